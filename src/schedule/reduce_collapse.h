// The one-hot reduce collapse: a reduction that selects one element of a loop by comparing the
// loop variable with an index is a load at that index.
//
//   REDUCE(ADD, where(idx == r, x(r), 0), r)  →  where(0 <= idx < n, x(clamp(idx, 0, n-1)), 0)
//
// This is how gathers (take, Gather, GatherElements, GatherND) and other "compare with arange,
// select, sum" patterns are written in the tensor front end; without the collapse each output
// element loops over the whole gathered axis (BERT's word embedding: 30,522 compares and adds per
// element). The collapse runs in rangeify on each REDUCE it builds, before simplification.
//
// Out-of-range indices (after the front end's single wrap of negative indices) select nothing, as
// before the collapse: the result is the reduction's identity (0 for a sum, false for "any"). The
// clamp keeps every load inside the loop's old bounds, so no load can leave its buffer, and gives
// the simplifier the index's exact range.
#pragma once

#include <vector>

#include "ir/uop.h"

namespace kiln {

// `reduce_op` over `ranges` of `body` without a loop over a range that `body` selects by
// equality, or nullptr when no range is selected that way. The result may still be a REDUCE
// over the other ranges.
UOpPtr collapse_one_hot_reduce(Ops reduce_op, DType dtype, const UOpPtr& body, const std::vector<UOpPtr>& ranges);

}  // namespace kiln
