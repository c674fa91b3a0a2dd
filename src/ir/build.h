// Builders: the readable way to create UOps in passes, rules and tests. `a + b`, `x * 4`,
// `i.lt(n)`, `cond.where(a, b)` build (interned) nodes; nothing is evaluated or simplified here —
// simplification is the job of the rule tables.
//
// Comparisons are named methods rather than operators: `==` on UOpPtr keeps its meaning of identity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/uop.h"

namespace kiln {

// An integer constant; the value is wrapped into the type's range (const_int(u8, -1) holds 255).
UOpPtr const_int(DType dtype, int64_t value);
UOpPtr const_float(DType dtype, double value);
UOpPtr const_bool(bool value);
// A constant of `like`'s dtype with the given value (converted to float for float dtypes).
UOpPtr const_like(const UOpPtr& like, int64_t value);
// A symbolic integer known to lie in [min, max].
UOpPtr variable(const std::string& name, int64_t min, int64_t max, DType dtype = dtypes::index);
// A loop index in [0, end).
UOpPtr range(const UOpPtr& end, int64_t axis);
UOpPtr range(int64_t end, int64_t axis);

// An ALU node. The result dtype is the sources' (bool for comparisons); sources must agree.
UOpPtr alu(Ops op, const UOpPtr& a);
UOpPtr alu(Ops op, const UOpPtr& a, const UOpPtr& b);
UOpPtr alu(Ops op, const UOpPtr& a, const UOpPtr& b, const UOpPtr& c);

UOpPtr operator+(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b);
// Truncating division for integers (IDIV), true division for floats (FDIV).
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator&(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator|(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator^(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator<<(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator>>(const UOpPtr& a, const UOpPtr& b);
UOpPtr operator-(const UOpPtr& a);

// Mixed forms with a plain number take the number as a constant of the node's dtype.
#define KILN_SCALAR_OPERATOR(symbol)                                                              \
  inline UOpPtr operator symbol(const UOpPtr& a, int64_t b) { return a symbol const_like(a, b); } \
  inline UOpPtr operator symbol(int64_t a, const UOpPtr& b) { return const_like(b, a) symbol b; }
KILN_SCALAR_OPERATOR(+)
KILN_SCALAR_OPERATOR(-)
KILN_SCALAR_OPERATOR(*)
KILN_SCALAR_OPERATOR(/)
KILN_SCALAR_OPERATOR(%)
KILN_SCALAR_OPERATOR(&)
KILN_SCALAR_OPERATOR(|)
KILN_SCALAR_OPERATOR(^)
KILN_SCALAR_OPERATOR(<<)
KILN_SCALAR_OPERATOR(>>)
#undef KILN_SCALAR_OPERATOR

UOpPtr lt(const UOpPtr& a, const UOpPtr& b);       // a < b
UOpPtr ne(const UOpPtr& a, const UOpPtr& b);       // a != b
UOpPtr eq(const UOpPtr& a, const UOpPtr& b);       // a == b
UOpPtr maximum(const UOpPtr& a, const UOpPtr& b);  // max(a, b)
UOpPtr minimum(const UOpPtr& a, const UOpPtr& b);  // min(a, b): -max(-a, -b) for index and floats, a WHERE for fixed-width ints
UOpPtr where(const UOpPtr& condition, const UOpPtr& if_true, const UOpPtr& if_false);
// Appends the conditions the bool `condition` is the conjunction of (AND nodes split, others as
// they are) to `out`.
void collect_conjuncts(const UOpPtr& condition, std::vector<UOpPtr>& out);

// The value of a reduction over nothing, of scalar type `type`: 0 for ADD, 1 for MUL, the type's
// lowest value for MAX (-inf for floats, false for bool). Throws for other ops.
UOpPtr reduction_identity(Ops op, DType type);
UOpPtr logical_not(const UOpPtr& a);
UOpPtr cast(const UOpPtr& a, DType dtype);
inline UOpPtr lt(const UOpPtr& a, int64_t b) { return lt(a, const_like(a, b)); }
inline UOpPtr ne(const UOpPtr& a, int64_t b) { return ne(a, const_like(a, b)); }
inline UOpPtr eq(const UOpPtr& a, int64_t b) { return eq(a, const_like(a, b)); }
inline UOpPtr maximum(const UOpPtr& a, int64_t b) { return maximum(a, const_like(a, b)); }
inline UOpPtr minimum(const UOpPtr& a, int64_t b) { return minimum(a, const_like(a, b)); }
inline UOpPtr where(const UOpPtr& condition, const UOpPtr& if_true, int64_t if_false) {
  return where(condition, if_true, const_like(if_true, if_false));
}
inline UOpPtr where(const UOpPtr& condition, int64_t if_true, const UOpPtr& if_false) {
  return where(condition, const_like(if_false, if_true), if_false);
}

// A SINK over the given outputs.
UOpPtr sink(std::vector<UOpPtr> outputs);

}  // namespace kiln
