// Scalar semantics of the ALU ops; see evaluate.h.
#include "ir/evaluate.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "support/error.h"
#include "support/float_rounding.h"

namespace kiln {

int128 wrap_integer(int128 value, DType dtype) {
  if (dtype.is_index()) return value;
  if (dtype.is_bool()) return value != 0 ? 1 : 0;
  int bits = dtype.scalar_bytes() * 8;
  uint128 mask = (static_cast<uint128>(1) << bits) - 1;
  uint128 low = static_cast<uint128>(value) & mask;
  if (dtype.is_signed() && (low >> (bits - 1)) != 0) return static_cast<int128>(low) - (int128{1} << bits);
  return static_cast<int128>(low);
}

namespace {

// x rounded to the nearest integer, halves to the even one, independent of the FP environment's
// rounding mode; -0.4 gives -0, and NaN and infinities are themselves.
double round_half_even(double x) {
  double whole = std::trunc(x), fraction = x - whole;
  bool odd = std::fmod(whole, 2.0) != 0;
  if (std::fabs(fraction) > 0.5 || (std::fabs(fraction) == 0.5 && odd)) return whole + std::copysign(1.0, x);
  return whole;
}

double round_float(double value, DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::Float16: return round_to_f16(value);
    case ScalarType::BFloat16: return round_to_bf16(value);
    case ScalarType::Float32: return round_to_f32(value);
    default: return value;
  }
}

ScalarValue integer_value(DType dtype, int128 value) { return {dtype, wrap_integer(value, dtype), 0.0}; }
ScalarValue real_value(DType dtype, double value) { return {dtype, 0, round_float(value, dtype)}; }

// An integer rounded to nearest-even with `precision` significant bits, as a double. Integers above
// 2^53 must be rounded once, directly: going through double first rounds twice, and the first
// rounding can land exactly on a midpoint of the narrower type (2^60 + 2^36 + 1 → f32).
double integer_to_real(int128 value, int precision) {
  uint128 magnitude = value < 0 ? static_cast<uint128>(0) - static_cast<uint128>(value) : static_cast<uint128>(value);
  int bits = 0;
  for (uint128 rest = magnitude; rest != 0; rest >>= 1) ++bits;
  int dropped = bits - precision;
  if (dropped > 0) {
    uint128 kept = magnitude >> dropped, remainder = magnitude & ((static_cast<uint128>(1) << dropped) - 1);
    uint128 half = static_cast<uint128>(1) << (dropped - 1);
    if (remainder > half || (remainder == half && (kept & 1) != 0)) ++kept;
    magnitude = kept << dropped;
  }
  // `magnitude` now has at most `precision` (<= 53) significant bits, so the conversion is exact.
  double result = static_cast<double>(magnitude);
  return value < 0 ? -result : result;
}

std::optional<ScalarValue> cast_value(const ScalarValue& source, DType target) {
  if (target.is_float()) {
    if (source.dtype.is_float()) return real_value(target, source.real);
    return real_value(target, integer_to_real(source.integer, target.precision_bits()));
  }
  if (target.is_bool())
    return integer_value(target, source.dtype.is_float() ? source.real != 0.0 : source.integer != 0);
  if (!source.dtype.is_float()) return integer_value(target, source.integer);
  // Float to integer truncates; out of range (and NaN) is undefined in C, so it is not folded.
  // The limits are compared as min and max+1: both are exact doubles (0 or ±2^k), whereas the
  // largest i64 and u64 round up to 2^63 and 2^64 as doubles and would let those values through.
  double truncated = std::trunc(source.real);
  DType limits = target.is_index() ? dtypes::i64 : target;
  if (std::isnan(truncated) || truncated < static_cast<double>(min_value(limits)) ||
      truncated >= static_cast<double>(max_value(limits) + 1))
    return std::nullopt;
  return integer_value(target, static_cast<int128>(truncated));
}

// The IEEE binary16 encoding of a value that f16 represents exactly (folded f16 values always are).
uint64_t f16_bits(double value) {
  uint64_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7e00;
  double magnitude = std::fabs(value);
  if (std::isinf(magnitude)) return sign | 0x7c00;
  if (magnitude < 0x1p-14) return sign | static_cast<uint64_t>(magnitude * 0x1p24);  // subnormal: units of 2^-24
  int exponent = std::ilogb(magnitude);
  auto fraction = static_cast<uint64_t>(std::ldexp(magnitude, 10 - exponent)) - 1024;
  return sign | (static_cast<uint64_t>(exponent + 15) << 10) | fraction;
}

double f16_value(uint64_t bits) {
  double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  int exponent = static_cast<int>((bits >> 10) & 0x1f);
  auto fraction = static_cast<double>(bits & 0x3ff);
  if (exponent == 0x1f) return fraction != 0 ? std::copysign(NAN, sign) : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024.0 + fraction, exponent - 25);
}

