// The CPU renderer's AMX bf16 block (opt/amx_layout.h): 2 × 2 tiles of 16 × 16 f32 sums, a loop
// over the reduction in steps of kAmxDepth (a's row start moved by the steps' taps) that loads two
// tiles of a (16 rows × 32 bf16) and two of b (16 pair rows × 16 columns), adds their four products
// to the accumulator tiles (tdpbf16ps), and at the end stores the tiles into the 32 × 32 f32
// block. LLVM's AMX passes configure the tiles (ldtilecfg, once: every tile has the one shape 16
// rows × 64 bytes) and keep the accumulators in tile registers across the loop.
#pragma once

#include <cstdint>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "opt/amx_layout.h"

namespace kiln {

struct AmxBlockOperands {
  llvm::Value* block;  // f32 × 1024, the block's first element
  llvm::Value* a;      // a's element at the block's first row, step 0
  llvm::Value* b;      // b's element at step 0, the block's first column (in pair panels)
  int64_t a_stride;    // elements between a's rows
  int64_t b_stride;    // elements between b's pair rows
  int64_t depth;       // reduction steps, a multiple of kAmxDepth
  std::vector<AmxStep> a_steps;  // how a step moves along a's rows (opt/amx_layout.h)
  int64_t element_bytes;  // of a and b: 2 (bf16 or its bits)
};

// Emits the block at the builder's insertion point, which it leaves after the stores.
void emit_amx_block(llvm::IRBuilder<>& builder, const AmxBlockOperands& operands);

}  // namespace kiln
