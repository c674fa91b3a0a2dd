// kiln's ALU semantics as Z3 terms; see z3_semantics.h. The reference for every op is fold_alu
// (src/ir/evaluate.cpp) and ops.def; test_fold_alu_z3.cpp checks the two against each other.
#include "z3/z3_semantics.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "ir/dtype.h"
#include "support/error.h"
#include "support/float_rounding.h"

namespace kiln::z3check {
namespace {

// The C API is used for the bit-vector and IEEE operations so that every signed/unsigned choice is
// explicit rather than hidden in an overloaded operator.
z3::expr wrap(z3::context& context, Z3_ast ast) { return z3::to_expr(context, ast); }

unsigned bits_of(DType dtype) { return static_cast<unsigned>(dtype.scalar_bytes() * 8); }

bool is_fixed_width(DType dtype) { return dtype.is_int() && !dtype.is_index(); }

[[noreturn]] void untranslatable(std::string reason) { throw Untranslatable{std::move(reason)}; }

std::string op_on(Ops op, DType dtype) { return str_cat(op_name(op), " on ", dtype.name()); }

// The bit pattern of `value` in a float dtype, rounded to nearest-even first (as the folder rounds).
uint64_t ieee_bits(double value, DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::Float64: {
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof bits);
      return bits;
    }
    case ScalarType::Float32:
    case ScalarType::BFloat16: {
      // A bf16 value rounded to bf16 is an f32 whose low 16 bits are zero.
      float narrow = static_cast<float>(dtype.scalar() == ScalarType::BFloat16 ? round_to_bf16(value) : value);
      uint32_t bits;
      std::memcpy(&bits, &narrow, sizeof bits);
      return dtype.scalar() == ScalarType::BFloat16 ? bits >> 16 : bits;
    }
    case ScalarType::Float16: {
      double rounded = round_to_f16(value);
      uint64_t sign = std::signbit(rounded) ? 1 : 0;
      double magnitude = std::fabs(rounded);
      if (std::isinf(magnitude)) return sign << 15 | 0x7c00;
      if (magnitude < std::ldexp(1.0, -14))  // zero or subnormal: multiples of 2^-24
        return sign << 15 | static_cast<uint64_t>(std::ldexp(magnitude, 24));
      int exponent = std::ilogb(magnitude);
      uint64_t fraction = static_cast<uint64_t>(std::ldexp(magnitude, 10 - exponent)) - 1024;
      return sign << 15 | static_cast<uint64_t>(exponent + 15) << 10 | fraction;
    }
    default: untranslatable(str_cat("float bits of ", dtype.name()));
  }
}

}  // namespace

Z3Semantics::Z3Semantics(z3::context& context, IntDivision division) : context_(context), division_(division) {}

z3::sort Z3Semantics::sort_of(DType dtype) {
  if (dtype.is_pointer() || dtype.count() != 1) untranslatable(str_cat("dtype ", dtype.name(), " is not a scalar"));
  switch (dtype.scalar()) {
    case ScalarType::Index: return context_.int_sort();
    case ScalarType::Bool: return context_.bool_sort();
    case ScalarType::Int8: case ScalarType::UInt8: case ScalarType::Int16: case ScalarType::UInt16:
    case ScalarType::Int32: case ScalarType::UInt32: case ScalarType::Int64: case ScalarType::UInt64:
      return context_.bv_sort(bits_of(dtype));
    case ScalarType::Float16: return context_.fpa_sort(5, 11);
    case ScalarType::BFloat16: return context_.fpa_sort(8, 8);
    case ScalarType::Float32: return context_.fpa_sort(8, 24);
    case ScalarType::Float64: return context_.fpa_sort(11, 53);
    default: untranslatable(str_cat("dtype ", dtype.name(), " has no value semantics"));
  }
}

