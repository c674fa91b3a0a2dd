// Scalar ops as C expressions with kiln's semantics; see c_alu.h. The rules follow the LLVM renderer
// (src/codegen/llvm/llvm_alu.cpp) op for op, so a kernel computes the same bits on either backend
// (f16 through f32, f64 → f16 through f32 rounded to odd, saturating float → integer casts).
#include "codegen/c_style/c_alu.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "support/error.h"
#include "support/float_rounding.h"

namespace kiln {

namespace {

std::string paren(const std::string& text) { return "(" + text + ")"; }

bool is_f16(DType dtype) { return dtype.scalar() == ScalarType::Float16; }
bool is_bf16(DType dtype) { return dtype.scalar() == ScalarType::BFloat16; }

// The C type of a scalar: the dialect's, except bf16, which no C dialect has: its bits live in the
// 16-bit unsigned type, and ops widen them to f32 (as the LLVM renderer keeps bf16 in i16 registers).
std::string type_name(const CDialect& dialect, ScalarType scalar) {
  return dialect.scalar_type(scalar == ScalarType::BFloat16 ? ScalarType::UInt16 : scalar);
}

int bit_width(DType dtype) { return dtype.scalar_bytes() * 8; }

// The unsigned type integer arithmetic is done in, so that it wraps instead of overflowing (C's
// undefined behaviour): 32 bits for types up to 32 bits (narrower ones are promoted anyway).
std::string unsigned_work_type(const CDialect& dialect, DType dtype) {
  return dialect.scalar_type(bit_width(dtype) > 32 ? ScalarType::UInt64 : ScalarType::UInt32);
}

// An integer literal of `dtype` holding `value` (u64 as its bit pattern).
std::string integer_literal(const CDialect& dialect, DType dtype, int64_t value) {
  std::string type = type_name(dialect, dtype.scalar());
  if (dtype.is_unsigned()) {
    auto bits = static_cast<uint64_t>(value);
    if (bit_width(dtype) < 64) bits &= (uint64_t{1} << bit_width(dtype)) - 1;
    return "((" + type + ")" + std::to_string(bits) + "UL)";
  }
  // -9223372036854775808 is not a literal in C: the positive part does not fit a signed long.
  if (value == std::numeric_limits<int64_t>::min()) return "((" + type + ")(-9223372036854775807L - 1L))";
  return "((" + type + ")" + std::to_string(value) + "L)";
}

// `value` (exact in f32 or f64) as a hexadecimal literal of `dtype` (f32 or f64); infinities and
// NaN as bit patterns, which every dialect can reinterpret without a math header.
std::string float_literal(const CDialect& dialect, ScalarType scalar, double value) {
  bool is_double = scalar == ScalarType::Float64;
  if (std::isnan(value) || std::isinf(value)) {
    if (is_double) {
      uint64_t bits = std::isnan(value) ? 0x7FF8000000000000ULL : value > 0 ? 0x7FF0000000000000ULL : 0xFFF0000000000000ULL;
      return dialect.bitcast(ScalarType::UInt64, ScalarType::Float64, std::to_string(bits) + "UL");
    }
    uint32_t bits = std::isnan(value) ? 0x7FC00000U : value > 0 ? 0x7F800000U : 0xFF800000U;
    return dialect.bitcast(ScalarType::UInt32, ScalarType::Float32, std::to_string(bits) + "U");
  }
  char text[64];
  std::snprintf(text, sizeof text, "%a", is_double ? value : static_cast<double>(static_cast<float>(value)));
  return paren(std::string(text) + (is_double ? "" : "f"));
}

// f32 → bf16 bits, rounded to nearest even; NaN stays NaN (quieted), overflow becomes infinity
// (llvm_alu.cpp, f32_to_bf16).
std::string bf16_round_helper(const CExpressionContext& c) {
  const CDialect& d = c.dialect;
  std::string u16 = d.scalar_type(ScalarType::UInt16), u32 = d.scalar_type(ScalarType::UInt32);
  return c.helpers.use("kiln_f32_to_bf16", str_cat(
      d.helper_prefix, " ", u16, " kiln_f32_to_bf16(", d.scalar_type(ScalarType::Float32), " v) {\n",
      "  ", u32, " bits = ", d.bitcast(ScalarType::Float32, ScalarType::UInt32, "v"), ";\n",
      "  if (v != v) return (", u16, ")((bits >> 16) | 0x40u);\n",
      "  return (", u16, ")((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);\n}\n"));
}

// Narrow float values are computed in f32: widen the sources, narrow the result.
std::string widen(const CExpressionContext& c, DType dtype, const std::string& value) {
  if (is_f16(dtype)) return c.dialect.f16_to_f32(value);
  if (is_bf16(dtype))  // bf16 is the top half of an f32
    return c.dialect.bitcast(ScalarType::UInt32, ScalarType::Float32,
                             "((" + c.dialect.scalar_type(ScalarType::UInt32) + ")" + value + " << 16)");
  return value;
}
std::string narrow(const CExpressionContext& c, DType dtype, const std::string& value) {
  if (is_f16(dtype)) return c.dialect.f32_to_f16(value);
  if (is_bf16(dtype)) return bf16_round_helper(c) + "(" + value + ")";
  return value;
}

// The f32 or f64 type an op of `dtype` is computed in.
ScalarType compute_type(DType dtype) {
  return dtype.scalar() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

// max(x, y) with NaN winning and max(-0, +0) = +0, the LLVM renderer's float_maximum.
std::string float_max_helper(const CExpressionContext& c, ScalarType scalar) {
  const CDialect& d = c.dialect;
  std::string type = d.scalar_type(scalar);
  ScalarType bits = scalar == ScalarType::Float64 ? ScalarType::UInt64 : ScalarType::UInt32;
  std::string name = "kiln_max_" + type;
  return c.helpers.use(name, str_cat(
      d.helper_prefix, " ", type, " ", name, "(", type, " x, ", type, " y) {\n",
      "  if (x != x || y != y) return x + y;  /* a quiet NaN */\n",
      "  if (x > y) return x;\n  if (y > x) return y;\n",
      "  /* equal: only -0 and +0 differ in their bits, and AND gives +0 */\n",
      "  return ", d.bitcast(bits, scalar, d.bitcast(scalar, bits, "x") + " & " + d.bitcast(scalar, bits, "y")), ";\n}\n"));
}

// Truncating division and remainder without traps: x/0 = x%0 = 0, MIN/-1 = MIN, x%-1 = 0.
std::string division_helper(const CExpressionContext& c, Ops op, DType dtype) {
  const CDialect& d = c.dialect;
  std::string type = d.scalar_type(dtype.scalar());
  std::string name = std::string(op == Ops::IDIV ? "kiln_idiv_" : "kiln_mod_") + type;
  std::string body;
  if (!dtype.is_signed()) body = op == Ops::IDIV ? "y == 0 ? 0 : x / y" : "y == 0 ? 0 : x % y";
  else if (op == Ops::IDIV)
    body = str_cat("y == 0 ? 0 : y == -1 ? (", type, ")(0u - (", unsigned_work_type(d, dtype), ")x) : x / y");
  else body = "(y == 0 || y == -1) ? 0 : x % y";
  return c.helpers.use(name, str_cat(d.helper_prefix, " ", type, " ", name, "(", type, " x, ", type, " y) { return ",
                                     body, "; }\n"));
}

// f64 → f32 rounded to odd (truncated, lowest bit set when inexact): rounding that to f16 afterwards
// gives the correctly rounded f16 (llvm_alu.cpp, f64_to_f32_round_to_odd).
std::string round_to_odd_helper(const CExpressionContext& c) {
  const CDialect& d = c.dialect;
  std::string f32 = d.scalar_type(ScalarType::Float32), f64 = d.scalar_type(ScalarType::Float64);
  std::string u32 = d.scalar_type(ScalarType::UInt32);
  return c.helpers.use("kiln_f64_to_f32_odd", str_cat(
      d.helper_prefix, " ", f32, " kiln_f64_to_f32_odd(", f64, " v) {\n",
      "  ", f32, " nearest = (", f32, ")v;\n",
      "  ", f64, " back = (", f64, ")nearest;\n",
      "  if (!(back < v || back > v)) return nearest;  /* exact, or NaN */\n",
      "  ", u32, " bits = ", d.bitcast(ScalarType::Float32, ScalarType::UInt32, "nearest"), ";\n",
      "  if ((back < 0 ? -back : back) > (v < 0 ? -v : v)) bits -= 1u;  /* one step toward zero */\n",
      "  return ", d.bitcast(ScalarType::UInt32, ScalarType::Float32, "bits | 1u"), ";\n}\n"));
}

// Float (f32 or f64) → integer, truncating and saturating, NaN → 0.
std::string float_to_integer_helper(const CExpressionContext& c, ScalarType from, DType to) {
  const CDialect& d = c.dialect;
  std::string source = d.scalar_type(from), target = d.scalar_type(to.scalar());
  std::string name = "kiln_" + source + "_to_" + target;
  std::string suffix = from == ScalarType::Float64 ? "" : "f";
  int bits = bit_width(to);
  std::string body;
  auto power = [&](int exponent) { return str_cat("0x1p", exponent, suffix); };
  if (to.is_signed()) {
    int64_t largest = bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (bits - 1)) - 1;
    body = str_cat("x != x ? 0 : x >= ", power(bits - 1), " ? ", integer_literal(d, to, largest), " : x < -",
                   power(bits - 1), " ? ", integer_literal(d, to, -largest - 1), " : (", target, ")x");
  } else {
    body = str_cat("!(x > -1", suffix == "f" ? ".0f" : ".0", ") ? 0 : x >= ", power(bits), " ? ",
                   integer_literal(d, to, -1), " : (", target, ")x");
  }
  return c.helpers.use(name, str_cat(d.helper_prefix, " ", target, " ", name, "(", source, " x) { return ", body,
                                     "; }\n"));
}

// An integer of more than 24 bits → f32 with a sticky bit, so that rounding it to bf16 afterwards is
// exact: the magnitude is shifted down to 24 significant bits, ORing the lost bits into the lowest,
// converted (exactly) and scaled back by a power of two (llvm_alu.cpp, wide_integer_to_f32_sticky).
std::string integer_to_f32_sticky_helper(const CExpressionContext& c, DType from) {
  const CDialect& d = c.dialect;
  std::string type = d.scalar_type(from.scalar()), work = unsigned_work_type(d, from);
  std::string f32 = d.scalar_type(ScalarType::Float32);
  std::string name = "kiln_" + type + "_to_f32_sticky";
  return c.helpers.use(name, str_cat(
      d.helper_prefix, " ", f32, " ", name, "(", type, " v) {\n",
      "  bool negative = ", from.is_signed() ? "v < 0" : "false", ";\n",
      "  ", work, " magnitude = negative ? (", work, ")0 - (", work, ")v : (", work, ")v;\n",
      "  int shift = 0;\n",
      "  while ((magnitude >> shift) >= ((", work, ")1 << 24)) ++shift;\n",
      "  ", work, " kept = (magnitude >> shift) | ((magnitude & (((", work, ")1 << shift) - 1)) != 0);\n",
      "  ", f32, " scaled = (", f32, ")kept * (", f32, ")((", work, ")1 << shift);  /* both exact */\n",
      "  return negative ? -scaled : scaled;\n}\n"));
}

// Bool arithmetic is integer arithmetic on 0/1 followed by `!= 0` (ir/evaluate.cpp, llvm_alu.cpp).
std::string bool_alu(Ops op, std::span<const std::string> x) {
  switch (op) {
    case Ops::NEG: case Ops::TRUNC: case Ops::ROUND_EVEN: case Ops::SHL: case Ops::SHR: return x[0];
    case Ops::NOT: return paren("!" + x[0]);
    case Ops::ADD: case Ops::OR: case Ops::MAX: return paren(x[0] + " || " + x[1]);
    case Ops::SUB: case Ops::XOR: case Ops::CMPNE: return paren(x[0] + " != " + x[1]);
    case Ops::MUL: case Ops::AND: case Ops::IDIV: return paren(x[0] + " && " + x[1]);
    case Ops::MOD: return "false";
    case Ops::CMPLT: return paren("!" + x[0] + " && " + x[1]);
    case Ops::CMPEQ: return paren(x[0] + " == " + x[1]);
    default: break;
  }
  throw_internal_error(str_cat("C renderer: ", op_name(op), " on bool has no meaning"));
}

const char* infix(Ops op) {
  switch (op) {
    case Ops::ADD: return " + ";
    case Ops::SUB: return " - ";
    case Ops::MUL: return " * ";
    case Ops::FDIV: case Ops::IDIV: return " / ";
    case Ops::MOD: return " % ";
    case Ops::AND: return " & ";
    case Ops::OR: return " | ";
    case Ops::XOR: return " ^ ";
    case Ops::CMPLT: return " < ";
    case Ops::CMPNE: return " != ";
    case Ops::CMPEQ: return " == ";
    default: return nullptr;
  }
}

std::string integer_alu(const CExpressionContext& c, Ops op, DType dtype, std::span<const std::string> x,
                        DType shift_amount) {
  const CDialect& d = c.dialect;
  std::string type = d.scalar_type(dtype.scalar());
  std::string work = unsigned_work_type(d, dtype);
  auto wrapped = [&](const std::string& expression) { return "((" + type + ")(" + expression + "))"; };
  // `index` never overflows and never divides by zero (ops.def): plain C keeps index math readable.
  bool plain = dtype.is_index();
  switch (op) {
    case Ops::NEG: return plain ? paren("-" + x[0]) : wrapped("0 - (" + work + ")" + x[0]);
    case Ops::NOT: return wrapped("~" + x[0]);
    case Ops::TRUNC: case Ops::ROUND_EVEN: return x[0];
    case Ops::ADD: case Ops::SUB: case Ops::MUL:
      if (plain) return paren(x[0] + infix(op) + x[1]);
      return wrapped("(" + work + ")" + x[0] + infix(op) + "(" + work + ")" + x[1]);
    case Ops::IDIV: case Ops::MOD:
      if (plain) return paren(x[0] + infix(op) + x[1]);
      return division_helper(c, op, dtype) + "(" + x[0] + ", " + x[1] + ")";
    case Ops::MAX: return paren(x[0] + " > " + x[1] + " ? " + x[0] + " : " + x[1]);
    case Ops::AND: case Ops::OR: case Ops::XOR: return wrapped(x[0] + infix(op) + x[1]);
    case Ops::CMPLT: case Ops::CMPNE: case Ops::CMPEQ: return paren(x[0] + infix(op) + x[1]);
    case Ops::SHL: case Ops::SHR: {
      // The amount modulo the width; its low bits survive the conversion to the work type.
      std::string amount = str_cat("((", work, ")", x[1], " & ", bit_width(dtype) - 1, "u)");
      (void)shift_amount;
      if (op == Ops::SHL) return wrapped("(" + work + ")" + x[0] + " << " + amount);
      if (dtype.is_signed()) return wrapped(x[0] + " >> " + amount);  // arithmetic shift
      return wrapped("(" + work + ")" + x[0] + " >> " + amount);
    }
    default: break;
  }
  throw_internal_error(str_cat("C renderer: ", op_name(op), " on ", dtype.name(), " has no meaning"));
}

std::string float_alu(const CExpressionContext& c, Ops op, DType dtype, std::span<const std::string> x) {
  const CDialect& d = c.dialect;
  // A sign flip, exact in every float type. A 16-bit float kept as its bits (bf16 always; f16 in both
  // dialects) flips its top bit: `-` would negate the integer (-inf would become a denormal).
  if (op == Ops::NEG && dtype.is_narrow_float() && type_name(d, dtype.scalar()) == d.scalar_type(ScalarType::UInt16))
    return "((" + d.scalar_type(ScalarType::UInt16) + ")(" + x[0] + " ^ 0x8000u))";
  if (op == Ops::NEG) return paren("-" + x[0]);
  std::vector<std::string> w;
  for (const std::string& source : x) w.push_back(widen(c, dtype, source));
  ScalarType compute = compute_type(dtype);
  auto result = [&](const std::string& expression) { return narrow(c, dtype, expression); };
  switch (op) {
    case Ops::SQRT: return result("sqrt(" + w[0] + ")");
    case Ops::TRUNC: return result("trunc(" + w[0] + ")");
    case Ops::ROUND_EVEN: return result("rint(" + w[0] + ")");  // the default rounding mode: halves to even
    case Ops::RECIPROCAL: return result(paren(float_literal(d, compute, 1.0) + " / " + w[0]));
    case Ops::ADD: case Ops::SUB: case Ops::MUL: case Ops::FDIV: return result(paren(w[0] + infix(op) + w[1]));
    case Ops::CMPLT: case Ops::CMPNE: case Ops::CMPEQ: return paren(w[0] + infix(op) + w[1]);
    case Ops::MAX: return result(float_max_helper(c, compute) + "(" + w[0] + ", " + w[1] + ")");
    case Ops::MULACC: return result("fma(" + w[0] + ", " + w[1] + ", " + w[2] + ")");  // rounded once
    default: break;
  }
  throw_internal_error(str_cat("C renderer: ", op_name(op), " on ", dtype.name(), " has no meaning"));
}

}  // namespace

const std::string& CHelpers::use(const std::string& name, const std::string& definition) {
  if (names_.insert(name).second) text_ += definition;
  return *names_.find(name);
}

std::string c_register_type(const CDialect& dialect, DType dtype) {
  if (dtype.is_pointer()) throw_internal_error("C renderer: a pointer of type " + dtype.name() + " is not a value");
  return type_name(dialect, dtype.scalar());
}

std::string c_memory_type(const CDialect& dialect, DType dtype) {
  return type_name(dialect, dtype.base().is_bool() ? ScalarType::UInt8 : dtype.scalar());
}

std::string c_constant(const CExpressionContext& context, const UOp& constant) {
  DType dtype = constant.dtype();
  const CDialect& d = context.dialect;
  if (dtype.is_bool()) return constant.arg_bool() ? "true" : "false";
  if (is_f16(dtype)) return d.f32_to_f16(float_literal(d, ScalarType::Float32, round_to_f16(constant.arg_float())));
  if (is_bf16(dtype)) {  // the top half of the f32 that holds the rounded value
    auto value = static_cast<float>(round_to_bf16(constant.arg_float()));
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    if (std::isnan(value)) bits = 0x7FC00000U;
    return "((" + d.scalar_type(ScalarType::UInt16) + ")" + std::to_string(bits >> 16) + "u)";
  }
  if (dtype.is_float()) return float_literal(d, dtype.scalar(), constant.arg_float());
  return integer_literal(d, dtype, constant.arg_int());
}

std::string c_alu(const CExpressionContext& context, Ops op, DType operand, std::span<const std::string> sources,
                  DType shift_amount) {
  switch (op) {
    case Ops::EXP2: case Ops::LOG2: case Ops::SIN:
      throw_internal_error(str_cat("C renderer: ", op_name(op),
                                   " reached code generation; the transcendental pass (src/passes/transcendental.*) "
                                   "must run first, so that every backend computes the same polynomial"));
    case Ops::POW: case Ops::THREEFRY:
      throw_internal_error(str_cat("C renderer: ", op_name(op), " never reaches a renderer (docs/kernel-ast.md)"));
    case Ops::WHERE: return paren(sources[0] + " ? " + sources[1] + " : " + sources[2]);
    default: break;
  }
  KILN_ASSERT(op_is_alu(op) && !sources.empty(), "not an ALU op: ", op_name(op));
  if (operand.is_bool()) return bool_alu(op, sources);
  if (operand.is_float()) return float_alu(context, op, operand, sources);
  if (operand.is_int() && op != Ops::MULACC) return integer_alu(context, op, operand, sources, shift_amount);
  throw_internal_error(str_cat("C renderer: ", op_name(op), " on ", operand.name(), " has no meaning"));
}

std::string c_cast(const CExpressionContext& context, const std::string& value, DType from, DType to) {
  const CDialect& d = context.dialect;
  const CExpressionContext& c = context;
  if (from == to) return value;
  std::string type = type_name(d, to.scalar());
  if (to.is_bool()) return paren(widen(c, from, value) + " != 0");  // NaN != 0 is true
  if (from.is_bool()) {
    if (to.is_float()) {
      ScalarType compute = compute_type(to);
      return narrow(c, to, paren(value + " ? " + float_literal(d, compute, 1.0) + " : " + float_literal(d, compute, 0.0)));
    }
    return "((" + type + ")" + value + ")";
  }
  if (from.is_int() && to.is_int()) return "((" + type + ")" + value + ")";  // truncate or extend
  // Integer → float rounds to nearest even; narrow floats go through f32, as in the LLVM renderer:
  // exact below 2^24, and integers wider than that reach bf16 through a sticky f32 (below).
  if (from.is_int() && to.is_float()) {
    if (is_bf16(to) && bit_width(from) > 16) return narrow(c, to, integer_to_f32_sticky_helper(c, from) + "(" + value + ")");
    return narrow(c, to, "((" + d.scalar_type(compute_type(to)) + ")" + value + ")");
  }
  if (from.is_float() && to.is_int())
    return float_to_integer_helper(context, compute_type(from), to) + "(" + widen(c, from, value) + ")";
  if (from.is_float() && to.is_float()) {
    if (from.scalar() == ScalarType::Float64 && to.is_narrow_float())
      return narrow(c, to, round_to_odd_helper(context) + "(" + value + ")");
    std::string wide = widen(c, from, value);  // f16 or bf16 → f32 is exact
    if (to.is_narrow_float()) return narrow(c, to, wide);
    return "((" + type + ")" + wide + ")";
  }
  throw_internal_error("C renderer: CAST from " + from.name() + " to " + to.name());
}

std::string c_bitcast(const CExpressionContext& context, const std::string& value, DType from, DType to) {
  if (from.scalar_bytes() != to.scalar_bytes())
    throw_internal_error("C renderer: BITCAST from " + from.name() + " to " + to.name() + " changes the size");
  if (from == to) return value;
  // bool is one byte in memory: its bits are those of 0 or 1.
  if (to.is_bool()) return paren(value + " != 0");
  if (from.is_bool()) return "((" + type_name(context.dialect, to.scalar()) + ")" + value + ")";
  // bf16 bits are a 16-bit unsigned value already.
  auto bits_type = [](DType dtype) { return is_bf16(dtype) ? ScalarType::UInt16 : dtype.scalar(); };
  if (bits_type(from) == bits_type(to)) return value;
  return context.dialect.bitcast(bits_type(from), bits_type(to), value);
}

}  // namespace kiln
