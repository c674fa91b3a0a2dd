// The ONNX operator tables: each op family file (ops_*.cpp) registers builders that turn one ONNX
// node into Tensor operations. A builder sees the node through OnnxNode: its inputs as Tensors,
// its attributes with defaults, and the opset the model imports for the node's domain, so that
// one builder can follow an op's changes across opsets (attributes that became inputs, etc.).
//
// Constant folding of shape subgraphs happens by itself: every Tensor is lazy and computable, so a
// builder that needs values (Reshape's shape, Slice's starts) asks for them with input_ints(), which
// realizes that small tensor. Shape/Gather/Concat chains over static shapes therefore fold at
// import time. Over symbolic shapes they fold into size expressions instead (shape_values.h), which
// builders that take a shape read with input_dims().
//
// Values are OnnxValues (onnx_value.h): tensors for almost every op; sequences and optionals for
// the sequence/optional ops and control flow, which register with add_value_op. If/Loop/Scan bodies
// are evaluated through OnnxNode::run_graph, a hook into the model's graph evaluator that sees the
// values of the scope the node lives in (subgraphs read outer names directly).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/kiln.hpp"
#include "onnx_value.h"
#include "tensor/dim.h"

namespace onnx {
class NodeProto;
class AttributeProto;
class TensorProto;
class GraphProto;
class TypeProto;
}  // namespace onnx

namespace kiln::onnx_import {

// Evaluates a subgraph with the given inputs (bound to the subgraph's inputs by position) and
// returns its outputs; names the subgraph does not define are looked up in the enclosing scopes.
using GraphRunner = std::function<std::vector<OnnxValue>(const onnx::GraphProto& graph,
                                                         const std::vector<OnnxValue>& inputs)>;

class OnnxNode {
 public:
  OnnxNode(const onnx::NodeProto& proto, int64_t opset, std::vector<std::optional<OnnxValue>> inputs,
           std::string model_directory, GraphRunner graph_runner = {});

  const std::string& name() const;
  const std::string& op_type() const;
  const std::string& domain() const;  // "" for ai.onnx
  int64_t opset() const { return opset_; }

  // How many outputs the node declares (trailing optional outputs may be left out of the model).
  size_t output_count() const;
  // The name of output i in the model ("" for an omitted optional output): unique in the graph.
  const std::string& output_name(size_t i) const;

  // Inputs: an empty input name (an omitted optional input) is nullopt.
  size_t input_count() const { return inputs_.size(); }
  bool has_input(size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
  // The input, or a UserError naming the node when it is missing or not a tensor.
  const Tensor& input(size_t i) const;
  // The input as any kind of value (tensor, sequence, optional), or a UserError when missing.
  const OnnxValue& input_value(size_t i) const;
  // The values of a (small) input as integers / doubles: realizes it (a shape value whose elements
  // are all known is read from them instead). For shape-like inputs.
  std::vector<int64_t> input_ints(size_t i) const;
  std::vector<double> input_doubles(size_t i) const;
  // A shape-like input as Dims: a shape value's (shape_values.h: computed from a symbolic shape, its
  // elements are size expressions), otherwise input_ints.
  Dims input_dims(size_t i) const;

  // Attributes, with defaults for the optional ones; a missing required one is a UserError.
  bool has_attribute(const std::string& name) const;
  int64_t attr_int(const std::string& name, std::optional<int64_t> fallback = std::nullopt) const;
  double attr_float(const std::string& name, std::optional<double> fallback = std::nullopt) const;
  std::string attr_string(const std::string& name, std::optional<std::string> fallback = std::nullopt) const;
  std::vector<std::string> attr_strings(const std::string& name, std::optional<std::vector<std::string>> fallback = std::nullopt) const;
  std::vector<int64_t> attr_ints(const std::string& name, std::optional<std::vector<int64_t>> fallback = std::nullopt) const;
  std::vector<double> attr_floats(const std::string& name, std::optional<std::vector<double>> fallback = std::nullopt) const;
  Tensor attr_tensor(const std::string& name) const;
  // A GRAPH attribute (If's branches, Loop/Scan bodies) and a TYPE_PROTO one (Optional's type).
  const onnx::GraphProto& attr_graph(const std::string& name) const;
  const onnx::TypeProto& attr_type(const std::string& name) const;

  // Evaluates a subgraph of this node (see GraphRunner) in the scope the node lives in; errors
  // inside it name the subgraph's own nodes.
  std::vector<OnnxValue> run_graph(const onnx::GraphProto& graph, const std::vector<OnnxValue>& inputs) const;

  // ONNX element types (TensorProto data type numbers). Types kiln has no dtype for (float8, int4…,
  // see narrow_types.h) travel as u8/i8 carrier tensors; the model tracks their ONNX type. A
  // builder that accepts them asks input_elem_type() (which also marks the input as understood:
  // a narrow input no builder asked about fails the node) and declares narrow outputs with
  // set_output_elem_type(); undeclared outputs are of their kiln dtype.
  int32_t input_elem_type(size_t i) const;
  void set_output_elem_type(size_t i, int32_t type) const;
  // Set by the model: the narrow ONNX type of each input, 0 for inputs of a kiln dtype.
  void set_narrow_input_types(std::vector<int32_t> types) { narrow_inputs_ = std::move(types); }
  // The narrow type a builder declared for output i, or 0.
  int32_t narrow_output_type(size_t i) const;
  // The first narrow input the builder did not ask about, if any.
  std::optional<size_t> unexpected_narrow_input() const;

  // Set by the model for a Conv whose output feeds one pointwise conv (pointwise_readers.h): that
  // conv's filter count, else 0. Conv builders pass it on as ConvOptions::pointwise_reader_filters.
  void set_pointwise_reader_filters(int64_t filters) { pointwise_reader_filters_ = filters; }
  int64_t pointwise_reader_filters() const { return pointwise_reader_filters_; }

  // A UserError whose message names the node, op type, domain and opset, then `what`.
  [[noreturn]] void fail(const std::string& what) const;
  // "node 'conv1' (Conv, opset 13)": the prefix every error about this node carries.
  std::string describe() const;

 private:
  const onnx::AttributeProto* find_attribute(const std::string& name) const;
  const onnx::AttributeProto& required_attribute(const std::string& name, int expected_type) const;
  const onnx::NodeProto& proto_;
  int64_t opset_;
  std::vector<std::optional<OnnxValue>> inputs_;
  std::string model_directory_;
  std::vector<int32_t> narrow_inputs_;
  int64_t pointwise_reader_filters_ = 0;
  // Builders see a const node; what they learn and declare about element types is recorded here.
  mutable std::vector<bool> narrow_input_understood_;
  mutable std::vector<int32_t> narrow_outputs_;
  GraphRunner graph_runner_;
};

// Builds the node's outputs (one Tensor per ONNX output; outputs the node does not produce may be
// left out at the end).
using OpBuilder = std::function<std::vector<Tensor>(const OnnxNode& node)>;
// The same for ops whose outputs may be sequences or optionals (sequence ops, control flow).
using ValueOpBuilder = std::function<std::vector<OnnxValue>(const OnnxNode& node)>;

class OpRegistry {
 public:
  // Registers `builder` for op `name` in `domain` ("" = ai.onnx) from opset `since` on; a later
  // registration with a higher `since` takes over from that opset.
  void add(const std::string& name, OpBuilder builder, int64_t since = 1, const std::string& domain = "");
  void add_value_op(const std::string& name, ValueOpBuilder builder, int64_t since = 1, const std::string& domain = "");
  // The builder for the op at the given opset, or nullptr (tensor builders are wrapped).
  const ValueOpBuilder* find(const std::string& domain, const std::string& name, int64_t opset) const;

