// Conv + BatchNormalization as one conv (conv_batchnorm.h).
#include "conv_batchnorm.h"

#include <string>
#include <unordered_set>

#include "op_helpers.h"

namespace kiln::onnx_import {

std::unordered_map<int, int> find_conv_batchnorm_pairs(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, int> readers;
  for (const auto& node : graph.node())
    for (const auto& input : node.input()) ++readers[input];
  std::unordered_set<std::string> graph_outputs;
  for (const auto& output : graph.output()) graph_outputs.insert(output.name());
  std::unordered_map<std::string, int> conv_producing;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.domain().empty() && node.op_type() == "Conv" && node.output_size() == 1)
      conv_producing[node.output(0)] = i;
  }
  std::unordered_map<int, int> pairs;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!node.domain().empty() || node.op_type() != "BatchNormalization" || node.input_size() != 5) continue;
    // Training mode (or the statistics outputs it writes) is a different computation.
    bool training = false;
    for (const auto& attribute : node.attribute())
      if (attribute.name() == "training_mode" && attribute.i() != 0) training = true;
    for (int o = 1; o < node.output_size(); ++o)
      if (!node.output(o).empty()) training = true;
    if (training) continue;
    auto conv = conv_producing.find(node.input(0));
    if (conv == conv_producing.end() || readers[node.input(0)] != 1 || graph_outputs.contains(node.input(0))) continue;
    pairs.emplace(i, conv->second);
  }
  return pairs;
}

std::vector<Tensor> build_conv_batchnorm(const OnnxNode& conv, const OnnxNode& batchnorm) {
  // opset 9 dropped `spatial`; earlier versions may normalise per element.
  if (batchnorm.opset() < 9) return {};
  const Tensor& x = conv.input(0);
  const Tensor& weight = conv.input(1);
  if (x.dtype() != ScalarType::Float32 || weight.dtype() != ScalarType::Float32 || weight.ndim() < 3) return {};
  int64_t filters = weight.dim(0);
  for (size_t i = 1; i < 5; ++i) {
    const Tensor& parameter = batchnorm.input(i);
    if (parameter.dtype() != ScalarType::Float32 || parameter.shape() != Shape{filters}) return {};
  }
  if (conv.has_input(2) && (conv.input(2).dtype() != ScalarType::Float32 || conv.input(2).shape() != Shape{filters}))
    return {};
  double epsilon = batchnorm.attr_float("epsilon", 1e-5);
  Tensor epsilon_value = Tensor::scalar(epsilon, ScalarType::Float32);
  Tensor factor = (batchnorm.input(4) + epsilon_value).sqrt().reciprocal() * batchnorm.input(1);
  Shape factor_shape(static_cast<size_t>(weight.ndim()), 1);
  factor_shape[0] = filters;
  Tensor folded_weight = weight * factor.reshape(factor_shape);
  Tensor conv_bias = conv.has_input(2) ? conv.input(2) : Tensor::zeros({filters}, ScalarType::Float32);
  Tensor folded_bias = (conv_bias - batchnorm.input(3)) * factor + batchnorm.input(2);
  return {x.conv(folded_weight, folded_bias, conv_options(conv, x, weight.shape()))};
}

}  // namespace kiln::onnx_import
