// The good inputs the catalogue checks the process with after each case: a small ONNX model
// (y = Softmax(x · w), z = ReduceSum(y): a weight, arena intermediates and two outputs), its plan
// compiled in process through compiler.h, and a run of it checked against a plain reference.
#pragma once

#include <string>
#include <vector>

#include "catalogue.h"
#include "kiln/kiln.h"
#include "onnx/onnx_pb.h"

namespace bad_input {

// ModelProto helpers: opset 17 of the default domain, IR version 8.
onnx::ModelProto empty_model(int64_t opset = 17);
onnx::ValueInfoProto* add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                                const std::vector<int64_t>& dims, int elem_type = onnx::TensorProto_DataType_FLOAT);
onnx::NodeProto* add_node(onnx::GraphProto* graph, const std::string& op, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name);
onnx::TensorProto float_tensor(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);

onnx::ModelProto good_model();
std::string save_model(const onnx::ModelProto& model, const std::string& path);  // returns path

// kiln_compile_onnx_file with default options; the status and message.
Outcome compile_model_file(const std::string& model_path, const std::string& plan_path);

// Compiles `model` to WORK/NAME.kiln; returns the plan's bytes (throws on failure).
std::string compile_plan(const onnx::ModelProto& model, const std::string& work, const std::string& name);

// Compiles good_model() under `work`; returns the plan's bytes (throws on failure).
std::string compile_good_plan(const std::string& work);

// x (256, 1) → B = x · xᵀ (256, 256) → y = ΣΣ B · B: the 256 KiB intermediate B must live in the
// arena, while the inputs and outputs are tiny (the memory-limit cases).
onnx::ModelProto big_intermediate_model();

// Runs a loaded good plan on fixed inputs and compares with the reference: "" or what is wrong.
std::string check_good_run(const kiln_plan* plan);

// Loads `plan_bytes` (a good plan), runs and checks it, frees it: "" or what is wrong.
std::string good_plan_works(const std::string& plan_bytes);

}  // namespace bad_input
