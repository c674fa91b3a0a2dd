// Integer sums as data: an expression viewed as Σ coefficient·base + constant. Used by the rules
// that reorder sums and by the division/modulo folding that splits a numerator into parts.
#pragma once

#include <vector>

#include "ir/uop.h"
#include "support/int128.h"

namespace kiln {

struct LinearTerm {
  UOpPtr base;
  int128 coefficient;
};

struct LinearSum {
  std::vector<LinearTerm> terms;
  int128 constant = 0;
};

// Flattens nested ADDs; `base * c` contributes (base, c); constants add up. No terms are combined.
LinearSum split_sum(const UOpPtr& node);

// The canonical form: like terms combined, zero terms dropped, `(x/c)*c + x%c` folded to x (and
// `(x/(c1*c2))*c2 + (x/c1)%c2` to x/c1),
// terms sorted by structural_compare of their base.
LinearSum canonical_sum(const UOpPtr& node);

// Whether the coefficients and the constant can be CONSTs of `dtype`. Fixed-width values wrap, but
// an index CONST holds an int64: combining the constants of a sum whose values all fit in int64
// can still leave that range (d%2 + -4 with d near 2^63 folds d%2 to d - (2^63 - 2)).
bool constants_representable(const LinearSum& sum, DType dtype);

// Builds ((t0 + t1) + t2) + constant with `base * coefficient` terms (no MUL for coefficient 1).
// Coefficients and the constant are wrapped for fixed-width integers; null when they are not
// representable (see above), so that a rule built on it declines.
UOpPtr build_sum(const LinearSum& sum, DType dtype);

// The constant of a dtype with an int128 value (wrapped for fixed-width types).
UOpPtr integer_constant(DType dtype, int128 value);

}  // namespace kiln
