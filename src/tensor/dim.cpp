// Dim arithmetic: integers stay integers; anything symbolic goes through simplify().
#include "tensor/dim.h"

#include <limits>

#include "ir/build.h"
#include "ir/printer.h"
#include "passes/symbolic.h"
#include "support/error.h"

namespace kiln {
namespace {

int64_t to_int64(int128 value, const char* what) {
  if (value < std::numeric_limits<int64_t>::min() || value > std::numeric_limits<int64_t>::max())
    throw UserError(str_cat("a dimension's ", what, " does not fit in int64"));
  return static_cast<int64_t>(value);
}

// Integer arithmetic when both are known (overflow is a UserError), else a simplified expression.
template <class Known, class Symbolic>
Dim combine(const Dim& a, const Dim& b, const char* what, Known known, Symbolic symbolic) {
  if (a.is_known() && b.is_known()) {
    int64_t result = 0;
    if (!known(a.value(), b.value(), result))
      throw UserError(str_cat("dimension arithmetic overflows or divides by zero: ", a.value(), " ", what, " ", b.value()));
    return Dim(result);
  }
  return Dim(symbolic(a.expression(), b.expression()));
}

}  // namespace

Dim::Dim(int64_t value) : value_(value) {}

Dim::Dim(const UOpPtr& expression) {
  KILN_ASSERT(expression && expression->dtype() == dtypes::index, "a Dim is an index expression");
  UOpPtr simplified = simplify(expression);
  if (simplified->is_const()) value_ = to_int64(simplified->const_int(), "value");
  else expression_ = std::move(simplified);
}

int64_t Dim::value(const char* what) const {
  if (expression_)
    throw UserError(str_cat("unsupported: the symbolic dimension ", text(), " where ", what, " needs a fixed size"));
  return value_;
}

UOpPtr Dim::expression() const { return expression_ ? expression_ : const_int(dtypes::index, value_); }

int64_t Dim::min() const { return expression_ ? to_int64(expression_->vmin(), "minimum") : value_; }

int64_t Dim::max() const { return expression_ ? to_int64(expression_->vmax(), "maximum") : value_; }

std::string Dim::text() const { return expression_ ? render_expr(expression_) : std::to_string(value_); }

Dim operator+(const Dim& a, const Dim& b) {
  return combine(a, b, "+", [](int64_t x, int64_t y, int64_t& r) { return !__builtin_add_overflow(x, y, &r); },
                 [](const UOpPtr& x, const UOpPtr& y) { return x + y; });
}

Dim operator-(const Dim& a, const Dim& b) {
  return combine(a, b, "-", [](int64_t x, int64_t y, int64_t& r) { return !__builtin_sub_overflow(x, y, &r); },
                 [](const UOpPtr& x, const UOpPtr& y) { return x - y; });
}

Dim operator*(const Dim& a, const Dim& b) {
  return combine(a, b, "*", [](int64_t x, int64_t y, int64_t& r) { return !__builtin_mul_overflow(x, y, &r); },
                 [](const UOpPtr& x, const UOpPtr& y) { return x * y; });
}

Dim operator/(const Dim& a, const Dim& b) {
  return combine(
      a, b, "/",
      [](int64_t x, int64_t y, int64_t& r) {
        if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) return false;
        r = x / y;
        return true;
      },
      [](const UOpPtr& x, const UOpPtr& y) { return x / y; });
}

Dim operator%(const Dim& a, const Dim& b) {
  return combine(
      a, b, "%",
      [](int64_t x, int64_t y, int64_t& r) {
        if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) return false;
        r = x % y;
        return true;
      },
      [](const UOpPtr& x, const UOpPtr& y) { return x % y; });
}

Dim max(const Dim& a, const Dim& b) {
  return combine(a, b, "max", [](int64_t x, int64_t y, int64_t& r) { r = x > y ? x : y; return true; },
                 [](const UOpPtr& x, const UOpPtr& y) { return maximum(x, y); });
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_known() != b.is_known()) return false;
  return a.is_known() ? a.value_ == b.value_ : a.expression_ == b.expression_;
}

}  // namespace kiln
