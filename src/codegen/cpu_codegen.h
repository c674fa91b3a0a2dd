// The front door of CPU code generation: kernel AST → object code → callable function.
// (Interface fixed by the pipeline, src/passes/pipeline.cpp; implemented in cpu_codegen.cpp.)
#pragma once

#include <cstdint>
#include <string>

#include "ir/uop.h"

namespace kiln {

// The signature of every generated CPU kernel (docs/kernel-ast.md).
using KernelFunction = void (*)(void* const* buffers, int64_t begin, int64_t end);

// Linearises, renders LLVM IR, optimises and emits an object file for the host CPU; the function's
// symbol is the SINK's name. Prints KILN_DEBUG levels 4 (LLVM IR), 6 (linear UOps), 7 (assembly).
std::string cpu_compile(const UOpPtr& kernel_ast);

// Loads an object made by cpu_compile into this process and returns the function `symbol`.
KernelFunction cpu_load(const std::string& object, const std::string& symbol);

// What cpu_compile targets (triple, CPU name, features): part of the kernel cache key.
std::string cpu_target_id();

}  // namespace kiln
