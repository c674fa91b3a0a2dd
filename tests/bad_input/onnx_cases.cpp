// Bad ONNX models through compiler.h (kiln_compile_onnx_file), in process: the limits of
// docs/limits.md one by one, and hostile models that tests/onnx/make_broken_models.py does not
// already cover (that corpus runs through the CLI in the onnx-broken-models suite). Each model is
// written with the ONNX protobuf classes (libonnx_proto), most of them invalid on purpose.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "catalogue.h"
#include "fixtures.h"

namespace bad_input {
namespace {

onnx::AttributeProto* add_attribute(onnx::NodeProto* node, const std::string& name, onnx::AttributeProto_AttributeType type) {
  onnx::AttributeProto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(type);
  return attribute;
}

// x (2, 3) → N nodes of `op`, each reading the previous one → y.
onnx::ModelProto chain_model(int64_t length, const std::string& op) {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", {2, 3});
  for (int64_t i = 0; i < length; ++i)
    add_node(graph, op, {i == 0 ? "x" : "v" + std::to_string(i - 1)}, {i == length - 1 ? "y" : "v" + std::to_string(i)},
             "n" + std::to_string(i));
  add_value(graph->mutable_output(), "y", {2, 3});
  return model;
}

// If nodes nested `depth` levels: each then-branch holds the next If; the innermost returns x.
onnx::GraphProto nested_branch(int depth) {
  onnx::GraphProto graph;
  graph.set_name("level" + std::to_string(depth));
  if (depth == 0) {
    add_node(&graph, "Identity", {"x"}, {"out0"}, "leaf");
  } else {
    onnx::NodeProto* node = add_node(&graph, "If", {"c"}, {"out" + std::to_string(depth)}, "if" + std::to_string(depth));
    *add_attribute(node, "then_branch", onnx::AttributeProto_AttributeType_GRAPH)->mutable_g() = nested_branch(depth - 1);
    onnx::GraphProto other;
    other.set_name("other" + std::to_string(depth));
    add_node(&other, "Identity", {"x"}, {"other_out" + std::to_string(depth)}, "other" + std::to_string(depth));
    add_value(other.mutable_output(), "other_out" + std::to_string(depth), {2, 3});
    *add_attribute(node, "else_branch", onnx::AttributeProto_AttributeType_GRAPH)->mutable_g() = other;
  }
  add_value(graph.mutable_output(), "out" + std::to_string(depth), {2, 3});
  return graph;
}

onnx::ModelProto nested_model(int depth) {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", {2, 3});
  add_value(graph->mutable_input(), "c", {}, onnx::TensorProto_DataType_BOOL);
  // The top If is nesting level 0; its branch holds `depth` more levels.
  onnx::NodeProto* top = add_node(graph, "If", {"c"}, {"y"}, "top");
  onnx::GraphProto then_branch = nested_branch(depth);
  *add_attribute(top, "then_branch", onnx::AttributeProto_AttributeType_GRAPH)->mutable_g() = then_branch;
  onnx::GraphProto other;
  other.set_name("top_other");
  add_node(&other, "Identity", {"x"}, {"top_other_out"}, "top_other");
  add_value(other.mutable_output(), "top_other_out", {2, 3});
  *add_attribute(top, "else_branch", onnx::AttributeProto_AttributeType_GRAPH)->mutable_g() = other;
  add_value(graph->mutable_output(), "y", {2, 3});
  return model;
}

// x → Relu → y, with x declared as `dims`.
onnx::ModelProto relu_model(const std::vector<int64_t>& dims) {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", dims);
  add_node(graph, "Relu", {"x"}, {"y"}, "relu");
  add_value(graph->mutable_output(), "y", dims);
  return model;
}

onnx::TensorProto int64_tensor(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto tensor;
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto_DataType_INT64);
  tensor.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t value : values) tensor.add_int64_data(value);
  return tensor;
}

// Range(start, limit, delta) → y, the three int64 scalars initializers.
onnx::ModelProto range_model(int64_t start, int64_t limit, int64_t delta) {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  const char* names[] = {"start", "limit", "delta"};
  int64_t values[] = {start, limit, delta};
  for (int i = 0; i < 3; ++i) {
    onnx::TensorProto* scalar = graph->add_initializer();
    scalar->set_name(names[i]);
    scalar->set_data_type(onnx::TensorProto_DataType_INT64);
    scalar->add_int64_data(values[i]);
  }
  add_node(graph, "Range", {"start", "limit", "delta"}, {"y"}, "range");
  add_value(graph->mutable_output(), "y", {4});
  return model;
}

