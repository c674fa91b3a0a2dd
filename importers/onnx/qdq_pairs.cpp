// Finding QuantizeLinear -> DequantizeLinear pairs (qdq_pairs.h); ops_quant.cpp builds them.
#include "qdq_pairs.h"

#include <string>

namespace kiln::onnx_import {

std::unordered_map<int, int> find_quantize_dequantize_pairs(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, int> quantize_producing;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.domain().empty() && node.op_type() == "QuantizeLinear" && node.output_size() >= 1 &&
        !node.output(0).empty())
      quantize_producing[node.output(0)] = i;
  }
  std::unordered_map<int, int> pairs;
  if (quantize_producing.empty()) return pairs;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!node.domain().empty() || node.op_type() != "DequantizeLinear" || node.input_size() < 2) continue;
    auto quantize = quantize_producing.find(node.input(0));
    if (quantize != quantize_producing.end()) pairs.emplace(i, quantize->second);
  }
  return pairs;
}

std::unordered_map<int, DequantizedConv> find_dequantized_convs(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, int> dequantize_producing;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.domain().empty() && node.op_type() == "DequantizeLinear" && node.output_size() == 1)
      dequantize_producing[node.output(0)] = i;
  }
  std::unordered_map<int, DequantizedConv> convs;
  if (dequantize_producing.empty()) return convs;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!node.domain().empty() || node.op_type() != "Conv" || node.input_size() < 2) continue;
    auto input = dequantize_producing.find(node.input(0)), weight = dequantize_producing.find(node.input(1));
    if (input != dequantize_producing.end() && weight != dequantize_producing.end())
      convs.emplace(i, DequantizedConv{input->second, weight->second});
  }
  return convs;
}

}  // namespace kiln::onnx_import
