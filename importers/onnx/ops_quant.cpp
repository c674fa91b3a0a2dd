// ONNX type conversions and quantization: Cast, CastLike, BitCast, QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
// These are the ops that take and make the narrow types (float8, float4, int4, int2; see
// narrow_types.h), so every input's ONNX type is read through OnnxNode::input_elem_type.
#include <algorithm>
#include <cmath>
#include <optional>

#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "op_helpers.h"
#include "qdq_pairs.h"
#include "support/error.h"
#include "driver/run_on_device.h"     // graph_target_caps(): whether the target has 8-bit dot products
#include "tensor/tensor_internal.h"  // contiguous(): a fusion barrier the public API does not offer

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

constexpr int32_t kOnnxString = onnx::TensorProto_DataType_STRING;
constexpr int32_t kOnnxUInt8 = onnx::TensorProto_DataType_UINT8;

// ---- conversions -------------------------------------------------------------------------------

void check_convertible(const OnnxNode& node, int32_t type) {
  if (type == kOnnxString) node.fail("unsupported: string tensors (kiln has no string dtype)");
  if (!is_narrow_type(type)) scalar_type_from_onnx(type);  // a clear error for unknown types
}

// The numbers a (possibly narrow) value holds, as a kiln tensor: narrow floats are decoded to f32,
// narrow integers are their carrier (which holds the integer itself).
Tensor numeric_value(const Tensor& value, int32_t type) {
  return is_narrow_float(type) ? decode_narrow(value, type) : value;
}

E8M0Rounding e8m0_rounding(const OnnxNode& node) {
  const std::string mode = node.attr_string("round_mode", "up");
  if (mode == "up") return E8M0Rounding::Up;
  if (mode == "down") return E8M0Rounding::Down;
  if (mode == "nearest") return E8M0Rounding::Nearest;
  node.fail(str_cat("unsupported: round_mode '", mode, "'"));
}

// Input `index` converted to ONNX type `to` as output 0, by Cast's rules (saturate from opset 19).
Tensor convert_input(const OnnxNode& node, size_t index, int32_t to) {
  const int32_t from = node.input_elem_type(index);
  check_convertible(node, from);
  check_convertible(node, to);
  node.set_output_elem_type(0, to);
  const Tensor& x = node.input(index);
  if (from == to) return x;
  Tensor value = numeric_value(x, from);
  if (is_narrow_type(to)) {
    const bool saturate = node.opset() < 19 || node.attr_int("saturate", 1) != 0;
    return encode_narrow(value, to, saturate, e8m0_rounding(node));
  }
  return value.cast(scalar_type_from_onnx(to));
}

// A small 64-bit integer tensor converted to floating point is computed once, into a buffer of its
// own. Its consumers often broadcast it over a large kernel (BERT's attention mask, [1, 128] int64,
// is added to every head's 128×128 scores), and x86 without AVX-512 has no vector conversion from
// i64 to float: LLVM then keeps the whole loop around the conversion scalar, exp and all (BERT's
// softmax kernels on an AVX2 Zen 3: 49 -> 24 ms of a 423 ms run; the model about 10 % faster).
constexpr int64_t kConvertOnceElements = 64 * 1024;

Outputs cast(const OnnxNode& node) {
  const int32_t from = node.input_elem_type(0);
  Tensor converted = convert_input(node, 0, static_cast<int32_t>(node.attr_int("to")));
  bool wide_integer = from == onnx::TensorProto_DataType_INT64 || from == onnx::TensorProto_DataType_UINT64;
  if (wide_integer && is_floating(converted.dtype()) && dims_numel(dims_of(converted)).max() <= kConvertOnceElements)
    converted = contiguous(converted);
  return {converted};
}

Outputs cast_like(const OnnxNode& node) { return {convert_input(node, 0, node.input_elem_type(1))}; }

// Width in bits of an ONNX type, for BitCast (bool is stored in a byte).
int type_bits(int32_t type) {
  return is_narrow_type(type) ? narrow_bits(type) : 8 * scalar_type_size(scalar_type_from_onnx(type));
}

Outputs bitcast(const OnnxNode& node) {
  const int32_t from = node.input_elem_type(0);
  const int32_t to = static_cast<int32_t>(node.attr_int("to"));
  check_convertible(node, from);
  check_convertible(node, to);
  if (type_bits(from) != type_bits(to))
    node.fail(str_cat("BitCast from ", onnx_type_name(from), " (", type_bits(from), " bits) to ", onnx_type_name(to), " (",
                      type_bits(to), " bits): the widths differ"));
  node.set_output_elem_type(0, to);
  // A kiln bool is a byte holding 0 or 1, so a bool's bit pattern is that byte; the other way,
  // only 0 and 1 are valid kiln bools, so any non-zero byte becomes true.
  const Tensor x = from == onnx::TensorProto_DataType_BOOL ? node.input(0).cast(ScalarType::UInt8) : node.input(0);
  if (!is_narrow_type(from) && !is_narrow_type(to)) {
    if (to == onnx::TensorProto_DataType_BOOL) return {x.ne(Tensor::scalar(0, x.dtype()))};
    return {x.bitcast(scalar_type_from_onnx(to))};
  }
  // Through the raw bit pattern, as the low bits of a u8.
  const int bits = type_bits(from);
  Tensor pattern = x.dtype() == ScalarType::Int8 ? x.bitcast(ScalarType::UInt8) : x;
  if (bits < 8) pattern = pattern.bitwise_and(Tensor::scalar((1 << bits) - 1, ScalarType::UInt8));
  if (is_narrow_integer(to) && narrow_integer_min(to) < 0) {
    Tensor wide = pattern.cast(ScalarType::Int32);
    wide = wide.ge(Tensor::scalar(1 << (bits - 1), ScalarType::Int32))
               .where(wide.sub(Tensor::scalar(1 << bits, ScalarType::Int32)), wide);
    return {wide.cast(ScalarType::Int8)};
  }
  if (is_narrow_type(to)) return {pattern};
  if (to == onnx::TensorProto_DataType_BOOL) return {pattern.ne(Tensor::scalar(0, ScalarType::UInt8))};
  return {pattern.bitcast(scalar_type_from_onnx(to))};
}

