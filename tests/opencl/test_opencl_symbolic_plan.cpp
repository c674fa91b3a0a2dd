// Symbolic OpenCL plans (format version 5): one plan over a size variable n runs at every n in its
// range on the OpenCL device and computes what the CPU plan of the same graph computes, n = 0 (every
// launch over the rows skipped, a reduction over no rows) included, on host buffers and on the
// caller's device buffers of exactly the run's size. The kernels take n as an
// integer parameter after their buffers (docs/backends.md, "Symbolic device plans").
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

constexpr int64_t kWidth = 8, kClasses = 5, kWide = 256, kMaxRows = 16;

std::vector<float> wave(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = std::cos(static_cast<float>(i) * 0.61f) * scale;
  return values;
}

// Over x [n, 8]: an elementwise scale and ReLU ([n, 8]), a matmul against a weight and a softmax
// per row ([n, 5]), the column sums over the rows ([8]: a reduction whose length is n), and a
// softmax over 256 columns ([n, 256]: few rows of long reductions, which a work-group per row shares
// through local memory, launched with n groups).
std::string rows_plan(const std::string& device) {
  Dim n = size_variable("n", 0, kMaxRows);
  Tensor x = symbolic_graph_input("x", {n, kWidth}, ScalarType::Float32);
  Tensor scale = Tensor::from_vector(wave(kWidth, 1.5f), {kWidth});
  Tensor m = Tensor::from_vector(wave(kWidth * kClasses, 0.4f), {kWidth, kClasses});
  Tensor spread = Tensor::from_vector(wave(kWidth * kWide, 0.7f), {kWidth, kWide});
  PlanWriteOptions options;
  options.device = device;
  return write_plan({{"x", x}},
                    {{"scaled", (x * scale).relu()},
                     {"scores", x.matmul(m).softmax(-1)},
                     {"columns", x.sum({0})},
                     {"wide", x.matmul(spread).softmax(-1)}},
                    options);
}

// The four outputs of a run at n rows.
std::vector<std::vector<float>> run_rows(const kiln_plan* plan, int64_t n) {
  std::vector<float> input = wave(static_cast<size_t>(n * kWidth) + 1, 2.0f);  // + 1: never an empty vector
  std::vector<std::vector<float>> outputs = {std::vector<float>(static_cast<size_t>(n * kWidth) + 1, -7.0f),
                                             std::vector<float>(static_cast<size_t>(n * kClasses) + 1, -7.0f),
                                             std::vector<float>(kWidth, -7.0f),
                                             std::vector<float>(static_cast<size_t>(n * kWide) + 1, -7.0f)};
  int64_t x_shape[] = {n, kWidth}, scores_shape[] = {n, kClasses}, columns_shape[] = {kWidth}, wide_shape[] = {n, kWide};
  auto bytes = [](int64_t elements) { return static_cast<size_t>(elements) * sizeof(float); };
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, input.data(), bytes(n * kWidth)};
  kiln_tensor out[] = {{"scaled", KILN_DTYPE_FLOAT32, 2, x_shape, outputs[0].data(), bytes(n * kWidth)},
                       {"scores", KILN_DTYPE_FLOAT32, 2, scores_shape, outputs[1].data(), bytes(n * kClasses)},
                       {"columns", KILN_DTYPE_FLOAT32, 1, columns_shape, outputs[2].data(), bytes(kWidth)},
                       {"wide", KILN_DTYPE_FLOAT32, 2, wide_shape, outputs[3].data(), bytes(n * kWide)}};
  REQUIRE_MESSAGE(kiln_plan_run(plan, &in, 1, out, 4) == KILN_OK, kiln_error_message());
  return outputs;
}

}  // namespace

TEST_SUITE("opencl") {

TEST_CASE("a symbolic OpenCL plan runs at every size in its range as the CPU plan does") {
  std::string bytes = rows_plan("opencl");
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(bytes.data()) + plan::header_field::format_version) ==
        plan::kPlanFormatVersionSymbolicDevice);
  CHECK(bytes.find("long var0") != std::string::npos);  // the kernels' size parameter (OpenCL C source)
  CHECK(bytes.find("__local float local0[") != std::string::npos);  // the wide softmax's work-group rows
  LoadedPlan cpu(rows_plan("")), opencl(bytes);
  for (int64_t n : {int64_t{5}, int64_t{0}, int64_t{1}, kMaxRows, int64_t{7}}) {
    CAPTURE(n);
    std::vector<std::vector<float>> want = run_rows(cpu.plan, n), got = run_rows(opencl.plan, n);
    for (size_t o = 0; o < want.size(); ++o) {
      CAPTURE(o);
      for (size_t i = 0; i < want[o].size(); ++i) {
        CAPTURE(i);
        CHECK(got[o][i] == doctest::Approx(want[o][i]).epsilon(1e-5));
      }
    }
    // n = 0: the column sums are over no rows.
    if (n == 0) CHECK(got[2] == std::vector<float>(kWidth, 0.0f));
  }
}