z3::expr Z3Semantics::constant(const UOp& node) {
  DType dtype = node.dtype();
  z3::sort sort = sort_of(dtype);
  if (dtype.is_float()) {
    double value = node.arg_float();
    if (std::isnan(value)) return wrap(context_, Z3_mk_fpa_nan(context_, sort));
    // From the IEEE bit pattern: Z3 4.8's Z3_mk_fpa_numeral_double mangles subnormal targets.
    unsigned width = bits_of(dtype);
    z3::expr bits = context_.bv_val(ieee_bits(value, dtype), width);
    return wrap(context_, Z3_mk_fpa_to_fp_bv(context_, bits, sort)).simplify();
  }
  if (dtype.is_bool()) return context_.bool_val(node.const_int() != 0);
  if (dtype.is_index()) return context_.int_val(to_string(node.const_int()).c_str());
  // A fixed-width CONST is emitted as its bit pattern in the type, which is also what every wrapping
  // operation of the folder computes from it.
  uint64_t bits = static_cast<uint64_t>(node.const_int());
  unsigned width = bits_of(dtype);
  if (width < 64) bits &= (uint64_t{1} << width) - 1;
  return context_.bv_val(bits, width);
}

z3::expr Z3Semantics::translate(const UOp* root, std::vector<z3::expr>& definedness) {
  for (const UOp* node : toposort(root->self())) {
    if (memo_.count(node) != 0) continue;
    if (node->op() == Ops::CONST) {
      memo_.emplace(node, constant(*node));
      continue;
    }
    if (node->op() == Ops::DEFINE_VAR) {
      std::string name = node->arg_variable().name + ":" + node->dtype().name();
      memo_.emplace(node, context_.constant(name.c_str(), sort_of(node->dtype())));
      continue;
    }
    if (!op_is_alu(node->op()) && node->op() != Ops::CAST)
      untranslatable(str_cat(op_name(node->op()), " is not a scalar ALU op"));
    std::vector<DType> source_dtypes;
    std::vector<z3::expr> sources;
    for (const UOpPtr& source : node->srcs()) {
      source_dtypes.push_back(source->dtype());
      sources.push_back(memo_.at(source.get()));
    }
    memo_.emplace(node, apply(node->op(), node->dtype(), source_dtypes, sources, definedness));
  }
  return memo_.at(root);
}

z3::expr Z3Semantics::apply(Ops op, DType result, const std::vector<DType>& source_dtypes,
                            const std::vector<z3::expr>& sources, std::vector<z3::expr>& definedness) {
  sort_of(result);  // rejects vectors and pointers
  for (DType dtype : source_dtypes) sort_of(dtype);
  if (op == Ops::WHERE) {
    if (!source_dtypes[0].is_bool()) untranslatable("WHERE with a non-bool condition");
    return z3::ite(sources[0], sources[1], sources[2]);
  }
  if (op == Ops::CAST) return cast(sources[0], source_dtypes[0], result);
  DType operand = source_dtypes.at(0);
  if (operand.is_index()) return apply_integer(op, operand, sources, definedness);
  if (is_fixed_width(operand)) return apply_bitvector(op, operand, source_dtypes, sources, definedness);
  if (operand.is_bool()) return apply_bool(op, sources, definedness);
  if (operand.is_float()) return apply_float(op, operand, sources);
  untranslatable(op_on(op, operand));
}

z3::expr Z3Semantics::int_divide(const z3::expr& a, const z3::expr& b) {
  switch (division_) {
    case IntDivision::Native: return z3::ite(a >= 0, a / b, -((-a) / b));
    case IntDivision::AbsoluteDivisor: {
      z3::expr magnitude = z3::ite(b >= 0, b, -b);
      z3::expr quotient = z3::ite(a >= 0, a / magnitude, -((-a) / magnitude));
      return z3::ite(b >= 0, quotient, -quotient);
    }
    case IntDivision::QuotientRemainder: break;
  }
  auto key = std::make_pair(a.id(), b.id());
  auto found = quotients_.find(key);
  if (found == quotients_.end()) {
    std::string suffix = std::to_string(fresh_++);
    z3::expr q = context_.int_const(("quotient!" + suffix).c_str());
    z3::expr r = context_.int_const(("remainder!" + suffix).c_str());
    z3::expr magnitude = z3::ite(b >= 0, b, -b);
    // Guarded by b != 0 so that a division by zero stays possible in a model (it is then caught as
    // undefined instead of silently excluded).
    definitions_.push_back(z3::implies(b != 0, a == b * q + r && z3::implies(a >= 0, r >= 0 && r < magnitude) &&
                                                    z3::implies(a < 0, r <= 0 && r > -magnitude)));
    divisions_.push_back({a, b, q, r});
    found = quotients_.emplace(key, divisions_.size() - 1).first;
  }
  return divisions_[found->second].quotient;
}

