// Timing one compiled kernel, for the Opt search (beam_search.h): its arguments are zero-filled
// buffers of the schedule's sizes, and a run covers the kernel's whole parallel extent on a thread
// pool, split as the plan runner splits it for a run with the same thread count.
#pragma once

#include <memory>
#include <vector>

#include "runtime/cpu/cpu_jit.h"
#include "runtime/host_buffer.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"

namespace kiln {

// One 64-byte aligned, zero-filled buffer per DEFINE_GLOBAL slot of a kernel, of the size of the
// schedule buffer bound to it. Zeros keep every data-dependent index (a Gather's indices) in bounds,
// and integer division by zero is defined in kiln's kernels, so any kernel runs safely on them.
// Timings do not depend on the values for the kernels kiln makes (no data-dependent branches).
class KernelArguments {
 public:
  KernelArguments(const Schedule& schedule, const ScheduledKernel& kernel);
  void* const* pointers() const { return pointers_.data(); }

 private:
  std::vector<std::unique_ptr<HostBuffer>> buffers_;
  std::vector<void*> pointers_;
};

class KernelTimer {
 public:
  // `threads` as ThreadPool counts them (the caller included); 0: ThreadPool::default_thread_count().
  explicit KernelTimer(int threads);
  int threads() const { return pool_.thread_count(); }

  // Seconds for one run of `function` (the compiled `kernel`) over its whole parallel extent: the
  // minimum of `samples` samples after one warm-up run. A sample of a kernel shorter than ~0.2 ms
  // is a batch of runs (divided by their number), so the clock's resolution and the cost of reading
  // it do not count. The minimum, not the mean: on a shared machine noise only ever adds time.
  double time(KernelFunction function, const ScheduledKernel& kernel, const KernelArguments& arguments, int samples);

 private:
  void run_once(KernelFunction function, const ScheduledKernel& kernel, void* const* arguments);
  ThreadPool pool_;
};

}  // namespace kiln
