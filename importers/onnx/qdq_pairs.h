// QuantizeLinear followed by DequantizeLinear with the same scale and zero point (the "QDQ" form
// that onnxruntime's quantizer writes around every quantized op), built as one rounding step.
//
// DequantizeLinear(QuantizeLinear(x)) = (clamp(round(x / s) + z, lo, hi) - z) · s, where the
// clamped integer goes through the 8- or 16-bit type and back. That equals
// clamp(round(x / s), lo - z, hi - z) · s exactly: round(x / s) is an integer, adding and
// subtracting z are exact below 2^24 (and from there both forms clamp to the same end), and the
// integer type holds every value of [lo, hi]. So the pair is built as that: the quotient, its
// rounding, two selects and the product, where the unfused form also adds and subtracts the zero
// point and converts to the integer type and back (vector conversions, ~half the chain's ops).
// A NaN quotient gives what the conversion gives it, 0 in the integer type (llvm_alu.cpp's
// float_to_integer: NaN to 0), so -z after the shift.
//
// The QuantizeLinear is still built as usual for its other readers (nothing is removed from the
// graph); the DequantizeLinear just does not read its integer output.
#pragma once

#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

#include "op_registry.h"

namespace kiln::onnx_import {

// For each DequantizeLinear node of `graph` (by index) that reads the output of a QuantizeLinear
// node of `graph`: that QuantizeLinear's index. Both in the default domain. Whether their
// parameters agree is decided when they are built (build_quantize_dequantize).
std::unordered_map<int, int> find_quantize_dequantize_pairs(const onnx::GraphProto& graph);

// The DequantizeLinear's output computed from the QuantizeLinear's input in one rounding step, or
// an empty vector when the two do not undo each other's parameters (a different scale, zero point,
// axis or block size, a float8 or 4-bit type, an output_dtype): then both are built as usual.
std::vector<Tensor> build_quantize_dequantize(const OnnxNode& quantize, const OnnxNode& dequantize);

// A QDQ 1x1 conv as an 8-bit integer product. Conv(DequantizeLinear(q_x), DequantizeLinear(q_w), b)
// with q_x u8 with one scale s_x and zero point z_x, and q_w an int8 weight (F, C, 1, 1) known
// when the model is built, zero point 0 and one scale s_w[f] per filter (or one for all), one
// group, stride 1 and no padding, is Σc (q_x − z_x)·s_x · q_w·s_w[f] + b[f] =
// (Σc q_x·q_w − z_x·Σc q_w)·s_x·s_w[f] + b[f]. The sum is exact in i32 and, as a matmul, is what
// 8-bit dot-product instructions compute (opt/dot_products.h), reading a quarter of the bytes:
//  - filters × pixels, (F, C) · (N, C, H·W), where the image fills whole vectors (56×56, 28×28):
//    the output is NCHW as a float conv's is, the activation is copied into dot-product panels;
//  - pixels × filters, (N, H·W, C) · (C, F), on smaller images (14×14, 7×7), where the float path
//    reads such convs' inputs channels-last already: the weight folds into panels.
// The result differs from the float conv on dequantized values by that conv's float rounding only
// (one rounding here, where the float conv rounds at every addition): a later QuantizeLinear may
// then land one step apart, as onnxruntime's QLinearConv does against its own unfused graph.
// Where the target has no 8-bit dot products (its i32 multiplies are slower than f32 FMAs), or the
// pattern does not hold, returns an empty vector and the Conv is built as usual.
std::vector<Tensor> build_integer_pointwise_conv(const OnnxNode& conv, const OnnxNode& input_dequantize,
                                                 const OnnxNode& weight_dequantize);

// A QDQ Gemm (transA 0, alpha 1) or MatMul by a 2-D weight as the same integer product:
// (Σk q_x·q_w − z_x·Σk q_w)·s_x·s_w[n] + β·C, with the parameters of build_integer_pointwise_conv
// (one scale per output column, or one in all). A classifier's matrix-vector product then reads
// its weight as the bytes vpdpbusd takes, not as bytes dequantized one by one. Empty where the
// pattern does not hold or the target has no 8-bit dot products.
std::vector<Tensor> build_integer_matmul(const OnnxNode& product, const OnnxNode& input_dequantize,
                                         const OnnxNode& weight_dequantize);

// For each Conv, Gemm or MatMul node of `graph` (by index) whose first two inputs are DequantizeLinear
// outputs of `graph`: those two DequantizeLinear nodes' indices (whether the rest of the pattern
// holds is decided when they are built: build_integer_pointwise_conv, build_integer_matmul).
struct DequantizedProduct {
  int input = -1, weight = -1;
};
std::unordered_map<int, DequantizedProduct> find_dequantized_products(const onnx::GraphProto& graph);

}  // namespace kiln::onnx_import
