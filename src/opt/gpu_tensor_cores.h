// Tensor cores for f16 and bf16 matmuls and convolutions: a warp computes a 16×8 tile of outputs
// with one warp-wide multiply-accumulate (a WMMA node, mma_layout.h) per 16 reduction steps.
//
// A kernel qualifies when its one reduction is an f32 sum of products of two f16 values, or of two
// bf16 values where the target takes them (what an f16 or bf16 MatMul, Gemm or Conv lowers to:
// CAST(load) · CAST(load), accumulated in f32), the
// two factors depend on disjoint sets of the output axes besides the ones both read (a matmul's
// rows and columns; a conv's pixels and filters; its batch and a batched matmul's batch are read
// by both), and enough of each 16×16×8 step is real work: at least 16 reduction steps, and the
// tiles' padding less than half of the outputs. The first factor's own axes are flattened into the
// 16 rows M of the operation, the second's into its 8 columns N, the reduction ranges into its
// depth K (several ranges, a conv's channels × taps, walked as one).
//
// The kernel then has output axes (M tile, N tile, lane of 32, the shared axes) and one reduction
// over K / 16 steps, in which lane l loads its 8 elements of the A tile and 4 of the B tile (the
// expressions of the two factors at those rows, columns and steps) and the WMMA adds their product
// to its 4 accumulators; each store is then written 4 times, once per accumulator, at that
// element's row and column. Extents that are not multiples of the tile read a clamped (in-bounds)
// row or step, zero the padded steps' operands, and mask the padded outputs' stores.
//
// A warp's 32 lanes must be one tile's: the grid keeps the lane axis innermost (gpu_grid.h), and
// the total is a multiple of 32, so whole warps are in or out of the grid's bound.
#pragma once

#include <cstdint>

#include "ir/uop.h"

namespace kiln {

struct TensorCoreKernel {
  UOpPtr ast;
  // Axis id of the lane range (extent 32) that must vary fastest across threads; -1: the kernel
  // does not qualify and `ast` is the input.
  int64_t lane_axis = -1;
};

// `kernel` (a SINK of stores, unoptimised, fixed shapes) with its reduction on tensor cores, where
// it qualifies (above); unchanged otherwise. `bf16_operands`: the target's tensor cores take bf16
// as well as f16 (TargetCaps::bf16_tensor_cores).
TensorCoreKernel gpu_tensor_cores(const UOpPtr& kernel, bool bf16_operands);

}  // namespace kiln
