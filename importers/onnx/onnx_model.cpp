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
#include <stdexcept>
#include <unordered_set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "ir/uop.h"
#include "conv_batchnorm.h"
#include "pointwise_readers.h"
#include "qdq_pairs.h"
#include "narrow_types.h"
#include "onnx/onnx_pb.h"
#include "op_helpers.h"
#include "shape_values.h"
#include "support/error.h"
#include "support/large_stack.h"
#include "support/limits.h"

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

// A sequence or optional type: which kind of value it is, and the dtype of the tensors inside.
void read_container_type(const onnx::ValueInfoProto& proto, OnnxValueInfo& info) {
  info.is_tensor = false;
  const onnx::TypeProto* inner = &proto.type();
  if (inner->has_optional_type()) {
    info.kind = OnnxValue::Kind::Optional;
    inner = &inner->optional_type().elem_type();
    if (inner->has_sequence_type()) info.optional_element = OnnxValue::Kind::Sequence;
  } else if (inner->has_sequence_type()) {
    info.kind = OnnxValue::Kind::Sequence;
  } else {
    info.supported_kind = false;  // maps, sparse tensors
    return;
  }
  if (inner->has_sequence_type()) inner = &inner->sequence_type().elem_type();
  if (!inner->has_tensor_type()) {
    info.supported_kind = false;  // sequences of sequences or maps, optionals of maps
    return;
  }
  if (inner->tensor_type().elem_type() == onnx::TensorProto_DataType_UNDEFINED) return;
  try {
    info.dtype = scalar_type_from_onnx(inner->tensor_type().elem_type());
  } catch (const UserError& error) {
    throw UserError(str_cat("graph value '", proto.name(), "': ", error.what()));
  }
}

OnnxValueInfo value_info_from_proto(const onnx::ValueInfoProto& proto) {
  OnnxValueInfo info;
  info.name = proto.name();
  if (!proto.has_type() || proto.type().value_case() == onnx::TypeProto::VALUE_NOT_SET)
    return info;  // untyped: anything goes
  info.typed = true;
  if (!proto.type().has_tensor_type()) {
    read_container_type(proto, info);
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

// "(2, 3)", "(5)", "(batch, 8)": a shape in this file's messages.
std::string shape_text(const Dims& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += str_cat(i ? ", " : "", shape[i]);
  return text + ")";
}

// The value names visible in a (sub)graph at load time: its own, then those of the enclosing graphs.
struct NameScope {
  std::unordered_set<std::string> names;
  const NameScope* parent = nullptr;
  bool has(const std::string& name) const { return names.count(name) > 0 || (parent != nullptr && parent->has(name)); }
};

// A subgraph (If branch, Loop/Scan body) reads its own inputs, initializers and node outputs, and
// values of the enclosing graphs; any other name is a dangling input, reported at load time whether
// or not the subgraph is ever built. `depth` is this subgraph's nesting level (1: a subgraph of the
// main graph); a level past limits::kMaxSubgraphNesting is refused here, before anything recurses
// through it again.
void check_subgraph_reads(const onnx::GraphProto& graph, const NameScope& outer, const std::string& where,
                          const std::function<std::string(const onnx::NodeProto&)>& describe, int depth) {
  if (depth > limits::kMaxSubgraphNesting)
    throw UserError(str_cat(where, ": subgraphs are nested ", depth, " levels deep, more than kiln's limit of ",
                            limits::kMaxSubgraphNesting, " (docs/limits.md)"));
  NameScope scope{{}, &outer};
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
      if (attribute.has_g()) check_subgraph_reads(attribute.g(), scope, inner, describe, depth + 1);
      for (const auto& g : attribute.graphs()) check_subgraph_reads(g, scope, inner, describe, depth + 1);
    }
  }
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

// The nodes of `graph` in an order where each comes after the nodes producing what it reads (its
// subgraphs' reads included): Kahn's algorithm, smallest index first, so a graph already in order
// keeps its order. Names no node of this graph produces come from outside (inputs, initializers,
// enclosing graphs) and impose no order. A cycle or a value with two producers is a UserError.
std::vector<int> topological_order(const onnx::GraphProto& graph, const std::function<std::string(int)>& describe) {
  const int node_count = graph.node_size();
  std::unordered_map<std::string, int> producer;
  for (int index = 0; index < node_count; ++index)
    for (const auto& name : graph.node(index).output()) {
      if (name.empty()) continue;
      auto [it, inserted] = producer.emplace(name, index);
      if (!inserted)
        throw UserError(str_cat(describe(index), ": output '", name, "' is also produced by ", describe(it->second)));
    }

  std::vector<std::vector<int>> consumers(static_cast<size_t>(node_count));
  std::vector<int> pending(static_cast<size_t>(node_count), 0);
  for (int index = 0; index < node_count; ++index) {
    const auto& node = graph.node(index);
    std::vector<std::string> reads(node.input().begin(), node.input().end());
    collect_subgraph_reads(node, reads);
    std::set<int> dependencies;
    for (const auto& name : reads) {
      auto found = producer.find(name);
      if (found == producer.end()) continue;
      if (found->second == index)
        throw UserError(str_cat("the graph has a cycle: ", describe(index), " reads its own output '", name, "'"));
      dependencies.insert(found->second);
    }
    for (int dependency : dependencies) consumers[static_cast<size_t>(dependency)].push_back(index);
    pending[static_cast<size_t>(index)] = static_cast<int>(dependencies.size());
  }
  std::vector<int> order;
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int index = 0; index < node_count; ++index)
    if (pending[static_cast<size_t>(index)] == 0) ready.push(index);
  while (!ready.empty()) {
    int index = ready.top();
    ready.pop();
    order.push_back(index);
    for (int consumer : consumers[static_cast<size_t>(index)])
      if (--pending[static_cast<size_t>(consumer)] == 0) ready.push(consumer);
  }
  if (static_cast<int>(order.size()) == node_count) return order;
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
  return order;
}