// ---- quantization parameters -------------------------------------------------------------------

// A scale or zero point shaped to broadcast against x: per tensor (one element), per axis (1-D of
// x's `axis` length) or blocked (x's rank, `block_size` elements of x per entry along `axis`).
Tensor broadcast_parameter(const OnnxNode& node, const Tensor& parameter, const Dims& x_shape, int64_t axis,
                           int64_t block_size) {
  const int64_t rank = static_cast<int64_t>(x_shape.size());
  if (block_size < 0) node.fail(str_cat("block_size must be >= 0, not ", block_size));
  if (block_size == 0 && parameter.numel() == 1 && parameter.ndim() <= 1) return parameter.reshape({});
  const int64_t a = normalize_axis(node, axis, std::max<int64_t>(rank, 1));
  // (A per-tensor parameter returned above; the other axes of x may be symbolic.)
  const int64_t length = rank == 0 ? 1 : x_shape[static_cast<size_t>(a)].value("a per-axis or blocked quantization axis");
  if (block_size == 0) {
    if (parameter.ndim() != 1 || parameter.dim(0) != length)
      node.fail(str_cat("per-axis scale/zero point must be 1-D of length ", length, " (axis ", a, "), not shape of rank ",
                        parameter.ndim(), " with ", parameter.numel(), " elements"));
    Shape shape(static_cast<size_t>(rank), 1);
    shape[static_cast<size_t>(a)] = length;
    return parameter.reshape(shape);
  }
  if (parameter.ndim() != rank) node.fail("blocked quantization needs a scale/zero point of the input's rank");
  const int64_t blocks = parameter.dim(a);
  if (blocks * block_size < length || (blocks - 1) * block_size >= length)
    node.fail(str_cat("block_size ", block_size, " does not fit: ", blocks, " blocks along axis ", a, " of length ", length));
  Shape repeated = parameter.shape();
  repeated.insert(repeated.begin() + a + 1, block_size);
  Shape merged = parameter.shape();
  merged[static_cast<size_t>(a)] = blocks * block_size;
  return parameter.unsqueeze(a + 1).expand(repeated).reshape(merged).slice(a, 0, length);
}

struct Granularity {
  int64_t axis;
  int64_t block_size;
};

Granularity granularity(const OnnxNode& node) {
  // axis came with opset 13 and block_size with 21: earlier models have per-tensor parameters.
  return {node.attr_int("axis", 1), node.attr_int("block_size", 0)};
}

// Scale values as a kiln float tensor (E8M0 scales decoded).
Tensor scale_value(const OnnxNode& node, size_t index) {
  const int32_t type = node.input_elem_type(index);
  if (is_narrow_type(type) && type != kFloat8E8M0)
    node.fail(str_cat("unsupported: a scale of type ", onnx_type_name(type)));
  return numeric_value(node.input(index), type);
}

ScalarType float_type_attribute(const OnnxNode& node, const std::string& name, int32_t type) {
  if (is_narrow_type(type)) node.fail(str_cat("unsupported: ", name, " ", onnx_type_name(type)));
  ScalarType result = scalar_type_from_onnx(type);
  if (!is_floating(result)) node.fail(str_cat(name, " must be a float type, not ", onnx_type_name(type)));
  return result;
}

// Integer range of a quantized integer type.
std::pair<double, double> integer_range(const OnnxNode& node, int32_t type) {
  if (is_narrow_integer(type)) return {double(narrow_integer_min(type)), double(narrow_integer_max(type))};
  switch (type) {
    case onnx::TensorProto_DataType_UINT8: return {0, 255};
    case onnx::TensorProto_DataType_INT8: return {-128, 127};
    case onnx::TensorProto_DataType_UINT16: return {0, 65535};
    case onnx::TensorProto_DataType_INT16: return {-32768, 32767};
    case onnx::TensorProto_DataType_INT32: return {-2147483648.0, 2147483647.0};
    default: node.fail(str_cat("unsupported quantized type ", onnx_type_name(type)));
  }
}

