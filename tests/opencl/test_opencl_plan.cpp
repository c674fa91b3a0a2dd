// OpenCL plans (`kiln compile --target opencl`, format version 3, or 4 with work-group sizes) through
// libkiln's C API on this machine's OpenCL device: the same graph as a CPU plan and as a device plan
// gives the same outputs, bad arguments get the CPU plan's errors and leave the plan usable, device
// tensors and the caller's own queues work, work-group reductions run with the plan's sizes, the
// intermediates share one arena buffer, and plans holding f64 and f16 run.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "loaded_plan.h"
#include "plan/plan_format.h"
#include "plan/plan_writer.h"
#include "runtime/opencl/opencl_api.h"
#include "tensor/tensor_internal.h"

using namespace kiln;
using kiln::testing::LoadedPlan;

namespace {

std::vector<float> ramp(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = std::sin(static_cast<float>(i) * 0.37f) * scale;
  return values;
}

// A conv + bias + ReLU, a matmul against a weight, a softmax and a repeated output: weights,
// intermediates in the arena, reductions and an output that copies another.
std::string conv_plan(const std::string& device) {
  Tensor x = graph_input("x", {1, 3, 10, 10}, ScalarType::Float32);
  Tensor w = Tensor::from_vector(ramp(4 * 3 * 3 * 3, 0.5f), {4, 3, 3, 3});
  Tensor b = Tensor::from_vector(ramp(4, 0.1f), {4});
  ConvOptions options;
  options.padding = {1, 1, 1, 1};
  Tensor y = x.conv(w, b, options).relu();
  Tensor flat = y.reshape({4, 100});
  Tensor m = Tensor::from_vector(ramp(100 * 7, 0.05f), {100, 7});
  Tensor scores = flat.matmul(m).softmax(-1);
  PlanWriteOptions write;
  write.device = device;
  return write_plan({{"x", x}}, {{"features", y}, {"scores", scores}, {"scores_again", scores}}, write);
}

// Runs `plan` on host buffers with `options` (may be null) into *outputs (features, scores,
// scores_again).
kiln_status run_with(const kiln_plan* plan, const std::vector<float>& input, const kiln_run_options* options,
                     std::vector<std::vector<float>>* outputs) {
  int64_t x_shape[] = {1, 3, 10, 10}, y_shape[] = {1, 4, 10, 10}, s_shape[] = {4, 7};
  *outputs = {std::vector<float>(400, -1), std::vector<float>(28, -1), std::vector<float>(28, -1)};
  auto& o = *outputs;
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 4, x_shape, const_cast<float*>(input.data()), input.size() * 4};
  kiln_tensor out[] = {{"features", KILN_DTYPE_FLOAT32, 4, y_shape, o[0].data(), 400 * 4},
                       {"scores", KILN_DTYPE_FLOAT32, 2, s_shape, o[1].data(), 28 * 4},
                       {"scores_again", KILN_DTYPE_FLOAT32, 2, s_shape, o[2].data(), 28 * 4}};
  return kiln_plan_run_with_options(plan, &in, 1, out, 3, options);
}

std::vector<std::vector<float>> run(kiln_plan* plan, const std::vector<float>& input) {
  std::vector<std::vector<float>> outputs;
  REQUIRE_MESSAGE(run_with(plan, input, nullptr, &outputs) == KILN_OK, kiln_error_message());
  return outputs;
}

}  // namespace

