// The narrow ONNX element types (see narrow_types.h): names, carriers, and their decoding and
// encoding as Tensor ops.
#include "narrow_types.h"

#include <cmath>

#include "onnx/onnx_pb.h"
#include "support/error.h"

namespace kiln::onnx_import {
namespace {

// A small float format: sign, exponent and mantissa bits, and how it spells NaN and infinity.
struct FloatFormat {
  enum Specials {
    Ieee,              // all-ones exponent: infinity (mantissa 0) or NaN (E5M2)
    NanAllOnes,        // S.1111.111 is NaN, no infinity (E4M3FN)
    NanNegativeZero,   // 1.0000.000 is the only NaN, no -0, no infinity (the FNUZ types)
    None,              // every code is a finite number (E2M1)
  };
  int mantissa_bits;
  int bias;
  int max_code;  // the largest finite magnitude
  int sign_bit;
  Specials specials;
};

FloatFormat float_format(int32_t data_type) {
  switch (data_type) {
    case kFloat8E4M3FN: return {3, 7, 0x7E, 0x80, FloatFormat::NanAllOnes};
    case kFloat8E4M3FNUZ: return {3, 8, 0x7F, 0x80, FloatFormat::NanNegativeZero};
    case kFloat8E5M2: return {2, 15, 0x7B, 0x80, FloatFormat::Ieee};
    case kFloat8E5M2FNUZ: return {2, 16, 0x7F, 0x80, FloatFormat::NanNegativeZero};
    case kFloat4E2M1: return {1, 1, 0x7, 0x8, FloatFormat::None};
    default: throw_internal_error(str_cat("float_format: ", onnx_type_name(data_type), " is not a small float"));
  }
}

Tensor constant(double value, ScalarType type) { return Tensor::scalar(value, type); }

// The code of NaN (the sign is not kept: every NaN compares alike). E2M1 has no NaN: it becomes
// +0, the choice of the ONNX reference implementation up to the sign of zero.
int nan_code(const FloatFormat& format) {
  switch (format.specials) {
    case FloatFormat::Ieee: return 0x7F;
    case FloatFormat::NanAllOnes: return format.sign_bit - 1;
    case FloatFormat::NanNegativeZero: return format.sign_bit;
    case FloatFormat::None: return 0;
  }
  return 0;
}

Tensor decode_small_float(const Tensor& carrier, const FloatFormat& format) {
  const ScalarType i32 = ScalarType::Int32, f32 = ScalarType::Float32;
  const int m = format.mantissa_bits;
  Tensor bits = carrier.cast(i32);
  Tensor magnitude = bits.bitwise_and(constant(format.sign_bit - 1, i32));
  Tensor exponent = magnitude.shift_right(constant(m, i32));
  Tensor mantissa = magnitude.bitwise_and(constant((1 << m) - 1, i32));
  // Normal numbers: rebias the exponent and widen the mantissa into an f32 bit pattern (exact).
  Tensor normal = exponent.add(constant(127 - format.bias, i32))
                      .shift_left(constant(23, i32))
                      .bitwise_or(mantissa.shift_left(constant(23 - m, i32)))
                      .bitcast(f32);
  Tensor subnormal = mantissa.cast(f32) * constant(std::ldexp(1.0, 1 - format.bias - m), f32);
  Tensor value = exponent.eq(constant(0, i32)).where(subnormal, normal);
  Tensor negative = bits.bitwise_and(constant(format.sign_bit, i32)).ne(constant(0, i32));
  value = negative.where(value.neg(), value);
  const Tensor nan = constant(NAN, f32);
  switch (format.specials) {
    case FloatFormat::Ieee: {
      const int all_ones = (format.sign_bit - 1) >> m;
      Tensor special = exponent.eq(constant(all_ones, i32));
      Tensor infinity = negative.where(constant(-INFINITY, f32), constant(INFINITY, f32));
      return special.where(mantissa.eq(constant(0, i32)).where(infinity, nan), value);
    }
    case FloatFormat::NanAllOnes: return magnitude.eq(constant(format.sign_bit - 1, i32)).where(nan, value);
    case FloatFormat::NanNegativeZero: return bits.eq(constant(format.sign_bit, i32)).where(nan, value);
    case FloatFormat::None: return value;
  }
  return value;
}

// Rounds to nearest even on the bit pattern of a wider IEEE float (f32, or f64 for f64 inputs so
// that no value is rounded twice), then applies the overflow, sign and NaN rules of `format`.
Tensor encode_small_float(const Tensor& values, const FloatFormat& format, bool saturate) {
  const bool wide = values.dtype() == ScalarType::Float64;
  const ScalarType f = wide ? ScalarType::Float64 : ScalarType::Float32;
  const ScalarType i = wide ? ScalarType::Int64 : ScalarType::Int32;
  const int source_mantissa = wide ? 52 : 23, source_bias = wide ? 1023 : 127;
  const int m = format.mantissa_bits, shift = source_mantissa - m;

  Tensor x = values.cast(f);
  Tensor is_nan = x.isnan();
  Tensor negative = x.bitcast(i).lt(constant(0, i));
  // NaN is replaced by 0 so that the integer arithmetic below never sees its payload.
  Tensor magnitude = is_nan.where(constant(0, f), x.abs());

  // Normal range: add half an ulp of the target (minus one, plus the kept lsb: ties to even) to
  // the bit pattern, drop the extra mantissa bits and rebias the exponent. A carry out of the
  // mantissa bumps the exponent, which is what rounding up to the next binade needs.
  Tensor pattern = magnitude.bitcast(i);
  Tensor lsb = pattern.shift_right(constant(shift, i)).bitwise_and(constant(1, i));
  Tensor rounded = pattern.add(constant(std::ldexp(1.0, shift - 1) - 1, i)).add(lsb);
  Tensor normal_code = rounded.shift_right(constant(shift, i))
                           .sub(constant(static_cast<double>(int64_t{source_bias - format.bias} << m), i));
  // Subnormal range: a multiple of the smallest subnormal, rounded half to even (exact scaling).
  const double smallest_normal = std::ldexp(1.0, 1 - format.bias);
  Tensor small = magnitude.minimum(constant(smallest_normal, f));
  Tensor subnormal_code = (small * constant(std::ldexp(1.0, format.bias - 1 + m), f)).round().cast(i);
  Tensor code = magnitude.lt(constant(smallest_normal, f)).where(subnormal_code, normal_code);

  Tensor overflow = code.gt(constant(format.max_code, i));
  int overflow_code = format.max_code;
  if (!saturate && format.specials == FloatFormat::Ieee) overflow_code = ((format.sign_bit - 1) >> m) << m;  // inf
  if (!saturate && format.specials == FloatFormat::NanAllOnes) overflow_code = format.sign_bit - 1;          // NaN
  code = overflow.where(constant(overflow_code, i), code);

  Tensor signed_code = code.bitwise_or(constant(format.sign_bit, i));
  Tensor keep_sign = negative;
  if (format.specials == FloatFormat::NanNegativeZero) keep_sign = negative.logical_and(code.ne(constant(0, i)));
  code = keep_sign.where(signed_code, code);
  if (!saturate && format.specials == FloatFormat::NanNegativeZero)
    code = overflow.where(constant(format.sign_bit, i), code);
  code = is_nan.where(constant(nan_code(format), i), code);
  return code.cast(ScalarType::UInt8);
}

// E8M0: a bare biased exponent (2^(code - 127)); 0xFF is NaN, there is no zero and no sign.
Tensor decode_e8m0(const Tensor& carrier) {
  const ScalarType i32 = ScalarType::Int32, f32 = ScalarType::Float32;
  Tensor code = carrier.cast(i32);
  // Code 0 is 2^-127, an f32 subnormal: only its mantissa's top bit is set.
  Tensor pattern = code.eq(constant(0, i32)).where(constant(0x00400000, i32), code.shift_left(constant(23, i32)));
  return code.eq(constant(255, i32)).where(constant(NAN, f32), pattern.bitcast(f32));
}

// Rounds the exponent of a wider IEEE float (f32, or f64 for f64 inputs) by its mantissa.
Tensor encode_e8m0(const Tensor& values, bool saturate, E8M0Rounding rounding) {
  const bool wide = values.dtype() == ScalarType::Float64;
  const ScalarType f = wide ? ScalarType::Float64 : ScalarType::Float32;
  const ScalarType i = wide ? ScalarType::Int64 : ScalarType::Int32;
  const int source_mantissa = wide ? 52 : 23, source_bias = wide ? 1023 : 127;
  Tensor x = values.cast(f);
  Tensor is_nan = x.isnan();
  // Negative inputs are undefined behaviour in the spec: their magnitude is used. Positive floats
  // order like their bit patterns, so all comparisons below are on integers.
  Tensor pattern = is_nan.where(constant(0, f), x.abs()).bitcast(i);
  Tensor exponent = pattern.shift_right(constant(source_mantissa, i));
  Tensor mantissa = pattern.bitwise_and(constant(std::ldexp(1.0, source_mantissa) - 1, i));
  const double half = std::ldexp(1.0, source_mantissa - 1);
  Tensor one = constant(1, i), zero = constant(0, i);
  Tensor round_up = zero;
  if (rounding == E8M0Rounding::Up) round_up = mantissa.ne(zero).where(one, zero);
  if (rounding == E8M0Rounding::Nearest) round_up = mantissa.ge(constant(half, i)).where(one, zero);
  Tensor code = exponent.sub(constant(source_bias - 127, i)).add(round_up);
  if (!wide) {
    // 2^-127 (code 0) is an f32 subnormal, mantissa 0x400000; 2^-126 (code 1) the next binade.
    Tensor subnormal_code = zero;
    if (rounding == E8M0Rounding::Up) subnormal_code = mantissa.gt(constant(half, i)).where(one, zero);
    if (rounding == E8M0Rounding::Nearest) subnormal_code = mantissa.ge(constant(1.5 * half, i)).where(one, zero);
    code = exponent.eq(zero).where(subnormal_code, code);
  }
  // Below 2^-127, the smallest E8M0 value (its bit pattern: an f32 subnormal, an f64 normal).
  const double smallest_pattern = wide ? (source_bias - 127) * std::ldexp(1.0, source_mantissa) : half;
  Tensor underflow = pattern.lt(constant(smallest_pattern, i));
  Tensor overflow = code.ge(constant(255, i));  // infinity included
  code = underflow.where(zero, code);
  code = overflow.where(constant(saturate ? 254 : 255, i), code);
  if (!saturate) code = underflow.where(constant(255, i), code);
  code = is_nan.where(constant(255, i), code);
  return code.cast(ScalarType::UInt8);
}

// Integers wrap to their bit width (two's complement for the signed ones), as Cast's rule for
// fixed-point targets says; floats are truncated toward zero first.
Tensor encode_small_integer(const Tensor& values, int32_t data_type) {
  const ScalarType i64 = ScalarType::Int64;
  const int bits = narrow_bits(data_type);
  Tensor wide = values.dtype() == ScalarType::Float16 || values.dtype() == ScalarType::BFloat16
                    ? values.cast(ScalarType::Float32).cast(i64)
                    : values.cast(i64);
  Tensor low = wide.bitwise_and(constant((1 << bits) - 1, i64));
  if (narrow_integer_min(data_type) < 0)
    low = low.ge(constant(1 << (bits - 1), i64)).where(low.sub(constant(1 << bits, i64)), low);
  return low.cast(narrow_carrier(data_type));
}

}  // namespace

bool is_narrow_type(int32_t data_type) { return data_type >= kFloat8E4M3FN && data_type <= kInt2; }

bool is_narrow_float(int32_t data_type) { return is_narrow_type(data_type) && !is_narrow_integer(data_type); }

bool is_narrow_integer(int32_t data_type) {
  return data_type == kUInt4 || data_type == kInt4 || data_type == kUInt2 || data_type == kInt2;
}

int narrow_bits(int32_t data_type) {
  switch (data_type) {
    case kUInt4: case kInt4: case kFloat4E2M1: return 4;
    case kUInt2: case kInt2: return 2;
    default: return 8;
  }
}

ScalarType narrow_carrier(int32_t data_type) {
  return data_type == kInt4 || data_type == kInt2 ? ScalarType::Int8 : ScalarType::UInt8;
}

int64_t narrow_integer_min(int32_t data_type) {
  return data_type == kInt4 ? -8 : data_type == kInt2 ? -2 : 0;
}

int64_t narrow_integer_max(int32_t data_type) {
  switch (data_type) {
    case kInt4: return 7;
    case kUInt4: return 15;
    case kInt2: return 1;
    case kUInt2: return 3;
    default: return 255;
  }
}

std::string onnx_type_name(int32_t data_type) {
  if (onnx::TensorProto_DataType_IsValid(data_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(data_type));
  switch (data_type) {
    case kFloat8E4M3FN: return "FLOAT8E4M3FN";
    case kFloat8E4M3FNUZ: return "FLOAT8E4M3FNUZ";
    case kFloat8E5M2: return "FLOAT8E5M2";
    case kFloat8E5M2FNUZ: return "FLOAT8E5M2FNUZ";
    case kUInt4: return "UINT4";
    case kInt4: return "INT4";
    case kFloat4E2M1: return "FLOAT4E2M1";
    case kFloat8E8M0: return "FLOAT8E8M0";
    case kUInt2: return "UINT2";
    case kInt2: return "INT2";
    default: return str_cat(data_type, " (not an ONNX data type)");
  }
}

int32_t onnx_type_of(ScalarType type) {
  switch (type) {
    case ScalarType::Float32: return onnx::TensorProto_DataType_FLOAT;
    case ScalarType::UInt8: return onnx::TensorProto_DataType_UINT8;
    case ScalarType::Int8: return onnx::TensorProto_DataType_INT8;
    case ScalarType::UInt16: return onnx::TensorProto_DataType_UINT16;
    case ScalarType::Int16: return onnx::TensorProto_DataType_INT16;
    case ScalarType::Int32: return onnx::TensorProto_DataType_INT32;
    case ScalarType::Int64: return onnx::TensorProto_DataType_INT64;
    case ScalarType::Bool: return onnx::TensorProto_DataType_BOOL;
    case ScalarType::Float16: return onnx::TensorProto_DataType_FLOAT16;
    case ScalarType::Float64: return onnx::TensorProto_DataType_DOUBLE;
    case ScalarType::UInt32: return onnx::TensorProto_DataType_UINT32;
    case ScalarType::UInt64: return onnx::TensorProto_DataType_UINT64;
    case ScalarType::BFloat16: return onnx::TensorProto_DataType_BFLOAT16;
    default: throw_internal_error(str_cat("onnx_type_of: no ONNX type for ", scalar_type_name(type)));
  }
}

double narrow_value(int32_t data_type, int carrier_value) {
  if (is_narrow_integer(data_type)) return carrier_value;
  const int code = carrier_value & 0xFF;
  if (data_type == kFloat8E8M0) return code == 255 ? NAN : std::ldexp(1.0, code - 127);
  const FloatFormat format = float_format(data_type);
  const int magnitude = code & (format.sign_bit - 1);
  const bool negative = (code & format.sign_bit) != 0;
  const int m = format.mantissa_bits;
  const int exponent = magnitude >> m, mantissa = magnitude & ((1 << m) - 1);
  switch (format.specials) {
    case FloatFormat::Ieee:
      if (exponent == (format.sign_bit - 1) >> m) return mantissa != 0 ? NAN : negative ? -INFINITY : INFINITY;
      break;
    case FloatFormat::NanAllOnes:
      if (magnitude == format.sign_bit - 1) return NAN;
      break;
    case FloatFormat::NanNegativeZero:
      if (code == format.sign_bit) return NAN;
      break;
    case FloatFormat::None: break;
  }
  double value = exponent == 0 ? std::ldexp(mantissa, 1 - format.bias - m)
                               : std::ldexp((1 << m) + mantissa, exponent - format.bias - m);
  return negative ? -value : value;
}

Tensor decode_narrow(const Tensor& carrier, int32_t data_type) {
  if (is_narrow_integer(data_type)) return carrier.cast(ScalarType::Float32);
  if (data_type == kFloat8E8M0) return decode_e8m0(carrier);
  return decode_small_float(carrier, float_format(data_type));
}

Tensor encode_narrow(const Tensor& values, int32_t data_type, bool saturate, E8M0Rounding rounding) {
  if (is_narrow_integer(data_type)) return encode_small_integer(values, data_type);
  Tensor numbers = values;
  const ScalarType type = values.dtype();
  if (type == ScalarType::Bool) numbers = values.cast(ScalarType::Float32);
  // Integers go through f64 (exact up to 2^53) so that they are rounded once, by the encoder.
  else if (type != ScalarType::Float16 && type != ScalarType::BFloat16 && type != ScalarType::Float32 &&
           type != ScalarType::Float64)
    numbers = values.cast(ScalarType::Float64);
  if (data_type == kFloat8E8M0) return encode_e8m0(numbers, saturate, rounding);
  return encode_small_float(numbers, float_format(data_type), saturate);
}

}  // namespace kiln::onnx_import