z3::expr Z3Semantics::int_remainder(const z3::expr& a, const z3::expr& b) {
  switch (division_) {
    case IntDivision::Native: return z3::ite(a >= 0, z3::mod(a, b), -z3::mod(-a, b));
    case IntDivision::AbsoluteDivisor: {
      // C's remainder does not depend on the divisor's sign.
      z3::expr magnitude = z3::ite(b >= 0, b, -b);
      return z3::ite(a >= 0, z3::mod(a, magnitude), -z3::mod(-a, magnitude));
    }
    case IntDivision::QuotientRemainder: break;
  }
  int_divide(a, b);
  return divisions_[quotients_.at(std::make_pair(a.id(), b.id()))].remainder;
}

// index: the mathematical integers. Bitwise ops have no meaning without a width, so they are not
// translated (ops.def gives index no bit pattern); NOT is the exception because ~x = -x-1 holds for
// two's complement of any width.
z3::expr Z3Semantics::apply_integer(Ops op, DType dtype, const std::vector<z3::expr>& s,
                                    std::vector<z3::expr>& definedness) {
  switch (op) {
    case Ops::ADD: return s[0] + s[1];
    case Ops::SUB: return s[0] - s[1];
    case Ops::MUL: return s[0] * s[1];
    case Ops::NEG: return -s[0];
    case Ops::NOT: return -s[0] - 1;
    case Ops::TRUNC: case Ops::ROUND_EVEN: return s[0];
    case Ops::IDIV: definedness.push_back(s[1] != 0); return int_divide(s[0], s[1]);
    case Ops::MOD: definedness.push_back(s[1] != 0); return int_remainder(s[0], s[1]);
    case Ops::MAX: return z3::ite(s[0] > s[1], s[0], s[1]);
    case Ops::CMPLT: return s[0] < s[1];
    case Ops::CMPNE: return s[0] != s[1];
    case Ops::CMPEQ: return s[0] == s[1];
    case Ops::MULACC: return s[0] * s[1] + s[2];
    case Ops::AND: case Ops::OR: case Ops::XOR: case Ops::SHL: case Ops::SHR:
      untranslatable(op_on(op, dtype) + ": index is unbounded and has no bit pattern");
    default: untranslatable(op_on(op, dtype));
  }
}