TEST_SUITE("opencl") {

TEST_CASE("an OpenCL plan computes what the CPU plan of the same graph computes") {
  LoadedPlan cpu(conv_plan("")), opencl(conv_plan("opencl"));
  std::vector<float> input = ramp(300, 1.0f);
  std::vector<std::vector<float>> expected = run(cpu.plan, input), got = run(opencl.plan, input);
  for (size_t o = 0; o < expected.size(); ++o) {
    CAPTURE(o);
    for (size_t i = 0; i < expected[o].size(); ++i) {
      CAPTURE(i);
      CHECK(got[o][i] == doctest::Approx(expected[o][i]).epsilon(1e-5));
    }
  }
  CHECK(got[1] == got[2]);
  // A second run with other inputs: nothing of the first run leaks into it.
  std::vector<float> other = ramp(300, -2.0f);
  std::vector<std::vector<float>> expected_other = run(cpu.plan, other), got_other = run(opencl.plan, other);
  for (size_t i = 0; i < expected_other[1].size(); ++i) CHECK(got_other[1][i] == doctest::Approx(expected_other[1][i]).epsilon(1e-5));
}

TEST_CASE("device tensors: an OpenCL plan runs on the caller's buffers in libkiln's context") {
  LoadedPlan cpu(conv_plan("")), opencl(conv_plan("opencl"));
  const char* device = nullptr;
  void *context = nullptr, *queue = nullptr;
  REQUIRE(kiln_plan_device(opencl.plan, &device, &context, &queue) == KILN_OK);
  CHECK(std::string(device).rfind("opencl:", 0) == 0);
  REQUIRE(context != nullptr);
  REQUIRE(queue != nullptr);
  const OpenCLApi* api = load_opencl_api(nullptr);
  REQUIRE(api != nullptr);
  std::vector<cl_mem> buffers;
  auto buffer = [&](size_t bytes) {
    cl_int status = CL_SUCCESS;
    cl_mem memory = api->clCreateBuffer(static_cast<cl_context>(context), CL_MEM_READ_WRITE, bytes, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    buffers.push_back(memory);
    return memory;
  };
  auto* commands = static_cast<cl_command_queue>(queue);
  std::vector<float> input = ramp(300, 1.0f);
  cl_mem x = buffer(300 * 4), features = buffer(400 * 4), scores = buffer(28 * 4), again = buffer(28 * 4);
  REQUIRE(api->clEnqueueWriteBuffer(commands, x, CL_TRUE, 0, 300 * 4, input.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  int64_t x_shape[] = {1, 3, 10, 10}, y_shape[] = {1, 4, 10, 10}, s_shape[] = {4, 7};
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 4, x_shape, x, 300 * 4};
  kiln_tensor out[] = {{"features", KILN_DTYPE_FLOAT32, 4, y_shape, features, 400 * 4},
                       {"scores", KILN_DTYPE_FLOAT32, 2, s_shape, scores, 28 * 4},
                       {"scores_again", KILN_DTYPE_FLOAT32, 2, s_shape, again, 28 * 4}};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.tensors_on_device = 1;
  REQUIRE_MESSAGE(kiln_plan_run_with_options(opencl.plan, &in, 1, out, 3, &options) == KILN_OK, kiln_error_message());
  std::vector<std::vector<float>> expected = run(cpu.plan, input);
  std::vector<std::vector<float>> got{std::vector<float>(400), std::vector<float>(28), std::vector<float>(28)};
  cl_mem results[] = {features, scores, again};
  for (size_t o = 0; o < 3; ++o) {
    REQUIRE(api->clEnqueueReadBuffer(commands, results[o], CL_TRUE, 0, got[o].size() * 4, got[o].data(), 0, nullptr,
                                     nullptr) == CL_SUCCESS);
    CAPTURE(o);
    for (size_t i = 0; i < got[o].size(); ++i) CHECK(got[o][i] == doctest::Approx(expected[o][i]).epsilon(1e-5));
  }
  CHECK(got[1] == got[2]);
  // An output that is an input's memory is refused (handles cannot be checked for overlap).
  kiln_tensor aliased[] = {out[0], {"scores", KILN_DTYPE_FLOAT32, 2, s_shape, x, 28 * 4}, out[2]};
  CHECK(kiln_plan_run_with_options(opencl.plan, &in, 1, aliased, 3, &options) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()) ==
        "kiln_plan_run: output 'scores' is the device memory of input 'x'");
  // A CPU plan has no device memory to take.
  std::vector<std::vector<float>> unused;
  CHECK(run_with(cpu.plan, input, &options, &unused) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("tensors_on_device is for plans compiled for a device") != std::string::npos);
  REQUIRE(kiln_plan_device(cpu.plan, &device, &context, &queue) == KILN_OK);
  CHECK(std::string(device) == "cpu");
  CHECK(context == nullptr);
  CHECK(queue == nullptr);
  for (cl_mem memory : buffers) api->clReleaseMemObject(memory);
}

TEST_CASE("a run on the caller's OpenCL queue is ordered after the caller's work there, and with device tensors does not wait") {
  LoadedPlan cpu(conv_plan("")), opencl(conv_plan("opencl"));
  void *context = nullptr, *own_queue = nullptr;
  REQUIRE(kiln_plan_device(opencl.plan, nullptr, &context, &own_queue) == KILN_OK);
  const OpenCLApi* api = load_opencl_api(nullptr);
  REQUIRE(api != nullptr);
  cl_device_id device = nullptr;
  REQUIRE(api->clGetCommandQueueInfo(static_cast<cl_command_queue>(own_queue), CL_QUEUE_DEVICE, sizeof device, &device,
                                     nullptr) == CL_SUCCESS);
  auto* shared_context = static_cast<cl_context>(context);
  cl_int status = CL_SUCCESS;
  cl_command_queue first = api->clCreateCommandQueue(shared_context, device, 0, &status);
  REQUIRE(status == CL_SUCCESS);
  cl_command_queue second = api->clCreateCommandQueue(shared_context, device, 0, &status);
  REQUIRE(status == CL_SUCCESS);
  std::vector<cl_mem> buffers;
  auto buffer = [&](size_t bytes) {
    cl_mem memory = api->clCreateBuffer(shared_context, CL_MEM_READ_WRITE, bytes, nullptr, &status);
    REQUIRE(status == CL_SUCCESS);
    buffers.push_back(memory);
    return memory;
  };
  int64_t x_shape[] = {1, 3, 10, 10}, y_shape[] = {1, 4, 10, 10}, s_shape[] = {4, 7};
  struct DeviceIo {
    cl_mem x, features, scores, again;
  };
  auto device_io = [&] { return DeviceIo{buffer(300 * 4), buffer(400 * 4), buffer(28 * 4), buffer(28 * 4)}; };
  auto run_on = [&](const kiln_plan* plan, const DeviceIo& io, void* queue) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 4, x_shape, io.x, 300 * 4};
    kiln_tensor out[] = {{"features", KILN_DTYPE_FLOAT32, 4, y_shape, io.features, 400 * 4},
                         {"scores", KILN_DTYPE_FLOAT32, 2, s_shape, io.scores, 28 * 4},
                         {"scores_again", KILN_DTYPE_FLOAT32, 2, s_shape, io.again, 28 * 4}};
    kiln_run_options options;
    kiln_run_options_init(&options);
    options.tensors_on_device = 1;
    options.queue = queue;
    return kiln_plan_run_with_options(plan, &in, 1, out, 3, &options);
  };
  // Reads io's outputs on `queue` (blocking) and compares them with the CPU plan's for `input`.
  auto check_outputs = [&](const DeviceIo& io, cl_command_queue queue, const std::vector<float>& input) {
    std::vector<std::vector<float>> expected = run(cpu.plan, input);
    cl_mem results[] = {io.features, io.scores, io.again};
    for (size_t o = 0; o < 3; ++o) {
      std::vector<float> got(expected[o].size());
      REQUIRE(api->clEnqueueReadBuffer(queue, results[o], CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr, nullptr) ==
              CL_SUCCESS);
      CAPTURE(o);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[o][i]).epsilon(1e-5));
    }
  };

  // The input is written without waiting; the run, queued after it on the same queue, reads it, and
  // the caller's read, queued after the run, sees its outputs.
  std::vector<float> input = ramp(300, 1.0f), other = ramp(300, -2.0f);
  DeviceIo a = device_io(), b = device_io();
  REQUIRE(api->clEnqueueWriteBuffer(first, a.x, CL_FALSE, 0, 300 * 4, input.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  REQUIRE_MESSAGE(run_on(opencl.plan, a, first) == KILN_OK, kiln_error_message());
  check_outputs(a, first, input);
  // Runs on two queues one after the other share the plan's intermediate buffers: the second waits
  // for the first, and each gets its own input's outputs.
  REQUIRE(api->clEnqueueWriteBuffer(second, b.x, CL_TRUE, 0, 300 * 4, other.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  REQUIRE(api->clEnqueueWriteBuffer(first, a.x, CL_TRUE, 0, 300 * 4, input.data(), 0, nullptr, nullptr) == CL_SUCCESS);
  REQUIRE_MESSAGE(run_on(opencl.plan, a, first) == KILN_OK, kiln_error_message());
  REQUIRE_MESSAGE(run_on(opencl.plan, b, second) == KILN_OK, kiln_error_message());
  REQUIRE_MESSAGE(run_on(opencl.plan, a, first) == KILN_OK, kiln_error_message());
  check_outputs(b, second, other);
  check_outputs(a, first, input);

  // Host tensors on the caller's queue: the call returns with the outputs filled.
  {
    kiln_run_options options;
    kiln_run_options_init(&options);
    options.queue = second;
    std::vector<std::vector<float>> got;
    REQUIRE_MESSAGE(run_with(opencl.plan, other, &options, &got) == KILN_OK, kiln_error_message());
    std::vector<float> expected = run(cpu.plan, other)[1];
    for (size_t i = 0; i < 28; ++i) CHECK(got[1][i] == doctest::Approx(expected[i]).epsilon(1e-5));
    CHECK(got[1] == got[2]);
  }

  // Queues the plan cannot take, and a queue for a CPU plan.
  cl_context stranger = api->clCreateContext(nullptr, 1, &device, nullptr, nullptr, &status);
  REQUIRE(status == CL_SUCCESS);
  cl_command_queue foreign = api->clCreateCommandQueue(stranger, device, 0, &status);
  REQUIRE(status == CL_SUCCESS);
  CHECK(run_on(opencl.plan, a, foreign) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("options->queue cannot take this plan's work: it belongs to another "
                                               "OpenCL context") != std::string::npos);
  cl_command_queue out_of_order =
      api->clCreateCommandQueue(shared_context, device, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &status);
  if (out_of_order != nullptr) {
    CHECK(run_on(opencl.plan, a, out_of_order) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(kiln_error_message()).find("it runs its commands out of order") != std::string::npos);
    api->clReleaseCommandQueue(out_of_order);
  } else {
    MESSAGE("this OpenCL device has no out-of-order queues; that refusal is not checked");
  }
  kiln_run_options cpu_options;
  kiln_run_options_init(&cpu_options);
  cpu_options.queue = first;
  std::vector<std::vector<float>> unused;
  CHECK(run_with(cpu.plan, input, &cpu_options, &unused) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("options->queue is for plans compiled for a device") != std::string::npos);

  // A plan freed while its last run is still queued waits for it: the outputs are complete.
  {
    LoadedPlan short_lived(conv_plan("opencl"));
    REQUIRE(api->clEnqueueWriteBuffer(first, a.x, CL_TRUE, 0, 300 * 4, other.data(), 0, nullptr, nullptr) == CL_SUCCESS);
    REQUIRE_MESSAGE(run_on(short_lived.plan, a, first) == KILN_OK, kiln_error_message());
  }
  check_outputs(a, first, other);

  for (cl_mem memory : buffers) api->clReleaseMemObject(memory);
  api->clReleaseCommandQueue(foreign);
  api->clReleaseContext(stranger);
  api->clReleaseCommandQueue(first);
  api->clReleaseCommandQueue(second);
}

TEST_CASE("bad arguments get the CPU plan's errors, and the OpenCL plan runs afterwards") {
  LoadedPlan opencl(conv_plan("opencl"));
  std::vector<float> input = ramp(300, 1.0f), output(400), scores(28), again(28);
  int64_t wrong_shape[] = {1, 3, 10, 9}, y_shape[] = {1, 4, 10, 10}, s_shape[] = {4, 7};
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 4, wrong_shape, input.data(), input.size() * 4};
  kiln_tensor out[] = {{"features", KILN_DTYPE_FLOAT32, 4, y_shape, output.data(), 400 * 4},
                       {"scores", KILN_DTYPE_FLOAT32, 2, s_shape, scores.data(), 28 * 4},
                       {"scores_again", KILN_DTYPE_FLOAT32, 2, s_shape, again.data(), 28 * 4}};
  CHECK(kiln_plan_run(opencl.plan, &in, 1, out, 3) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()) ==
        "kiln_plan_run: input 'x' has shape (1, 3, 10, 9), the plan expects (1, 3, 10, 10)");
  LoadedPlan cpu(conv_plan(""));
  CHECK(run(opencl.plan, input)[1] == run(opencl.plan, input)[1]);
  std::vector<float> expected = run(cpu.plan, input)[1], got = run(opencl.plan, input)[1];
  for (size_t i = 0; i < expected.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-5));
}

