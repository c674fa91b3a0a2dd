// The front door of CPU code generation: kernel AST (docs/kernel-ast.md) → object file bytes →
// a callable function. The steps, each printed at its KILN_DEBUG level:
//   linearize (6: the linear UOps) → render LLVM IR (4: the IR) → optimise (O3, host CPU)
//   → emit an object file (7: its assembly).
#pragma once

#include <string>

#include "codegen/target.h"
#include "ir/uop.h"
#include "runtime/cpu/cpu_jit.h"

namespace kiln {

class CpuTarget;  // codegen/llvm/llvm_target.h

struct CompiledKernel {
  std::string name;    // the kernel's function symbol (the SINK's name)
  std::string object;  // a relocatable object file for the host CPU (cpu_target_id())
};

// Compiles one kernel AST for `target` (null: the host CPU; a cross target makes an object for a
// plan only, never one to cpu_load). The object defines one function, `void NAME(void* const*
// buffers, int64_t begin, int64_t end)`, and references no external symbol (checked: an InternalError
// names any symbol LLVM left undefined). Thread-safe: each call has its own LLVM context.
CompiledKernel cpu_compile_kernel(const UOpPtr& kernel_ast, const CpuTarget* target = nullptr);

// cpu_compile_kernel(kernel_ast).object: just the object bytes.
std::string cpu_compile(const UOpPtr& kernel_ast, const CpuTarget* target = nullptr);

// Loads an object from cpu_compile into the process and returns its function `symbol` (cpu_jit.h).
KernelFunction cpu_load(const std::string& object, const std::string& symbol);

// What the objects are compiled for ("triple;cpu;features"); objects with the same id are
// interchangeable, so a disk cache keys on it. Null: the host CPU.
std::string cpu_target_id(const CpuTarget* target = nullptr);

// The capability object of `target` (null: host_cpu_caps()).
const TargetCaps& cpu_target_caps(const CpuTarget* target = nullptr);

}  // namespace kiln
