// Builders for common UOps; see build.h.
#include "ir/build.h"

#include <cmath>

#include "ir/evaluate.h"
#include "support/error.h"

namespace kiln {

UOpPtr const_int(DType dtype, int64_t value) {
  if (dtype.is_bool()) return UOp::make(Ops::CONST, dtype, {}, value != 0);
  if (dtype.is_float()) return UOp::make(Ops::CONST, dtype, {}, static_cast<double>(value));
  KILN_ASSERT(dtype.is_int(), "integer constant of type ", dtype.name());
  // Every constant is stored in its type's range (u8 -1 is 255), so that one value has one node
  // and folding sees the value the type holds. u64 keeps its bit pattern in the int64.
  return make_constant(ScalarValue{dtype, wrap_integer(value, dtype), 0.0});
}

UOpPtr const_float(DType dtype, double value) {
  KILN_ASSERT(dtype.is_float(), "float constant of type ", dtype.name());
  return UOp::make(Ops::CONST, dtype, {}, value);
}

UOpPtr const_bool(bool value) { return UOp::make(Ops::CONST, dtypes::bool_, {}, value); }

UOpPtr const_like(const UOpPtr& like, int64_t value) { return const_int(like->dtype(), value); }

UOpPtr variable(const std::string& name, int64_t min, int64_t max, DType dtype) {
  KILN_ASSERT(min <= max, "variable '", name, "' has an empty range [", min, ", ", max, "]");
  return UOp::make(Ops::DEFINE_VAR, dtype, {}, VariableSpec{name, min, max});
}

UOpPtr range(const UOpPtr& end, int64_t axis) { return UOp::make(Ops::RANGE, end->dtype(), {end}, axis); }
UOpPtr range(int64_t end, int64_t axis) { return range(const_int(dtypes::index, end), axis); }

namespace {
DType comparison_dtype(const UOpPtr& operand) { return dtypes::bool_.vec(operand->dtype().count()); }

void check_same_dtype(Ops op, const UOpPtr& a, const UOpPtr& b) {
  KILN_ASSERT(a->dtype() == b->dtype(), op_name(op), " of ", a->dtype().name(), " and ", b->dtype().name());
}
}  // namespace

UOpPtr alu(Ops op, const UOpPtr& a) { return UOp::make(op, a->dtype(), {a}); }

UOpPtr alu(Ops op, const UOpPtr& a, const UOpPtr& b) {
  bool is_comparison = op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ;
  // Shift amounts may have their own integer type; every other binary op takes equal types.
  if (op != Ops::SHL && op != Ops::SHR) check_same_dtype(op, a, b);
  return UOp::make(op, is_comparison ? comparison_dtype(a) : a->dtype(), {a, b});
}

UOpPtr alu(Ops op, const UOpPtr& a, const UOpPtr& b, const UOpPtr& c) {
  if (op == Ops::WHERE) {
    check_same_dtype(op, b, c);
    return UOp::make(op, b->dtype(), {a, b, c});
  }
  check_same_dtype(op, a, b);
  check_same_dtype(op, b, c);
  return UOp::make(op, a->dtype(), {a, b, c});
}

UOpPtr operator+(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::ADD, a, b); }
UOpPtr operator-(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::SUB, a, b); }
UOpPtr operator*(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::MUL, a, b); }
UOpPtr operator/(const UOpPtr& a, const UOpPtr& b) {
  return alu(a->dtype().is_float() ? Ops::FDIV : Ops::IDIV, a, b);
}
UOpPtr operator%(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::MOD, a, b); }
UOpPtr operator&(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::AND, a, b); }
UOpPtr operator|(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::OR, a, b); }
UOpPtr operator^(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::XOR, a, b); }
UOpPtr operator<<(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::SHL, a, b); }
UOpPtr operator>>(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::SHR, a, b); }
UOpPtr operator-(const UOpPtr& a) { return alu(Ops::NEG, a); }

UOpPtr lt(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::CMPLT, a, b); }
UOpPtr ne(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::CMPNE, a, b); }
UOpPtr eq(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::CMPEQ, a, b); }
UOpPtr maximum(const UOpPtr& a, const UOpPtr& b) { return alu(Ops::MAX, a, b); }
UOpPtr minimum(const UOpPtr& a, const UOpPtr& b) {
  // -max(-a, -b) keeps min inside the MAX rules for index and floats. Fixed-width negation wraps
  // (-(-128) is -128 in i8, and unsigned negation is never order-reversing), so those use WHERE.
  if (a->dtype().base().is_int() && !a->dtype().base().is_index()) return where(lt(a, b), a, b);
  return -maximum(-a, -b);
}
UOpPtr where(const UOpPtr& condition, const UOpPtr& if_true, const UOpPtr& if_false) {
  return alu(Ops::WHERE, condition, if_true, if_false);
}

void collect_conjuncts(const UOpPtr& condition, std::vector<UOpPtr>& out) {
  if (condition->op() == Ops::AND && condition->dtype().is_bool()) {
    collect_conjuncts(condition->src(0), out);
    collect_conjuncts(condition->src(1), out);
    return;
  }
  out.push_back(condition);
}

UOpPtr reduction_identity(Ops op, DType type) {
  if (op == Ops::ADD) return type.is_float() ? const_float(type, 0.0) : type.is_bool() ? const_bool(false) : const_int(type, 0);
  if (op == Ops::MUL) return type.is_float() ? const_float(type, 1.0) : type.is_bool() ? const_bool(true) : const_int(type, 1);
  KILN_ASSERT(op == Ops::MAX, str_cat("unknown reduction ", op_name(op)));
  if (type.is_float()) return const_float(type, -INFINITY);
  if (type.is_bool()) return const_bool(false);
  return UOp::make(Ops::CONST, type, {}, static_cast<int64_t>(min_value(type)));
}

UOpPtr logical_not(const UOpPtr& a) { return alu(Ops::NOT, a); }
UOpPtr cast(const UOpPtr& a, DType dtype) { return UOp::make(Ops::CAST, dtype, {a}); }

UOpPtr sink(std::vector<UOpPtr> outputs) { return UOp::make(Ops::SINK, dtypes::void_, std::move(outputs)); }

}  // namespace kiln