TEST_CASE("kernels that share a row's reduction across a work-group run with the size the plan fixes") {
  // Three rows of 5,000 steps (softmax, sums, maxima) and a full sum of 1,000: on OpenCL each output
  // gets a group of 64 work-items whose partials meet in local memory, launched with that size
  // (Kernel.device_local_size, format version 4), the steps past 4,992 and 960 masked.
  auto make = [](const std::string& device) {
    Tensor x = graph_input("x", {3, 5000}, ScalarType::Float32);
    PlanWriteOptions write;
    write.device = device;
    Tensor stats = x.sum({1}, true).add(x.max({1}, true)).add(x.reshape({15, 1000}).sum());
    return write_plan({{"x", x}}, {{"softmax", x.softmax(-1)}, {"stats", stats}}, write);
  };
  std::string bytes = make("opencl");
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(bytes.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionLocalSizes);
  CHECK(bytes.find("barrier(CLK_LOCAL_MEM_FENCE);") != std::string::npos);
  LoadedPlan cpu(make("")), opencl(bytes);
  // Positive values: sums of either sign cancel, and then any two summation orders differ by more
  // than 1e-5 of what is left (both within f32's error bound).
  std::vector<float> input = ramp(15000, 2.0f);
  for (float& value : input) value += 3.0f;
  int64_t x_shape[] = {3, 5000}, softmax_shape[] = {3, 5000}, stats_shape[] = {3, 1};
  std::vector<float> results[2][2];
  LoadedPlan* plans[] = {&cpu, &opencl};
  for (int p = 0; p < 2; ++p) {
    results[p][0].assign(15000, -1);
    results[p][1].assign(3, -1);
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, input.data(), 15000 * 4};
    kiln_tensor out[] = {{"softmax", KILN_DTYPE_FLOAT32, 2, softmax_shape, results[p][0].data(), 15000 * 4},
                         {"stats", KILN_DTYPE_FLOAT32, 2, stats_shape, results[p][1].data(), 3 * 4}};
    REQUIRE_MESSAGE(kiln_plan_run(plans[p]->plan, &in, 1, out, 2) == KILN_OK, kiln_error_message());
  }
  for (int o = 0; o < 2; ++o)
    for (size_t i = 0; i < results[0][o].size(); ++i) {
      CAPTURE(o);
      CAPTURE(i);
      CHECK(results[1][o][i] == doctest::Approx(results[0][o][i]).epsilon(1e-5));
    }
}

