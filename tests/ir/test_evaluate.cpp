// Unit tests of constant evaluation (src/ir/evaluate.h): the scalar semantics that constant folding
// and the oracle tests rely on — C division and remainder, two's-complement wrap-around, shifts,
// IEEE rounding to f16/bf16/f32, float/int casts, comparisons — and evaluate() over small graphs.
#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <vector>

#include "ir/build.h"
#include "ir/evaluate.h"

namespace kiln {
namespace {

ScalarValue integer(DType dtype, int128 value) { return {dtype, value, 0.0}; }
ScalarValue real(DType dtype, double value) { return {dtype, 0, value}; }

std::optional<ScalarValue> fold(Ops op, DType result, std::initializer_list<ScalarValue> sources) {
  std::vector<ScalarValue> values(sources);
  return fold_alu(op, result, values);
}

// The integer result of a fold; doctest shows the int128 through this string when a check fails.
std::string folded_integer(Ops op, DType dtype, int128 a, int128 b) {
  std::optional<ScalarValue> result = fold(op, dtype, {integer(dtype, a), integer(dtype, b)});
  return result ? to_string(result->integer) : "undefined";
}
std::string folded_integer(Ops op, DType dtype, int128 a) {
  std::optional<ScalarValue> result = fold(op, dtype, {integer(dtype, a)});
  return result ? to_string(result->integer) : "undefined";
}
std::string text(int128 value) { return to_string(value); }

std::optional<double> cast_to_float(DType target, double value, DType source = dtypes::f64) {
  std::optional<ScalarValue> result = fold(Ops::CAST, target, {real(source, value)});
  if (!result) return std::nullopt;
  return result->real;
}

std::string cast_float_to_int(DType target, double value) {
  std::optional<ScalarValue> result = fold(Ops::CAST, target, {real(dtypes::f64, value)});
  return result ? to_string(result->integer) : "undefined";
}

double pow2(int exponent) { return std::ldexp(1.0, exponent); }

TEST_CASE("integer division truncates toward zero and the remainder has the dividend's sign") {
  struct Row {
    int64_t a, b, quotient, remainder;
  };
  const Row rows[] = {
      {7, 2, 3, 1},   {-7, 2, -3, -1}, {7, -2, -3, 1}, {-7, -2, 3, -1}, {6, 3, 2, 0},   {-6, 3, -2, 0},
      {6, -3, -2, 0}, {0, 5, 0, 0},    {0, -5, 0, 0},  {1, 7, 0, 1},    {-1, 7, 0, -1}, {-1, -7, 0, -1},
  };
  for (DType dtype : {dtypes::index, dtypes::i8, dtypes::i16, dtypes::i32, dtypes::i64}) {
    for (const Row& row : rows) {
      INFO(dtype.name(), ": ", row.a, " / ", row.b);
      CHECK(folded_integer(Ops::IDIV, dtype, row.a, row.b) == text(row.quotient));
      CHECK(folded_integer(Ops::MOD, dtype, row.a, row.b) == text(row.remainder));
    }
  }
  CHECK(folded_integer(Ops::IDIV, dtypes::u8, 200, 7) == "28");
  CHECK(folded_integer(Ops::MOD, dtypes::u8, 200, 7) == "4");
  // u64 values above 2^63 divide as unsigned numbers.
  int128 u64_max = max_value(dtypes::u64);
  CHECK(folded_integer(Ops::IDIV, dtypes::u64, u64_max, 2) == text(std::numeric_limits<int64_t>::max()));
  CHECK(folded_integer(Ops::MOD, dtypes::u64, u64_max, 10) == "5");
}

TEST_CASE("division and remainder by zero have no value") {
  for (DType dtype : {dtypes::index, dtypes::i8, dtypes::u8, dtypes::i32, dtypes::u64}) {
    INFO(dtype.name());
    CHECK_FALSE(fold(Ops::IDIV, dtype, {integer(dtype, 5), integer(dtype, 0)}).has_value());
    CHECK_FALSE(fold(Ops::MOD, dtype, {integer(dtype, 5), integer(dtype, 0)}).has_value());
    CHECK_FALSE(fold(Ops::IDIV, dtype, {integer(dtype, 0), integer(dtype, 0)}).has_value());
  }
  // Float division by zero is defined by IEEE 754.
  std::optional<ScalarValue> infinite = fold(Ops::FDIV, dtypes::f32, {real(dtypes::f32, 1.0), real(dtypes::f32, 0.0)});
  REQUIRE(infinite.has_value());
  CHECK(std::isinf(infinite->real));
  std::optional<ScalarValue> negative = fold(Ops::FDIV, dtypes::f32, {real(dtypes::f32, 1.0), real(dtypes::f32, -0.0)});
  REQUIRE(negative.has_value());
  CHECK(negative->real == -INFINITY);
}

TEST_CASE("fixed-width integers wrap around; index does not") {
  CHECK(folded_integer(Ops::ADD, dtypes::i8, 127, 1) == "-128");
  CHECK(folded_integer(Ops::SUB, dtypes::i8, -128, 1) == "127");
  CHECK(folded_integer(Ops::MUL, dtypes::i8, 100, 3) == "44");
  CHECK(folded_integer(Ops::MUL, dtypes::i8, -128, -1) == "-128");
  CHECK(folded_integer(Ops::NEG, dtypes::i8, -128) == "-128");
  CHECK(folded_integer(Ops::SUB, dtypes::u8, 0, 1) == "255");
  CHECK(folded_integer(Ops::ADD, dtypes::u8, 255, 1) == "0");
  CHECK(folded_integer(Ops::MUL, dtypes::u8, 16, 16) == "0");
  CHECK(folded_integer(Ops::NEG, dtypes::u8, 1) == "255");
  int64_t i32_max = std::numeric_limits<int32_t>::max(), i32_min = std::numeric_limits<int32_t>::min();
  CHECK(folded_integer(Ops::ADD, dtypes::i32, i32_max, 1) == text(i32_min));
  CHECK(folded_integer(Ops::MUL, dtypes::i32, 65536, 65536) == "0");
  CHECK(folded_integer(Ops::MUL, dtypes::i32, 65537, 65537) == "131073");
  CHECK(folded_integer(Ops::SUB, dtypes::u32, 3, 5) == "4294967294");
  int128 u64_max = max_value(dtypes::u64);
  CHECK(folded_integer(Ops::SUB, dtypes::u64, 0, 1) == text(u64_max));
  CHECK(folded_integer(Ops::ADD, dtypes::u64, u64_max, 2) == "1");
  CHECK(folded_integer(Ops::MUL, dtypes::u64, int128{1} << 63, 2) == "0");
  CHECK(folded_integer(Ops::MUL, dtypes::u64, u64_max, u64_max) == "1");
  int64_t i64_max = std::numeric_limits<int64_t>::max();
  CHECK(folded_integer(Ops::ADD, dtypes::i64, i64_max, 1) == text(std::numeric_limits<int64_t>::min()));
  // index is the mathematical integers.
  CHECK(folded_integer(Ops::ADD, dtypes::index, i64_max, 1) == text(int128{1} << 63));
  CHECK(folded_integer(Ops::MUL, dtypes::index, i64_max, i64_max) == text(int128{i64_max} * i64_max));

  CHECK(wrap_integer(300, dtypes::u8) == 44);
  CHECK(wrap_integer(-1, dtypes::u16) == 65535);
  CHECK(wrap_integer(128, dtypes::i8) == -128);
  CHECK(wrap_integer(-129, dtypes::i8) == 127);
  CHECK(wrap_integer(int128{1} << 70, dtypes::index) == int128{1} << 70);
  CHECK(wrap_integer(5, dtypes::bool_) == 1);
  CHECK(wrap_integer(0, dtypes::bool_) == 0);
}

TEST_CASE("bitwise ops, NOT and MAX on integers") {
  CHECK(folded_integer(Ops::AND, dtypes::i8, -1, 0x0F) == "15");
  CHECK(folded_integer(Ops::OR, dtypes::i8, 0x70, 0x0F) == "127");
  CHECK(folded_integer(Ops::OR, dtypes::i8, -128, 1) == "-127");
  CHECK(folded_integer(Ops::XOR, dtypes::u8, 0xFF, 0x0F) == "240");
  CHECK(folded_integer(Ops::XOR, dtypes::i32, -1, 5) == "-6");
  CHECK(folded_integer(Ops::NOT, dtypes::i8, 5) == "-6");
  CHECK(folded_integer(Ops::NOT, dtypes::u8, 0) == "255");
  CHECK(folded_integer(Ops::NOT, dtypes::u64, 0) == text(max_value(dtypes::u64)));
  CHECK(folded_integer(Ops::NOT, dtypes::bool_, 0) == "1");
  CHECK(folded_integer(Ops::NOT, dtypes::bool_, 1) == "0");
  CHECK(folded_integer(Ops::MAX, dtypes::i32, -3, 2) == "2");
  CHECK(folded_integer(Ops::MAX, dtypes::i32, -3, -7) == "-3");
  CHECK(folded_integer(Ops::MAX, dtypes::u64, max_value(dtypes::u64), 1) == text(max_value(dtypes::u64)));
  CHECK(folded_integer(Ops::AND, dtypes::bool_, 1, 0) == "0");
  CHECK(folded_integer(Ops::OR, dtypes::bool_, 1, 0) == "1");
  CHECK(folded_integer(Ops::XOR, dtypes::bool_, 1, 1) == "0");
}

TEST_CASE("shifts: wrap, arithmetic right shift, out-of-range amounts have no value") {
  CHECK(folded_integer(Ops::SHL, dtypes::i32, 1, 31) == text(std::numeric_limits<int32_t>::min()));
  CHECK(folded_integer(Ops::SHL, dtypes::i32, 3, 4) == "48");
  CHECK(folded_integer(Ops::SHL, dtypes::u8, 255, 1) == "254");
  CHECK(folded_integer(Ops::SHL, dtypes::i8, 1, 7) == "-128");
  CHECK(folded_integer(Ops::SHR, dtypes::i8, -8, 1) == "-4");
  CHECK(folded_integer(Ops::SHR, dtypes::i8, -1, 7) == "-1");
  CHECK(folded_integer(Ops::SHR, dtypes::i32, -7, 1) == "-4");  // rounds toward -inf, unlike division
  CHECK(folded_integer(Ops::SHR, dtypes::u8, 128, 7) == "1");
  CHECK(folded_integer(Ops::SHR, dtypes::u64, max_value(dtypes::u64), 63) == "1");
  CHECK(folded_integer(Ops::SHL, dtypes::index, 1, 62) == text(int128{1} << 62));
  // Amounts at or above the width, or negative, are undefined.
  CHECK(folded_integer(Ops::SHL, dtypes::i32, 1, 32) == "undefined");
  CHECK(folded_integer(Ops::SHR, dtypes::i32, 1, 32) == "undefined");
  CHECK(folded_integer(Ops::SHL, dtypes::i32, 1, -1) == "undefined");
  CHECK(folded_integer(Ops::SHR, dtypes::u8, 200, 8) == "undefined");
  CHECK(folded_integer(Ops::SHL, dtypes::i8, 1, 8) == "undefined");
  CHECK(folded_integer(Ops::SHL, dtypes::index, 1, 64) == "undefined");
  // The amount may have its own type.
  std::optional<ScalarValue> mixed = fold(Ops::SHL, dtypes::i64, {integer(dtypes::i64, 1), integer(dtypes::u8, 40)});
  REQUIRE(mixed.has_value());
  CHECK(mixed->integer == int128{1} << 40);
}

TEST_CASE("f16 rounding: to nearest even, overflow to infinity, subnormals") {
  auto f16 = [](double value) { return cast_to_float(dtypes::f16, value).value(); };
  CHECK(f16(1.0) == 1.0);
  CHECK(f16(1.0 + pow2(-11)) == 1.0);                         // tie, 1.0 is even
  CHECK(f16(1.0 + 3 * pow2(-11)) == 1.0 + pow2(-9));          // tie, rounds up to the even neighbour
  CHECK(f16(1.0 + pow2(-11) + pow2(-30)) == 1.0 + pow2(-10));  // just above the tie
  CHECK(f16(1.0 + pow2(-11) - pow2(-30)) == 1.0);             // just below the tie
  CHECK(f16(2049.0) == 2048.0);
  CHECK(f16(2051.0) == 2052.0);
  CHECK(f16(0.1) == 0.0999755859375);
  CHECK(f16(-0.1) == -0.0999755859375);
  CHECK(f16(65504.0) == 65504.0);
  CHECK(f16(65519.99) == 65504.0);
  CHECK(f16(65520.0) == INFINITY);  // the tie between 65504 and 2^16 rounds to "even" 2^16: overflow
  CHECK(f16(-65520.0) == -INFINITY);
  CHECK(f16(1e10) == INFINITY);
  CHECK(f16(pow2(-14)) == pow2(-14));                 // smallest normal
  CHECK(f16(pow2(-24)) == pow2(-24));                 // smallest subnormal
  CHECK(f16(5 * pow2(-24)) == 5 * pow2(-24));         // subnormals are exact multiples of 2^-24
  CHECK(f16(pow2(-25)) == 0.0);                       // tie between 0 and 2^-24: 0 is even
  CHECK(f16(3 * pow2(-25)) == pow2(-23));             // tie between 1 and 2 ulps: 2 is even
  CHECK(f16(pow2(-25) + pow2(-40)) == pow2(-24));
  CHECK(f16(0.75 * pow2(-24)) == pow2(-24));
  double negative_tiny = f16(-pow2(-26));
  CHECK(negative_tiny == 0.0);
  CHECK(std::signbit(negative_tiny));  // underflow keeps the sign
  CHECK(std::isnan(f16(NAN)));
  CHECK(f16(-INFINITY) == -INFINITY);
  // Arithmetic rounds its exact result once.
  std::optional<ScalarValue> sum =
      fold(Ops::ADD, dtypes::f16, {real(dtypes::f16, 2048.0), real(dtypes::f16, 1.0)});
  REQUIRE(sum.has_value());
  CHECK(sum->real == 2048.0);
  std::optional<ScalarValue> overflow =
      fold(Ops::MUL, dtypes::f16, {real(dtypes::f16, 256.0), real(dtypes::f16, 256.0)});
  REQUIRE(overflow.has_value());
  CHECK(overflow->real == INFINITY);
}

TEST_CASE("bf16 rounding: to nearest even, overflow to infinity, subnormals") {
  auto bf16 = [](double value) { return cast_to_float(dtypes::bf16, value).value(); };
  double bf16_max = max_finite(dtypes::bf16);
  CHECK(bf16(1.0 + pow2(-8)) == 1.0);
  CHECK(bf16(1.0 + 3 * pow2(-8)) == 1.0 + pow2(-6));
  CHECK(bf16(1.0 + pow2(-8) + pow2(-30)) == 1.0 + pow2(-7));
  CHECK(bf16(257.0) == 256.0);
  CHECK(bf16(259.0) == 260.0);
  CHECK(bf16(3.14159265) == 3.140625);
  CHECK(bf16(bf16_max) == bf16_max);
  CHECK(bf16(bf16_max + pow2(118)) == bf16_max);      // below the tie
  CHECK(bf16(bf16_max + pow2(119)) == INFINITY);      // the tie rounds to 2^128: overflow
  CHECK(bf16(-1e39) == -INFINITY);
  CHECK(bf16(pow2(-126)) == pow2(-126));              // smallest normal
  CHECK(bf16(pow2(-133)) == pow2(-133));              // smallest subnormal
  CHECK(bf16(pow2(-134)) == 0.0);                     // tie: 0 is even
  CHECK(bf16(3 * pow2(-135)) == pow2(-133));
  CHECK(bf16(3 * pow2(-134)) == pow2(-132));          // tie between 1 and 2 ulps: 2 is even
  CHECK(std::signbit(bf16(-pow2(-140))));
}

TEST_CASE("f32 rounding") {
  auto f32 = [](double value) { return cast_to_float(dtypes::f32, value).value(); };
  CHECK(f32(1.0 + pow2(-24)) == 1.0);
  CHECK(f32(1.0 + 3 * pow2(-24)) == 1.0 + pow2(-22));
  CHECK(f32(0.1) == static_cast<double>(0.1f));
  CHECK(f32(1e39) == INFINITY);
  CHECK(f32(pow2(-149)) == pow2(-149));
  CHECK(f32(pow2(-150)) == 0.0);
  std::optional<ScalarValue> sum =
      fold(Ops::ADD, dtypes::f32, {real(dtypes::f32, 16777216.0), real(dtypes::f32, 1.0)});
  REQUIRE(sum.has_value());
  CHECK(sum->real == 16777216.0);
  // f64 keeps every double.
  CHECK(cast_to_float(dtypes::f64, 0.1, dtypes::f32).value() == 0.1);
}

TEST_CASE("float to integer casts truncate; out of range and NaN have no value") {
  CHECK(cast_float_to_int(dtypes::i32, 2.7) == "2");
  CHECK(cast_float_to_int(dtypes::i32, -2.7) == "-2");
  CHECK(cast_float_to_int(dtypes::i32, -0.9) == "0");
  CHECK(cast_float_to_int(dtypes::i8, 127.9) == "127");
  CHECK(cast_float_to_int(dtypes::i8, -128.9) == "-128");
  CHECK(cast_float_to_int(dtypes::i8, 128.0) == "undefined");
  CHECK(cast_float_to_int(dtypes::i8, -129.0) == "undefined");
  CHECK(cast_float_to_int(dtypes::u8, 255.9) == "255");
  CHECK(cast_float_to_int(dtypes::u8, -0.5) == "0");
  CHECK(cast_float_to_int(dtypes::u8, 256.0) == "undefined");
  CHECK(cast_float_to_int(dtypes::u8, -1.0) == "undefined");
  CHECK(cast_float_to_int(dtypes::i32, 2147483647.0) == "2147483647");
  CHECK(cast_float_to_int(dtypes::i32, 2147483648.0) == "undefined");
  CHECK(cast_float_to_int(dtypes::i32, NAN) == "undefined");
  CHECK(cast_float_to_int(dtypes::i32, INFINITY) == "undefined");
  CHECK(cast_float_to_int(dtypes::i32, -INFINITY) == "undefined");
  // The 64-bit limits: 2^63 and 2^64 are doubles, but one past the largest i64 and u64.
  CHECK(cast_float_to_int(dtypes::i64, -pow2(63)) == text(std::numeric_limits<int64_t>::min()));
  CHECK(cast_float_to_int(dtypes::i64, pow2(63) - 1024) == text((int128{1} << 63) - 1024));
  CHECK(cast_float_to_int(dtypes::i64, pow2(63)) == "undefined");
  CHECK(cast_float_to_int(dtypes::index, pow2(63)) == "undefined");
  CHECK(cast_float_to_int(dtypes::u64, pow2(64) - 2048) == text((int128{1} << 64) - 2048));
  CHECK(cast_float_to_int(dtypes::u64, pow2(64)) == "undefined");
  CHECK(cast_float_to_int(dtypes::u64, pow2(63)) == text(int128{1} << 63));
  // Casting to bool tests for non-zero.
  CHECK(cast_float_to_int(dtypes::bool_, 0.0) == "0");
  CHECK(cast_float_to_int(dtypes::bool_, -0.0) == "0");
  CHECK(cast_float_to_int(dtypes::bool_, 0.5) == "1");
  CHECK(cast_float_to_int(dtypes::bool_, NAN) == "1");
}

TEST_CASE("integer to float casts round once, to nearest even") {
  auto to_float = [](DType target, DType source, int128 value) {
    return fold(Ops::CAST, target, {integer(source, value)}).value().real;
  };
  CHECK(to_float(dtypes::f32, dtypes::i32, 16777217) == 16777216.0);  // tie: even
  CHECK(to_float(dtypes::f32, dtypes::i32, 16777219) == 16777220.0);  // tie: even
  CHECK(to_float(dtypes::f32, dtypes::i32, -16777217) == -16777216.0);
  CHECK(to_float(dtypes::f16, dtypes::i32, 2049) == 2048.0);
  CHECK(to_float(dtypes::f16, dtypes::i32, 65520) == INFINITY);
  CHECK(to_float(dtypes::bf16, dtypes::i32, 257) == 256.0);
  CHECK(to_float(dtypes::f32, dtypes::u64, max_value(dtypes::u64)) == pow2(64));
  CHECK(to_float(dtypes::f64, dtypes::i64, (int128{1} << 53) + 1) == pow2(53));
  CHECK(to_float(dtypes::f64, dtypes::i64, (int128{1} << 53) + 3) == pow2(53) + 4);
  // 2^60 + 2^36 + 1 lies just above the midpoint of two f32 neighbours (2^60 and 2^60 + 2^37):
  // it must round up. Converting through double first lands exactly on the midpoint and rounds
  // down — the classic double-rounding error.
  CHECK(to_float(dtypes::f32, dtypes::i64, (int128{1} << 60) + (int128{1} << 36) + 1) == pow2(60) + pow2(37));
  CHECK(to_float(dtypes::f32, dtypes::i64, -((int128{1} << 60) + (int128{1} << 36) + 1)) == -(pow2(60) + pow2(37)));
  CHECK(to_float(dtypes::f32, dtypes::u64, (int128{1} << 63) + (int128{1} << 39) + 1) == pow2(63) + pow2(40));
  CHECK(to_float(dtypes::f16, dtypes::bool_, 1) == 1.0);
}

TEST_CASE("integer to integer casts wrap") {
  auto convert = [](DType target, DType source, int128 value) {
    return to_string(fold(Ops::CAST, target, {integer(source, value)}).value().integer);
  };
  CHECK(convert(dtypes::u8, dtypes::i32, 300) == "44");
  CHECK(convert(dtypes::u32, dtypes::i32, -1) == "4294967295");
  CHECK(convert(dtypes::i8, dtypes::u64, max_value(dtypes::u64)) == "-1");
  CHECK(convert(dtypes::i64, dtypes::u64, max_value(dtypes::u64)) == "-1");
  CHECK(convert(dtypes::u64, dtypes::i8, -1) == text(max_value(dtypes::u64)));
  CHECK(convert(dtypes::i32, dtypes::bool_, 1) == "1");
  CHECK(convert(dtypes::bool_, dtypes::i32, 5) == "1");
  CHECK(convert(dtypes::bool_, dtypes::i32, -1) == "1");
  CHECK(convert(dtypes::bool_, dtypes::i32, 0) == "0");
  CHECK(convert(dtypes::index, dtypes::i8, -5) == "-5");
}

TEST_CASE("comparisons") {
  auto compare = [](Ops op, ScalarValue a, ScalarValue b) {
    return fold(op, dtypes::bool_, {a, b}).value().integer;
  };
  CHECK(compare(Ops::CMPLT, integer(dtypes::i32, -1), integer(dtypes::i32, 1)) == 1);
  CHECK(compare(Ops::CMPLT, integer(dtypes::i32, 1), integer(dtypes::i32, 1)) == 0);
  CHECK(compare(Ops::CMPLT, integer(dtypes::u8, 100), integer(dtypes::u8, 200)) == 1);
  CHECK(compare(Ops::CMPLT, integer(dtypes::u64, max_value(dtypes::u64)), integer(dtypes::u64, 1)) == 0);
  CHECK(compare(Ops::CMPNE, integer(dtypes::index, 3), integer(dtypes::index, 3)) == 0);
  CHECK(compare(Ops::CMPEQ, integer(dtypes::index, 3), integer(dtypes::index, 3)) == 1);
  CHECK(compare(Ops::CMPLT, real(dtypes::f32, -0.5), real(dtypes::f32, 0.0)) == 1);
  CHECK(compare(Ops::CMPEQ, real(dtypes::f32, -0.0), real(dtypes::f32, 0.0)) == 1);
  CHECK(compare(Ops::CMPLT, real(dtypes::f32, -0.0), real(dtypes::f32, 0.0)) == 0);
  // NaN is unordered: every comparison but != is false.
  CHECK(compare(Ops::CMPLT, real(dtypes::f32, NAN), real(dtypes::f32, 1.0)) == 0);
  CHECK(compare(Ops::CMPLT, real(dtypes::f32, 1.0), real(dtypes::f32, NAN)) == 0);
  CHECK(compare(Ops::CMPEQ, real(dtypes::f32, NAN), real(dtypes::f32, NAN)) == 0);
  CHECK(compare(Ops::CMPNE, real(dtypes::f32, NAN), real(dtypes::f32, NAN)) == 1);
  CHECK(compare(Ops::CMPLT, integer(dtypes::bool_, 0), integer(dtypes::bool_, 1)) == 1);
}

TEST_CASE("other float ops: folded when exact, declined otherwise") {
  std::optional<ScalarValue> root = fold(Ops::SQRT, dtypes::f32, {real(dtypes::f32, 2.0)});
  REQUIRE(root.has_value());
  CHECK(root->real == static_cast<double>(std::sqrt(2.0f)));
  std::optional<ScalarValue> reciprocal = fold(Ops::RECIPROCAL, dtypes::f16, {real(dtypes::f16, 3.0)});
  REQUIRE(reciprocal.has_value());
  CHECK(reciprocal->real == 0.333251953125);  // 1/3 rounded to f16
  std::optional<ScalarValue> truncated = fold(Ops::TRUNC, dtypes::f32, {real(dtypes::f32, -2.5)});
  REQUIRE(truncated.has_value());
  CHECK(truncated->real == -2.0);
  // Halves to even, signs kept (-0.4 gives -0), whatever the FP environment's rounding mode.
  const double rounding[][2] = {{-2.5, -2.0}, {-1.5, -2.0}, {0.5, 0.0}, {1.5, 2.0}, {2.5, 2.0}, {2.6, 3.0}, {-0.4, -0.0},
                                {8388609.0, 8388609.0}};
  for (const auto& [input, expected] : rounding) {
    std::optional<ScalarValue> rounded = fold(Ops::ROUND_EVEN, dtypes::f32, {real(dtypes::f32, input)});
    REQUIRE(rounded.has_value());
    CHECK(rounded->real == expected);
    CHECK(std::signbit(rounded->real) == std::signbit(expected));
  }
  std::optional<ScalarValue> negated = fold(Ops::NEG, dtypes::f32, {real(dtypes::f32, 0.0)});
  REQUIRE(negated.has_value());
  CHECK(std::signbit(negated->real));
  // Transcendentals and float MAX are left to the backend.
  CHECK_FALSE(fold(Ops::EXP2, dtypes::f32, {real(dtypes::f32, 1.0)}).has_value());
  CHECK_FALSE(fold(Ops::LOG2, dtypes::f32, {real(dtypes::f32, 1.0)}).has_value());
  CHECK_FALSE(fold(Ops::SIN, dtypes::f32, {real(dtypes::f32, 0.0)}).has_value());
  CHECK_FALSE(fold(Ops::MAX, dtypes::f32, {real(dtypes::f32, 1.0), real(dtypes::f32, 2.0)}).has_value());
  CHECK_FALSE(fold(Ops::SQRT, dtypes::i32, {integer(dtypes::i32, 4)}).has_value());
}

TEST_CASE("WHERE picks a branch") {
  ScalarValue a = integer(dtypes::i32, 10), b = integer(dtypes::i32, 20);
  CHECK(fold(Ops::WHERE, dtypes::i32, {integer(dtypes::bool_, 1), a, b}).value().integer == 10);
  CHECK(fold(Ops::WHERE, dtypes::i32, {integer(dtypes::bool_, 0), a, b}).value().integer == 20);
  CHECK(fold(Ops::WHERE, dtypes::f32, {integer(dtypes::bool_, 1), real(dtypes::f32, 1.5), real(dtypes::f32, 2.5)})
            .value()
            .real == 1.5);
}

TEST_CASE("constant_value and make_constant round-trip, u64 included") {
  int128 u64_max = max_value(dtypes::u64);
  UOpPtr big = make_constant(integer(dtypes::u64, u64_max));
  CHECK(big->arg_int() == -1);  // the bit pattern
  CHECK(constant_value(*big).integer == u64_max);
  UOpPtr negative = make_constant(integer(dtypes::i8, -5));
  CHECK(negative == const_int(dtypes::i8, -5));
  CHECK(make_constant(integer(dtypes::bool_, 1)) == const_bool(true));
  CHECK(make_constant(real(dtypes::f16, 0.5)) == const_float(dtypes::f16, 0.5));
  CHECK(constant_value(*const_float(dtypes::f32, -0.0)).real == 0.0);
  CHECK(std::signbit(constant_value(*const_float(dtypes::f32, -0.0)).real));
}

TEST_CASE("evaluate computes a graph over variables") {
  UOpPtr x = variable("ev_x", 0, 100), y = variable("ev_y", -50, 50);
  UOpPtr expression = (x * 4 + y) % 7;
  CHECK(evaluate(expression, {{"ev_x", 3}, {"ev_y", 5}}).value().integer == 3);     // 17 % 7
  CHECK(evaluate(expression, {{"ev_x", 0}, {"ev_y", -20}}).value().integer == -6);  // -20 % 7
  CHECK(evaluate(where(lt(x, y), x, y), {{"ev_x", 3}, {"ev_y", 5}}).value().integer == 3);
  CHECK(evaluate(where(lt(x, y), x, y), {{"ev_x", 9}, {"ev_y", 5}}).value().integer == 5);
  CHECK(evaluate(lt(x, y), {{"ev_x", 9}, {"ev_y", 5}}).value().integer == 0);
  // Shared subexpressions are evaluated consistently.
  UOpPtr shared = x - y;
  CHECK(evaluate(shared * shared + shared, {{"ev_x", 7}, {"ev_y", 2}}).value().integer == 30);
  // Floats: cast, then arithmetic rounded to f32.
  UOpPtr scaled = cast(x, dtypes::f32) * const_float(dtypes::f32, 0.5);
  CHECK(evaluate(scaled, {{"ev_x", 3}}).value().real == 1.5);
  // Variables of fixed-width types take their value wrapped into the type.
  UOpPtr small = variable("ev_s", -128, 127, dtypes::i8);
  CHECK(evaluate(small + const_int(dtypes::i8, 1), {{"ev_s", 127}}).value().integer == -128);
}

TEST_CASE("evaluate has no value for undefined steps, missing variables and non-ALU nodes") {
  UOpPtr x = variable("eu_x", 0, 100), y = variable("eu_y", 0, 100);
  CHECK_FALSE(evaluate(x / y, {{"eu_x", 3}, {"eu_y", 0}}).has_value());
  CHECK(evaluate(x / y, {{"eu_x", 3}, {"eu_y", 2}}).has_value());
  CHECK_FALSE(evaluate(x + y, {{"eu_x", 3}}).has_value());
  CHECK_FALSE(evaluate(x + range(10, 0), {{"eu_x", 3}}).has_value());
  UOpPtr vector = UOp::make(Ops::VECTORIZE, dtypes::index.vec(2), {x, y});
  CHECK_FALSE(evaluate(vector, {{"eu_x", 1}, {"eu_y", 2}}).has_value());
  UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::index.ptr(), {}, int64_t{0});
  CHECK_FALSE(evaluate(UOp::make(Ops::LOAD, dtypes::index, {UOp::make(Ops::INDEX, dtypes::index.ptr(), {buffer, x})}),
                       {{"eu_x", 1}})
                  .has_value());
}

}  // namespace
}  // namespace kiln
