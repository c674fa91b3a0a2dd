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

std::unordered_map<int, DequantizedProduct> find_dequantized_products(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, int> dequantize_producing;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (node.domain().empty() && node.op_type() == "DequantizeLinear" && node.output_size() == 1)
      dequantize_producing[node.output(0)] = i;
  }
  std::unordered_map<int, DequantizedProduct> products;
  if (dequantize_producing.empty()) return products;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    const std::string& op = node.op_type();
    if (!node.domain().empty() || (op != "Conv" && op != "Gemm" && op != "MatMul") || node.input_size() < 2) continue;
    auto input = dequantize_producing.find(node.input(0)), weight = dequantize_producing.find(node.input(1));
    if (input != dequantize_producing.end() && weight != dequantize_producing.end())
      products.emplace(i, DequantizedProduct{input->second, weight->second});
  }
  return products;
}

}  // namespace kiln::onnx_import