z3::expr Z3Semantics::apply_bitvector(Ops op, DType dtype, const std::vector<DType>& source_dtypes,
                                      const std::vector<z3::expr>& s, std::vector<z3::expr>& definedness) {
  z3::context& c = context_;
  bool is_signed = dtype.is_signed();
  auto binary = [&](Z3_ast (*make)(Z3_context, Z3_ast, Z3_ast)) { return wrap(c, make(c, s[0], s[1])); };
  switch (op) {
    case Ops::ADD: return binary(Z3_mk_bvadd);
    case Ops::SUB: return binary(Z3_mk_bvsub);
    case Ops::MUL: return binary(Z3_mk_bvmul);
    case Ops::NEG: return wrap(c, Z3_mk_bvneg(c, s[0]));
    case Ops::NOT: return wrap(c, Z3_mk_bvnot(c, s[0]));
    case Ops::TRUNC: case Ops::ROUND_EVEN: return s[0];
    case Ops::AND: return binary(Z3_mk_bvand);
    case Ops::OR: return binary(Z3_mk_bvor);
    case Ops::XOR: return binary(Z3_mk_bvxor);
    // bvsdiv/bvsrem truncate toward zero and give the remainder the dividend's sign (C), and
    // INT_MIN / -1 wraps to INT_MIN as the folder's wrap of the exact quotient does.
    case Ops::IDIV:
      definedness.push_back(s[1] != c.bv_val(uint64_t{0}, bits_of(dtype)));
      return binary(is_signed ? Z3_mk_bvsdiv : Z3_mk_bvudiv);
    case Ops::MOD:
      definedness.push_back(s[1] != c.bv_val(uint64_t{0}, bits_of(dtype)));
      return binary(is_signed ? Z3_mk_bvsrem : Z3_mk_bvurem);
    case Ops::MAX: return z3::ite(binary(is_signed ? Z3_mk_bvsgt : Z3_mk_bvugt), s[0], s[1]);
    case Ops::CMPLT: return binary(is_signed ? Z3_mk_bvslt : Z3_mk_bvult);
    case Ops::CMPNE: return s[0] != s[1];
    case Ops::CMPEQ: return s[0] == s[1];
    case Ops::MULACC: return wrap(c, Z3_mk_bvadd(c, Z3_mk_bvmul(c, s[0], s[1]), s[2]));
    case Ops::SHL:
    case Ops::SHR: {
      // The amount may have its own integer type; the shift is defined for 0 <= amount < width.
      unsigned width = bits_of(dtype);
      DType amount_dtype = source_dtypes[1];
      z3::expr amount = s[1];
      z3::expr shift_bits = amount;
      if (amount_dtype.is_index()) {
        definedness.push_back(amount >= 0 && amount < static_cast<int>(width));
        shift_bits = z3::int2bv(width, amount);
      } else if (is_fixed_width(amount_dtype)) {
        unsigned amount_width = bits_of(amount_dtype);
        unsigned compare_width = std::max(width, amount_width) + 1;
        z3::expr wide = amount_dtype.is_signed() ? z3::sext(amount, compare_width - amount_width)
                                                 : z3::zext(amount, compare_width - amount_width);
        definedness.push_back(wrap(c, Z3_mk_bvsge(c, wide, c.bv_val(uint64_t{0}, compare_width))) &&
                              wrap(c, Z3_mk_bvslt(c, wide, c.bv_val(uint64_t{width}, compare_width))));
        shift_bits = amount_width < width ? z3::zext(amount, width - amount_width) : amount.extract(width - 1, 0);
      } else {
        untranslatable(str_cat(op_name(op), " by an amount of type ", amount_dtype.name()));
      }
      if (op == Ops::SHL) return wrap(c, Z3_mk_bvshl(c, s[0], shift_bits));
      return wrap(c, (is_signed ? Z3_mk_bvashr : Z3_mk_bvlshr)(c, s[0], shift_bits));
    }
    default: untranslatable(op_on(op, dtype));
  }
}

// bool: the folder computes on 0/1 and converts the result back with `!= 0`, as C does; logical
// ops act on the truth values directly.
z3::expr Z3Semantics::apply_bool(Ops op, const std::vector<z3::expr>& s, std::vector<z3::expr>& definedness) {
  switch (op) {
    case Ops::AND: return s[0] && s[1];
    case Ops::OR: return s[0] || s[1];
    case Ops::XOR: return s[0] != s[1];
    case Ops::NOT: return !s[0];
    default: break;
  }
  std::vector<z3::expr> integers;
  for (const z3::expr& value : s) integers.push_back(z3::ite(value, context_.int_val(1), context_.int_val(0)));
  z3::expr result = apply_integer(op, dtypes::bool_, integers, definedness);
  if (result.is_bool()) return result;  // comparisons
  return result != 0;
}