TEST_CASE("a symbolic OpenCL plan runs on the caller's device buffers of exactly the run's size") {
  LoadedPlan cpu(rows_plan("")), opencl(rows_plan("opencl"));
  const char* device = nullptr;
  void *context = nullptr, *queue = nullptr;
  REQUIRE(kiln_plan_device(opencl.plan, &device, &context, &queue) == KILN_OK);
  const OpenCLApi* api = load_opencl_api(nullptr);
  REQUIRE(api != nullptr);
  auto* commands = static_cast<cl_command_queue>(queue);
  constexpr int64_t n = 6;
  std::vector<int64_t> elements = {n * kWidth, n * kWidth, n * kClasses, kWidth, n * kWide};  // x, then the outputs
  std::vector<cl_mem> buffers;
  for (int64_t count : elements) {
    cl_int status = CL_SUCCESS;
    buffers.push_back(api->clCreateBuffer(static_cast<cl_context>(context), CL_MEM_READ_WRITE,
                                          static_cast<size_t>(count) * 4, nullptr, &status));
    REQUIRE(status == CL_SUCCESS);
  }
  std::vector<float> input = wave(static_cast<size_t>(n * kWidth) + 1, 2.0f);
  REQUIRE(api->clEnqueueWriteBuffer(commands, buffers[0], CL_TRUE, 0, n * kWidth * 4, input.data(), 0, nullptr, nullptr) ==
          CL_SUCCESS);
  int64_t x_shape[] = {n, kWidth}, scores_shape[] = {n, kClasses}, columns_shape[] = {kWidth}, wide_shape[] = {n, kWide};
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, buffers[0], n * kWidth * 4};
  kiln_tensor out[] = {{"scaled", KILN_DTYPE_FLOAT32, 2, x_shape, buffers[1], n * kWidth * 4},
                       {"scores", KILN_DTYPE_FLOAT32, 2, scores_shape, buffers[2], n * kClasses * 4},
                       {"columns", KILN_DTYPE_FLOAT32, 1, columns_shape, buffers[3], kWidth * 4},
                       {"wide", KILN_DTYPE_FLOAT32, 2, wide_shape, buffers[4], n * kWide * 4}};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.tensors_on_device = 1;
  REQUIRE_MESSAGE(kiln_plan_run_with_options(opencl.plan, &in, 1, out, 4, &options) == KILN_OK, kiln_error_message());
  std::vector<std::vector<float>> want = run_rows(cpu.plan, n);
  for (size_t o = 0; o < want.size(); ++o) {
    CAPTURE(o);
    std::vector<float> got(static_cast<size_t>(elements[o + 1]));
    REQUIRE(api->clEnqueueReadBuffer(commands, buffers[o + 1], CL_TRUE, 0, got.size() * 4, got.data(), 0, nullptr,
                                     nullptr) == CL_SUCCESS);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[o][i]).epsilon(1e-5));
  }
  for (cl_mem memory : buffers) api->clReleaseMemObject(memory);
}

TEST_CASE("a symbolic device plan refuses a size outside its range with the CPU plan's error") {
  LoadedPlan opencl(rows_plan("opencl"));
  constexpr int64_t rows = kMaxRows + 1;
  std::vector<float> input(rows * kWidth, 1.0f), output(input.size()), scores(rows * kClasses), columns(kWidth),
      wide(rows * kWide);
  int64_t shape[] = {rows, kWidth}, scores_shape[] = {rows, kClasses}, columns_shape[] = {kWidth}, wide_shape[] = {rows, kWide};
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, shape, input.data(), input.size() * 4};
  kiln_tensor out[] = {{"scaled", KILN_DTYPE_FLOAT32, 2, shape, output.data(), output.size() * 4},
                       {"scores", KILN_DTYPE_FLOAT32, 2, scores_shape, scores.data(), scores.size() * 4},
                       {"columns", KILN_DTYPE_FLOAT32, 1, columns_shape, columns.data(), columns.size() * 4},
                       {"wide", KILN_DTYPE_FLOAT32, 2, wide_shape, wide.data(), wide.size() * 4}};
  CHECK(kiln_plan_run(opencl.plan, &in, 1, out, 4) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("is 17; the plan allows 0..16") != std::string::npos);
  std::vector<std::vector<float>> after = run_rows(opencl.plan, 3);  // and still runs
  CHECK(after[2][0] != -7.0f);
}

}  // TEST_SUITE
