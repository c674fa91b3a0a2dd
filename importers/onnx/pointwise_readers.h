// Which Conv nodes feed exactly one pointwise (1x1) conv: a layout hint for the Tensor front end.
//
// A depthwise conv computes fastest channels-last when the conv that reads its output wants that
// layout too (Tensor::conv, ConvOptions::pointwise_reader_filters). The Tensor graph is lazy and
// built forwards, so while a conv is built its readers are unknown; the ONNX graph knows them.
#pragma once

#include <cstdint>
#include <unordered_map>

#include <onnx/onnx_pb.h>

namespace kiln::onnx_import {

// For each Conv node of `graph` (by index) whose output is read by one Conv with a 1x1 kernel,
// stride 1, no padding and one group, directly or through a chain of elementwise activations and
// BatchNormalizations each read only there: that reader's filter count. A value on the way that is
// a graph output, or read twice, ends the chain. Only the default domain; the reader's kernel comes
// from its `kernel_shape` attribute or a 4-D weight initializer.
std::unordered_map<int, int64_t> find_convs_feeding_pointwise(const onnx::GraphProto& graph);

}  // namespace kiln::onnx_import