// round_half_even(value) + zero_point, saturated to the integer type's range, as that type.
Tensor saturate_integer(const OnnxNode& node, const Tensor& value, const Tensor& zero_point, int32_t type) {
  auto [low, high] = integer_range(node, type);
  // An f32 value bound for a type of 16 bits or fewer stays in f32: rounding is exact in any type,
  // and round(q) + zero point is exact below 2^24, while from 2^24 on both sums lie far outside the
  // type and clip to the same end. (f64 vector code ran at half the lanes: QDQ MobileNetV3's
  // quantize kernels took a third of its run.)
  bool narrow = high - low < 65536.0;
  ScalarType compute = value.dtype() == ScalarType::Float32 && narrow ? ScalarType::Float32 : ScalarType::Float64;
  Tensor result = value.cast(compute).round().add(zero_point.cast(compute)).clip(low, high);
  return result.cast(is_narrow_type(type) ? narrow_carrier(type) : scalar_type_from_onnx(type));
}

// ---- QuantizeLinear / DequantizeLinear ---------------------------------------------------------

// QuantizeLinear up to its rounding: x / scale in the precision the spec asks for, the zero point
// broadcast against x (numeric, in the output type), and the output type.
struct QuantizeParts {
  Tensor quotient;
  Tensor zero_point;
  int32_t out_type = 0;
};

QuantizeParts quantize_parts(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Granularity g = granularity(node);
  Tensor scale = scale_value(node, 1);
  const bool has_zero_point = node.has_input(2);
  int32_t out_type = static_cast<int32_t>(node.attr_int("output_dtype", 0));
  if (has_zero_point) {
    const int32_t zero_point_type = node.input_elem_type(2);
    if (out_type != 0 && out_type != zero_point_type)
      node.fail(str_cat("output_dtype ", onnx_type_name(out_type), " differs from the zero point's type ",
                        onnx_type_name(zero_point_type)));
    out_type = zero_point_type;
  }
  if (out_type == 0) out_type = kOnnxUInt8;

  // The division is done in f64 and rounded once to the precision the spec asks for: the
  // `precision` attribute, else the scale's type (correctly rounded: f64 has > 2p+2 bits).
  const ScalarType precision = node.has_attribute("precision")
                                   ? float_type_attribute(node, "precision", static_cast<int32_t>(node.attr_int("precision")))
                                   : (is_floating(scale.dtype()) ? scale.dtype() : ScalarType::Float32);
  Tensor scale_b = broadcast_parameter(node, scale, dims_of(x), g.axis, g.block_size);
  // (Both already of that type: one division in it is the same correctly rounded quotient.)
  Tensor quotient = x.dtype() == precision && scale_b.dtype() == precision &&
                            (precision == ScalarType::Float32 || precision == ScalarType::Float64)
                        ? x.div(scale_b)
                        : x.cast(ScalarType::Float64).div(scale_b.cast(ScalarType::Float64)).cast(precision);
  Tensor zero_point = has_zero_point ? broadcast_parameter(node, numeric_value(node.input(2), out_type), dims_of(x),
                                                           g.axis, g.block_size)
                                     : Tensor::scalar(0, ScalarType::Float32);
  return {quotient, zero_point, out_type};
}

Outputs quantize_linear(const OnnxNode& node) {
  QuantizeParts parts = quantize_parts(node);
  node.set_output_elem_type(0, parts.out_type);
  if (is_narrow_float(parts.out_type)) {
    const bool saturate = node.attr_int("saturate", 1) != 0;
    Tensor shifted = parts.quotient.cast(ScalarType::Float32).add(parts.zero_point.cast(ScalarType::Float32));
    return {encode_narrow(shifted, parts.out_type, saturate)};
  }
  return {saturate_integer(node, parts.quotient, parts.zero_point, parts.out_type)};
}

// DequantizeLinear's output type and the type it computes (x - zero point)·scale in.
struct DequantizeTypes {
  ScalarType out;
  ScalarType compute;
};

DequantizeTypes dequantize_types(const OnnxNode& node, const Tensor& scale) {
  const int32_t x_type = node.input_elem_type(0);
  const int32_t out_onnx = static_cast<int32_t>(node.attr_int("output_dtype", 0));
  const ScalarType out = out_onnx != 0 ? float_type_attribute(node, "output_dtype", out_onnx)
                                       : (is_floating(scale.dtype()) ? scale.dtype() : ScalarType::Float32);
  // f64 holds (x - zero point) exactly and rounds the product once into the output type. For an
  // integer x of 16 bits or fewer, an f32 scale and an f32 output, f32 does the same: |x - zero
  // point| < 2^17 is exact in it, and its product rounds once (the f64 product was exact).
  bool small_integer = x_type == kOnnxUInt8 || x_type == onnx::TensorProto_DataType_INT8 ||
                       x_type == onnx::TensorProto_DataType_UINT16 || x_type == onnx::TensorProto_DataType_INT16 ||
                       is_narrow_integer(x_type);
  const ScalarType compute =
      small_integer && scale.dtype() == ScalarType::Float32 && out == ScalarType::Float32 ? ScalarType::Float32
                                                                                          : ScalarType::Float64;
  return {out, compute};
}

