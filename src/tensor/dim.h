// Dim: one dimension of a tensor in the compiler — a size known now (an int64) or an index
// expression over DEFINE_VARs whose value is known only when a plan runs (docs/symbolic-shapes.md,
// decision 1). Arithmetic folds when both sides are known and builds simplified expressions
// otherwise, so shape code written for integers reads the same for symbolic dims. This is the
// foundation of stage 2; the Tensor layer's Shape does not use it yet.
#pragma once

#include <cstdint>
#include <string>

#include "ir/uop.h"

namespace kiln {

class Dim {
 public:
  // Implicit: every integer is a known dim.
  Dim(int64_t value);  // NOLINT(google-explicit-constructor)
  // An index-typed expression, simplified; one that simplifies to a constant is a known dim.
  explicit Dim(const UOpPtr& expression);

  bool is_known() const { return !expression_; }
  // The size; a UserError naming the expression when it is symbolic ("unsupported: the symbolic
  // dimension (n*2) where WHAT needs a fixed size").
  int64_t value(const char* what = "this operation") const;
  // The expression: a CONST for a known dim.
  UOpPtr expression() const;
  // Bounds over every allowed value of the variables (the simplifier's range analysis).
  int64_t min() const;
  int64_t max() const;
  // "12", or the expression as the printer writes it.
  std::string text() const;

  friend Dim operator+(const Dim& a, const Dim& b);
  friend Dim operator-(const Dim& a, const Dim& b);
  friend Dim operator*(const Dim& a, const Dim& b);
  // Truncating division and C's modulo, as the IR's IDIV and MOD (sizes are non-negative).
  friend Dim operator/(const Dim& a, const Dim& b);
  friend Dim operator%(const Dim& a, const Dim& b);
  friend Dim max(const Dim& a, const Dim& b);
  // Structural equality of the simplified forms (hash-consing makes it a pointer compare). Two
  // symbolic dims that are equal for every value but simplify differently compare unequal, which
  // errs on the safe side: shape checks then ask for the same expression.
  friend bool operator==(const Dim& a, const Dim& b);

 private:
  int64_t value_ = 0;
  UOpPtr expression_;  // null when known
};

}  // namespace kiln