// The bit pattern of a scalar, as an unsigned integer of its width. Float values are exact in
// their type (folding rounds them), so the narrow encodings lose nothing; a NaN becomes the quiet
// NaN of its sign (the evaluator does not track payloads).
uint64_t bits_of(const ScalarValue& value) {
  switch (value.dtype.scalar()) {
    case ScalarType::Float64: return std::bit_cast<uint64_t>(value.real);
    case ScalarType::Float32: return std::bit_cast<uint32_t>(static_cast<float>(value.real));
    case ScalarType::BFloat16: return std::bit_cast<uint32_t>(static_cast<float>(value.real)) >> 16;
    case ScalarType::Float16: return f16_bits(value.real);
    default: {
      int bits = value.dtype.scalar_bytes() * 8;
      uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
      return static_cast<uint64_t>(static_cast<uint128>(value.integer)) & mask;
    }
  }
}

// BITCAST: the same bits read as `target`, which must have the source's width.
std::optional<ScalarValue> bitcast_value(const ScalarValue& source, DType target) {
  if (source.dtype.scalar_bytes() != target.scalar_bytes()) return std::nullopt;
  uint64_t bits = bits_of(source);
  switch (target.scalar()) {
    case ScalarType::Float64: return ScalarValue{target, 0, std::bit_cast<double>(bits)};
    case ScalarType::Float32:
      return ScalarValue{target, 0, std::bit_cast<float>(static_cast<uint32_t>(bits))};
    case ScalarType::BFloat16:
      return ScalarValue{target, 0, std::bit_cast<float>(static_cast<uint32_t>(bits << 16))};
    case ScalarType::Float16: return ScalarValue{target, 0, f16_value(bits)};
    default: return integer_value(target, static_cast<int128>(static_cast<uint128>(bits)));
  }
}

std::optional<ScalarValue> fold_integer(Ops op, DType dtype, int128 a, int128 b) {
  switch (op) {
    case Ops::ADD: return integer_value(dtype, a + b);
    case Ops::SUB: return integer_value(dtype, a - b);
    case Ops::MUL: {
      // Index values are int64-sized, so the product fits in int128.
      uint128 product = static_cast<uint128>(a) * static_cast<uint128>(b);
      return integer_value(dtype, static_cast<int128>(product));
    }
    case Ops::IDIV:
      if (b == 0) return std::nullopt;
      return integer_value(dtype, a / b);  // int128 division truncates, like C
    case Ops::MOD:
      if (b == 0) return std::nullopt;
      return integer_value(dtype, a % b);
    case Ops::MAX: return integer_value(dtype, a > b ? a : b);
    case Ops::AND: return integer_value(dtype, a & b);
    case Ops::OR: return integer_value(dtype, a | b);
    case Ops::XOR: return integer_value(dtype, a ^ b);
    case Ops::SHL:
      if (b < 0 || b >= dtype.scalar_bytes() * 8) return std::nullopt;
      return integer_value(dtype, a << static_cast<int>(b));
    case Ops::SHR:
      if (b < 0 || b >= dtype.scalar_bytes() * 8) return std::nullopt;
      return integer_value(dtype, a >> static_cast<int>(b));  // arithmetic on signed values
    default: return std::nullopt;
  }
}

std::optional<ScalarValue> fold_real(Ops op, DType dtype, double a, double b) {
  switch (op) {
    case Ops::ADD: return real_value(dtype, a + b);
    case Ops::SUB: return real_value(dtype, a - b);
    case Ops::MUL: return real_value(dtype, a * b);
    case Ops::FDIV: return real_value(dtype, a / b);
    // MAX is not folded for floats: its NaN behaviour belongs to the backend (ops.def).
    default: return std::nullopt;
  }
}

}  // namespace

ScalarValue constant_value(const UOp& node) {
  KILN_ASSERT(node.op() == Ops::CONST && node.dtype().count() == 1, "not a scalar constant: ", op_name(node.op()));
  if (node.dtype().is_float()) return {node.dtype(), 0, node.arg_float()};
  return {node.dtype(), node.const_int(), 0.0};
}

