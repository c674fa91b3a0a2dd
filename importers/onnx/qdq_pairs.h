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

}  // namespace kiln::onnx_import