z3::expr Z3Semantics::float_maximum(const z3::expr& a, const z3::expr& b, DType dtype) {
  // ops.def leaves max(NaN, x) and max(-0, +0) to the backend: those cases go to an uninterpreted
  // function, so a rule is proven only if it holds whatever the backend returns there.
  z3::sort sort = sort_of(dtype);
  z3::func_decl backend = context_.function(("backend_max_" + dtype.name()).c_str(), sort, sort, sort);
  z3::expr a_greater = wrap(context_, Z3_mk_fpa_gt(context_, a, b));
  z3::expr b_greater = wrap(context_, Z3_mk_fpa_gt(context_, b, a));
  return z3::ite(a == b, a, z3::ite(a_greater, a, z3::ite(b_greater, b, backend(a, b))));
}

z3::expr Z3Semantics::apply_float(Ops op, DType dtype, const std::vector<z3::expr>& s) {
  z3::context& c = context_;
  z3::expr nearest_even = wrap(c, Z3_mk_fpa_rne(c));
  switch (op) {
    case Ops::ADD: return wrap(c, Z3_mk_fpa_add(c, nearest_even, s[0], s[1]));
    case Ops::SUB: return wrap(c, Z3_mk_fpa_sub(c, nearest_even, s[0], s[1]));
    case Ops::MUL: return wrap(c, Z3_mk_fpa_mul(c, nearest_even, s[0], s[1]));
    case Ops::FDIV: return wrap(c, Z3_mk_fpa_div(c, nearest_even, s[0], s[1]));
    case Ops::NEG: return wrap(c, Z3_mk_fpa_neg(c, s[0]));
    case Ops::SQRT: return wrap(c, Z3_mk_fpa_sqrt(c, nearest_even, s[0]));
    case Ops::RECIPROCAL: {
      z3::expr one = wrap(c, Z3_mk_fpa_numeral_double(c, 1.0, sort_of(dtype)));
      return wrap(c, Z3_mk_fpa_div(c, nearest_even, one, s[0]));
    }
    case Ops::TRUNC: return wrap(c, Z3_mk_fpa_round_to_integral(c, wrap(c, Z3_mk_fpa_rtz(c)), s[0]));
    case Ops::ROUND_EVEN: return wrap(c, Z3_mk_fpa_round_to_integral(c, nearest_even, s[0]));
    case Ops::MULACC: return wrap(c, Z3_mk_fpa_fma(c, nearest_even, s[0], s[1], s[2]));
    case Ops::MAX: return float_maximum(s[0], s[1], dtype);
    case Ops::CMPLT: return wrap(c, Z3_mk_fpa_lt(c, s[0], s[1]));
    case Ops::CMPNE: return !wrap(c, Z3_mk_fpa_eq(c, s[0], s[1]));
    case Ops::CMPEQ: return wrap(c, Z3_mk_fpa_eq(c, s[0], s[1]));
    case Ops::EXP2: case Ops::LOG2: case Ops::SIN: case Ops::POW:
      untranslatable(op_on(op, dtype) + ": transcendental, computed by the backend's own approximation");
    default: untranslatable(op_on(op, dtype));
  }
}

z3::expr Z3Semantics::cast(const z3::expr& value, DType from, DType to) {
  if (from == to) return value;
  if (from.is_float() || to.is_float()) untranslatable(str_cat("CAST from ", from.name(), " to ", to.name()));
  z3::context& c = context_;
  if (to.is_bool()) {
    if (from.is_index()) return value != 0;
    return value != c.bv_val(uint64_t{0}, bits_of(from));
  }
  if (to.is_index()) return to_integer(value, from);
  unsigned width = bits_of(to);
  if (from.is_bool()) return z3::ite(value, c.bv_val(uint64_t{1}, width), c.bv_val(uint64_t{0}, width));
  if (from.is_index()) return z3::int2bv(width, value);  // wraps modulo 2^width
  unsigned from_width = bits_of(from);
  if (from_width == width) return value;
  if (from_width > width) return value.extract(width - 1, 0);
  return from.is_signed() ? z3::sext(value, width - from_width) : z3::zext(value, width - from_width);
}