Outputs dequantize_linear(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const int32_t x_type = node.input_elem_type(0);
  const Granularity g = granularity(node);
  Tensor scale = scale_value(node, 1);
  const auto [out, compute] = dequantize_types(node, scale);
  Tensor value = numeric_value(x, x_type).cast(compute);
  if (node.has_input(2)) {
    const int32_t zero_point_type = node.input_elem_type(2);
    if (zero_point_type != x_type)
      node.fail(str_cat("the zero point's type ", onnx_type_name(zero_point_type), " differs from x's ", onnx_type_name(x_type)));
    Tensor zero_point = numeric_value(node.input(2), zero_point_type).cast(compute);
    value = value.sub(broadcast_parameter(node, zero_point, dims_of(x), g.axis, g.block_size));
  }
  Tensor scale_b = broadcast_parameter(node, scale, dims_of(x), g.axis, g.block_size).cast(compute);
  return {value.mul(scale_b).cast(out)};
}

Outputs dynamic_quantize_linear(const OnnxNode& node) {
  const ScalarType f32 = ScalarType::Float32;
  Tensor x = node.input(0).cast(f32);
  Tensor zero = Tensor::scalar(0, f32);
  // The range always includes 0, so that 0 is exactly representable.
  Tensor low = x.min().minimum(zero), high = x.max().maximum(zero);
  Tensor scale = high.sub(low).div(Tensor::scalar(255, f32));
  Tensor zero_point = zero.sub(low.div(scale)).round().clip(0, 255);
  Tensor y = x.div(scale).round().add(zero_point).clip(0, 255).cast(ScalarType::UInt8);
  return declared_outputs(node, {y, scale, zero_point.cast(ScalarType::UInt8)});
}

// ---- integer matrix products and convolutions --------------------------------------------------

// A quantization parameter shaped to broadcast against an operand of rank `rank`: a scalar, one
// value per row along the axis `per_row_axis` counts from the end (0: none), or as it is.
Tensor shaped_parameter(const Tensor& parameter, int64_t per_row_axis, int64_t rank) {
  if (parameter.numel() == 1) return parameter.reshape({});
  if (parameter.ndim() == 1 && per_row_axis != 0 && rank >= -per_row_axis) {
    Shape shape(static_cast<size_t>(-per_row_axis), 1);
    shape[0] = parameter.dim(0);
    return parameter.reshape(shape);
  }
  return parameter;
}

// Whether input `index` is a zero point known to be all zeros when the model is built.
bool known_zero(const OnnxNode& node, size_t index) {
  if (!node.has_input(index)) return true;
  const Tensor& value = node.input(index);
  if (has_symbolic_shape(value) || reads_graph_input(value) || value.numel() > 4096) return false;
  std::vector<double> values = node.input_doubles(index);
  return std::all_of(values.begin(), values.end(), [](double v) { return v == 0; });
}

// Input `index`, the zero point of input `operand_index`, as i32 shaped to broadcast against that
// operand: a scalar, one per row (`per_row_axis`: the axis it runs along, counted from the end),
// or as it is; nullopt when it is absent or known to be 0. Its type must be the operand's.
std::optional<Tensor> zero_point_i32(const OnnxNode& node, size_t operand_index, size_t index, int64_t per_row_axis) {
  if (known_zero(node, index)) return std::nullopt;
  const int32_t type = node.input_elem_type(index), operand_type = node.input_elem_type(operand_index);
  if (is_narrow_type(type)) node.fail(str_cat("unsupported: zero point of type ", onnx_type_name(type)));
  if (type != operand_type)
    node.fail(str_cat("the zero point's type ", onnx_type_name(type), " (input ", index, ") differs from input ",
                      operand_index, "'s ", onnx_type_name(operand_type)));
  const Tensor& operand = node.input(operand_index);
  const Tensor& zero_point = node.input(index);
  if (zero_point.ndim() == 1 && zero_point.numel() != 1 && per_row_axis != 0 && operand.ndim() >= -per_row_axis) {
    Dim rows = dim_of(operand, per_row_axis);
    if (rows.is_known() && rows.value() != zero_point.dim(0))
      node.fail(str_cat("the zero point (input ", index, ") has ", zero_point.dim(0), " values for the ", rows.value(),
                        " along axis ", per_row_axis, " of input ", operand_index, " ", dims_string(dims_of(operand))));
  }
  return shaped_parameter(zero_point.cast(ScalarType::Int32), per_row_axis, operand.ndim());
}

// x - zero_point in i32 (see zero_point_i32).
Tensor shifted_integer(const OnnxNode& node, size_t x_index, size_t zero_point_index, int64_t per_row_axis) {
  const int32_t x_type = node.input_elem_type(x_index);
  if (is_narrow_type(x_type)) node.fail(str_cat("unsupported: input ", x_index, " of type ", onnx_type_name(x_type)));
  Tensor value = node.input(x_index).cast(ScalarType::Int32);
  std::optional<Tensor> zero_point = zero_point_i32(node, x_index, zero_point_index, per_row_axis);
  return zero_point ? value.sub(*zero_point) : value;
}

// A scale as f64, shaped like its zero point would be (see shifted_integer).
Tensor shaped_scale(const OnnxNode& node, size_t index, int64_t per_row_axis, int64_t rank) {
  return shaped_parameter(scale_value(node, index).cast(ScalarType::Float64), per_row_axis, rank);
}

