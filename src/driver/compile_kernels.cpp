// compile_schedule_kernels: the kernel half of every compile (realize() and write_plan), calling
// the pipeline's per-kernel entry points (src/passes/pipeline.h) for each distinct kernel, on
// several threads (support/parallel_tasks.h).
#include "driver/compile_kernels.h"

#include <chrono>
#include <mutex>
#include <unordered_map>

#include "passes/pipeline.h"
#include "support/error.h"
#include "support/parallel_tasks.h"

namespace kiln {

std::vector<KernelBuild> compile_schedule_kernels(const Schedule& schedule, const KernelBuildOptions& options) {
  std::vector<KernelBuild> builds(schedule.kernels.size());
  std::unordered_map<std::string, size_t> first_with_symbol;
  std::vector<size_t> distinct;  // the first kernel with each symbol, in schedule order
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    auto [first, added] = first_with_symbol.emplace(schedule.kernels[k].name(), k);
    if (added) distinct.push_back(k);
    else builds[k].repeat = true;
  }

  // Progress lines go out in schedule order whatever order the threads finish in, so a compile
  // prints the same lines every time; `reported` counts the distinct kernels already printed.
  std::mutex progress_mutex;
  std::vector<bool> done(distinct.size(), false);
  size_t reported = 0;
  auto report_finished = [&](size_t d) {
    if (!options.progress) return;
    std::lock_guard lock(progress_mutex);
    done[d] = true;
    for (; reported < distinct.size() && done[reported]; ++reported) {
      size_t k = distinct[reported];
      const KernelBuild& build = builds[k];
      const char* how = build.reused ? " (already loaded)" : build.from_cache ? " (from the disk cache)" : " (compiled)";
      options.progress(str_cat("kernel ", k + 1, "/", schedule.kernels.size(), " ", schedule.kernels[k].name(), how));
    }
  };

  run_tasks_in_parallel(distinct.size(), compile_thread_count(), [&](size_t d) {
    const ScheduledKernel& kernel = schedule.kernels[distinct[d]];
    KernelBuild& build = builds[distinct[d]];
    if (options.product == KernelProduct::Function) {
      LoadedKernel loaded = compile_cpu_kernel(kernel);
      build.function = loaded.function;
      build.from_cache = loaded.from_cache;
      build.reused = loaded.reused;
      build.compile_ms = loaded.compile_ms;
    } else {
      auto start = std::chrono::steady_clock::now();
      build.object = compile_cpu_kernel_object(kernel, &build.from_cache, options.target);
      build.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    report_finished(d);
  });

  for (size_t k = 0; k < builds.size(); ++k) {
    if (!builds[k].repeat) continue;
    builds[k].function = builds[first_with_symbol.at(schedule.kernels[k].name())].function;
    builds[k].reused = options.product == KernelProduct::Function;
  }
  return builds;
}

}  // namespace kiln