TEST_CASE("an OpenCL plan holding f64 values runs where the device has f64, exactly as the CPU plan") {
  auto make = [](const std::string& device) {
    Tensor x = graph_input("x", {16}, ScalarType::Float64);
    Tensor y = (x * 3.0 + 0.5).sum();
    PlanWriteOptions write;
    write.device = device;
    return write_plan({{"x", x}}, {{"y", y}}, write);
  };
  std::string bytes = make("opencl");
  CHECK(bytes.find("f64") != std::string::npos);  // device_requirements
  LoadedPlan cpu(make("")), opencl(bytes);
  std::vector<double> input(16);
  for (size_t i = 0; i < input.size(); ++i) input[i] = 0.25 * static_cast<double>(i);
  int64_t shape[] = {16};
  double results[2] = {0, 0};
  LoadedPlan* plans[] = {&cpu, &opencl};
  for (int p = 0; p < 2; ++p) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT64, 1, shape, input.data(), 16 * 8};
    kiln_tensor out{"y", KILN_DTYPE_FLOAT64, 0, nullptr, &results[p], 8};
    REQUIRE_MESSAGE(kiln_plan_run(plans[p]->plan, &in, 1, &out, 1) == KILN_OK, kiln_error_message());
  }
  CHECK(results[1] == results[0]);
  CHECK(results[0] == doctest::Approx(3.0 * 0.25 * 120.0 + 8.0));
}