// The quantized output of the QLinear ops: round(accumulator * scale / y_scale) + y_zero_point.
Tensor requantize(const OnnxNode& node, const Tensor& accumulator, const Tensor& scale, size_t y_scale_index,
                  size_t y_zero_point_index) {
  Tensor y_scale = scale_value(node, y_scale_index).cast(ScalarType::Float64).reshape({});
  int32_t out_type = kOnnxUInt8;
  Tensor zero_point = Tensor::scalar(0, ScalarType::Float64);
  if (node.has_input(y_zero_point_index)) {
    out_type = node.input_elem_type(y_zero_point_index);
    if (is_narrow_type(out_type)) node.fail(str_cat("unsupported: output type ", onnx_type_name(out_type)));
    zero_point = node.input(y_zero_point_index).reshape({});
  }
  // The real value is rounded to f32 first, as a float implementation of the op would hold it.
  Tensor real = accumulator.cast(ScalarType::Float64).mul(scale).cast(ScalarType::Float32).cast(ScalarType::Float64);
  return saturate_integer(node, real.div(y_scale), zero_point, out_type);
}

// An 8-bit operand of an integer matrix product moved into the signedness `want_unsigned` asks
// for: x ± 128 in the other 8-bit type (a constant weight folds). The zero point moves with it, so
// x - zero point is unchanged; `zero_point` is null when it is 0 (and stays null when unmoved).
Tensor with_signedness(const Tensor& x, bool want_unsigned, std::optional<Tensor>& zero_point) {
  bool is_unsigned = x.dtype() == ScalarType::UInt8;
  if (is_unsigned == want_unsigned) return x;
  const int64_t shift = want_unsigned ? 128 : -128;
  Tensor moved = zero_point ? zero_point->add(Tensor::scalar(static_cast<double>(shift), ScalarType::Int32))
                            : Tensor::scalar(static_cast<double>(shift), ScalarType::Int32);
  zero_point = moved;
  return x.cast(ScalarType::Int32)
      .add(Tensor::scalar(static_cast<double>(shift), ScalarType::Int32))
      .cast(want_unsigned ? ScalarType::UInt8 : ScalarType::Int8);
}

// Σk (a - za)(b - zb) for 8-bit a and b, as Σk a·b - zb·Σk a - za·Σk b + K·za·zb: the product then
// reads the 8-bit operands themselves, one unsigned and one signed (an operand of the other kind
// is moved by 128), the form of a CPU's 8-bit dot-product instructions (AVX-512 VNNI's vpdpbusd
// multiplies unsigned by signed bytes; opt/dot_products.h), and the corrections are a row sum of a
// and a column sum of b (a constant b folds its own). Every term is exact in i32 for K < 2^16.
// Both operands have rank 2 or more.
// The zero points are i32, shaped to broadcast against a's rows and b's columns (zero_point_i32), or
// absent where they are 0.
Tensor product_8bit(Tensor a, Tensor b, std::optional<Tensor> a_zero, std::optional<Tensor> b_zero) {
  // The unsigned operand: a, unless only b is unsigned.
  const bool a_unsigned = a.dtype() == ScalarType::UInt8 || b.dtype() != ScalarType::UInt8;
  a = with_signedness(a, a_unsigned, a_zero);
  b = with_signedness(b, !a_unsigned, b_zero);
  Tensor product = a.cast(ScalarType::Int32).matmul(b.cast(ScalarType::Int32));
  if (b_zero) {
    Tensor row_sums = a.cast(ScalarType::Int32).sum({-1}, true);  // (…, M, 1)
    product = product.sub(row_sums.mul(*b_zero));
  }
  if (a_zero) {
    Tensor column_sums = b.cast(ScalarType::Int32).sum({-2}, true);  // (…, 1, N)
    product = product.sub(column_sums.mul(*a_zero));
  }
  if (a_zero && b_zero) {
    const int64_t k = a.dim(-1);
    product = product.add(a_zero->mul(*b_zero).mul(Tensor::scalar(static_cast<double>(k), ScalarType::Int32)));
  }
  return product;
}

// product_8bit of MatMulInteger-style inputs: a and b with their zero points (a's one per row).
Tensor integer_matmul_8bit(const OnnxNode& node, size_t a_index, size_t a_zero_index, size_t b_index,
                           size_t b_zero_index) {
  return product_8bit(node.input(a_index), node.input(b_index), zero_point_i32(node, a_index, a_zero_index, -2),
                      zero_point_i32(node, b_index, b_zero_index, 0));
}

// Σk (a - za)(b - zb) in i32: a's zero point may be one per row (M), b's one per column (N, the
// last axis: broadcasts as is).
Tensor integer_matmul(const OnnxNode& node, size_t a_index, size_t a_zero_index, size_t b_index, size_t b_zero_index) {
  auto is_8bit = [&](size_t index) {
    const int32_t type = node.input_elem_type(index);
    return (type == kOnnxUInt8 || type == onnx::TensorProto_DataType_INT8) && node.input(index).ndim() >= 2;
  };
  if (is_8bit(a_index) && is_8bit(b_index)) return integer_matmul_8bit(node, a_index, a_zero_index, b_index, b_zero_index);
  Tensor a = shifted_integer(node, a_index, a_zero_index, -2);
  Tensor b = shifted_integer(node, b_index, b_zero_index, 0);
  return a.matmul(b);
}

