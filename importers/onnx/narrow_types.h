// ONNX element types that kiln has no dtype for: float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ,
// E8M0), float4 (E2M1) and the 4-bit and 2-bit integers. We call them "narrow" types.
//
// Decision: they are not kiln dtypes. Inside the importer such a value is a kiln u8 tensor (i8 for
// INT4/INT2) with one element per byte, holding the float's bit pattern (or the integer's value),
// and the model records its ONNX type beside it (OnnxNode::input_elem_type /
// set_output_elem_type). Only the ops that understand these types (Cast, CastLike, the
// quantization family, BitCast) accept them; any other op given one fails with a clear message.
// Decoding and encoding are plain Tensor ops (bit shifts, masks, where), so they fuse into kernels.
#pragma once

#include <cstdint>
#include <string>

#include "kiln/kiln.hpp"

namespace kiln::onnx_import {

// ONNX TensorProto data type numbers newer than the ONNX 1.12 schema kiln is built against.
enum OnnxNarrowType : int32_t {
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

bool is_narrow_type(int32_t data_type);
bool is_narrow_float(int32_t data_type);    // the float8/float4 types
bool is_narrow_integer(int32_t data_type);  // INT4, UINT4, INT2, UINT2
int narrow_bits(int32_t data_type);          // 8, 4 or 2
// The kiln dtype that carries one element per byte: Int8 for INT4/INT2, else UInt8.
ScalarType narrow_carrier(int32_t data_type);
// Range of the narrow integer types.
int64_t narrow_integer_min(int32_t data_type);
int64_t narrow_integer_max(int32_t data_type);

// "FLOAT8E4M3FN", "FLOAT", "data type 99": for every ONNX data type number.
std::string onnx_type_name(int32_t data_type);
// The ONNX data type number of a kiln dtype.
int32_t onnx_type_of(ScalarType type);

// The value of one stored narrow element (carrier byte), on the host: for the test runner's
// comparisons. NaN for NaN encodings.
double narrow_value(int32_t data_type, int carrier_value);

// Tensor ops (lazy): carrier → float values (f32, exact for every narrow type) and float → carrier
// with round-to-nearest-even and the ONNX saturate rules; integers wrap to their bit width.
enum class E8M0Rounding { Up, Down, Nearest };
Tensor decode_narrow(const Tensor& carrier, int32_t data_type);
Tensor encode_narrow(const Tensor& values, int32_t data_type, bool saturate,
                     E8M0Rounding rounding = E8M0Rounding::Up);

}  // namespace kiln::onnx_import
