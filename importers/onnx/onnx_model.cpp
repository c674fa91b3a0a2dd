// Loading, validating and running an ONNX model (see onnx_model.h for the contract).
#include "onnx_model.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "ir/uop.h"
#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "support/error.h"

namespace kiln::onnx_import {
namespace {

std::string canonical_domain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

std::string domain_label(const std::string& domain) { return domain.empty() ? std::string("ai.onnx") : domain; }

// Why `bytes` is not a well-formed ModelProto, judged at the protobuf wire level with the
// library's own reader; empty when the wire format is fine. Only called after a failed parse, to
// tell "not ONNX at all" apart from "an ONNX file that was cut short".
std::string wire_diagnosis(const uint8_t* bytes, int size) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream input(bytes, size);
  const auto* descriptor = onnx::ModelProto::descriptor();
  bool first = true;
  while (true) {
    const int position = input.CurrentPosition();
    const uint32_t tag = input.ReadTag();
    if (tag == 0) {
      if (input.CurrentPosition() == size && position == size) return {};
      return first ? std::string("not an ONNX model (the data is not a protobuf message)")
                   : str_cat("not an ONNX model, or corrupt: invalid protobuf data at byte ", position);
    }
    const int field_number = static_cast<int>(tag >> 3);
    const auto* field = descriptor->FindFieldByNumber(field_number);
    if (first && field == nullptr)
      return str_cat("not an ONNX model (it starts with protobuf field ", field_number,
                     ", which an ONNX ModelProto does not have)");
    first = false;
    const std::string field_name = field != nullptr ? field->name() : str_cat("#", field_number);
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t length = 0;
      if (!input.ReadVarint32(&length)) return str_cat("the model is truncated (it ends inside field '", field_name, "')");
      const int remaining = size - input.CurrentPosition();
      if (length > static_cast<uint32_t>(remaining))
        return str_cat("the model is truncated: field '", field_name, "' needs ", length, " bytes but only ", remaining,
                       " remain (", size, " bytes in all)");
      input.Skip(static_cast<int>(length));
    } else if (!WireFormatLite::SkipField(&input, tag)) {
      return input.CurrentPosition() >= size
                 ? str_cat("the model is truncated (it ends inside field '", field_name, "')")
                 : str_cat("not an ONNX model, or corrupt: invalid protobuf data at byte ", position);
    }
  }
}

OnnxValueInfo value_info_from_proto(const onnx::ValueInfoProto& proto) {
  OnnxValueInfo info;
  info.name = proto.name();
  if (!proto.has_type()) return info;  // untyped: anything goes
  if (!proto.type().has_tensor_type()) {
    info.is_tensor = false;
    return info;
  }
  const auto& tensor_type = proto.type().tensor_type();
  info.elem_type = tensor_type.elem_type();
  if (is_narrow_type(info.elem_type)) {
    info.dtype = narrow_carrier(info.elem_type);
  } else if (tensor_type.elem_type() != onnx::TensorProto_DataType_UNDEFINED) {
    try {
      info.dtype = scalar_type_from_onnx(tensor_type.elem_type());
    } catch (const UserError& error) {
      throw UserError(str_cat("graph value '", proto.name(), "': ", error.what()));
    }
  }
  if (tensor_type.has_shape()) {
    std::vector<OnnxDim> dims;
    for (const auto& dim : tensor_type.shape().dim()) {
      OnnxDim entry;
      // Negative sizes appear in some exporters' output for "unknown"; treat them as unknown.
      if (dim.has_dim_value() && dim.dim_value() >= 0) entry.size = dim.dim_value();
      else if (dim.has_dim_param()) entry.symbol = dim.dim_param();
      dims.push_back(std::move(entry));
    }
    info.dims = std::move(dims);
  }
  return info;
}

std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? ", " : "", shape[i]);
  return text + ")";
}

bool element_count_fits(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) return false;
    count *= dim;
  }
  return true;
}