Outputs matmul_integer(const OnnxNode& node) { return {integer_matmul(node, 0, 2, 1, 3)}; }

Outputs qlinear_matmul(const OnnxNode& node) {
  const int64_t a_rank = node.input(0).ndim(), b_rank = node.input(3).ndim();
  Tensor scale = shaped_scale(node, 1, -2, a_rank).mul(shaped_scale(node, 4, 0, b_rank));
  return {requantize(node, integer_matmul(node, 0, 2, 3, 5), scale, 6, 7)};
}

// conv(x - x_zero_point, w - w_zero_point) in i32; padding is zero after the shift, i.e. the zero
// point before it. The weight's zero point may be one per output channel.
Tensor integer_conv(const OnnxNode& node, size_t x_index, size_t x_zero_index, size_t w_index, size_t w_zero_index,
                    const Tensor& bias) {
  const Tensor& w_raw = node.input(w_index);
  if (w_raw.ndim() < 3) node.fail("the weight must have rank 3 or more");
  Tensor x = shifted_integer(node, x_index, x_zero_index, 0);
  Tensor w = shifted_integer(node, w_index, w_zero_index, -w_raw.ndim());
  return x.conv(w, bias, conv_options(node, x, w.shape()));
}

Outputs conv_integer(const OnnxNode& node) { return {integer_conv(node, 0, 2, 1, 3, Tensor())}; }

Outputs qlinear_conv(const OnnxNode& node) {
  const Tensor& w = node.input(3);
  Tensor bias = node.has_input(8) ? node.input(8).cast(ScalarType::Int32) : Tensor();
  Tensor accumulator = integer_conv(node, 0, 2, 3, 5, bias);
  // The weight scale is per tensor or per output channel (axis 1 of the output).
  Tensor w_scale = shaped_scale(node, 4, -(w.ndim() - 1), w.ndim() - 1);
  Tensor scale = shaped_scale(node, 1, 0, 0).mul(w_scale);
  return {requantize(node, accumulator, scale, 6, 7)};
}

}  // namespace

namespace {

// Whether input `a_index` of `a` and input `b_index` of `b` hold the same quantization parameter:
// both absent, or the same value (one tensor of the graph, or constants of equal type, shape and
// values).
bool same_parameter(const OnnxNode& a, size_t a_index, const OnnxNode& b, size_t b_index) {
  if (!a.has_input(a_index) || !b.has_input(b_index)) return !a.has_input(a_index) && !b.has_input(b_index);
  if (a.input_elem_type(a_index) != b.input_elem_type(b_index)) return false;
  const Tensor& x = a.input(a_index);
  const Tensor& y = b.input(b_index);
  if (x.data().node == y.data().node) return true;
  auto constant = [](const Tensor& t) {
    return !has_symbolic_shape(t) && !reads_graph_input(t) && t.numel() <= 4096;
  };
  if (!constant(x) || !constant(y) || x.shape() != y.shape()) return false;
  return a.input_doubles(a_index) == b.input_doubles(b_index);
}

}  // namespace

std::vector<Tensor> build_quantize_dequantize(const OnnxNode& quantize, const OnnxNode& dequantize) {
  // (opset 10's QuantizeLinear has no axis: a per-axis scale there is per tensor's axis 1 anyway.)
  const Granularity q = granularity(quantize), d = granularity(dequantize);
  if (q.block_size != 0 || d.block_size != 0 || dequantize.has_attribute("output_dtype")) return {};
  if (!same_parameter(quantize, 1, dequantize, 1) || !same_parameter(quantize, 2, dequantize, 2)) return {};
  const Tensor& x = quantize.input(0);
  const Tensor& scale = quantize.input(1);
  // A per-axis scale or zero point must be read along the same axis by both.
  const bool per_axis = scale.numel() != 1 || (quantize.has_input(2) && quantize.input(2).numel() != 1);
  if (per_axis && normalize_axis(quantize, q.axis, x.ndim()) != normalize_axis(dequantize, d.axis, x.ndim()))
    return {};
  QuantizeParts parts = quantize_parts(quantize);
  const int32_t type = parts.out_type;
  const bool eight_or_sixteen = type == kOnnxUInt8 || type == onnx::TensorProto_DataType_INT8 ||
                                type == onnx::TensorProto_DataType_UINT16 || type == onnx::TensorProto_DataType_INT16;
  if (!eight_or_sixteen || dequantize.input_elem_type(0) != type) return {};
  auto [low, high] = integer_range(quantize, type);
  // The type saturate_integer rounds in (f32 for an f32 quotient: the range is under 2^17).
  const ScalarType compute = parts.quotient.dtype() == ScalarType::Float32 ? ScalarType::Float32 : ScalarType::Float64;
  // (+0: the unfused pair's q - z is +0 where the rounding gave -0, from x in (-s/2, 0].)
  Tensor rounded = parts.quotient.cast(compute).round().add(Tensor::scalar(0.0, compute));
  Tensor zero_point = parts.zero_point.cast(compute);
  Tensor lowest = Tensor::scalar(low, compute).sub(zero_point), highest = Tensor::scalar(high, compute).sub(zero_point);
  Tensor shifted;
  if (low == 0) {
    // lowest < NaN is false: NaN takes the lower end, -z, which is what its conversion gives (0 - z).
    shifted = lowest.lt(rounded).where(rounded, lowest);
  } else {
    shifted = rounded.lt(lowest).where(lowest, rounded);
    shifted = shifted.ne(shifted).where(Tensor::scalar(0.0, compute).sub(zero_point), shifted);  // NaN: 0 - z
  }
  shifted = highest.lt(shifted).where(highest, shifted);
  Tensor dq_scale = scale_value(dequantize, 1);
  const auto [out, dq_compute] = dequantize_types(dequantize, dq_scale);
  Tensor scale_b = broadcast_parameter(dequantize, dq_scale, dims_of(x), d.axis, d.block_size).cast(dq_compute);
  return {shifted.cast(dq_compute).mul(scale_b).cast(out)};
}