// The longest chain of nodes (each reading the previous one's output) must stay within
// limits::kMaxGraphDepth: later stages walk the graph recursively. `order` is topological, so one
// pass finds every node's depth.
void check_graph_depth(const onnx::GraphProto& graph, const std::vector<int>& order,
                       const std::unordered_map<std::string, int>& producer, const std::function<std::string(int)>& describe) {
  std::vector<int64_t> depth(static_cast<size_t>(graph.node_size()), 1);
  for (int index : order) {
    int64_t deepest = 0;
    for (const auto& name : graph.node(index).input()) {
      auto found = producer.find(name);
      if (found != producer.end()) deepest = std::max(deepest, depth[static_cast<size_t>(found->second)]);
    }
    depth[static_cast<size_t>(index)] = deepest + 1;
    if (deepest + 1 > limits::kMaxGraphDepth)
      throw UserError(str_cat(describe(index), " ends a chain of ", deepest + 1, " nodes, deeper than kiln's limit of ",
                              limits::kMaxGraphDepth, " (docs/limits.md)"));
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

// A graph output the model declares as a narrow type must be produced as exactly that type (the
// carrier's bytes mean nothing otherwise), and one of a kiln dtype must not be a narrow value.
void check_narrow_output(const OnnxValueInfo& info, int32_t produced) {
  if (produced == 0 && !is_narrow_type(info.elem_type)) return;
  if (info.elem_type != 0 && produced != info.elem_type)
    throw UserError(str_cat("graph output '", info.name, "' is declared ", onnx_type_name(info.elem_type),
                            " but its node produces ", produced ? onnx_type_name(produced) : std::string("a kiln dtype")));
}

}  // namespace

OnnxModel::OnnxModel()
    : proto_(std::make_unique<onnx::ModelProto>()), fold_cache_(std::make_shared<ConstantFoldCache>()) {}
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
  if (size > limits::kMaxModelBytes)
    throw UserError(str_cat("ONNX model '", path, "' is ", size, " bytes, more than kiln's limit of ",
                            limits::kMaxModelBytes, " (protobuf's; docs/limits.md): models of 2 GB or more must store "
                            "their weights as external data"));
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
  if (size > limits::kMaxModelBytes)
    throw UserError(str_cat("the model is ", size, " bytes, more than kiln's limit of ", limits::kMaxModelBytes,
                            " (protobuf's; docs/limits.md): models of 2 GB or more must store their weights as external data"));
  OnnxModel model;
  model.model_directory_ = std::move(model_directory);
  google::protobuf::io::CodedInputStream stream(static_cast<const uint8_t*>(data), static_cast<int>(size));
  stream.SetRecursionLimit(limits::kMaxProtobufNesting);
  if (!model.proto_->ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    std::string why = wire_diagnosis(static_cast<const uint8_t*>(data), static_cast<int>(size));
    // The top level is well-formed, so a nested message is at fault.
    throw UserError(why.empty() ? str_cat("not a valid ONNX model: a nested message does not parse (corrupt data, or "
                                          "messages nested deeper than the parser's limit of ",
                                          limits::kMaxProtobufNesting, " levels, about ", limits::kMaxProtobufNesting / 3,
                                          " levels of subgraphs; docs/limits.md)")
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

  // Dangling inputs are found here, where the graph's inputs and initializers are known; a
  // subgraph's unknown names may come from an enclosing graph and are only checked when built.
  for (int index = 0; index < node_count; ++index)
    for (const auto& name : graph.node(index).input())
      if (!name.empty() && !available.count(name) && !producer.count(name))
        throw UserError(str_cat(describe(index), ": input '", name,
                                "' is not a graph input, an initializer or the output of any node (dangling input)"));
  NameScope top_level{available, nullptr};
  for (const auto& [name, index] : producer) top_level.names.insert(name);
  auto describe_proto = [&](const onnx::NodeProto& node) {
    return OnnxNode(node, opset(node.domain()).value_or(0), {}, model_directory_).describe();
  };
  for (int index = 0; index < node_count; ++index)
    for (const auto& attribute : graph.node(index).attribute()) {
      if (!attribute.has_g() && attribute.graphs_size() == 0) continue;
      const std::string where = str_cat(describe(index), ", subgraph '", attribute.name(), "'");
      if (attribute.has_g()) check_subgraph_reads(attribute.g(), top_level, where, describe_proto, 1);
      for (const auto& g : attribute.graphs()) check_subgraph_reads(g, top_level, where, describe_proto, 1);
    }
  node_order_ = topological_order(graph, describe);
  check_graph_depth(graph, node_order_, producer, describe);

  for (const auto& output : outputs_)
    if (!available.count(output.name) && !producer.count(output.name))
      throw UserError(str_cat("graph output '", output.name, "' is not produced by any node, input or initializer"));
}

namespace {

// The values visible while one graph is built: its own, then those of the graphs around it (If,
// Loop and Scan bodies read outer names directly).
class Scope {
 public:
  explicit Scope(const Scope* outer) : outer_(outer) {}
  const OnnxValue* find(const std::string& name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->outer_) {
      auto found = scope->values_.find(name);
      if (found != scope->values_.end()) return &found->second;
    }
    return nullptr;
  }
  void set(const std::string& name, OnnxValue value, int32_t narrow_type = 0) {
    values_.insert_or_assign(name, std::move(value));
    // A name set here shadows outer ones, its narrow type (or the lack of one) included.
    narrow_types_.insert_or_assign(name, narrow_type);
  }
  // The ONNX type of a value that kiln holds in a carrier dtype (narrow_types.h); 0 for the rest.
  int32_t narrow_type(const std::string& name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->outer_) {
      auto found = scope->narrow_types_.find(name);
      if (found != scope->narrow_types_.end()) return found->second;
    }
    return 0;
  }

 private:
  const Scope* outer_;
  std::unordered_map<std::string, OnnxValue> values_;
  std::unordered_map<std::string, int32_t> narrow_types_;
};

// What building any graph of one model needs besides the graph itself.
struct BuildContext {
  const OpRegistry& registry;
  const std::map<std::string, int64_t>& opsets;
  const std::string& model_directory;

  std::optional<int64_t> opset(const std::string& domain) const {
    auto found = opsets.find(canonical_domain(domain));
    if (found == opsets.end()) return std::nullopt;
    return found->second;
  }
};

void build_nodes(const BuildContext& context, const onnx::GraphProto& graph, const std::vector<int>& order,
                 Scope& scope);

// A subgraph (If branch, Loop/Scan body) built in a scope nested in `outer`: its initializers and
// inputs (bound by position) shadow outer names. Returns its outputs in order.
std::vector<OnnxValue> build_subgraph(const BuildContext& context, const onnx::GraphProto& graph, const Scope& outer,
                                      const std::vector<OnnxValue>& inputs) {
  const std::string label = str_cat("subgraph '", graph.name(), "'");
  Scope scope(&outer);
  if (graph.sparse_initializer_size() > 0) throw UserError(str_cat(label, ": sparse initializers are not supported"));
  for (const auto& initializer : graph.initializer()) {
    try {
      scope.set(initializer.name(), tensor_from_proto(initializer, context.model_directory),
                is_narrow_type(initializer.data_type()) ? initializer.data_type() : 0);
    } catch (const UserError& error) {
      throw UserError(str_cat(label, ", initializer '", initializer.name(), "': ", error.what()));
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) scope.set(graph.input(static_cast<int>(i)).name(), inputs[i]);
  auto describe = [&](int index) {
    const auto& node = graph.node(index);
    return OnnxNode(node, context.opset(node.domain()).value_or(0), {}, context.model_directory).describe();
  };
  build_nodes(context, graph, topological_order(graph, describe), scope);
  std::vector<OnnxValue> outputs;
  for (const auto& output : graph.output()) {
    const OnnxValue* value = scope.find(output.name());
    if (value == nullptr || !value->defined())
      throw UserError(str_cat(label, ": output '", output.name(), "' is not produced"));
    outputs.push_back(*value);
  }
  return outputs;
}

// The view of one node that op builders see: its inputs looked up in `scope`. `pointwise_reader_filters`
// is the layout hint of pointwise_readers.h (0: none).
OnnxNode make_node(const BuildContext& context, const onnx::NodeProto& proto, Scope& scope,
                   int64_t pointwise_reader_filters = 0) {
  const std::string domain = canonical_domain(proto.domain());
  std::optional<int64_t> node_opset = context.opset(domain);

  std::vector<std::optional<OnnxValue>> node_inputs;
  for (const auto& name : proto.input()) {
    if (name.empty()) {
      node_inputs.emplace_back();
      continue;
    }
    const OnnxValue* value = scope.find(name);
    if (value == nullptr || !value->defined())
      OnnxNode(proto, node_opset.value_or(0), {}, context.model_directory)
          .fail(str_cat("input '", name,
                        "' was not produced: it is no value of this graph or an enclosing one, or its node returned "
                        "fewer outputs than the model uses"));
    node_inputs.emplace_back(*value);
  }
  GraphRunner run_subgraph = [&context, &scope](const onnx::GraphProto& graph, const std::vector<OnnxValue>& inputs) {
    return build_subgraph(context, graph, scope, inputs);
  };
  OnnxNode node(proto, node_opset.value_or(0), std::move(node_inputs), context.model_directory,
                std::move(run_subgraph));
  std::vector<int32_t> narrow_inputs;
  for (const auto& name : proto.input()) narrow_inputs.push_back(name.empty() ? 0 : scope.narrow_type(name));
  node.set_narrow_input_types(std::move(narrow_inputs));
  node.set_pointwise_reader_filters(pointwise_reader_filters);
  if (!node_opset) node.fail(str_cat("the model imports no opset for domain '", domain_label(domain), "'"));
  return node;
}

// What build_node may build a node together with, found over the whole graph first: the Conv a
// BatchNormalization absorbs (conv_batchnorm.h), the QuantizeLinear a DequantizeLinear undoes and
// the DequantizeLinear nodes whose 8-bit values a Conv, Gemm or MatMul multiplies (qdq_pairs.h),
// and the layout hints (pointwise_readers.h) of the node and of that Conv.
struct NodeContext {
  const onnx::NodeProto* fused_conv = nullptr;
  const onnx::NodeProto* quantize = nullptr;
  const onnx::NodeProto* input_dequantize = nullptr;   // a Conv's, Gemm's or MatMul's input and weight
  const onnx::NodeProto* weight_dequantize = nullptr;  // DequantizeLinear nodes (qdq_pairs.h)
  int64_t pointwise_reader_filters = 0;
  int64_t fused_conv_pointwise_reader_filters = 0;
};

// Builds one node: looks up its inputs in `scope`, runs its builder (Constant is the model's own)
// and stores its outputs in `scope`.
void build_node(const BuildContext& context, const onnx::NodeProto& proto, Scope& scope,
                const NodeContext& with = {}) {
  const std::string domain = canonical_domain(proto.domain());
  OnnxNode node = make_node(context, proto, scope, with.pointwise_reader_filters);
  std::optional<int64_t> node_opset = context.opset(domain);

  // Every UOp this node's builder creates is tagged with the node, so errors and profiles made
  // much later (scheduling, codegen) still point back into the model.
  ProvenanceScope provenance(node.describe());
  std::vector<OnnxValue> results;
  try {
    std::vector<Tensor> fused;
    if (with.fused_conv != nullptr)
      fused = build_conv_batchnorm(make_node(context, *with.fused_conv, scope, with.fused_conv_pointwise_reader_filters),
                                   node);
    else if (with.quantize != nullptr && !(node_opset && *node_opset < 10))
      fused = build_quantize_dequantize(make_node(context, *with.quantize, scope), node);
    else if (with.input_dequantize != nullptr && proto.op_type() == "Conv")
      fused = build_integer_pointwise_conv(node, make_node(context, *with.input_dequantize, scope),
                                           make_node(context, *with.weight_dequantize, scope));
    else if (with.input_dequantize != nullptr)
      fused = build_integer_matmul(node, make_node(context, *with.input_dequantize, scope),
                                   make_node(context, *with.weight_dequantize, scope));
    if (!fused.empty()) {
      results.emplace_back(fused[0]);
    } else if (domain.empty() && proto.op_type() == "Constant") {
      results.emplace_back(constant_value(node, proto));
    } else {
      const ValueOpBuilder* builder = context.registry.find(domain, proto.op_type(), *node_opset);
      if (builder == nullptr)
        node.fail(str_cat("unsupported op '", proto.op_type(), "' (domain '", domain_label(domain), "', opset ",
                          *node_opset, ")"));
      results = (*builder)(node);
      propagate_shape_values(node, results);
    }
  } catch (const Error& error) {
    // Tensor-level errors (shapes that do not broadcast, …) do not know the node: add it.
    const std::string prefix = node.describe();
    if (std::string_view(error.what()).substr(0, prefix.size()) == prefix) throw;
    throw UserError(str_cat(prefix, ": ", error.what()));
  } catch (const std::out_of_range&) {
    // Builders read model-given lists with .at(): a list shorter than the op needs (CumSum with an
    // empty axis tensor) is the model's error, not a crash (found by tests/fuzz onnx).
    node.fail("an input or attribute holds fewer values than the op needs");
  }
  if (auto input = node.unexpected_narrow_input())
    node.fail(str_cat("unsupported: input ", *input, " has ONNX type ", onnx_type_name(node.input_elem_type(*input)),
                      ", which kiln has no dtype for and this op does not take"));
  // Builders return at most the outputs a node lists, so more results mean the model lists fewer
  // outputs than the op must produce (a Relu with none): the model's error (found by tests/fuzz onnx).
  if (results.size() > static_cast<size_t>(proto.output_size()))
    node.fail(str_cat("the node lists ", proto.output_size(), " outputs, fewer than the ", results.size(), " that ",
                      proto.op_type(), " produces"));
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string& name = proto.output(static_cast<int>(i));
    if (name.empty() || !results[i].defined()) continue;  // an optional output the builder does not produce
    // A hostile shape (ConstantOfShape of 2^40 x 2^40 x 2^40, …) must stop here, before any
    // later stage multiplies its dimensions.
    // (A symbolic shape is checked at its variables' maxima: the sizes its buffers are given.)
    if (results[i].is_tensor()) {
      Dims dims = dims_of(results[i].tensor());
      Shape largest = max_sizes(dims);
      if (!element_count_fits(largest))
        node.fail(str_cat("output '", name, "' would have shape ", shape_text(dims), ", more elements than fit in 64 bits"));
      std::string problem = tensor_limit_problem(largest, results[i].tensor().dtype());
      if (!problem.empty()) node.fail(str_cat("output '", name, "' ", shape_text(dims), " ", problem));
    }
    scope.set(name, std::move(results[i]), node.narrow_output_type(i));
  }
}

void build_nodes(const BuildContext& context, const onnx::GraphProto& graph, const std::vector<int>& order,
                 Scope& scope) {
  std::unordered_map<int, int> conv_of_batchnorm = find_conv_batchnorm_pairs(graph);
  std::unordered_map<int, int64_t> pointwise_readers = find_convs_feeding_pointwise(graph);
  auto hint = [&](int index) {
    auto found = pointwise_readers.find(index);
    return found == pointwise_readers.end() ? int64_t{0} : found->second;
  };
  std::unordered_map<int, int> quantize_of_dequantize = find_quantize_dequantize_pairs(graph);
  std::unordered_map<int, DequantizedProduct> dequantized_products = find_dequantized_products(graph);
  for (int index : order) {
    NodeContext with;
    with.pointwise_reader_filters = hint(index);
    if (auto conv = conv_of_batchnorm.find(index); conv != conv_of_batchnorm.end()) {
      with.fused_conv = &graph.node(conv->second);
      with.fused_conv_pointwise_reader_filters = hint(conv->second);
    }
    if (auto quantize = quantize_of_dequantize.find(index); quantize != quantize_of_dequantize.end())
      with.quantize = &graph.node(quantize->second);
    if (auto product = dequantized_products.find(index); product != dequantized_products.end()) {
      with.input_dequantize = &graph.node(product->second.input);
      with.weight_dequantize = &graph.node(product->second.weight);
    }
    build_node(context, graph.node(index), scope, with);
  }
}

std::string kind_label(OnnxValue::Kind kind) {
  switch (kind) {
    case OnnxValue::Kind::Tensor: return "tensor";
    case OnnxValue::Kind::Sequence: return "sequence";
    case OnnxValue::Kind::Optional: return "optional";
  }
  return "value";
}

// The dtype of the tensors a value holds, where it holds any (or knows them, as an empty sequence
// does).
std::optional<ScalarType> held_dtype(const OnnxValue& value) {
  switch (value.kind()) {
    case OnnxValue::Kind::Tensor: return value.tensor().dtype();
    case OnnxValue::Kind::Sequence: return value.element_type();
    case OnnxValue::Kind::Optional: return value.has_element() ? held_dtype(value.element()) : std::nullopt;
  }
  return std::nullopt;
}

// A given sequence or optional input against its declared type (kind, inner kind, element dtype).
void check_container_input(const OnnxValueInfo& info, const OnnxValue& value) {
  if (!info.typed) return;
  if (!info.supported_kind)
    throw UserError(str_cat("input '", info.name, "' has a type kiln does not support (maps, nested sequences)"));
  if (value.kind() != info.kind)
    throw UserError(str_cat("input '", info.name, "' is a ", value.kind_name(), " but the model expects a ",
                            kind_label(info.kind)));
  if (value.is_optional() && value.has_element() && value.element().kind() != info.optional_element)
    throw UserError(str_cat("input '", info.name, "' is an optional ", value.element().kind_name(),
                            " but the model expects an optional ", kind_label(info.optional_element)));
  std::optional<ScalarType> dtype = held_dtype(value);
  if (info.dtype && dtype && *dtype != *info.dtype)
    throw UserError(str_cat("input '", info.name, "' holds ", scalar_type_name(*dtype), " tensors but the model expects ",
                            scalar_type_name(*info.dtype)));
  if (value.is_sequence())
    for (size_t i = 0; i < value.elements().size(); ++i) {
      const Tensor& element = value.elements()[i];
      if (!element.defined()) throw UserError(str_cat("input '", info.name, "': sequence element ", i, " is an empty handle"));
      if (element.dtype() != value.element_type())
        throw UserError(str_cat("input '", info.name, "': sequence element ", i, " is ", scalar_type_name(element.dtype()),
                                " but the sequence holds ", scalar_type_name(*value.element_type()), " tensors"));
    }
}

}  // namespace