// Every value name a subgraph (If/Loop/Scan body, recursively) reads: an outer value read this way
// is a dependency of the node that owns the subgraph, even though it is not one of its inputs.
void collect_subgraph_reads(const onnx::NodeProto& node, std::vector<std::string>& names) {
  std::function<void(const onnx::GraphProto&)> visit = [&](const onnx::GraphProto& graph) {
    for (const auto& inner : graph.node()) {
      for (const auto& name : inner.input()) names.push_back(name);
      for (const auto& attribute : inner.attribute()) {
        if (attribute.has_g()) visit(attribute.g());
        for (const auto& g : attribute.graphs()) visit(g);
      }
    }
  };
  for (const auto& attribute : node.attribute()) {
    if (attribute.has_g()) visit(attribute.g());
    for (const auto& g : attribute.graphs()) visit(g);
  }
}

// The value names visible in a (sub)graph: its own, then those of the enclosing graphs.
struct Scope {
  std::unordered_set<std::string> names;
  const Scope* parent = nullptr;
  bool has(const std::string& name) const { return names.count(name) > 0 || (parent != nullptr && parent->has(name)); }
};

// A subgraph (If branch, Loop/Scan body) reads its own inputs, initializers and node outputs, and
// values of the enclosing graphs; any other name is a dangling input, reported at load time whether
// or not the op that owns the subgraph is supported. Depth is bounded by protobuf's parse limit.
void check_subgraph_reads(const onnx::GraphProto& graph, const Scope& outer, const std::string& where,
                          const std::function<std::string(const onnx::NodeProto&)>& describe) {
  Scope scope{{}, &outer};
  for (const auto& input : graph.input()) scope.names.insert(input.name());
  for (const auto& initializer : graph.initializer()) scope.names.insert(initializer.name());
  for (const auto& sparse : graph.sparse_initializer()) scope.names.insert(sparse.values().name());
  for (const auto& node : graph.node()) scope.names.insert(node.output().begin(), node.output().end());
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input())
      if (!name.empty() && !scope.has(name))
        throw UserError(str_cat(where, ": ", describe(node), ": input '", name,
                                "' is not a value of the subgraph or of an enclosing graph (dangling input)"));
    for (const auto& attribute : node.attribute()) {
      if (!attribute.has_g() && attribute.graphs_size() == 0) continue;
      const std::string inner = str_cat(where, ": ", describe(node), ", subgraph '", attribute.name(), "'");
      if (attribute.has_g()) check_subgraph_reads(attribute.g(), scope, inner, describe);
      for (const auto& g : attribute.graphs()) check_subgraph_reads(g, scope, inner, describe);
    }
  }
}

// ONNX's Constant: exactly one attribute holds the value.
Tensor constant_value(const OnnxNode& node, const onnx::NodeProto& proto) {
  if (proto.attribute_size() != 1)
    node.fail(str_cat("Constant needs exactly one value attribute, it has ", proto.attribute_size()));
  const std::string& name = proto.attribute(0).name();
  if (name == "value") {
    node.set_output_elem_type(0, proto.attribute(0).t().data_type());
    return node.attr_tensor("value");
  }
  if (name == "value_float") return Tensor::from_vector<float>({static_cast<float>(node.attr_float(name))}, {});
  if (name == "value_int") return Tensor::from_vector<int64_t>({node.attr_int(name)}, {});
  if (name == "value_floats") {
    std::vector<double> values = node.attr_floats(name);
    std::vector<float> narrowed(values.begin(), values.end());
    return Tensor::from_vector<float>(narrowed, {static_cast<int64_t>(narrowed.size())});
  }
  if (name == "value_ints") {
    std::vector<int64_t> values = node.attr_ints(name);
    return Tensor::from_vector<int64_t>(values, {static_cast<int64_t>(values.size())});
  }
  if (name == "value_string" || name == "value_strings") node.fail("string constants are not supported: kiln has no string dtype");
  if (name == "sparse_value") node.fail("sparse constants are not supported");
  node.fail(str_cat("unknown Constant attribute '", name, "'"));
}

// The narrow ONNX type of each input of a node (0 for inputs of a kiln dtype).
std::vector<int32_t> narrow_input_types(const onnx::NodeProto& proto,
                                        const std::unordered_map<std::string, int32_t>& narrow_types) {
  std::vector<int32_t> types;
  for (const auto& name : proto.input()) {
    auto found = narrow_types.find(name);
    types.push_back(found == narrow_types.end() ? 0 : found->second);
  }
  return types;
}