namespace {

// The operands of a QDQ product read through their DequantizeLinear nodes: q_x, a u8 activation
// with one scale and zero point, and q_w, an int8 weight known when the model is built with zero
// point 0 and one scale in all or one per output along `output_axis` of the weight.
struct QuantizedOperands {
  Tensor q_x, q_w;
  Tensor scale;                  // s_x·s_w: a scalar, or one per output (outputs,)
  std::optional<Tensor> x_zero;  // z_x as an i32 scalar; absent when 0
};

std::optional<QuantizedOperands> quantized_operands(const OnnxNode& input_dequantize, const OnnxNode& weight_dequantize,
                                                    int64_t output_axis) {
  if (graph_target_caps().dot_product_bytes == 0) return std::nullopt;
  if (input_dequantize.input_elem_type(0) != kOnnxUInt8 ||
      weight_dequantize.input_elem_type(0) != onnx::TensorProto_DataType_INT8)
    return std::nullopt;
  QuantizedOperands operands{input_dequantize.input(0), weight_dequantize.input(0), Tensor(), std::nullopt};
  const Tensor& q_w = operands.q_w;
  if (has_symbolic_shape(q_w) || reads_graph_input(q_w) || output_axis >= q_w.ndim() || !known_zero(weight_dequantize, 2))
    return std::nullopt;
  for (const OnnxNode* dequantize : {&input_dequantize, &weight_dequantize}) {
    const Tensor& scale = dequantize->input(1);
    if (scale.dtype() != ScalarType::Float32 || reads_graph_input(scale) || has_symbolic_shape(scale) ||
        dequantize->has_attribute("output_dtype") || dequantize->attr_int("block_size", 0) != 0)
      return std::nullopt;
  }
  const Tensor& x_scale = input_dequantize.input(1);
  const Tensor& w_scale = weight_dequantize.input(1);
  const int64_t outputs = q_w.dim(output_axis);
  if (x_scale.numel() != 1) return std::nullopt;
  if (w_scale.numel() != 1) {
    if (w_scale.ndim() != 1 || w_scale.dim(0) != outputs ||
        normalize_axis(weight_dequantize, weight_dequantize.attr_int("axis", 1), q_w.ndim()) != output_axis)
      return std::nullopt;
  }
  if (input_dequantize.has_input(2)) {
    if (input_dequantize.input(2).numel() != 1 || input_dequantize.input_elem_type(2) != kOnnxUInt8) return std::nullopt;
    if (!known_zero(input_dequantize, 2)) operands.x_zero = input_dequantize.input(2).reshape({}).cast(ScalarType::Int32);
  }
  operands.scale = x_scale.reshape({}).mul(w_scale.numel() == 1 ? w_scale.reshape({}) : w_scale.reshape({outputs}));
  return operands;
}

// Whether a K × N 8-bit product takes the dot-product tile (tensor_matmul.cpp's panels): K in
// steps of 4, N in whole vectors (TargetCaps::dot_product_lanes).
bool dot_product_sized(int64_t k, int64_t n) {
  return k % 4 == 0 && k >= 16 && graph_target_caps().dot_product_lanes(n) > 0;
}

// Σk q_x·q_w − z_x·Σk q_w, scaled: a (…, M, K) u8 activation by a (K, N) int8 weight, as f32
// (…, M, N) with the scale per column.
Tensor integer_product(const QuantizedOperands& operands, const Tensor& activation, const Tensor& weight) {
  return product_8bit(activation, weight, operands.x_zero, std::nullopt).cast(ScalarType::Float32).mul(operands.scale);
}

}  // namespace