UOpPtr make_constant(const ScalarValue& value) {
  DType dtype = value.dtype;
  if (dtype.is_float()) return UOp::make(Ops::CONST, dtype, {}, value.real);
  if (dtype.is_bool()) return UOp::make(Ops::CONST, dtype, {}, value.integer != 0);
  // u64 constants are stored as their bit pattern in an int64.
  return UOp::make(Ops::CONST, dtype, {}, static_cast<int64_t>(static_cast<uint64_t>(value.integer)));
}

std::optional<ScalarValue> fold_alu(Ops op, DType result, std::span<const ScalarValue> sources) {
  if (op == Ops::CAST) return cast_value(sources[0], result);
  if (op == Ops::BITCAST) return bitcast_value(sources[0], result);
  if (op == Ops::WHERE) {
    const ScalarValue& chosen = sources[0].integer != 0 ? sources[1] : sources[2];
    return chosen;
  }
  const ScalarValue& a = sources[0];
  bool is_float = a.dtype.is_float();
  if (sources.size() == 1) {
    switch (op) {
      case Ops::NEG:
        return is_float ? real_value(result, -a.real) : integer_value(result, -a.integer);
      case Ops::NOT:
        return result.is_bool() ? integer_value(result, a.integer == 0) : integer_value(result, ~a.integer);
      case Ops::TRUNC: return is_float ? real_value(result, std::trunc(a.real)) : a;
      case Ops::ROUND_EVEN: return is_float ? real_value(result, round_half_even(a.real)) : a;
      case Ops::SQRT: return is_float ? std::optional(real_value(result, std::sqrt(a.real))) : std::nullopt;
      case Ops::RECIPROCAL: return is_float ? std::optional(real_value(result, 1.0 / a.real)) : std::nullopt;
      default: return std::nullopt;
    }
  }
  const ScalarValue& b = sources[1];
  if (op == Ops::MULACC && sources.size() == 3 && is_float) {
    // Rounded once, as the renderer's llvm.fma: f64 in double, narrower floats in float (an f16 or
    // bf16 product is exact in float; the renderer computes those in float too).
    double c = sources[2].real;
    if (result.scalar() == ScalarType::Float64) return real_value(result, std::fma(a.real, b.real, c));
    return real_value(result, static_cast<double>(std::fma(static_cast<float>(a.real), static_cast<float>(b.real),
                                                           static_cast<float>(c))));
  }
  if (sources.size() != 2) return std::nullopt;
  switch (op) {
    case Ops::CMPLT: return integer_value(result, is_float ? a.real < b.real : a.integer < b.integer);
    case Ops::CMPNE: return integer_value(result, is_float ? a.real != b.real : a.integer != b.integer);
    case Ops::CMPEQ: return integer_value(result, is_float ? a.real == b.real : a.integer == b.integer);
    default: break;
  }
  return is_float ? fold_real(op, result, a.real, b.real) : fold_integer(op, result, a.integer, b.integer);
}

std::optional<ScalarValue> evaluate(const UOpPtr& root,
                                    const std::unordered_map<std::string, int128>& variables,
                                    const std::unordered_map<const UOp*, int128>* ranges) {
  std::unordered_map<const UOp*, ScalarValue> values;
  for (const UOp* node : toposort(root)) {
    if (node->dtype().count() != 1) return std::nullopt;
    if (node->op() == Ops::CONST) {
      values[node] = constant_value(*node);
    } else if (node->op() == Ops::DEFINE_VAR) {
      auto found = variables.find(node->arg_variable().name);
      if (found == variables.end()) return std::nullopt;
      values[node] = integer_value(node->dtype(), found->second);
    } else if (node->op() == Ops::RANGE && ranges != nullptr && ranges->count(node) != 0) {
      values[node] = integer_value(node->dtype(), ranges->at(node));
    } else if (node->op() == Ops::RANGE || node->op() == Ops::SPECIAL) {
      return std::nullopt;
    } else if (op_is_alu(node->op()) || node->op() == Ops::CAST || node->op() == Ops::BITCAST) {
      std::vector<ScalarValue> inputs;
      for (const UOpPtr& source : node->srcs()) inputs.push_back(values.at(source.get()));
      std::optional<ScalarValue> result = fold_alu(node->op(), node->dtype(), inputs);
      if (!result) return std::nullopt;
      values[node] = *result;
    } else {
      return std::nullopt;
    }
  }
  return values.at(root.get());
}

}  // namespace kiln
