// The catalogue's good inputs (fixtures.h).
#include "fixtures.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "catalogue.h"
#include "kiln/compiler.h"

namespace bad_input {
namespace {

constexpr int64_t kRows = 2, kInner = 4, kCols = 3;

std::vector<float> good_input() {
  std::vector<float> x(kRows * kInner);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i) - 1.0f;
  return x;
}

std::vector<float> good_weight() {
  std::vector<float> w(kInner * kCols);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
  return w;
}

}  // namespace

onnx::ModelProto empty_model(int64_t opset) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* import = model.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  model.mutable_graph()->set_name("catalogue");
  return model;
}

onnx::ValueInfoProto* add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                                const std::vector<int64_t>& dims, int elem_type) {
  onnx::ValueInfoProto* value = list->Add();
  value->set_name(name);
  auto* tensor = value->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(elem_type);
  auto* shape = tensor->mutable_shape();
  for (int64_t dim : dims) shape->add_dim()->set_dim_value(dim);
  return value;
}

onnx::NodeProto* add_node(onnx::GraphProto* graph, const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name) {
  onnx::NodeProto* node = graph->add_node();
  node->set_op_type(op);
  node->set_name(name);
  for (const std::string& input : inputs) node->add_input(input);
  for (const std::string& output : outputs) node->add_output(output);
  return node;
}

onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  onnx::TensorProto tensor;
  tensor.set_name(name);
  tensor.set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (int64_t dim : dims) tensor.add_dims(dim);
  for (float value : values) tensor.add_float_data(value);
  return tensor;
}

onnx::ModelProto good_model() {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", {kRows, kInner});
  *graph->add_initializer() = float_tensor("w", {kInner, kCols}, good_weight());
  add_node(graph, "MatMul", {"x", "w"}, {"xw"}, "matmul");
  add_node(graph, "Softmax", {"xw"}, {"y"}, "softmax");
  auto* sum = add_node(graph, "ReduceSum", {"y"}, {"z"}, "sum");
  auto* keepdims = sum->add_attribute();
  keepdims->set_name("keepdims");
  keepdims->set_type(onnx::AttributeProto_AttributeType_INT);
  keepdims->set_i(0);
  add_value(graph->mutable_output(), "y", {kRows, kCols});
  add_value(graph->mutable_output(), "z", {});
  return model;
}

std::string save_model(const onnx::ModelProto& model, const std::string& path) {
  std::string bytes;
  require(model.SerializeToString(&bytes), "cannot serialise a model for " + path);
  write_file(path, bytes);
  return path;
}

Outcome compile_model_file(const std::string& model_path, const std::string& plan_path) {
  return outcome_of(kiln_compile_onnx_file(model_path.c_str(), nullptr, plan_path.c_str()));
}

std::string compile_plan(const onnx::ModelProto& model, const std::string& work, const std::string& name) {
  std::string path = save_model(model, work + "/" + name + ".onnx");
  Outcome compiled = compile_model_file(path, work + "/" + name + ".kiln");
  require(compiled.status == KILN_OK, "the model " + name + " does not compile: " + compiled.message);
  return read_file(work + "/" + name + ".kiln");
}

std::string compile_good_plan(const std::string& work) { return compile_plan(good_model(), work, "good"); }

onnx::ModelProto big_intermediate_model() {
  onnx::ModelProto model = empty_model();
  onnx::GraphProto* graph = model.mutable_graph();
  add_value(graph->mutable_input(), "x", {256, 1});
  add_node(graph, "Transpose", {"x"}, {"xt"}, "transpose");
  add_node(graph, "MatMul", {"x", "xt"}, {"b"}, "outer");
  add_node(graph, "MatMul", {"b", "b"}, {"c"}, "square");
  auto* sum = add_node(graph, "ReduceSum", {"c"}, {"y"}, "sum");
  auto* keepdims = sum->add_attribute();
  keepdims->set_name("keepdims");
  keepdims->set_type(onnx::AttributeProto_AttributeType_INT);
  keepdims->set_i(0);
  add_value(graph->mutable_output(), "y", {});
  return model;
}

std::string check_good_run(const kiln_plan* plan) {
  std::vector<float> x = good_input(), w = good_weight();
  alignas(64) float y[kRows * kCols];
  alignas(64) float z[1];
  int64_t x_shape[] = {kRows, kInner}, y_shape[] = {kRows, kCols};
  kiln_tensor input{"x", KILN_DTYPE_FLOAT32, 2, x_shape, x.data(), x.size() * sizeof(float)};
  kiln_tensor outputs[] = {{"y", KILN_DTYPE_FLOAT32, 2, y_shape, y, sizeof y}, {"z", KILN_DTYPE_FLOAT32, 0, nullptr, z, sizeof z}};
  kiln_status status = kiln_plan_run(plan, &input, 1, outputs, 2);
  if (status != KILN_OK) return std::string("the good run failed: ") + kiln_error_message();
  float total = 0;
  for (int64_t row = 0; row < kRows; ++row) {
    double logits[kCols], largest = -1e30, sum = 0;
    for (int64_t col = 0; col < kCols; ++col) {
      logits[col] = 0;
      for (int64_t k = 0; k < kInner; ++k) logits[col] += double(x[row * kInner + k]) * w[k * kCols + col];
      largest = std::max(largest, logits[col]);
    }
    for (double& logit : logits) sum += logit = std::exp(logit - largest);
    for (int64_t col = 0; col < kCols; ++col) {
      float got = y[row * kCols + col];
      total += got;
      if (std::fabs(got - logits[col] / sum) > 1e-5)
        return "the good run computed y[" + std::to_string(row) + "][" + std::to_string(col) + "] = " + std::to_string(got) +
               ", the reference is " + std::to_string(logits[col] / sum);
    }
  }
  if (std::fabs(z[0] - total) > 1e-5) return "the good run computed z = " + std::to_string(z[0]) + ", not the sum of y";
  return "";
}

std::string good_plan_works(const std::string& plan_bytes) {
  kiln_plan* plan = nullptr;
  if (kiln_plan_load_buffer(plan_bytes.data(), plan_bytes.size(), &plan) != KILN_OK)
    return std::string("the good plan does not load: ") + kiln_error_message();
  std::string problem = check_good_run(plan);
  kiln_plan_free(plan);
  return problem;
}

}  // namespace bad_input
