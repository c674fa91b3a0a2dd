// OnnxNode: what an op builder sees of one ONNX node — inputs as Tensors, typed attribute access with
// defaults, and errors that carry the node's name, op type, domain and opset.
#include "onnx/onnx_pb.h"
#include "op_registry.h"
#include "support/error.h"

namespace kiln::onnx_import {
namespace {

std::string attribute_type_name(int type) {
  if (onnx::AttributeProto_AttributeType_IsValid(type))
    return onnx::AttributeProto_AttributeType_Name(static_cast<onnx::AttributeProto_AttributeType>(type));
  return "unknown";
}

}  // namespace

OnnxNode::OnnxNode(const onnx::NodeProto& proto, int64_t opset, std::vector<std::optional<Tensor>> inputs,
                   std::string model_directory)
    : proto_(proto), opset_(opset), inputs_(std::move(inputs)), model_directory_(std::move(model_directory)) {}

size_t OnnxNode::output_count() const { return static_cast<size_t>(proto_.output_size()); }

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
  return str_cat(who, " (", op, ", opset ", opset_, ")");
}

void OnnxNode::fail(const std::string& what) const { throw UserError(str_cat(describe(), ": ", what)); }

const Tensor& OnnxNode::input(size_t i) const {
  if (!has_input(i)) fail(str_cat("input ", i, " is required but missing"));
  return *inputs_[i];
}

std::vector<int64_t> OnnxNode::input_ints(size_t i) const {
  const Tensor& value = input(i);
  if (value.dtype() == ScalarType::Float16 || value.dtype() == ScalarType::BFloat16 ||
      value.dtype() == ScalarType::Float32 || value.dtype() == ScalarType::Float64)
    fail(str_cat("input ", i, " must be an integer tensor here, not ", scalar_type_name(value.dtype())));
  return value.to_vector<int64_t>();
}

std::vector<double> OnnxNode::input_doubles(size_t i) const { return input(i).to_vector<double>(); }

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

}  // namespace kiln::onnx_import
