// Dim arithmetic: integers stay integers; anything symbolic goes through simplify().
#include "tensor/dim.h"

#include <limits>
#include <ostream>
#include <mutex>
#include <unordered_map>
#include <vector>

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

Dim min(const Dim& a, const Dim& b) {
  return combine(a, b, "min", [](int64_t x, int64_t y, int64_t& r) { r = x < y ? x : y; return true; },
                 [](const UOpPtr& x, const UOpPtr& y) { return minimum(x, y); });
}

bool operator==(const Dim& a, const Dim& b) {
  if (a.is_known() != b.is_known()) return false;
  return a.is_known() ? a.value_ == b.value_ : a.expression_ == b.expression_;
}

std::ostream& operator<<(std::ostream& out, const Dim& dim) { return out << dim.text(); }

Dim size_variable(const std::string& name, int64_t min, int64_t max) {
  if (name.empty()) throw UserError("a size variable needs a name");
  if (min < 0 || min > max)
    throw UserError(str_cat("size variable '", name, "': the range ", min, "..", max, " is empty or negative"));
  return Dim(variable(name, min, max));
}

Dims to_dims(const Shape& shape) { return Dims(shape.begin(), shape.end()); }

bool all_known(const Dims& dims) {
  for (const Dim& dim : dims)
    if (!dim.is_known()) return false;
  return true;
}

Shape known_sizes(const Dims& dims, const char* what) {
  Shape sizes;
  sizes.reserve(dims.size());
  for (const Dim& dim : dims) sizes.push_back(dim.value(what));
  return sizes;
}

Dim dims_numel(const Dims& dims) {
  Dim count = 1;
  for (const Dim& dim : dims) count = count * dim;
  return count;
}

std::string dims_string(const Dims& dims) {
  std::string text = "(";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + dims[i].text();
  return text + (dims.size() == 1 ? ",)" : ")");
}

Shape max_sizes(const Dims& dims) {
  Shape sizes;
  sizes.reserve(dims.size());
  for (const Dim& dim : dims) sizes.push_back(dim.max());
  return sizes;
}

namespace {

// The marker table. Entries live as long as the process: they are a few expressions per symbolic
// graph, and a marker must keep naming its expression for as long as any node holds it.
struct DimMarkers {
  std::mutex mutex;
  std::vector<UOpPtr> expressions;
  std::unordered_map<const UOp*, int64_t> number_of;
};

DimMarkers& dim_markers() {
  static auto* markers = new DimMarkers;  // never destroyed: nodes may outlive static destruction
  return *markers;
}

}  // namespace

bool is_dim_marker(int64_t arg) { return arg < kFirstDimMarker; }

int64_t encode_dim(const Dim& dim) {
  if (dim.is_known()) return dim.value();
  DimMarkers& markers = dim_markers();
  std::lock_guard lock(markers.mutex);
  UOpPtr expression = dim.expression();
  auto [at, added] = markers.number_of.emplace(expression.get(), static_cast<int64_t>(markers.expressions.size()));
  if (added) markers.expressions.push_back(expression);
  return kFirstDimMarker - 1 - at->second;
}

Dim decode_dim(int64_t arg) {
  if (!is_dim_marker(arg)) return Dim(arg);
  DimMarkers& markers = dim_markers();
  std::lock_guard lock(markers.mutex);
  auto number = static_cast<size_t>(kFirstDimMarker - 1 - arg);
  KILN_ASSERT(number < markers.expressions.size(), "a dim marker that names no expression");
  return Dim(markers.expressions[number]);
}

std::vector<int64_t> encode_dims(const Dims& dims) {
  std::vector<int64_t> args;
  args.reserve(dims.size());
  for (const Dim& dim : dims) args.push_back(encode_dim(dim));
  return args;
}

Dims decode_dims(const std::vector<int64_t>& args) {
  Dims dims;
  dims.reserve(args.size());
  for (int64_t arg : args) dims.push_back(decode_dim(arg));
  return dims;
}

}  // namespace kiln
