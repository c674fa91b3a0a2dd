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

}  // namespace kiln