TEST_CASE("a device plan's intermediate values share one arena buffer on the device") {
  // Softmax, a matmul of it with itself, a second softmax and a sum: intermediate values of which
  // the arena layout reuses bytes. The device holds the inputs, the outputs and the arena once, each
  // arena slot a view of it (an OpenCL sub-buffer), not a buffer per value.
  auto make = [](const std::string& device) {
    Tensor x = graph_input("x", {64, 64}, ScalarType::Float32);
    Tensor first = x.softmax(-1);
    Tensor second = first.matmul(first).softmax(-1);
    PlanWriteOptions write;
    write.device = device;
    return write_plan({{"x", x}}, {{"y", second.matmul(first).sum()}}, write);
  };
  std::string messages;
  kiln_plan_options options;
  kiln_plan_options_init(&options);
  options.log = [](void* user, kiln_log_level, const char* message) { *static_cast<std::string*>(user) += message; };
  options.log_user_data = &messages;
  std::string bytes = make("opencl");
  kiln_plan* plan = nullptr;
  REQUIRE_MESSAGE(kiln_plan_load_buffer_v2(bytes.data(), bytes.size(), &options, &plan) == KILN_OK, kiln_error_message());
  uint64_t arena = 0;
  LoadedPlan cpu(make(""));
  REQUIRE(kiln_plan_describe(cpu.plan, nullptr, nullptr, &arena, nullptr, nullptr) == KILN_OK);
  CHECK(arena > 0);
  size_t at = messages.find("device memory ");
  REQUIRE(at != std::string::npos);
  uint64_t device_bytes = std::stoull(messages.substr(at + 14));
  uint64_t inputs_and_outputs = 64 * 64 * 4 + 4;
  CHECK(device_bytes >= inputs_and_outputs + arena);
  // PoCL's CPU device aligns sub-buffers to at most 64 bytes, the arena's own alignment, so every
  // slot is a view there; a device with a coarser alignment gives the off-alignment slots buffers.
  if (messages.find("on opencl:pthread") != std::string::npos) CHECK(device_bytes == inputs_and_outputs + arena);
  // And the plan computes what the CPU plan computes.
  std::vector<float> input = ramp(64 * 64, 1.0f);
  int64_t shape[] = {64, 64};
  float results[2] = {0, 0};
  kiln_plan* plans[] = {cpu.plan, plan};
  for (int p = 0; p < 2; ++p) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, shape, input.data(), input.size() * 4};
    kiln_tensor out{"y", KILN_DTYPE_FLOAT32, 0, nullptr, &results[p], 4};
    REQUIRE_MESSAGE(kiln_plan_run(plans[p], &in, 1, &out, 1) == KILN_OK, kiln_error_message());
  }
  CHECK(results[1] == doctest::Approx(results[0]).epsilon(1e-5));
  kiln_plan_free(plan);
}