std::unordered_map<std::string, OnnxValue> OnnxModel::bind_inputs(
    const std::vector<std::pair<std::string, OnnxValue>>& given) const {
  std::unordered_map<std::string, OnnxValue> bound;
  for (const auto& [name, value] : given) {
    auto known = std::find_if(inputs_.begin(), inputs_.end(), [&](const auto& info) { return info.name == name; });
    if (known == inputs_.end()) {
      std::string expected;
      for (size_t i = 0; i < inputs_.size(); ++i)
        if (!inputs_[i].has_initializer) expected += str_cat(expected.empty() ? "" : ", ", "'", inputs_[i].name, "'");
      throw UserError(str_cat("the model has no input named '", name, "' (its inputs: ", expected, ")"));
    }
    if (!value.defined()) throw UserError(str_cat("input '", name, "' is an empty Tensor handle"));
    if (!bound.emplace(name, value).second) throw UserError(str_cat("input '", name, "' is given twice"));
  }

  std::unordered_map<std::string, std::pair<Dim, std::string>> symbols;  // dim_param → (size, input)
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const OnnxValueInfo& info = inputs_[i];
    auto found = bound.find(info.name);
    if (found == bound.end()) {
      if (info.has_initializer) continue;  // the initializer is the default value
      throw UserError(str_cat("input '", info.name, "' is required but was not given"));
    }
    if (!info.is_tensor || !found->second.is_tensor()) {
      check_container_input(info, found->second);
      continue;
    }
    const Tensor& tensor = found->second.tensor();
    // Dims: a plan input may have symbolic dimensions (size variables named after the dim_params).
    const Dims shape = dims_of(tensor);
    std::string problem = tensor_limit_problem(max_sizes(shape), tensor.dtype());
    if (!problem.empty()) throw UserError(str_cat("input '", info.name, "' ", shape_text(shape), " ", problem));
    if (info.dtype && *info.dtype != tensor.dtype())
      throw UserError(str_cat("input '", info.name, "' has dtype ", scalar_type_name(tensor.dtype()),
                              " but the model expects ", scalar_type_name(*info.dtype)));
    if (!info.dims) continue;
    if (shape.size() != info.dims->size())
      throw UserError(str_cat("input '", info.name, "' has rank ", shape.size(), " ", shape_text(shape),
                              " but the model expects rank ", info.dims->size()));
    for (size_t axis = 0; axis < shape.size(); ++axis) {
      const OnnxDim& dim = (*info.dims)[axis];
      if (dim.size && !shape[axis].is(*dim.size))
        throw UserError(str_cat("input '", info.name, "' has shape ", shape_text(shape), " but the model fixes dimension ",
                                axis, " to ", *dim.size));
      if (!dim.symbol.empty()) {
        auto [it, inserted] = symbols.emplace(dim.symbol, std::make_pair(shape[axis], info.name));
        if (!inserted && !(it->second.first == shape[axis]))
          throw UserError(str_cat("dimension '", dim.symbol, "' is ", it->second.first, " in input '", it->second.second,
                                  "' but ", shape[axis], " in input '", info.name, "'"));
      }
    }
  }
  return bound;
}

