// Misuse of the C APIs (kiln.h, compiler.h) that tests/plan/test_plan.c's misuse mode does not
// already cover: options structs, names given twice, NULL shapes, overlapping buffers, DLPack
// views, the compiler's arguments. One plan is loaded for the whole area and is run again after
// every case (still_works): a rejected call must leave it usable. What cannot be detected
// (double free, use after free, a too-short buffer that claims a larger byte_size) is listed in
// docs/bad-input.md instead.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "catalogue.h"
#include "fixtures.h"
#include "kiln/compiler.h"

namespace bad_input {
namespace {

struct PlanDeleter {
  void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
};
using PlanHandle = std::shared_ptr<kiln_plan>;

// Correct tensors for the good plan (x (2, 4) → y (2, 3), z ()), which a case spoils in one place.
struct Io {
  alignas(64) float x[8] = {};
  alignas(64) float y[6] = {};
  alignas(64) float z[1] = {};
  int64_t x_shape[2] = {2, 4}, y_shape[2] = {2, 3};
  kiln_tensor input{"x", KILN_DTYPE_FLOAT32, 2, x_shape, x, sizeof x};
  kiln_tensor outputs[2] = {{"y", KILN_DTYPE_FLOAT32, 2, y_shape, y, sizeof y}, {"z", KILN_DTYPE_FLOAT32, 0, nullptr, z, sizeof z}};
};

Outcome run(const PlanHandle& plan, Io& io, const kiln_run_options* options = nullptr) {
  return outcome_of(kiln_plan_run_with_options(plan.get(), &io.input, 1, io.outputs, 2, options));
}

Outcome load_with(const std::string& good, const kiln_plan_options& options) {
  kiln_plan* plan = nullptr;
  Outcome result = outcome_of(kiln_plan_load_buffer_v2(good.data(), good.size(), &options, &plan));
  kiln_plan_free(plan);
  return result;
}

void* failing_alloc(void*, size_t, size_t) { return nullptr; }
void unused_free(void*, void*, size_t) {}

}  // namespace

Area capi_area(const std::string& work) {
  std::string good = compile_good_plan(work);
  kiln_plan* loaded = nullptr;
  require(kiln_plan_load_buffer(good.data(), good.size(), &loaded) == KILN_OK, "the good plan does not load");
  PlanHandle plan(loaded, PlanDeleter{});
  const auto INVALID = KILN_ERROR_INVALID_ARGUMENT;
  Area area{"capi", {}, [good, plan] {
              std::string problem = check_good_run(plan.get());  // the shared plan, after the misuse
              return problem.empty() ? good_plan_works(good) : problem;
            }};
  auto add = [&](std::string name, kiln_status status, std::vector<std::string> fragments, std::function<Outcome()> body) {
    area.cases.push_back({std::move(name), status, std::move(fragments), std::move(body)});
  };

  // ---- Load options.
  add("capi_load_options_size_zero", INVALID, {"kiln_plan_load_buffer_v2: options->size is 0"}, [good] {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.size = 0;
    return load_with(good, options);
  });
  add("capi_load_allocator_half", INVALID, {"options->allocator needs both alloc and free"}, [good] {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.allocator.alloc = failing_alloc;
    return load_with(good, options);
  });
  add("capi_load_negative_threads", INVALID, {"options->thread_count is negative (-2)"}, [good] {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.thread_count = -2;
    return load_with(good, options);
  });
  add("capi_load_allocator_fails", KILN_ERROR_OUT_OF_MEMORY, {"cannot allocate the plan's arena"}, [good] {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.allocator.alloc = failing_alloc;
    options.allocator.free = unused_free;
    return load_with(good, options);
  });
  add("capi_load_empty_file", KILN_ERROR_INVALID_PLAN, {"is empty"}, [work] {
    write_file(work + "/empty.kiln", "");
    kiln_plan* unused = nullptr;
    return outcome_of(kiln_plan_load_file((work + "/empty.kiln").c_str(), &unused));
  });
  add("capi_load_directory", KILN_ERROR_IO, {"plan '", "'"}, [work] {
    kiln_plan* unused = nullptr;
    return outcome_of(kiln_plan_load_file(work.c_str(), &unused));
  });

  // ---- Runs: each spoils one thing of a correct call.
  add("capi_run_output_twice", INVALID, {"output 'y' is given twice"}, [plan] {
    Io io;
    io.outputs[1] = io.outputs[0];
    return run(plan, io);
  });
  add("capi_run_null_shape", INVALID, {"input 'x' has shape NULL, the plan expects (2, 4)"}, [plan] {
    Io io;
    io.input.shape = nullptr;
    return run(plan, io);
  });
  add("capi_run_outputs_null", INVALID, {"the outputs array is NULL"}, [plan] {
    Io io;
    return outcome_of(kiln_plan_run(plan.get(), &io.input, 1, nullptr, 2));
  });
  add("capi_run_unknown_dtype", INVALID, {"input 'x' has dtype unknown, the plan expects float32"}, [plan] {
    Io io;
    io.input.dtype = static_cast<kiln_dtype>(99);
    return run(plan, io);
  });
  // Outputs must not overlap inputs or each other (kiln.h): a kernel would read what another
  // already overwrote, a silent wrong answer.
  add("capi_run_output_overlaps_input", INVALID, {"output 'y' overlaps input 'x'"}, [plan] {
    Io io;
    io.outputs[0].data = io.x;
    return run(plan, io);
  });
  add("capi_run_outputs_overlap", INVALID, {"output 'z' overlaps output 'y'"}, [plan] {
    Io io;
    io.outputs[1].data = io.y + 2;
    return run(plan, io);
  });
  add("capi_run_options_size_zero", INVALID, {"kiln_plan_run_with_options: options->size is 0"}, [plan] {
    Io io;
    kiln_run_options options;
    kiln_run_options_init(&options);
    options.size = 0;
    return run(plan, io, &options);
  });
  add("capi_run_negative_threads", INVALID, {"options->thread_count is negative (-1)"}, [plan] {
    Io io;
    kiln_run_options options;
    kiln_run_options_init(&options);
    options.thread_count = -1;
    return run(plan, io, &options);
  });
  add("capi_run_cancelled_before", KILN_ERROR_CANCELLED, {"the run was cancelled (before its first kernel)"}, [plan] {
    Io io;
    kiln_cancel* cancel = nullptr;
    require(kiln_cancel_create(&cancel) == KILN_OK, "kiln_cancel_create failed");
    kiln_cancel_request(cancel);
    kiln_run_options options;
    kiln_run_options_init(&options);
    options.cancel = cancel;
    Outcome result = run(plan, io, &options);
    kiln_cancel_free(cancel);
    return result;
  });

  // ---- Queries.
  add("capi_output_info_range", INVALID, {"kiln_plan_output_info: index 2 is out of range (the plan has 2 outputs)"}, [plan] {
    return outcome_of(kiln_plan_output_info(plan.get(), 2, nullptr, nullptr, nullptr, nullptr));
  });
  add("capi_kernel_info_range", INVALID, {"kiln_plan_kernel_info: index 100000 is out of range"},
      [plan] { return outcome_of(kiln_plan_kernel_info(plan.get(), 100000, nullptr, nullptr)); });
  add("capi_describe_null", INVALID, {"kiln_plan_describe: plan is NULL"},
      [] { return outcome_of(kiln_plan_describe(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr)); });
  // The symbolic-shape queries (kiln.h since 0.2.0) on a fixed-shape plan.
  add("capi_variable_info_range", INVALID, {"kiln_plan_variable_info: index 0 is out of range (the plan has 0 variables)"},
      [plan] { return outcome_of(kiln_plan_variable_info(plan.get(), 0, nullptr, nullptr, nullptr)); });
  // Sizes the run decides (kiln.h since 0.2.0): where a variable's value comes from.
  add("capi_variable_source_range", INVALID, {"kiln_plan_variable_source: index 0 is out of range (the plan has 0 variables)"},
      [plan] {
        kiln_variable_source source;
        return outcome_of(kiln_plan_variable_source(plan.get(), 0, &source));
      });
  add("capi_variable_source_null", INVALID, {"kiln_plan_variable_source", "out_source"},
      [plan] { return outcome_of(kiln_plan_variable_source(plan.get(), 0, nullptr)); });
  add("capi_variable_source_null_plan", INVALID, {"kiln_plan_variable_source", "plan"}, [] {
    kiln_variable_source source;
    return outcome_of(kiln_plan_variable_source(nullptr, 0, &source));
  });
  add("capi_input_info_v2_range", INVALID, {"kiln_plan_input_info_v2: index 1 is out of range (the plan has 1 input)"},
      [plan] {
        return outcome_of(kiln_plan_input_info_v2(plan.get(), 1, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
      });
  add("capi_output_shape_capacity", INVALID, {"kiln_plan_output_shape: capacity 1 is less than the rank of output 'y' (2)"},
      [plan] {
        Io io;
        int64_t shape[1];
        return outcome_of(kiln_plan_output_shape(plan.get(), &io.input, 1, 0, shape, 1, nullptr));
      });
  add("capi_output_shape_wrong_input", INVALID,
      {"kiln_plan_output_shape: input 'x' has shape (2, 5), the plan expects (2, 4)"}, [plan] {
        Io io;
        io.x_shape[1] = 5;
        int64_t shape[2];
        return outcome_of(kiln_plan_output_shape(plan.get(), &io.input, 1, 0, shape, 2, nullptr));
      });
  add("capi_output_shape_null_shape", INVALID, {"kiln_plan_output_shape: out_shape is NULL"}, [plan] {
    Io io;
    return outcome_of(kiln_plan_output_shape(plan.get(), &io.input, 1, 0, nullptr, 2, nullptr));
  });
  add("capi_cancel_create_null", INVALID, {"out_cancel is NULL"}, [] { return outcome_of(kiln_cancel_create(nullptr)); });

  // ---- DLPack views.
  add("capi_dltensor_device", INVALID, {"the tensor is on device type 2"}, [] {
    float data[4] = {};
    int64_t shape[1] = {4};
    DLTensor tensor{data, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    kiln_tensor view;
    return outcome_of(kiln_tensor_from_dltensor(&tensor, "x", &view));
  });
  add("capi_dltensor_strides", INVALID, {"has stride 2, expected 1"}, [] {
    float data[8] = {};
    int64_t shape[1] = {4}, strides[1] = {2};
    DLTensor tensor{data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, strides, 0};
    kiln_tensor view;
    return outcome_of(kiln_tensor_from_dltensor(&tensor, "x", &view));
  });
  add("capi_dltensor_negative_dim", INVALID, {"dimension 0 is negative"}, [] {
    float data[1] = {};
    int64_t shape[1] = {-4};
    DLTensor tensor{data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, nullptr, 0};
    kiln_tensor view;
    return outcome_of(kiln_tensor_from_dltensor(&tensor, "x", &view));
  });
  add("capi_to_dlpack_dtype", INVALID, {"dtype 42 is not a kiln_dtype"}, [] {
    float data[1] = {};
    kiln_tensor tensor{"x", static_cast<kiln_dtype>(42), 0, nullptr, data, sizeof data};
    DLManagedTensor* managed = nullptr;
    return outcome_of(kiln_tensor_to_dlpack(&tensor, nullptr, nullptr, &managed));
  });

  // ---- compiler.h.
  std::string model = save_model(good_model(), work + "/model.onnx");
  add("capi_compile_null_model", INVALID, {"kiln_compile_onnx_file: model_path is NULL"}, [work] {
    return outcome_of(kiln_compile_onnx_file(nullptr, nullptr, (work + "/never.kiln").c_str()));
  });
  add("capi_compile_options_size_zero", INVALID, {"options->size is 0"}, [model, work] {
    kiln_compile_options options;
    kiln_compile_options_init(&options);
    options.size = 0;
    return outcome_of(kiln_compile_onnx_file(model.c_str(), &options, (work + "/never.kiln").c_str()));
  });
  add("capi_compile_null_shape_spec", INVALID, {"options->shapes[1] is NULL"}, [model, work] {
    const char* shapes[] = {"x=2,4", nullptr};
    kiln_compile_options options;
    kiln_compile_options_init(&options);
    options.shapes = shapes;
    options.shape_count = 2;
    return outcome_of(kiln_compile_onnx_file(model.c_str(), &options, (work + "/never.kiln").c_str()));
  });
  add("capi_compile_bad_shape_spec", INVALID, {"shape spec 'x=2,,4'"}, [model, work] {
    const char* shapes[] = {"x=2,,4"};
    kiln_compile_options options;
    kiln_compile_options_init(&options);
    options.shapes = shapes;
    options.shape_count = 1;
    return outcome_of(kiln_compile_onnx_file(model.c_str(), &options, (work + "/never.kiln").c_str()));
  });
  add("capi_compile_missing_model", KILN_ERROR_IO, {"cannot open ONNX model", "nowhere.onnx"}, [work] {
    return outcome_of(kiln_compile_onnx_file((work + "/nowhere.onnx").c_str(), nullptr, (work + "/never.kiln").c_str()));
  });
  add("capi_compile_unwritable_plan", KILN_ERROR_IO, {"cannot write the plan to"}, [model, work] {
    return outcome_of(kiln_compile_onnx_file(model.c_str(), nullptr, (work + "/no/such/folder/plan.kiln").c_str()));
  });
  return area;
}

}  // namespace bad_input
