// Range analysis: the interval [vmin, vmax] of an integer, index or bool node, computed from its
// op and its sources' intervals. Called once per node when it is created.
//
// Sound under kiln's integer semantics (ops.def): when an operation on a fixed-width type might
// wrap, the result is the whole range of the type; `index` values are assumed to fit in int64.
// Division and modulo by zero are undefined, so the ranges of IDIV/MOD assume a non-zero divisor.
#pragma once

#include <utility>
#include <vector>

#include "ir/uop.h"

namespace kiln {

struct Interval {
  int128 min;
  int128 max;
};

Interval compute_bounds(Ops op, DType dtype, const std::vector<UOpPtr>& srcs, const Arg& arg);

// The interval of every value `dtype` can hold (int64's for index; int128's for non-integers).
Interval full_range(DType dtype);

}  // namespace kiln