// A graph output the model declares as a narrow type must be produced as exactly that type (the
// carrier's bytes mean nothing otherwise), and one of a kiln dtype must not be a narrow value.
void check_narrow_output(const OnnxValueInfo& info, const std::unordered_map<std::string, int32_t>& narrow_types) {
  auto found = narrow_types.find(info.name);
  const int32_t produced = found == narrow_types.end() ? 0 : found->second;
  if (produced == 0 && !is_narrow_type(info.elem_type)) return;
  if (info.elem_type != 0 && produced != info.elem_type)
    throw UserError(str_cat("graph output '", info.name, "' is declared ", onnx_type_name(info.elem_type),
                            " but its node produces ", produced ? onnx_type_name(produced) : std::string("a kiln dtype")));
}

}  // namespace

OnnxModel::OnnxModel() : proto_(std::make_unique<onnx::ModelProto>()) {}
OnnxModel::OnnxModel(OnnxModel&&) noexcept = default;
OnnxModel& OnnxModel::operator=(OnnxModel&&) noexcept = default;
OnnxModel::~OnnxModel() = default;

OnnxModel OnnxModel::load_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error))
    throw UserError(str_cat("cannot open ONNX model '", path, "': ",
                            std::filesystem::exists(path, error) ? "not a regular file" : "no such file"));
  const uint64_t size = std::filesystem::file_size(path, error);
  if (error) throw UserError(str_cat("cannot read ONNX model '", path, "': ", error.message()));
  // protobuf refuses messages of 2 GiB or more; bigger models keep their weights as external data.
  if (size > static_cast<uint64_t>(INT_MAX))
    throw UserError(str_cat("ONNX model '", path, "' is ", size,
                            " bytes; models of 2 GB or more must store their weights as external data"));
  std::string bytes(static_cast<size_t>(size), '\0');
  std::ifstream stream(path, std::ios::binary);
  if (!stream.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw UserError(str_cat("cannot read ONNX model '", path, "'"));
  std::string directory = std::filesystem::path(path).parent_path().string();
  try {
    return load_buffer(bytes.data(), bytes.size(), directory.empty() ? std::string(".") : directory);
  } catch (const UserError& failure) {
    throw UserError(str_cat(path, ": ", failure.what()));
  }
}

OnnxModel OnnxModel::load_buffer(const void* data, size_t size, std::string model_directory) {
  if (size == 0) throw UserError("not an ONNX model: the data is empty");
  if (size > static_cast<size_t>(INT_MAX))
    throw UserError("models of 2 GB or more must store their weights as external data");
  OnnxModel model;
  model.model_directory_ = std::move(model_directory);
  if (!model.proto_->ParseFromArray(data, static_cast<int>(size))) {
    std::string why = wire_diagnosis(static_cast<const uint8_t*>(data), static_cast<int>(size));
    // The top level is well-formed, so a nested message is at fault.
    throw UserError(why.empty() ? std::string("not a valid ONNX model: a nested message does not parse (corrupt data, "
                                              "or subgraphs nested deeper than the parser's limit of 100 levels)")
                                : why);
  }
  if (!model.proto_->has_graph())
    throw UserError("not an ONNX model: the data parses as protobuf but holds no graph");
  const auto& graph = model.proto_->graph();
  if (graph.node_size() == 0 && graph.output_size() == 0)
    throw UserError("the ONNX model's graph is empty (no nodes and no outputs)");
  model.validate_and_index();
  return model;
}

std::optional<int64_t> OnnxModel::opset(const std::string& domain) const {
  auto found = opsets_.find(canonical_domain(domain));
  if (found == opsets_.end()) return std::nullopt;
  return found->second;
}

