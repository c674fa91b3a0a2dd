// Zero-filled kernel arguments and the kernel timer; see kernel_timing.h.
#include "opt/kernel_timing.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "passes/pipeline.h"
#include "support/error.h"

namespace kiln {

KernelArguments::KernelArguments(const Schedule& schedule, const ScheduledKernel& kernel) {
  for (int index : kernel.buffers) {
    KILN_ASSERT(index >= 0 && static_cast<size_t>(index) < schedule.buffers.size(), "a kernel argument outside the schedule");
    const ScheduledBuffer& buffer = schedule.buffers[static_cast<size_t>(index)];
    buffers_.push_back(std::make_unique<HostBuffer>(buffer.dtype, buffer.count, HostBuffer::Fill::Zero));
    pointers_.push_back(buffers_.back()->data());
  }
}

KernelTimer::KernelTimer(int threads) : pool_(threads) {}

void KernelTimer::run_once(KernelFunction function, const ScheduledKernel& kernel, void* const* arguments) {
  int64_t extent = kernel.parallel_extent.value("timing a kernel");
  if (extent <= 0) return;
  int threads = pool_.thread_count();
  if (threads == 1) {
    function(arguments, 0, extent);
    return;
  }
  // As the plan runner splits a run with an explicit thread count: at most one chunk per thread,
  // none shorter than the kernel's minimum chunk.
  pool_.parallel_for(extent, [&](int64_t begin, int64_t end) { function(arguments, begin, end); },
                     kernel_minimum_chunk(kernel), threads);
}

double KernelTimer::time(KernelFunction function, const ScheduledKernel& kernel, const KernelArguments& arguments,
                         int samples) {
  using Clock = std::chrono::steady_clock;
  void* const* pointers = arguments.pointers();
  auto start = Clock::now();
  run_once(function, kernel, pointers);  // warm-up: caches, page faults of the outputs, the pool's workers
  double warm_up = std::chrono::duration<double>(Clock::now() - start).count();
  constexpr double kShortestSample = 2e-4;
  int64_t runs = warm_up >= kShortestSample ? 1 : std::min<int64_t>(1000, static_cast<int64_t>(kShortestSample / std::max(warm_up, 1e-7)) + 1);
  double best = std::numeric_limits<double>::infinity();
  for (int sample = 0; sample < std::max(samples, 1); ++sample) {
    start = Clock::now();
    for (int64_t run = 0; run < runs; ++run) run_once(function, kernel, pointers);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(runs));
  }
  return best;
}

}  // namespace kiln
