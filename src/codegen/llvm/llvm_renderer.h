// The CPU renderer: a linearised kernel (codegen/linearize.h) becomes an LLVM module with one function
//
//   void NAME(void* const* buffers, int64_t begin, int64_t end)   // external linkage, C convention
//
// that runs the loop of RANGE axis 0 over [begin, end) (clamped to [0, the range's end)) and every other
// loop over its whole range. `buffers[slot]` is the base of DEFINE_GLOBAL `slot`. Loads and stores carry
// what docs/kernel-ast.md promises (64-byte aligned bases; outputs never alias inputs, as alias scopes)
// so that LLVM's vectoriser can work; accumulators are allocas that mem2reg promotes.
// The module has no target yet: llvm_target.h prepares, optimises and emits it.
#pragma once

#include <cstdint>
#include <memory>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "codegen/linearize.h"

namespace kiln {

// Renders the program; the function is named program.name. Throws InternalError for ops or dtypes the
// renderer does not support (see llvm_alu.h) and for a malformed program (unbalanced RANGE/END, a
// source used before it is defined). The module is verified before it is returned. `l2_bytes`: the
// target's L2 cache per core, which places next-tile prefetches (next_tile_prefetch.h); a negative
// value means the host's (host_cpu_caps()), so a cross target passes its own and its plans do not
// depend on the compiling machine.
std::unique_ptr<llvm::Module> render_llvm(const LinearProgram& program, llvm::LLVMContext& context,
                                          int64_t l2_bytes = -1);

}  // namespace kiln
