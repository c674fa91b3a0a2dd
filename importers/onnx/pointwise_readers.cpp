// Conv nodes that feed a pointwise conv (pointwise_readers.h).
#include "pointwise_readers.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::onnx_import {

namespace {

// Ops that map each element on its own (plus per-channel parameters): the value keeps its shape
// and layout, so a reader beyond them reads the conv's layout.
bool passes_layout_through(const onnx::NodeProto& node) {
  static const std::unordered_set<std::string> kOps = {"Relu", "Clip", "LeakyRelu", "HardSwish", "HardSigmoid",
                                                       "Elu", "Tanh", "Sigmoid", "BatchNormalization"};
  return node.domain().empty() && kOps.contains(node.op_type()) && node.output_size() >= 1;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool all_equal(const onnx::AttributeProto* a, int64_t value) {
  if (a == nullptr) return true;
  for (int64_t v : a->ints())
    if (v != value) return false;
  return true;
}

// The filter count of a 2-D Conv with a 1x1 kernel, stride 1, no padding and one group, or 0.
int64_t pointwise_filters(const onnx::NodeProto& node,
                          const std::unordered_map<std::string, const onnx::TensorProto*>& initializers) {
  if (!node.domain().empty() || node.op_type() != "Conv" || node.input_size() < 2) return 0;
  const onnx::AttributeProto* group = attribute(node, "group");
  if (group != nullptr && group->i() != 1) return 0;
  const onnx::AttributeProto* auto_pad = attribute(node, "auto_pad");
  if (auto_pad != nullptr && auto_pad->s() != "NOTSET" && auto_pad->s() != "VALID") return 0;
  if (!all_equal(attribute(node, "strides"), 1) || !all_equal(attribute(node, "pads"), 0)) return 0;
  auto weight = initializers.find(node.input(1));
  if (weight == initializers.end() || weight->second->dims_size() != 4) return 0;
  const auto& dims = weight->second->dims();
  if (dims[2] != 1 || dims[3] != 1) return 0;
  const onnx::AttributeProto* kernel = attribute(node, "kernel_shape");
  if (kernel != nullptr && !all_equal(kernel, 1)) return 0;
  return dims[0];
}

}  // namespace

std::unordered_map<int, int64_t> find_convs_feeding_pointwise(const onnx::GraphProto& graph) {
  std::unordered_map<std::string, std::vector<int>> readers;
  for (int i = 0; i < graph.node_size(); ++i)
    for (const auto& input : graph.node(i).input())
      if (!input.empty()) readers[input].push_back(i);  // "" is an omitted optional input
  std::unordered_set<std::string> graph_outputs;
  for (const auto& output : graph.output()) graph_outputs.insert(output.name());
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  for (const auto& tensor : graph.initializer()) initializers.emplace(tensor.name(), &tensor);

  std::unordered_map<int, int64_t> found;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& node = graph.node(i);
    if (!node.domain().empty() || node.op_type() != "Conv" || node.output_size() != 1 || node.output(0).empty()) continue;
    std::string value = node.output(0);
    // Each step moves to the value's one reader; the chain is at most the graph's length.
    for (int step = 0; step < graph.node_size(); ++step) {
      auto reading = readers.find(value);
      if (reading == readers.end() || reading->second.size() != 1 || graph_outputs.contains(value)) break;
      const onnx::NodeProto& reader = graph.node(reading->second[0]);
      if (int64_t filters = pointwise_filters(reader, initializers); filters > 0) {
        if (reader.input(0) == value) found.emplace(i, filters);
        break;
      }
      if (!passes_layout_through(reader) || reader.input(0) != value) break;
      value = reader.output(0);
    }
  }
  return found;
}

}  // namespace kiln::onnx_import