// x (1) → `op`(x, shape) → y, with `shape` an initializer: Reshape or Expand to a hostile shape.
onnx::ModelProto shape_op_model(const std::string& op, const std::vector<int64_t>& shape) {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", {1});
  *graph->add_initializer() = int64_tensor("shape", shape);
  add_node(graph, op, {"x", "shape"}, {"y"}, op == "Reshape" ? "reshape" : "expand");
  graph->add_output()->set_name("y");
  return model;
}

}  // namespace

Area onnx_area(const std::string& work) {
  Area area{"onnx", {}, {}};
  area.still_works = [work] {
    Outcome compiled = compile_model_file(save_model(good_model(), work + "/good.onnx"), work + "/good.kiln");
    if (compiled.status != KILN_OK) return "the good model no longer compiles: " + compiled.message;
    return good_plan_works(read_file(work + "/good.kiln"));
  };
  const auto INVALID = KILN_ERROR_INVALID_MODEL;
  // A case writes its model under work/NAME/ and compiles it there.
  auto add = [&](std::string name, kiln_status status, std::vector<std::string> fragments,
                 std::function<onnx::ModelProto()> make) {
    std::string folder = work + "/" + name;
    area.cases.push_back({name, status, std::move(fragments), [folder, make] {
                            std::filesystem::create_directories(folder);
                            return compile_model_file(save_model(make(), folder + "/model.onnx"), folder + "/model.kiln");
                          }});
  };

  // ---- Limits (docs/limits.md).
  add("limit_graph_depth", INVALID,
      {"node 'n4096' (Relu, opset 17) ends a chain of 4097 nodes", "deeper than kiln's limit of 4096"},
      [] { return chain_model(4097, "Relu"); });
  // At the limit the model compiles (about 9 s, most of it LLVM on one 4096-deep expression).
  // Before the compile ran on a large stack, this chain overflowed the 8 MiB stack of the main
  // thread in the scheduler's recursive walk (SIGSEGV in Rangeifier::lower).
  add("limit_graph_depth_at_limit", KILN_OK, {}, [] { return chain_model(4096, "HardSigmoid"); });
  add("limit_subgraph_nesting", INVALID,
      {"node 'if16' (If, opset 17), subgraph 'then_branch'", "nested 17 levels deep, more than kiln's limit of 16"},
      [] { return nested_model(16); });
  add("limit_input_rank", INVALID, {"input 'x' (", "has rank 33, more than kiln's limit of 32"},
      [] { return relu_model(std::vector<int64_t>(33, 1)); });
  add("limit_output_rank", INVALID, {"node 'reshape' (Reshape, opset 17): output 'y'", "has rank 33"},
      [] { return shape_op_model("Reshape", std::vector<int64_t>(33, 1)); });
  add("limit_initializer_rank", INVALID, {"initializer 'w' has rank 33, more than kiln's limit of 32"}, [] {
    onnx::ModelProto model = relu_model({2, 3});
    *model.mutable_graph()->add_initializer() = float_tensor("w", std::vector<int64_t>(33, 1), {1.0f});
    return model;
  });
  add("limit_input_2_40_elements", INVALID,
      {"input 'x' (1048576, 1048576) needs 4398046511104 bytes", "more than kiln's limit of 1099511627776 bytes"},
      [] { return relu_model({1 << 20, 1 << 20}); });
  add("limit_intermediate_bytes", INVALID,
      {"node 'expand' (Expand, opset 17): output 'y' (2199023255552)", "has 2199023255552 elements, more than kiln's limit"},
      [] { return shape_op_model("Expand", {int64_t{1} << 41}); });
  add("limit_external_data_bytes", INVALID,
      {"initializer 'w'", "need 2199023255552 bytes, more than kiln's limit of 1099511627776 bytes"}, [] {
        onnx::ModelProto model = relu_model({2, 3});
        onnx::TensorProto* w = model.mutable_graph()->add_initializer();
        w->set_name("w");
        w->set_data_type(onnx::TensorProto_DataType_FLOAT);
        w->add_dims(int64_t{1} << 39);
        w->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
        auto* location = w->add_external_data();
        location->set_key("location");
        location->set_value("huge.bin");
        return model;
      });
  // A file over protobuf's 2 GiB limit (sparse: no disk space is used), refused before reading.
  std::string huge_folder = work + "/limit_model_bytes";
  area.cases.push_back({"limit_model_bytes", INVALID, {"bytes, more than kiln's limit of 2147483647"}, [huge_folder] {
                          std::filesystem::create_directories(huge_folder);
                          std::string path = huge_folder + "/model.onnx";
                          int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
                          require(fd >= 0 && ::ftruncate(fd, off_t{1} << 31) == 0, "cannot make a sparse 2 GiB file");
                          ::close(fd);
                          Outcome result = compile_model_file(path, huge_folder + "/model.kiln");
                          std::filesystem::remove(path);
                          return result;
                        }});

  // ---- Hostile models.
  add("cycle_through_subgraph", INVALID, {"the graph has a cycle", "node 'choose' (If, opset 17)"}, [] {
    // The If's branch reads 'b', which a node computes from the If's own output.
    onnx::ModelProto model = empty_model();
    onnx::GraphProto* graph = model.mutable_graph();
    add_value(graph->mutable_input(), "x", {2, 3});
    add_value(graph->mutable_input(), "c", {}, onnx::TensorProto_DataType_BOOL);
    onnx::NodeProto* choose = add_node(graph, "If", {"c"}, {"a"}, "choose");
    for (const char* branch : {"then_branch", "else_branch"}) {
      onnx::GraphProto body;
      body.set_name(branch);
      add_node(&body, "Identity", {"b"}, {std::string(branch) + "_out"}, std::string(branch) + "_id");
      add_value(body.mutable_output(), std::string(branch) + "_out", {2, 3});
      *add_attribute(choose, branch, onnx::AttributeProto_AttributeType_GRAPH)->mutable_g() = body;
    }
    add_node(graph, "Relu", {"a"}, {"b"}, "after");
    add_node(graph, "Neg", {"b"}, {"y"}, "last");
    add_value(graph->mutable_output(), "y", {2, 3});
    return model;
  });
  add("huge_attribute_list", INVALID, {"node 't' (Transpose, opset 17)", "out of range for rank 2"}, [] {
    onnx::ModelProto model = relu_model({2, 3});
    onnx::GraphProto* graph = model.mutable_graph();
    graph->mutable_node(0)->set_output(0, "r");
    onnx::NodeProto* node = add_node(graph, "Transpose", {"r"}, {"y"}, "t");
    auto* perm = add_attribute(node, "perm", onnx::AttributeProto_AttributeType_INTS);
    for (int64_t i = 0; i < 200000; ++i) perm->add_ints(i);
    return model;
  });
  // Was compiled with a silent promotion of the int64 initializer; ONNX's Add takes one type.
  add("wrong_dtype_initializer", INVALID,
      {"node 'add' (Add, opset 17)", "input 0 is f32 but input 1 is i64", "must have the same type"}, [] {
    onnx::ModelProto model = empty_model();
    onnx::GraphProto* graph = model.mutable_graph();
    add_value(graph->mutable_input(), "x", {3});
    *graph->add_initializer() = int64_tensor("w", {1, 2, 3});
    add_node(graph, "Add", {"x", "w"}, {"y"}, "add");
    add_value(graph->mutable_output(), "y", {3});
    return model;
  });
  add("opset_too_old_for_op", INVALID, {"node 'gelu' (Gelu, opset 17)", "unsupported op 'Gelu'", "opset 17"}, [] {
    onnx::ModelProto model = relu_model({2, 3});
    model.mutable_graph()->mutable_node(0)->set_op_type("Gelu");
    model.mutable_graph()->mutable_node(0)->set_name("gelu");
    return model;
  });
  add("opset_zero", INVALID, {"node 'relu' (Relu", "unsupported op 'Relu' (domain 'ai.onnx', opset 0)"}, [] {
    onnx::ModelProto model = relu_model({2, 3});
    model.mutable_opset_import(0)->set_version(0);
    return model;
  });
  add("negative_input_dim", INVALID, {"unbound input dimension", "input 'x' dimension 0"},
      [] { return relu_model({-5, 3}); });
  // The product of the new shape wrapped to 0 in 64 bits (the message said "has 0" elements).
  add("reshape_count_overflow", INVALID,
      {"node 'reshape' (Reshape, opset 17)", "(4294967296, 4294967296, 4) has more elements than fit in 64 bits"},
      [] { return shape_op_model("Reshape", {int64_t{1} << 32, int64_t{1} << 32, 4}); });
  // Range (integers) built a host vector of every value before any limit applied: a count of 2^62
  // hung the build, and limit - start overflowed int64 (a silent empty output for the full range).
  add("range_huge_count", INVALID,
      {"node 'range' (Range, opset 17)", "make more than 1099511627776 elements"},
      [] { return range_model(0, int64_t{1} << 62, 1); });
  add("range_span_overflow", INVALID,
      {"node 'range' (Range, opset 17)", "start -9223372036854775808, limit 9223372036854775807 and delta 1"},
      [] { return range_model(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 1); });
  return area;
}

}  // namespace bad_input
