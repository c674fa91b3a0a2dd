// bf16 matmuls and convolutions on Intel AMX tiles (TargetCaps::amx_bf16): a kernel's reduction
// becomes 32 × 32 blocks of tile products (amx_layout.h), each written into a block of local memory
// that the rest of the kernel (bias, activation, the stores) then reads.
//
// A kernel qualifies when (before optimisation, fixed shapes) its one reduction is an f32 sum of
// products of two bf16 values read from buffers, unmasked, where one factor `a` is a matrix over the
// output axes of its own (M) and the reduction (K), rows a constant stride apart, each of K's ranges
// moving the row's start by a constant, the innermost by 1 over a multiple of 32 steps (a matmul's
// row-major operand: one range; a convolution's windows over channels-last pixels: taps and
// channels, tensor/tensor_conv_bf16.cpp), and the other `b` a matrix in pair panels over the
// reduction and the remaining output axes (N), 32 columns a panel: b[k][32·p + c] at first(p) +
// (k / 2)·stride + 2·c + k % 2 (what `--precision bf16` stores a weight as: tensor/bf16_operands.h,
// its N padded with zero columns to whole panels), with M at least 32, N at least 16 and K a
// multiple of 32 (the tensor layer pads it with zero steps). Output axes that both factors read are
// a batch of such products (attention's heads) where the batch only moves each factor's start (proved
// like the rest): the blocks run one product after another. The last block of M starts at M - 32
// instead of running past the end, so it recomputes a few rows of the block before it and writes
// them again with the same values; the last block of N reads its panel's padding and masks its
// stores there.
//
// The kernel becomes: axis 0 over the blocks ((batch ×) M blocks × N blocks, the dimension of the smaller
// operand fastest, so that consecutive blocks share a panel of the larger one), the block's
// product into local memory, then axes 1 and 2 over its 32 rows and 32 columns, where each store
// reads its element of the block in place of the reduction.
#pragma once

#include <optional>
#include <vector>

#include "ir/uop.h"
#include "opt/opt.h"

namespace kiln {

struct AmxKernel {
  UOpPtr ast;
  std::vector<Opt> opts;  // the columns vectorised, the rows unrolled: the kernel's whole optimisation
};

// `kernel` (a SINK of stores, unoptimised) on AMX tiles, where it qualifies (above); nullopt
// otherwise. The caller checks TargetCaps::amx_bf16.
std::optional<AmxKernel> amx_tile_kernel(const UOpPtr& kernel);

}  // namespace kiln
