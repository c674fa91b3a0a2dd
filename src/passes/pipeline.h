// The compiler pipeline, in order, in one place (ARCHITECTURE.md, "The pipeline"):
//
//   tensor graph ─ create_schedule ─► kernel ASTs + memory plan      (src/schedule/)
//                ─ optimize_schedule ► Opt actions chosen (tuning database or heuristics) and applied
//                                      (src/opt/optimize_schedule.h)
//   kernel AST   ─ lower_kernel ─────► transcendentals decomposed, UNROLL copies expanded, index math
//                                      simplified, the UPCAST range turned into vectors (src/opt/expand.h)
//                ─ cpu_compile ──────► linearise, render LLVM IR, optimise, object code (src/codegen/)
//                ─ kernel cache ─────► the object is stored on disk and reused by later runs
//                ─ cpu_load ─────────► a callable function (ORC JIT, in process)
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu_codegen.h"
#include "opt/heuristics.h"
#include "opt/optimize_schedule.h"
#include "schedule/schedule.h"

namespace kiln {

// The kernel AST after the passes that prepare it for a renderer.
UOpPtr lower_kernel(const UOpPtr& ast);

struct LoadedKernel {
  KernelFunction function = nullptr;
  bool from_cache = false;  // object code came from the disk cache (no LLVM code generation)
  bool reused = false;      // already loaded in this process
  double compile_ms = 0;
};

// The kernel's relocatable object for the host CPU (lowered, then from the disk cache or compiled
// and stored there); *from_cache (if given) says which. Loads nothing. Thread-safe.
std::string compile_cpu_kernel_object(const ScheduledKernel& kernel, bool* from_cache = nullptr,
                                      const CpuTarget* target = nullptr);

// The shortest chunk of the kernel's parallel axis worth handing to another thread (~32K units of
// estimated flops + bytes); the JIT runner and plans use the same rule.
int64_t kernel_minimum_chunk(const ScheduledKernel& kernel);

// Compiles one kernel for the host CPU, going through the process's loaded kernels and the disk
// cache first. Thread-safe.
LoadedKernel compile_cpu_kernel(const ScheduledKernel& kernel);

}  // namespace kiln
