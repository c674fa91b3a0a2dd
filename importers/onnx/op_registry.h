// The ONNX operator tables: each op family file (ops_*.cpp) registers builders that turn one ONNX
// node into Tensor operations. A builder sees the node through OnnxNode: its inputs as Tensors,
// its attributes with defaults, and the opset the model imports for the node's domain, so that
// one builder can follow an op's changes across opsets (attributes that became inputs, etc.).
//
// Constant folding of shape subgraphs happens by itself: every Tensor is lazy and computable, so a
// builder that needs values (Reshape's shape, Slice's starts) asks for them with input_ints(), which
// realizes that small tensor. Shape/Gather/Concat chains over static shapes therefore fold at
// import time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/kiln.hpp"

namespace onnx {
class NodeProto;
class AttributeProto;
class TensorProto;
}  // namespace onnx

namespace kiln::onnx_import {

class OnnxNode {
 public:
  OnnxNode(const onnx::NodeProto& proto, int64_t opset, std::vector<std::optional<Tensor>> inputs,
           std::string model_directory);

  const std::string& name() const;
  const std::string& op_type() const;
  const std::string& domain() const;  // "" for ai.onnx
  int64_t opset() const { return opset_; }

  // How many outputs the node declares (trailing optional outputs may be left out of the model).
  size_t output_count() const;

  // Inputs: an empty input name (an omitted optional input) is nullopt.
  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
  // The input, or a UserError naming the node when it is missing.
  const Tensor& input(size_t i) const;
  // The values of a (small) input as integers / doubles: realizes it. For shape-like inputs.
  std::vector<int64_t> input_ints(size_t i) const;
  std::vector<double> input_doubles(size_t i) const;

  // Attributes, with defaults for the optional ones; a missing required one is a UserError.
  bool has_attribute(const std::string& name) const;
  int64_t attr_int(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  double attr_float(const std::string& name, std::optional<double> fallback = std::nullopt) const;
  std::string attr_string(const std::string& name, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<std::string> attr_strings(const std::string& name, std::optional<std::vector<std::string>> fallback = std::nullopt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  std::vector<double> attr_floats(const std::string& name, std::optional<std::vector<double>> fallback = std::nullopt) const;
  Tensor attr_tensor(const std::string& name) const;

  // A UserError whose message names the node, op type, domain and opset, then `what`.
  [[noreturn]] void fail(const std::string& what) const;
  // "node 'conv1' (Conv, opset 13)": the prefix every error about this node carries.
  std::string describe() const;

 private:
  const onnx::AttributeProto* find_attribute(const std::string& name) const;
  const onnx::NodeProto& proto_;
  int64_t opset_;
  std::vector<std::optional<Tensor>> inputs_;
  std::string model_directory_;
};

// Builds the node's outputs (one Tensor per ONNX output; outputs the node does not produce may be
// left out at the end).
using OpBuilder = std::function<std::vector<Tensor>(const OnnxNode& node)>;

class OpRegistry {
 public:
  // Registers `builder` for op `name` in `domain` ("" = ai.onnx) from opset `since` on; a later
  // registration with a higher `since` takes over from that opset.
  void add(const std::string& name, OpBuilder builder, int64_t since = 1, const std::string& domain = "");
  // The builder for the op at the given opset, or nullptr.
  const OpBuilder* find(const std::string& domain, const std::string& name, int64_t opset) const;

 private:
  struct Versions {
    std::vector<std::pair<int64_t, OpBuilder>> by_since;  // sorted by since
  };
  std::unordered_map<std::string, Versions> ops_;  // key: domain + "::" + name
};

// Every op family registers itself here (ops_*.cpp each define one of these).
void register_elementwise_ops(OpRegistry& registry);
void register_reduce_ops(OpRegistry& registry);
void register_shape_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);
void register_attention_ops(OpRegistry& registry);  // Attention, RMSNormalization, RotaryEmbedding…
void register_loss_ops(OpRegistry& registry);       // losses, TopK, Scatter*, Einsum…
void register_recurrent_ops(OpRegistry& registry);  // RNN, GRU, LSTM
void register_misc_ops(OpRegistry& registry);       // ReverseSequence, Det, training optimizers

// The registry with every family registered.
const OpRegistry& default_registry();

// ONNX TensorProto → Tensor (initializers, Constant values, attributes): every data type kiln has,
// raw_data or typed fields, external data resolved only inside `model_directory`.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_directory);
// The kiln ScalarType of an ONNX TensorProto data type, or a UserError naming it.
ScalarType scalar_type_from_onnx(int32_t data_type);

}  // namespace kiln::onnx_import
