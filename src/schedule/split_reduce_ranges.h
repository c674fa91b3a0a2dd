// Splitting a reduce loop that the kernel only reads through `r / c` and `r % c`.
//
// A reduction over a reshaped view of a permuted tensor (BERT's attention output: heads × 64
// values per head, read as 768 contiguous features by the output projection) indexes its source
// with `(r / 64) * 8192 + r % 64`: a divide and a modulo per iteration, and no unit stride for
// the vectoriser. Written as two loops r = h·c + d, the simplifier turns `r / c` into h and `r % c`
// into d: the inner loop walks memory with stride 1 and has no division.
//
// The split applies to the innermost reduce range of a kernel (the one with the largest axis id),
// so the loop order of the other ranges is unchanged: h and d take its place, h outside d.
#pragma once

#include "ir/uop.h"

namespace kiln {

// `kernel` (a SINK of stores, docs/kernel-ast.md) with its innermost reduce range split where
// every division or modulo of it uses one divisor c that divides its extent; unchanged otherwise.
UOpPtr split_reduce_ranges(const UOpPtr& kernel);

// The same for output ranges. A channel shuffle (ShuffleNet's Reshape → Transpose → Reshape)
// fused into the grouped conv before it makes output channel c read group c % g and filter c / g:
// the weight and bias addresses are not affine in c, so no register tile or vector can span
// channels, and the conv ran at a third of its unshuffled twin's speed. A constant output range
// whose divisions and modulos all use one divisor c dividing its extent, and which some address
// reads in permuted order (r % c weighing more than r / c), becomes two ranges (extent / c
// outside, c inside) in its place; later output axes move up by one. Loop order is unchanged,
// and every index stays affine. A blocked read (conv filter panels: (r / 16)·256 + r % 16) is
// left to the optimisation layer, whose vector over r removes the division; splitting it first
// made MobileNetV2's 1x1 convs 9 % slower.
UOpPtr split_output_ranges(const UOpPtr& kernel);

}  // namespace kiln