 private:
  struct Versions {
    std::vector<std::pair<int64_t, ValueOpBuilder>> by_since;  // sorted by since
  };
  std::unordered_map<std::string, Versions> ops_;  // key: domain + "::" + name
};

// Every op family registers itself here (ops_*.cpp each define one of these).
void register_elementwise_ops(OpRegistry& registry);
void register_reduce_ops(OpRegistry& registry);
void register_shape_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);
void register_resize_ops(OpRegistry& registry);     // Resize, Upsample
void register_attention_ops(OpRegistry& registry);  // Attention, RMSNormalization, RotaryEmbedding…
void register_loss_ops(OpRegistry& registry);       // losses, TopK, Scatter*, Einsum…
void register_quant_ops(OpRegistry& registry);      // Cast, CastLike, BitCast, (De)QuantizeLinear, Q* ops
void register_signal_ops(OpRegistry& registry);     // DFT, STFT, windows, MelWeightMatrix
void register_data_dependent_ops(OpRegistry& registry);  // NonZero, Unique, Compress, TfIdfVectorizer
void register_preview_ops(OpRegistry& registry);    // SwiGLU, TensorScatter, LinearAttention, CausalConvWithState
void register_spatial_ops(OpRegistry& registry);    // GridSample, RoiAlign, DeformConv, NonMaxSuppression…
void register_control_ops(OpRegistry& registry);    // If, Loop, Scan, Sequence*, Optional*
void register_recurrent_ops(OpRegistry& registry);  // RNN, GRU, LSTM
void register_misc_ops(OpRegistry& registry);       // ReverseSequence, Det, training optimizers
// ai.onnx.ml (the ops scikit-learn models export through skl2onnx)
void register_ml_linear_ops(OpRegistry& registry);      // LinearClassifier, LinearRegressor
void register_ml_tree_ops(OpRegistry& registry);        // TreeEnsembleClassifier/Regressor, TreeEnsemble
void register_ml_preprocess_ops(OpRegistry& registry);  // Scaler, Normalizer, OneHotEncoder, ZipMap…

// The registry with every family registered.
const OpRegistry& default_registry();

// ONNX TensorProto → Tensor (initializers, Constant values, attributes): every data type kiln has,
// raw_data or typed fields, external data resolved only inside `model_directory`.
Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& model_directory);
// The kiln ScalarType of an ONNX TensorProto data type, or a UserError naming it.
ScalarType scalar_type_from_onnx(int32_t data_type);

}  // namespace kiln::onnx_import