TEST_CASE("an OpenCL plan holding f16 values requires nothing of its device and runs exactly as the CPU plan") {
  // f16 is stored as bits and converted by vload_half / vstore_half_rte, core OpenCL C: PoCL on x86,
  // which lacks cl_khr_fp16, runs it. Each op computes in f32 and rounds to f16 on both backends, and
  // elementwise ops use the same polynomials, so the results are bit for bit the CPU plan's.
  auto make = [](const std::string& device) {
    Tensor x = graph_input("x", {64}, ScalarType::Float16);
    Tensor y = (-x * Tensor::scalar(3.0, ScalarType::Float16)).exp() + x * x;
    PlanWriteOptions write;
    write.device = device;
    return write_plan({{"x", x}}, {{"y", y}}, write);
  };
  std::string bytes = make("opencl");
  CHECK(bytes.find("vstore_half_rte") != std::string::npos);
  LoadedPlan cpu(make("")), opencl(bytes);  // loads: the plan has no "f16" requirement to refuse
  std::vector<uint16_t> input(64);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint16_t>(0x3000 + 0x40 * i);  // 0.125 … 1.98
  input[7] = 0xc400;   // -4: exp(12) overflows f16 to infinity
  input[9] = 0x8001;   // the smallest negative subnormal
  input[11] = 0x7c00;  // +inf: exp(-inf) + inf
  int64_t shape[] = {64};
  std::vector<uint16_t> results[2] = {std::vector<uint16_t>(64, 1), std::vector<uint16_t>(64, 2)};
  LoadedPlan* plans[] = {&cpu, &opencl};
  for (int p = 0; p < 2; ++p) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT16, 1, shape, input.data(), 64 * 2};
    kiln_tensor out{"y", KILN_DTYPE_FLOAT16, 1, shape, results[p].data(), 64 * 2};
    REQUIRE_MESSAGE(kiln_plan_run(plans[p]->plan, &in, 1, &out, 1) == KILN_OK, kiln_error_message());
  }
  CHECK(results[0][7] == 0x7c00);
  CHECK(results[0][11] == 0x7c00);
  for (size_t i = 0; i < 64; ++i) {
    CAPTURE(i);
    CHECK(results[1][i] == results[0][i]);
  }
}