std::vector<std::pair<std::string, OnnxValue>> OnnxModel::build_values(
    const std::vector<std::pair<std::string, OnnxValue>>& inputs, const OpRegistry& registry) const {
  Scope scope(nullptr);
  for (const auto& [name, tensor] : initializers_) {
    auto narrow = narrow_initializers_.find(name);
    scope.set(name, tensor, narrow == narrow_initializers_.end() ? 0 : narrow->second);
  }
  for (auto& [name, value] : bind_inputs(inputs)) {
    auto info = std::find_if(inputs_.begin(), inputs_.end(), [&](const auto& candidate) { return candidate.name == name; });
    scope.set(name, std::move(value), info != inputs_.end() && is_narrow_type(info->elem_type) ? info->elem_type : 0);
  }

  const BuildContext context{registry, opsets_, model_directory_};
  build_nodes(context, proto_->graph(), node_order_, scope);

  std::vector<std::pair<std::string, OnnxValue>> outputs;
  for (const auto& info : outputs_) {
    const OnnxValue* value = scope.find(info.name);
    if (value == nullptr || !value->defined())
      throw UserError(str_cat("graph output '", info.name, "' was not produced (its node returned fewer outputs)"));
    check_narrow_output(info, scope.narrow_type(info.name));
    outputs.emplace_back(info.name, *value);
  }
  return outputs;
}

