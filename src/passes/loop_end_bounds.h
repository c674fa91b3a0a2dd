// Comparisons decided by the symbolic ends of loops. Interval analysis bounds a loop variable r of
// RANGE(E) by E's largest value, which forgets that r < E at every size: over a signal of any
// length n, a strided conv's read x[2·o + t] with o < windows(n) = (n+1)/2 - 1 and t < 3 is in
// range at every n, but intervals only see o <= 1598 and n >= 10, so each load kept a compare
// against n. Here an index comparison a < b is read as the sum a - b, each loop variable with a
// positive coefficient counted at E - 1, each k·(y/c) with c dividing k as (k/c)·(y - y%c), and the
// rest bounded by intervals: 2·((n+1)/2 - 2) + 2 - n = (n+1) - (n+1)%2 - 2 - n < 0.
#pragma once

#include <optional>

#include "ir/uop.h"

namespace kiln {

// Whether `left < right` (index values) holds, or fails, at every point of the loops it lies in;
// nullopt when neither is proven, or when no loop of symbolic end is involved (interval analysis
// already decides those).
std::optional<bool> compare_over_loop_ends(const UOpPtr& left, const UOpPtr& right);

}  // namespace kiln