std::vector<Tensor> build_integer_pointwise_conv(const OnnxNode& conv, const OnnxNode& input_dequantize,
                                                 const OnnxNode& weight_dequantize) {
  std::optional<QuantizedOperands> operands = quantized_operands(input_dequantize, weight_dequantize, 0);
  if (!operands) return {};
  const Tensor& q_x = operands->q_x;
  const Tensor& q_w = operands->q_w;
  if (q_x.ndim() != 4 || q_w.ndim() != 4 || q_w.dim(2) != 1 || q_w.dim(3) != 1) return {};
  const int64_t filters = q_w.dim(0), channels = q_w.dim(1);
  const Dims x_dims = dims_of(q_x);
  if (!x_dims[1].is(channels) || !x_dims[2].is_known() || !x_dims[3].is_known()) return {};
  if (!dot_product_sized(channels, filters)) return {};
  // One group, stride 1, no padding: a 1x1 conv is then a matmul over the channels.
  if (conv.attr_int("group", 1) != 1 || !(conv.input(1).shape() == q_w.shape())) return {};
  ConvOptions options = conv_options(conv, conv.input(0), conv.input(1).shape());
  for (int64_t s : options.stride)
    if (s != 1) return {};
  for (int64_t p : options.padding)
    if (p != 0) return {};
  if (conv.has_input(2) && !(conv.input(2).shape() == Shape{filters})) return {};

  const ScalarType f32 = ScalarType::Float32;
  const int64_t lanes = graph_target_caps().dot_product_bytes / 4;
  const Dim batch = x_dims[0];
  const int64_t height = x_dims[2].value(), width = x_dims[3].value(), pixels = height * width;
  Tensor weight = q_w.reshape({filters, channels});                      // (F, C)
  Tensor image = reshape_to(q_x, {batch, Dim(channels), Dim(pixels)});  // (N, C, H·W)
  Tensor value;                                                          // (N, F, H·W)
  if (pixels % lanes == 0 && batch.is_known()) {
    // The activation is stored in its own order first, so that the copy into dot-product panels
    // is a plain byte copy: computed into the panels' order (its loops), a depthwise conv before
    // it ran without a vector (0.05 -> 0.15 ms). The sums are stored as they are, in the loops of
    // the product (filters, pixels): the image's row, of 28 or 56 pixels, is no whole vector.
    // (Stored as the 4-D image: in the flattened (C, H·W) loops the depthwise conv lost its tile.)
    image = reshape_to(contiguous(q_x), {batch, Dim(channels), Dim(pixels)});
    // (The zero point's correction after the stored sums: inside their kernel, as its epilogue, it
    // kept the dot-product tile from the product: the model 2.08 -> 2.57 ms.)
    Tensor sums = contiguous(product_8bit(weight, image, std::nullopt, std::nullopt));  // (N, F, H·W)
    if (operands->x_zero)
      sums = sums.sub(weight.cast(ScalarType::Int32).sum({1}).reshape({filters, 1}).mul(*operands->x_zero));
    value = sums.cast(f32).mul(operands->scale.reshape({operands->scale.numel(), 1}));
  } else {
    value = integer_product(*operands, image.transpose(-1, -2), weight.transpose(0, 1)).transpose(-1, -2);
  }
  value = reshape_to(value, {batch, Dim(filters), Dim(height), Dim(width)});
  if (conv.has_input(2)) value = value.add(conv.input(2).cast(f32).reshape({filters, 1, 1}));
  return {value};
}

std::vector<Tensor> build_integer_matmul(const OnnxNode& product, const OnnxNode& input_dequantize,
                                         const OnnxNode& weight_dequantize) {
  const bool gemm = product.op_type() == "Gemm";
  // Gemm: A (M, K), B (K, N) or (N, K) with transB, alpha 1; MatMul: A (…, M, K), B (K, N).
  if (gemm && (product.attr_int("transA", 0) != 0 || product.attr_float("alpha", 1.0) != 1.0)) return {};
  const bool transposed = gemm && product.attr_int("transB", 0) != 0;
  std::optional<QuantizedOperands> operands = quantized_operands(input_dequantize, weight_dequantize, transposed ? 0 : 1);
  if (!operands || operands->q_w.ndim() != 2 || operands->q_x.ndim() < 2 || (gemm && operands->q_x.ndim() != 2))
    return {};
  if (!(product.input(1).shape() == operands->q_w.shape())) return {};
  Tensor weight = transposed ? operands->q_w.transpose(0, 1) : operands->q_w;  // (K, N)
  const int64_t k = weight.dim(0), n = weight.dim(1);
  if (!dim_of(operands->q_x, -1).is(k) || !dot_product_sized(k, n)) return {};
  Tensor value = integer_product(*operands, operands->q_x, weight);
  if (gemm && product.has_input(2)) {
    const double beta = product.attr_float("beta", 1.0);
    if (beta != 0.0) {
      Tensor c = product.input(2).cast(ScalarType::Float32);
      value = value.add(beta == 1.0 ? c : c.mul(Tensor::scalar(beta, ScalarType::Float32)));
    }
  }
  return {value};
}

void register_quant_ops(OpRegistry& registry) {
  registry.add("Cast", cast);
  registry.add("CastLike", cast_like, 15);
  registry.add("BitCast", bitcast, 26);
  registry.add("QuantizeLinear", quantize_linear, 10);
  registry.add("DequantizeLinear", dequantize_linear, 10);
  registry.add("DynamicQuantizeLinear", dynamic_quantize_linear, 11);
  registry.add("MatMulInteger", matmul_integer, 10);
  registry.add("QLinearMatMul", qlinear_matmul, 10);
  registry.add("ConvInteger", conv_integer, 10);
  registry.add("QLinearConv", qlinear_conv, 10);
}

}  // namespace kiln::onnx_import