void OnnxModel::validate_and_index() {
  const auto& graph = proto_->graph();
  for (const auto& import : proto_->opset_import()) opsets_[canonical_domain(import.domain())] = import.version();
  // IR version 1-2 models predate opset_import and mean opset 1 of the default domain.
  if (proto_->opset_import_size() == 0 && proto_->ir_version() < 3) opsets_[""] = 1;

  if (graph.sparse_initializer_size() > 0) throw UserError("sparse initializers are not supported");
  for (const auto& initializer : graph.initializer()) {
    if (initializer.name().empty()) throw UserError("an initializer has no name");
    if (initializers_.count(initializer.name()))
      throw UserError(str_cat("initializer '", initializer.name(), "' is defined twice"));
    try {
      initializers_.emplace(initializer.name(), tensor_from_proto(initializer, model_directory_));
      if (is_narrow_type(initializer.data_type())) narrow_initializers_.emplace(initializer.name(), initializer.data_type());
    } catch (const UserError& error) {
      // "tensor 'w' has …" becomes "initializer 'w' has …", not "initializer 'w': tensor 'w' has …".
      const std::string message = error.what(), self = str_cat("tensor '", initializer.name(), "'");
      const std::string rest = message.rfind(self, 0) == 0 ? message.substr(self.size()) : str_cat(": ", message);
      throw UserError(str_cat("initializer '", initializer.name(), "'", rest));
    }
  }

  std::unordered_set<std::string> available;  // values that exist before any node runs
  for (const auto& input : graph.input()) {
    if (input.name().empty()) throw UserError("a graph input has no name");
    if (!available.insert(input.name()).second) throw UserError(str_cat("graph input '", input.name(), "' is listed twice"));
    inputs_.push_back(value_info_from_proto(input));
    inputs_.back().has_initializer = initializers_.count(input.name()) > 0;
  }
  for (const auto& [name, tensor] : initializers_) available.insert(name);
  std::unordered_set<std::string> output_names;
  for (const auto& output : graph.output()) {
    if (output.name().empty()) throw UserError("a graph output has no name");
    if (!output_names.insert(output.name()).second)
      throw UserError(str_cat("graph output '", output.name(), "' is listed twice"));
    outputs_.push_back(value_info_from_proto(output));
  }

  // Who produces each value; a value has exactly one producer (ONNX graphs are SSA).
  const int node_count = graph.node_size();
  auto describe = [&](int index) {
    const auto& node = graph.node(index);
    return OnnxNode(node, opset(node.domain()).value_or(0), {}, model_directory_).describe();
  };
  std::unordered_map<std::string, int> producer;
  for (int index = 0; index < node_count; ++index) {
    for (const auto& name : graph.node(index).output()) {
      if (name.empty()) continue;
      if (available.count(name))
        throw UserError(str_cat(describe(index), ": output '", name, "' has the name of a graph input or initializer"));
      auto [it, inserted] = producer.emplace(name, index);
      if (!inserted && it->second == index)
        throw UserError(str_cat(describe(index), ": output '", name, "' is listed twice among the node's outputs"));
      if (!inserted)
        throw UserError(str_cat(describe(index), ": output '", name, "' is also produced by ", describe(it->second)));
    }
  }

  Scope top_level{available, nullptr};
  for (const auto& [name, index] : producer) top_level.names.insert(name);
  auto describe_proto = [&](const onnx::NodeProto& node) {
    return OnnxNode(node, opset(node.domain()).value_or(0), {}, model_directory_).describe();
  };
  for (int index = 0; index < node_count; ++index)
    for (const auto& attribute : graph.node(index).attribute()) {
      if (!attribute.has_g() && attribute.graphs_size() == 0) continue;
      const std::string where = str_cat(describe(index), ", subgraph '", attribute.name(), "'");
      if (attribute.has_g()) check_subgraph_reads(attribute.g(), top_level, where, describe_proto);
      for (const auto& g : attribute.graphs()) check_subgraph_reads(g, top_level, where, describe_proto);
    }

  // Kahn's algorithm, smallest index first, so a model already in order keeps its order.
  std::vector<std::vector<int>> consumers(static_cast<size_t>(node_count));
  std::vector<int> pending(static_cast<size_t>(node_count), 0);
  for (int index = 0; index < node_count; ++index) {
    const auto& node = graph.node(index);
    std::set<int> dependencies;
    for (const auto& name : node.input()) {
      if (name.empty() || available.count(name)) continue;
      auto found = producer.find(name);
      if (found == producer.end())
        throw UserError(str_cat(describe(index), ": input '", name,
                                "' is not a graph input, an initializer or the output of any node (dangling input)"));
      dependencies.insert(found->second);
    }
    std::vector<std::string> subgraph_reads;
    collect_subgraph_reads(node, subgraph_reads);
    for (const auto& name : subgraph_reads) {
      auto found = producer.find(name);
      if (found != producer.end() && found->second != index) dependencies.insert(found->second);
    }
    for (int dependency : dependencies) consumers[static_cast<size_t>(dependency)].push_back(index);
    pending[static_cast<size_t>(index)] = static_cast<int>(dependencies.size());
  }
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int index = 0; index < node_count; ++index)
    if (pending[static_cast<size_t>(index)] == 0) ready.push(index);
  while (!ready.empty()) {
    int index = ready.top();
    ready.pop();
    node_order_.push_back(index);
    for (int consumer : consumers[static_cast<size_t>(index)])
      if (--pending[static_cast<size_t>(consumer)] == 0) ready.push(consumer);
  }
  if (static_cast<int>(node_order_.size()) != node_count) {
    // Every node left waits, directly or not, on itself: name the first one and what it waits for.
    for (int index = 0; index < node_count; ++index) {
      if (pending[static_cast<size_t>(index)] == 0) continue;
      for (const auto& name : graph.node(index).input()) {
        auto found = producer.find(name);
        if (found != producer.end() && pending[static_cast<size_t>(found->second)] > 0)
          throw UserError(str_cat("the graph has a cycle: ", describe(index), " needs '", name, "' from ",
                                  describe(found->second), ", which depends on it in turn"));
      }
      throw UserError(str_cat("the graph has a cycle through ", describe(index)));
    }
  }

  for (const auto& output : outputs_)
    if (!available.count(output.name) && !producer.count(output.name))
      throw UserError(str_cat("graph output '", output.name, "' is not produced by any node, input or initializer"));
}

