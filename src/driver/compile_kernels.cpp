// compile_schedule_kernels: the kernel half of every compile (realize() and write_plan), calling
// the pipeline's per-kernel entry points (src/passes/pipeline.h) in schedule order.
#include "driver/compile_kernels.h"

#include <chrono>
#include <unordered_map>

#include "passes/pipeline.h"
#include "support/error.h"

namespace kiln {

std::vector<KernelBuild> compile_schedule_kernels(const Schedule& schedule, const KernelBuildOptions& options) {
  std::vector<KernelBuild> builds(schedule.kernels.size());
  std::unordered_map<std::string, size_t> first_with_symbol;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const ScheduledKernel& kernel = schedule.kernels[k];
    KernelBuild& build = builds[k];
    auto [first, added] = first_with_symbol.emplace(kernel.name(), k);
    if (!added) {
      build.repeat = true;
      build.function = builds[first->second].function;
      build.reused = options.product == KernelProduct::Function;
      continue;
    }
    if (options.product == KernelProduct::Function) {
      LoadedKernel loaded = compile_cpu_kernel(kernel);
      build.function = loaded.function;
      build.from_cache = loaded.from_cache;
      build.reused = loaded.reused;
      build.compile_ms = loaded.compile_ms;
    } else {
      auto start = std::chrono::steady_clock::now();
      build.object = compile_cpu_kernel_object(kernel, &build.from_cache);
      build.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    }
    if (options.progress) {
      const char* how = build.reused ? " (already loaded)" : build.from_cache ? " (from the disk cache)" : " (compiled)";
      options.progress(str_cat("kernel ", k + 1, "/", schedule.kernels.size(), " ", kernel.name(), how));
    }
  }
  return builds;
}

}  // namespace kiln
