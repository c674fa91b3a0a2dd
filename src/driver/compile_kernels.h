// The one loop that compiles a schedule's kernels for the host CPU, shared by realize() (which wants
// loaded functions) and the plan writer (which wants object files to link), so that both see the
// same kernels, in the same order, through the same cache.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/cpu_codegen.h"
#include "runtime/cpu/cpu_jit.h"
#include "schedule/schedule.h"

namespace kiln {

enum class KernelProduct {
  Function,  // loaded into this process (compile_cpu_kernel): what realize() runs
  Object,    // a relocatable object file (compile_cpu_kernel_object): what a plan links
};

struct KernelBuildOptions {
  KernelProduct product = KernelProduct::Function;
  // Called after each kernel that is compiled or looked up (not after a repeat) with one line:
  // "kernel K/N NAME (compiled)", "(from the disk cache)" or "(already loaded)". May be empty.
  std::function<void(const std::string&)> progress;
  // Object only: the CPU the objects are for (a cross target, `kiln compile --target`); null: the host.
  const CpuTarget* target = nullptr;
};

// One kernel of the schedule, at the kernel's position.
struct KernelBuild {
  KernelFunction function = nullptr;  // KernelProduct::Function
  std::string object;                 // KernelProduct::Object; empty for a repeat
  // An earlier kernel of the schedule has the same symbol (a symbol names its AST, so the code is
  // the same): it is not compiled again; a Function repeat shares the earlier function.
  bool repeat = false;
  bool from_cache = false;  // the object came from the disk cache (no LLVM code generation)
  bool reused = false;      // Function: already loaded in this process (always so for a repeat)
  double compile_ms = 0;    // time spent on this kernel (0 for a repeat or a reused function)
};

// Compiles the kernels of `schedule` in order, each distinct symbol once, through the disk cache.
// Returns one entry per kernel of the schedule.
std::vector<KernelBuild> compile_schedule_kernels(const Schedule& schedule, const KernelBuildOptions& options = {});

}  // namespace kiln
