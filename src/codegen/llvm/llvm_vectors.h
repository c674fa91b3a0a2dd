// Vectors the CPU renderer assembles from other values (VECTORIZE nodes whose lanes have a
// structure LLVM would otherwise have to rediscover from one insertelement per lane), and the
// 8-bit dot-product instruction (opt/dot_product_layout.h).
#pragma once

#include <utility>
#include <vector>

#include <llvm/IR/IRBuilder.h>

namespace kiln {

// A vector of `count` lanes repeating `group` (count a multiple of its size): the group built once
// and splatted by one shuffle. Four consecutive byte loads repeated become one 32-bit broadcast
// load in the backend.
llvm::Value* repeated_group(llvm::IRBuilder<>& builder, const std::vector<llvm::Value*>& group, unsigned count);

// A vector whose lane i is lane `lanes[i].second` of `vectors[lanes[i].first]`: the vectors (of one
// type, a power of two of them) concatenated pairwise, then one shuffle picks the lanes. An
// interleave of 4 byte vectors is a few inserts and one permute where 64 inserts were 64 ops.
// nullptr where the vectors do not have that form.
llvm::Value* lanes_of_vectors(llvm::IRBuilder<>& builder, const std::vector<llvm::Value*>& vectors,
                              const std::vector<std::pair<unsigned, unsigned>>& lanes);

// accumulator (i32 × W) + Σ of each lane's 4 unsigned × 4 signed bytes (u8 × 4W, i8 × 4W): vpdpbusd
// at W = 16 (AVX-512 VNNI), 8 or 4 (AVX-VNNI, or AVX-512 VNNI with VL).
llvm::Value* dot_product_8bit(llvm::IRBuilder<>& builder, llvm::Value* accumulator, llvm::Value* unsigned_bytes,
                              llvm::Value* signed_bytes);

}  // namespace kiln
