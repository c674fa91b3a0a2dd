// OnnxNode: what an op builder sees of one ONNX node — inputs as Tensors, typed attribute access with
// defaults, and errors that carry the node's name, op type, domain and opset.
#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "op_registry.h"
#include "shape_values.h"
#include "support/error.h"
#include "tensor/tensor_data.h"

namespace kiln::onnx_import {
namespace {

std::string attribute_type_name(int type) {
  if (onnx::AttributeProto_AttributeType_IsValid(type))
    return onnx::AttributeProto_AttributeType_Name(static_cast<onnx::AttributeProto_AttributeType>(type));
  return "unknown";
}

}  // namespace

OnnxNode::OnnxNode(const onnx::NodeProto& proto, int64_t opset, std::vector<std::optional<OnnxValue>> inputs,
                   std::string model_directory, GraphRunner graph_runner)
    : proto_(proto),
      opset_(opset),
      inputs_(std::move(inputs)),
      model_directory_(std::move(model_directory)),
      graph_runner_(std::move(graph_runner)) {}

size_t OnnxNode::output_count() const { return static_cast<size_t>(proto_.output_size()); }
const std::string& OnnxNode::output_name(size_t i) const { return proto_.output(static_cast<int>(i)); }

const std::string& OnnxNode::name() const { return proto_.name(); }
const std::string& OnnxNode::op_type() const { return proto_.op_type(); }
const std::string& OnnxNode::domain() const { return proto_.domain(); }

std::string OnnxNode::describe() const {
  // Unnamed nodes are common in exported models; an output name identifies them instead (the
  // first one given: optional outputs may be left empty, as LSTM's Y often is).
  std::string who = "unnamed node";
  if (!proto_.name().empty()) {
    who = str_cat("node '", proto_.name(), "'");
  } else {
    for (const auto& output : proto_.output())
      if (!output.empty()) {
        who = str_cat("unnamed node producing '", output, "'");
        break;
      }
  }
  std::string op = proto_.domain().empty() || proto_.domain() == "ai.onnx"
                       ? proto_.op_type()
                       : str_cat(proto_.domain(), ".", proto_.op_type());
  // Opset 0: the model imports no opset for the node's domain (the error that follows says so).
  return str_cat(who, " (", op, opset_ > 0 ? str_cat(", opset ", opset_) : std::string(", no opset"), ")");
}

void OnnxNode::fail(const std::string& what) const { throw UserError(str_cat(describe(), ": ", what)); }

const OnnxValue& OnnxNode::input_value(size_t i) const {
  if (!has_input(i)) fail(str_cat("input ", i, " is required but missing"));
  return *inputs_[i];
}

const Tensor& OnnxNode::input(size_t i) const {
  const OnnxValue& value = input_value(i);
  if (!value.is_tensor()) fail(str_cat("input ", i, " is a ", value.kind_name(), "; this op needs a tensor"));
  return value.tensor();
}

namespace {

// Reads a parameter (a reduction's axes, Pad's pads, a Resize's scales) with `read`. When the
// parameter is a graph input itself, fed by the caller, a plan cannot know it at compile time: the
// error then says that it is a parameter and how to compile for one value of it (`kiln compile
// --value`, docs/symbolic-shapes.md decision 19). A parameter computed from inputs keeps the plain
// error: pinning the inputs it is computed from would pin data.
template <class Read>
auto read_parameter(const Tensor& value, Read&& read) {
  try {
    return read();
  } catch (const UserError&) {
    const std::string& name = value.defined() ? value.data().graph_input_name : std::string();
    if (name.empty()) throw;
    throw UserError(str_cat("the value of graph input '", name,
                            "' is needed at compile time as a parameter of this node (it is only known when the plan "
                            "runs; `kiln compile --value ", name, "=V,...` compiles the plan for one value of it)"));
  }
}

}  // namespace

std::vector<int64_t> OnnxNode::input_ints(size_t i) const {
  const Tensor& value = input(i);
  if (value.dtype() == ScalarType::Float16 || value.dtype() == ScalarType::BFloat16 ||
      value.dtype() == ScalarType::Float32 || value.dtype() == ScalarType::Float64)
    fail(str_cat("input ", i, " must be an integer tensor here, not ", scalar_type_name(value.dtype())));
  // A shape value whose elements are all known (a channel count gathered from the shape of a
  // tensor with a symbolic batch) is read from its Dims: the tensor itself is computed from the
  // whole shape, variables included, and cannot be realized now.
  if (std::optional<Dims> values = shape_value_of(value); values && all_known(*values)) return known_sizes(*values);
  return read_parameter(value, [&] { return value.to_vector<int64_t>(); });
}

std::vector<double> OnnxNode::input_doubles(size_t i) const {
  const Tensor& value = input(i);
  return read_parameter(value, [&] { return value.to_vector<double>(); });
}

Dims OnnxNode::input_dims(size_t i) const {
  if (std::optional<Dims> values = shape_value_of(input(i))) return *values;
  return to_dims(input_ints(i));
}

const onnx::AttributeProto* OnnxNode::find_attribute(const std::string& name) const {
  for (const auto& attribute : proto_.attribute())
    if (attribute.name() == name) return &attribute;
  return nullptr;
}

bool OnnxNode::has_attribute(const std::string& name) const { return find_attribute(name) != nullptr; }

// One accessor per attribute kind: the attribute when present (type-checked), else the fallback,
// else an error naming the missing required attribute.
#define KILN_ATTRIBUTE_LOOKUP(expected_type, fallback)                                                   \
  const onnx::AttributeProto* attribute = find_attribute(name);                                           \
  if (attribute == nullptr) {                                                                             \
    if (fallback) return *fallback;                                                                       \
    fail(str_cat("required attribute '", name, "' is missing"));                                         \
  }                                                                                                       \
  if (attribute->type() != onnx::AttributeProto_AttributeType_##expected_type)                            \
    fail(str_cat("attribute '", name, "' must be " #expected_type ", not ", attribute_type_name(attribute->type())))

int64_t OnnxNode::attr_int(const std::string& name, std::optional<int64_t> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(INT, fallback);
  return attribute->i();
}

double OnnxNode::attr_float(const std::string& name, std::optional<double> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(FLOAT, fallback);
  return attribute->f();
}

std::string OnnxNode::attr_string(const std::string& name, std::optional<std::string> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(STRING, fallback);
  return attribute->s();
}

std::vector<std::string> OnnxNode::attr_strings(const std::string& name,
                                                std::optional<std::vector<std::string>> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(STRINGS, fallback);
  return {attribute->strings().begin(), attribute->strings().end()};
}

std::vector<int64_t> OnnxNode::attr_ints(const std::string& name, std::optional<std::vector<int64_t>> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(INTS, fallback);
  return {attribute->ints().begin(), attribute->ints().end()};
}

std::vector<double> OnnxNode::attr_floats(const std::string& name, std::optional<std::vector<double>> fallback) const {
  KILN_ATTRIBUTE_LOOKUP(FLOATS, fallback);
  return {attribute->floats().begin(), attribute->floats().end()};
}

Tensor OnnxNode::attr_tensor(const std::string& name) const {
  std::optional<Tensor> no_fallback;
  KILN_ATTRIBUTE_LOOKUP(TENSOR, no_fallback);
  try {
    return tensor_from_proto(attribute->t(), model_directory_);
  } catch (const UserError& error) {
    fail(str_cat("attribute '", name, "': ", error.what()));
  }
}

#undef KILN_ATTRIBUTE_LOOKUP

int32_t OnnxNode::input_elem_type(size_t i) const {
  const Tensor& value = input(i);
  if (i < narrow_inputs_.size() && narrow_inputs_[i] != 0) {
    narrow_input_understood_.resize(narrow_inputs_.size(), false);
    narrow_input_understood_[i] = true;
    return narrow_inputs_[i];
  }
  return onnx_type_of(value.dtype());
}

void OnnxNode::set_output_elem_type(size_t i, int32_t type) const {
  if (!is_narrow_type(type)) return;  // a kiln dtype: the tensor says it already
  if (narrow_outputs_.size() <= i) narrow_outputs_.resize(i + 1, 0);
  narrow_outputs_[i] = type;
}

int32_t OnnxNode::narrow_output_type(size_t i) const { return i < narrow_outputs_.size() ? narrow_outputs_[i] : 0; }

std::optional<size_t> OnnxNode::unexpected_narrow_input() const {
  for (size_t i = 0; i < narrow_inputs_.size(); ++i)
    if (narrow_inputs_[i] != 0 && (i >= narrow_input_understood_.size() || !narrow_input_understood_[i])) return i;
  return std::nullopt;
}

// Graph and type attributes have no default: a missing one is always an error.
const onnx::AttributeProto& OnnxNode::required_attribute(const std::string& name, int expected_type) const {
  const onnx::AttributeProto* attribute = find_attribute(name);
  if (attribute == nullptr) fail(str_cat("required attribute '", name, "' is missing"));
  if (attribute->type() != expected_type)
    fail(str_cat("attribute '", name, "' must be ", attribute_type_name(expected_type), ", not ",
                 attribute_type_name(attribute->type())));
  return *attribute;
}

const onnx::GraphProto& OnnxNode::attr_graph(const std::string& name) const {
  return required_attribute(name, onnx::AttributeProto_AttributeType_GRAPH).g();
}

const onnx::TypeProto& OnnxNode::attr_type(const std::string& name) const {
  return required_attribute(name, onnx::AttributeProto_AttributeType_TYPE_PROTO).tp();
}

std::vector<OnnxValue> OnnxNode::run_graph(const onnx::GraphProto& graph, const std::vector<OnnxValue>& inputs) const {
  if (!graph_runner_) throw_internal_error(str_cat(describe(), ": no graph evaluator was given to this node"));
  if (static_cast<size_t>(graph.input_size()) != inputs.size())
    fail(str_cat("subgraph '", graph.name(), "' declares ", graph.input_size(), " inputs but the op gives it ",
                 inputs.size()));
  return graph_runner_(graph, inputs);
}

}  // namespace kiln::onnx_import