std::vector<std::pair<std::string, OnnxValue>> OnnxModel::run_values(
    const std::vector<std::pair<std::string, OnnxValue>>& inputs, const OpRegistry& registry) const {
  // Building, folding and realizing recurse as deep as the graph; run them all on a stack sized for
  // that, as `kiln compile` does (support/large_stack.h).
  std::vector<std::pair<std::string, OnnxValue>> outputs;
  run_on_large_stack([&] { outputs = run_values_here(inputs, registry); });
  return outputs;
}

std::vector<std::pair<std::string, OnnxValue>> OnnxModel::run_values_here(
    const std::vector<std::pair<std::string, OnnxValue>>& inputs, const OpRegistry& registry) const {
  std::vector<std::pair<std::string, OnnxValue>> outputs = build_values(inputs, registry);
  std::vector<Tensor*> to_realize;
  for (auto& [name, value] : outputs) value.collect_tensors(to_realize);
  // Weight-only values are computed once per model (fold_cache_) and read as buffers by every run,
  // as a plan stores them; the given inputs are the run-time values.
  std::vector<Tensor> values, runtime_inputs;
  for (Tensor* tensor : to_realize) values.push_back(*tensor);
  std::vector<Tensor*> given;
  for (auto [name, value] : inputs) {
    given.clear();
    value.collect_tensors(given);
    for (Tensor* tensor : given) runtime_inputs.push_back(*tensor);
  }
  values = fold_constants(values, runtime_inputs, nullptr, fold_cache_.get());
  for (size_t i = 0; i < to_realize.size(); ++i) *to_realize[i] = values[i];
  Tensor::realize_all(to_realize);
  return outputs;
}