std::unordered_map<std::string, Tensor> OnnxModel::bind_inputs(
    const std::vector<std::pair<std::string, Tensor>>& given) const {
  std::unordered_map<std::string, Tensor> bound;
  for (const auto& [name, tensor] : given) {
    auto known = std::find_if(inputs_.begin(), inputs_.end(), [&](const auto& info) { return info.name == name; });
    if (known == inputs_.end()) {
      std::string expected;
      for (size_t i = 0; i < inputs_.size(); ++i)
        if (!inputs_[i].has_initializer) expected += str_cat(expected.empty() ? "" : ", ", "'", inputs_[i].name, "'");
      throw UserError(str_cat("the model has no input named '", name, "' (its inputs: ", expected, ")"));
    }
    if (!tensor.defined()) throw UserError(str_cat("input '", name, "' is an empty Tensor handle"));
    if (!bound.emplace(name, tensor).second) throw UserError(str_cat("input '", name, "' is given twice"));
  }

  std::unordered_map<std::string, std::pair<int64_t, std::string>> symbols;  // dim_param → (size, input)
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const OnnxValueInfo& info = inputs_[i];
    auto found = bound.find(info.name);
    if (found == bound.end()) {
      if (info.has_initializer) continue;  // the initializer is the default value
      throw UserError(str_cat("input '", info.name, "' is required but was not given"));
    }
    const Tensor& tensor = found->second;
    if (!info.is_tensor) throw UserError(str_cat("input '", info.name, "' is not a tensor; only tensor inputs are supported"));
    if (info.dtype && *info.dtype != tensor.dtype())
      throw UserError(str_cat("input '", info.name, "' has dtype ", scalar_type_name(tensor.dtype()),
                              " but the model expects ", scalar_type_name(*info.dtype)));
    if (!info.dims) continue;
    const Shape& shape = tensor.shape();
    if (shape.size() != info.dims->size())
      throw UserError(str_cat("input '", info.name, "' has rank ", shape.size(), " ", shape_text(shape),
                              " but the model expects rank ", info.dims->size()));
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      const OnnxDim& dim = (*info.dims)[axis];
      if (dim.size && *dim.size != shape[axis])
        throw UserError(str_cat("input '", info.name, "' has shape ", shape_text(shape), " but the model fixes dimension ",
                                axis, " to ", *dim.size));
      if (!dim.symbol.empty()) {
        auto [it, inserted] = symbols.emplace(dim.symbol, std::make_pair(shape[axis], info.name));
        if (!inserted && it->second.first != shape[axis])
          throw UserError(str_cat("dimension '", dim.symbol, "' is ", it->second.first, " in input '", it->second.second,
                                  "' but ", shape[axis], " in input '", info.name, "'"));
      }
    }
  }
  return bound;
}

std::vector<std::pair<std::string, Tensor>> OnnxModel::run(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                           const OpRegistry& registry) const {
  std::vector<std::pair<std::string, Tensor>> outputs = build(inputs, registry);
  std::vector<Tensor*> to_realize;
  for (auto& [name, tensor] : outputs) to_realize.push_back(&tensor);
  Tensor::realize_all(to_realize);
  return outputs;
}