z3::expr Z3Semantics::to_integer(const z3::expr& value, DType dtype) {
  if (dtype.is_index()) return value;
  if (dtype.is_bool()) return z3::ite(value, context_.int_val(1), context_.int_val(0));
  if (is_fixed_width(dtype)) return z3::bv2int(value, dtype.is_signed());
  untranslatable(str_cat("the integer value of a ", dtype.name()));
}

std::string render_integer(const z3::model& model, const z3::expr& value, bool signed_bitvector) {
  z3::expr evaluated = model.eval(value, true);
  if (evaluated.is_bv()) evaluated = model.eval(z3::bv2int(evaluated, signed_bitvector), true);
  return Z3_get_numeral_string(evaluated.ctx(), evaluated);
}

std::string Z3Semantics::render(const z3::model& model, const z3::expr& value, DType dtype) {
  z3::context& c = context_;
  z3::expr evaluated = model.eval(value, true);
  if (dtype.is_bool()) return evaluated.is_true() ? "true" : "false";
  if (dtype.is_index()) return Z3_get_numeral_string(c, evaluated);
  if (is_fixed_width(dtype)) return render_integer(model, evaluated, dtype.is_signed());
  if (!dtype.is_float()) return evaluated.to_string();
  if (Z3_fpa_is_numeral_nan(c, evaluated)) return "NaN";
  bool negative = Z3_fpa_is_numeral_negative(c, evaluated);
  if (Z3_fpa_is_numeral_inf(c, evaluated)) return negative ? "-inf" : "+inf";
  if (Z3_fpa_is_numeral_zero(c, evaluated)) return negative ? "-0.0" : "0.0";
  z3::expr real = model.eval(wrap(c, Z3_mk_fpa_to_real(c, evaluated)), true);
  z3::expr bits = model.eval(wrap(c, Z3_mk_fpa_to_ieee_bv(c, evaluated)), true);
  uint64_t pattern = 0;
  Z3_get_numeral_uint64(c, bits, &pattern);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(pattern));
  return str_cat(Z3_get_numeral_decimal_string(c, real, 12), " (", hex, ")");
}

// ----- guards ---------------------------------------------------------------------------------

namespace {

using Kind = GuardTerm::Kind;
using Operator = GuardTerm::Operator;

int literal_bits(int128 value) {
  int bits = 1;
  while (bits < 128 && (value < -(int128{1} << (bits - 1)) || value >= (int128{1} << (bits - 1)))) ++bits;
  return bits + 1;
}

class GuardTranslator {
 public:
  GuardTranslator(Z3Semantics& semantics, const GuardLeaves& leaves, TranslatedGuard& out)
      : semantics_(semantics), context_(semantics.context()), leaves_(leaves), out_(out) {}

  // A value in the guard's domain and whether it is defined (Guard::holds treats an undefined
  // guard — division by zero, `val` of a non-constant — as not holding).
  struct Value {
    z3::expr value;
    z3::expr defined;
    std::optional<z3::expr> truth;  // set for comparisons and logic, so Z3 sees plain Booleans
  };

  void choose_domain(const GuardTerm::Node& root) {
    use_int_ = reads_index(root);
    width_ = static_cast<unsigned>(std::max(2, widest(root)));
    if (!use_int_ && width_ > 1024) untranslatable("guard needs more than 1024 bits");
    out_.signed_bitvector = !use_int_;
  }

