// The loop order of a reduction kernel's output axes: which one is outermost (axis 0, the one the
// runtime splits over threads).
//
// Everything a kernel loads that does not depend on its outermost axis is read again on every
// iteration of it. For a matmul (i, j) ← A(i, k)·W(j, k) with i outermost, that is all of W per
// row of A: BERT's FFN weight (3072×768, 9.4 MB) streamed from far caches 128 times, where with j
// outermost A (128×768, 393 KB) is re-read from L2 instead. Rangeify numbers output axes in shape
// order; this pass moves to the front the output axis whose iterations re-read the fewest bytes,
// keeping the other axes in order. Kernels without a reduction keep shape order (their stores stay
// contiguous and nothing is re-read).
#pragma once

#include "ir/uop.h"
#include "tensor/dim.h"

namespace kiln {

struct OrderedKernel {
  UOpPtr ast;
  Dim parallel_extent = 1;  // the extent of axis 0 afterwards (1 when there is none)
};

// `kernel` (a SINK of stores) with its output RANGEs renumbered so that axis 0 re-reads the fewest
// bytes; unchanged (with its current axis 0) when shape order is already best or it has no REDUCE.
OrderedKernel order_output_axes(const UOpPtr& kernel);

}  // namespace kiln
