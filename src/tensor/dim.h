// Dim: one dimension of a tensor in the compiler — a size known now (an int64) or an index
// expression over DEFINE_VARs whose value is known only when a plan runs (docs/symbolic-shapes.md,
// decision 1). Arithmetic folds when both sides are known and builds simplified expressions
// otherwise, so shape code written for integers reads the same for symbolic dims. A tensor whose
// shape has a symbolic dim keeps its shape as Dims (TensorData::dims); its public integer shape()
// is then an error, so code that needs fixed sizes cannot misread a symbolic one.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

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
  friend Dim min(const Dim& a, const Dim& b);
  // Structural equality of the simplified forms (hash-consing makes it a pointer compare). Two
  // symbolic dims that are equal for every value but simplify differently compare unequal, which
  // errs on the safe side: shape checks then ask for the same expression.
  friend bool operator==(const Dim& a, const Dim& b);
  // Whether this is the known size `size` (false for any symbolic dim).
  bool is(int64_t size) const { return is_known() && value_ == size; }

 private:
  int64_t value_ = 0;
  UOpPtr expression_;  // null when known
};

// Writes text() (so str_cat takes Dims).
std::ostream& operator<<(std::ostream& out, const Dim& dim);

// A symbolic size variable `name` in [min, max] (a DEFINE_VAR; 0 <= min <= max).
Dim size_variable(const std::string& name, int64_t min, int64_t max);

// A shape in the compiler: one Dim per axis.
using Dims = std::vector<Dim>;

Dims to_dims(const Shape& shape);
bool all_known(const Dims& dims);
// The sizes; a UserError naming the first symbolic dim and `what` otherwise.
Shape known_sizes(const Dims& dims, const char* what = "this operation");
// The element count (symbolic when a dim is); a UserError when a known product passes int64.
Dim dims_numel(const Dims& dims);
// "(batch, 3)", as shape_string writes integer shapes.
std::string dims_string(const Dims& dims);
// The largest value of each dim (the sizes a buffer is laid out for: decision 6).
Shape max_sizes(const Dims& dims);

// Movement-op args and BUFFER counts are int64 lists (UOp::arg), so hashing and interning need no
// change for symbolic sizes: a symbolic dim is stored as a marker, a value below any real size (all
// markers are < kFirstDimMarker) that names its expression in a process-wide table. Expressions are
// interned, so one expression always gets one marker and equal graphs stay equal nodes. (Decision 2
// of docs/symbolic-shapes.md first put them in the node's sources; there every graph walker would
// have taken the index arithmetic for tensor computation.)
constexpr int64_t kFirstDimMarker = INT64_MIN / 2;
int64_t encode_dim(const Dim& dim);
Dim decode_dim(int64_t arg);
bool is_dim_marker(int64_t arg);
std::vector<int64_t> encode_dims(const Dims& dims);
Dims decode_dims(const std::vector<int64_t>& args);

}  // namespace kiln