  Value translate(const GuardTerm::Node& node) {
    switch (node.kind) {
      case Kind::Literal: return {number(node.literal), context_.bool_val(true), std::nullopt};
      case Kind::ConstValue: return constant_value(node.name);
      case Kind::RangeMin: case Kind::RangeMax: return range_end(node.name, node.kind == Kind::RangeMin);
      case Kind::Unary: {
        Value a = translate(*node.left);
        if (node.op == Operator::Not) return logical(!truth(a), a.defined);
        return {-a.value, a.defined, std::nullopt};
      }
      case Kind::Binary: break;
    }
    Value a = translate(*node.left);
    Value b = translate(*node.right);
    z3::expr zero = number(0);
    z3::expr both = a.defined && b.defined;
    switch (node.op) {
      case Operator::Add: return {a.value + b.value, both, std::nullopt};
      case Operator::Sub: return {a.value - b.value, both, std::nullopt};
      case Operator::Mul: return {a.value * b.value, both, std::nullopt};
      case Operator::Div: return {divide(a.value, b.value), both && b.value != zero, std::nullopt};
      case Operator::Mod: return {remainder(a.value, b.value), both && b.value != zero, std::nullopt};
      case Operator::Lt: return logical(less(a.value, b.value), both);
      case Operator::Le: return logical(!less(b.value, a.value), both);
      case Operator::Gt: return logical(less(b.value, a.value), both);
      case Operator::Ge: return logical(!less(a.value, b.value), both);
      case Operator::Eq: return logical(a.value == b.value, both);
      case Operator::Ne: return logical(a.value != b.value, both);
      // Short-circuit, as GuardTerm::evaluate: the right side only matters when it is evaluated.
      case Operator::And: return logical(truth(a) && truth(b), a.defined && (!truth(a) || b.defined));
      case Operator::Or: return logical(truth(a) || truth(b), a.defined && (truth(a) || b.defined));
      default: untranslatable("malformed guard");
    }
  }


  z3::expr truth(const Value& value) { return value.truth ? *value.truth : value.value != number(0); }

 private:
  const std::pair<z3::expr, DType>* find(const std::string& name, bool constants) const {
    const auto& map = constants ? leaves_.constants : leaves_.nodes;
    auto found = map.find(name);
    return found == map.end() ? nullptr : &found->second;
  }

  bool reads_index(const GuardTerm::Node& node) const {
    if (node.kind == Kind::ConstValue || node.kind == Kind::RangeMin || node.kind == Kind::RangeMax) {
      const auto* leaf = find(node.name, true);
      if (!leaf) leaf = find(node.name, false);
      return leaf && leaf->second.is_index();
    }
    return (node.left && reads_index(*node.left)) || (node.right && reads_index(*node.right));
  }

  // Bits of a signed bit-vector that holds every value the term can take.
  int widest(const GuardTerm::Node& node) const {
    switch (node.kind) {
      case Kind::Literal: return literal_bits(node.literal);
      case Kind::ConstValue: case Kind::RangeMin: case Kind::RangeMax: {
        const auto* leaf = find(node.name, true);
        if (!leaf) leaf = find(node.name, false);
        if (!leaf || leaf->second.is_float()) return 129;  // float ranges are the int128 extremes
        if (leaf->second.is_bool() || leaf->second.is_index()) return 2;
        return static_cast<int>(leaf->second.scalar_bytes() * 8) + 1;
      }
      case Kind::Unary: return widest(*node.left) + 1;
      case Kind::Binary: break;
    }
    int a = widest(*node.left), b = widest(*node.right);
    switch (node.op) {
      case Operator::Add: case Operator::Sub: return std::max(a, b) + 1;
      case Operator::Mul: return a + b;
      case Operator::Div: return std::max(a + 1, b);
      default: return std::max(a, b);
    }
  }

  z3::expr number(int128 value) {
    std::string text = to_string(value);
    if (use_int_) return context_.int_val(text.c_str());
    if (value >= 0) return context_.bv_val(text.c_str(), width_);
    std::string magnitude = to_string(-value);
    return -context_.bv_val(magnitude.c_str(), width_);
  }
  z3::expr boolean(const z3::expr& condition) { return z3::ite(condition, number(1), number(0)); }
  Value logical(const z3::expr& condition, const z3::expr& defined) { return {boolean(condition), defined, condition}; }
  z3::expr less(const z3::expr& a, const z3::expr& b) {
    return use_int_ ? a < b : wrap(context_, Z3_mk_bvslt(context_, a, b));
  }
  z3::expr divide(const z3::expr& a, const z3::expr& b) {
    return use_int_ ? semantics_.int_divide(a, b) : wrap(context_, Z3_mk_bvsdiv(context_, a, b));
  }
  z3::expr remainder(const z3::expr& a, const z3::expr& b) {
    return use_int_ ? semantics_.int_remainder(a, b) : wrap(context_, Z3_mk_bvsrem(context_, a, b));
  }