TEST_CASE("an f16 conv's weight stays f16 in a device plan (f32 in a CPU plan), with the same results") {
  // fold_constants' keep_narrow_weights: the weight reordered into panels is folded as f16 and
  // widened in the kernel, which is what gives CUDA's tensor cores f16 operands; the CPU plan folds
  // the f32 value, which its convs read faster.
  auto make = [](const std::string& device) {
    Tensor x = graph_input("x", {1, 16, 6, 6}, ScalarType::Float16);
    Tensor w = Tensor::from_vector(ramp(32 * 16 * 3 * 3, 0.2f), {32, 16, 3, 3}).cast(ScalarType::Float16);
    PlanWriteOptions write;
    write.device = device;
    return write_plan({{"x", x}}, {{"y", x.conv(w, Tensor(), ConvOptions())}}, write);
  };
  LoadedPlan cpu(make("")), opencl(make("opencl"));
  uint64_t weights[2] = {0, 0};
  REQUIRE(kiln_plan_describe(cpu.plan, nullptr, nullptr, nullptr, &weights[0], nullptr) == KILN_OK);
  REQUIRE(kiln_plan_describe(opencl.plan, nullptr, nullptr, nullptr, &weights[1], nullptr) == KILN_OK);
  const uint64_t elements = 32 * 16 * 3 * 3;
  CHECK(weights[0] >= elements * 4);  // f32
  CHECK(weights[1] >= elements * 2);  // f16
  CHECK(weights[1] < elements * 4);
  std::vector<uint16_t> input(16 * 36);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint16_t>(0x3000 + (i * 37) % 0x800);  // 0.125 … 0.99
  int64_t x_shape[] = {1, 16, 6, 6}, y_shape[] = {1, 32, 4, 4};
  std::vector<uint16_t> results[2] = {std::vector<uint16_t>(512, 1), std::vector<uint16_t>(512, 2)};
  LoadedPlan* plans[] = {&cpu, &opencl};
  for (int p = 0; p < 2; ++p) {
    kiln_tensor in{"x", KILN_DTYPE_FLOAT16, 4, x_shape, input.data(), input.size() * 2};
    kiln_tensor out{"y", KILN_DTYPE_FLOAT16, 4, y_shape, results[p].data(), 512 * 2};
    REQUIRE_MESSAGE(kiln_plan_run(plans[p]->plan, &in, 1, &out, 1) == KILN_OK, kiln_error_message());
  }
  // The sums may round differently (vector and FMA order on the CPU): one f16 step at most.
  for (size_t i = 0; i < 512; ++i) {
    CAPTURE(i);
    CHECK(std::abs(static_cast<int>(results[1][i]) - static_cast<int>(results[0][i])) <= 1);
  }
}

TEST_CASE("an OpenCL plan whose program does not build is refused at load with KILN_ERROR_INVALID_PLAN") {
  std::string bytes = conv_plan("opencl");
  // Break every kernel's program (same length, so the metadata stays valid) and re-hash, so that
  // only the device's build can catch it.
  size_t edits = 0;
  for (size_t at = bytes.find("__kernel void"); at != std::string::npos; at = bytes.find("__kernel void", at)) {
    bytes.replace(at, 13, "__kernel vxid");
    ++edits;
  }
  REQUIRE(edits > 0);
  auto* data = reinterpret_cast<unsigned char*>(bytes.data());
  plan::write_u64(data + plan::header_field::content_hash,
                  plan::plan_content_hash(data + plan::kPlanHeaderSize, bytes.size() - plan::kPlanHeaderSize));
  kiln_plan* plan = nullptr;
  CHECK(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_ERROR_INVALID_PLAN);
  CHECK(plan == nullptr);
  CHECK(std::string(kiln_error_message()).find("does not build") != std::string::npos);
}

}  // TEST_SUITE