namespace {

// The tensors of a tensor-only model's outputs (build() and run() take and give tensors only).
std::vector<std::pair<std::string, Tensor>> tensor_outputs(std::vector<std::pair<std::string, OnnxValue>> values) {
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (auto& [name, value] : values) {
    if (!value.is_tensor())
      throw UserError(str_cat("output '", name, "' is a ", value.kind_name(), "; this entry point returns tensors only (use run_values)"));
    outputs.emplace_back(name, value.tensor());
  }
  return outputs;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> OnnxModel::build(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                             const OpRegistry& registry) const {
  for (const auto& info : inputs_)
    if (info.typed && !info.is_tensor)
      throw UserError(str_cat("input '", info.name, "' is a ", kind_label(info.kind),
                              "; build() takes tensors only (use build_values)"));
  return tensor_outputs(build_values(std::vector<std::pair<std::string, OnnxValue>>(inputs.begin(), inputs.end()), registry));
}

std::vector<std::pair<std::string, Tensor>> OnnxModel::run(const std::vector<std::pair<std::string, Tensor>>& inputs,
                                                           const OpRegistry& registry) const {
  for (const auto& info : inputs_)
    if (info.typed && !info.is_tensor)
      throw UserError(str_cat("input '", info.name, "' is a ", kind_label(info.kind),
                              "; run() takes tensors only (use run_values)"));
  std::vector<std::pair<std::string, OnnxValue>> values(inputs.begin(), inputs.end());
  std::vector<std::pair<std::string, Tensor>> outputs;
  for (auto& [name, value] : run_values(values, registry)) {
    if (!value.is_tensor())
      throw UserError(str_cat("output '", name, "' is a ", value.kind_name(), "; run() returns tensors only (use run_values)"));
    outputs.emplace_back(name, value.tensor());
  }
  return outputs;
}

}  // namespace kiln::onnx_import