  // A node value as an integer of the guard's domain.
  z3::expr widen(const z3::expr& value, DType dtype) {
    if (use_int_) return semantics_.to_integer(value, dtype);
    if (dtype.is_bool()) return boolean(value);
    unsigned bits = static_cast<unsigned>(dtype.scalar_bytes() * 8);
    return dtype.is_signed() ? z3::sext(value, width_ - bits) : z3::zext(value, width_ - bits);
  }

  Value constant_value(const std::string& name) {
    if (const auto* leaf = find(name, true)) {
      // GuardTerm::evaluate: `val` of a float constant is undefined.
      if (leaf->second.is_float()) return {number(0), context_.bool_val(false), std::nullopt};
      return {widen(leaf->first, leaf->second), context_.bool_val(true), std::nullopt};
    }
    if (find(name, false)) return {number(0), context_.bool_val(false), std::nullopt};  // `val` of a non-constant
    untranslatable(str_cat("guard reads '", name, "', which the pattern does not bind"));
  }

  // Range analysis gives non-integer nodes the whole int128 range (bounds.h).
  Value float_range_end(bool minimum) {
    return {number(minimum ? int128_min : int128_max), context_.bool_val(true), std::nullopt};
  }

  Value range_end(const std::string& name, bool minimum) {
    if (const auto* leaf = find(name, true)) {
      // The range of a constant is its value (and the int128 extremes for floats).
      if (leaf->second.is_float()) return float_range_end(minimum);
      return {widen(leaf->first, leaf->second), context_.bool_val(true), std::nullopt};
    }
    const auto* leaf = find(name, false);
    if (!leaf) untranslatable(str_cat("guard reads '", name, "', which the pattern does not bind"));
    if (leaf->second.is_float()) return float_range_end(minimum);
    // vmin/vmax of a node: unknown bounds L <= value <= H, shared by every mention of the name.
    std::string label = str_cat(minimum ? "vmin(" : "vmax(", name, ")");
    for (const auto& [existing, symbol] : out_.range_symbols)
      if (existing == label) return {symbol, context_.bool_val(true), std::nullopt};
    z3::expr symbol = use_int_ ? context_.int_const(label.c_str()) : context_.bv_const(label.c_str(), width_);
    z3::expr value = widen(leaf->first, leaf->second);
    out_.assumptions.push_back(minimum ? !less(value, symbol) : !less(symbol, value));
    // Range analysis clamps the range of a fixed-width or bool node to its type (bounds.h), which
    // also keeps guard arithmetic on these symbols within the width chosen for it.
    if (!leaf->second.is_index()) {
      out_.assumptions.push_back(!less(symbol, number(min_value(leaf->second))));
      out_.assumptions.push_back(!less(number(max_value(leaf->second)), symbol));
    }
    out_.range_symbols.emplace_back(label, symbol);
    return {symbol, context_.bool_val(true), std::nullopt};
  }

  Z3Semantics& semantics_;
  z3::context& context_;
  const GuardLeaves& leaves_;
  TranslatedGuard& out_;
  bool use_int_ = false;
  unsigned width_ = 2;
};

}  // namespace

TranslatedGuard translate_guard(Z3Semantics& semantics, const Guard& guard, const GuardLeaves& leaves) {
  TranslatedGuard out{semantics.context().bool_val(true), {}, {}, false};
  if (!guard.condition()) return out;
  GuardTranslator translator(semantics, leaves, out);
  const GuardTerm::Node& root = guard.condition()->node();
  translator.choose_domain(root);
  GuardTranslator::Value value = translator.translate(root);
  out.holds = value.defined && translator.truth(value);
  return out;
}

}  // namespace kiln::z3check