std::vector<std::pair<std::string, Tensor>> OnnxModel::build(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                             const OpRegistry& registry) const {
  std::unordered_map<std::string, Tensor> values = initializers_;
  for (auto& [name, tensor] : bind_inputs(inputs)) values.insert_or_assign(name, tensor);
  // ONNX types of the values whose type kiln has no dtype for (narrow_types.h).
  std::unordered_map<std::string, int32_t> narrow_types = narrow_initializers_;
  for (const auto& info : inputs_)
    if (is_narrow_type(info.elem_type)) narrow_types.insert_or_assign(info.name, info.elem_type);

  const auto& graph = proto_->graph();
  for (int index : node_order_) {
    const onnx::NodeProto& proto = graph.node(index);
    const std::string domain = canonical_domain(proto.domain());
    std::optional<int64_t> node_opset = opset(domain);

    std::vector<std::optional<Tensor>> node_inputs;
    for (const auto& name : proto.input()) {
      if (name.empty()) {
        node_inputs.emplace_back();
        continue;
      }
      auto found = values.find(name);
      if (found == values.end())
        OnnxNode(proto, node_opset.value_or(0), {}, model_directory_)
            .fail(str_cat("input '", name, "' was not produced: its node returned fewer outputs than the model uses"));
      node_inputs.emplace_back(found->second);
    }
    OnnxNode node(proto, node_opset.value_or(0), std::move(node_inputs), model_directory_);
    node.set_narrow_input_types(narrow_input_types(proto, narrow_types));
    if (!node_opset)
      node.fail(str_cat("the model imports no opset for domain '", domain_label(domain), "'"));

    // Every UOp this node's builder creates is tagged with the node, so errors and profiles made
    // much later (scheduling, codegen) still point back into the model.
    ProvenanceScope provenance(node.describe());
    std::vector<Tensor> results;
    try {
      if (domain.empty() && proto.op_type() == "Constant") {
        results.push_back(constant_value(node, proto));
      } else {
        const OpBuilder* builder = registry.find(domain, proto.op_type(), *node_opset);
        if (builder == nullptr)
          node.fail(str_cat("unsupported op '", proto.op_type(), "' (domain '", domain_label(domain), "', opset ",
                            *node_opset, ")"));
        results = (*builder)(node);
      }
    } catch (const Error& error) {
      // Tensor-level errors (shapes that do not broadcast, …) do not know the node: add it.
      const std::string prefix = node.describe();
      if (std::string_view(error.what()).substr(0, prefix.size()) == prefix) throw;
      throw UserError(str_cat(prefix, ": ", error.what()));
    }
    if (auto input = node.unexpected_narrow_input())
      node.fail(str_cat("unsupported: input ", *input, " has ONNX type ", onnx_type_name(node.input_elem_type(*input)),
                        ", which kiln has no dtype for and this op does not take"));
    if (results.size() > static_cast<size_t>(proto.output_size()))
      throw_internal_error(str_cat(node.describe(), ": the builder returned ", results.size(), " outputs but the node has ",
                                   proto.output_size()));
    for (size_t i = 0; i < results.size(); ++i) {
      const std::string& name = proto.output(static_cast<int>(i));
      if (name.empty()) continue;
      if (!results[i].defined()) continue;  // an optional output the builder does not produce
      // A hostile shape (ConstantOfShape of 2^40 x 2^40 x 2^40, …) must stop here, before any
      // later stage multiplies its dimensions.
      if (!element_count_fits(results[i].shape()))
        node.fail(str_cat("output '", name, "' would have shape ", shape_text(results[i].shape()),
                          ", more elements than fit in 64 bits"));
      values.insert_or_assign(name, std::move(results[i]));
      if (int32_t type = node.narrow_output_type(i)) narrow_types.insert_or_assign(name, type);
      else narrow_types.erase(name);
    }
  }

  std::vector<std::pair<std::string, Tensor>> outputs;
  for (const auto& info : outputs_) {
    auto found = values.find(info.name);
    if (found == values.end())
      throw UserError(str_cat("graph output '", info.name, "' was not produced (its node returned fewer outputs)"));
    check_narrow_output(info, narrow_types);
    outputs.emplace_back(info.name, found->second);
  }
  return outputs;
}

}  // namespace kiln::onnx_import
