// Launch graphs (CUDA graphs) in CUDA plans: a run's second time at the same shapes and buffers
// records its launches once, and runs like it replay them (docs/backends.md, "Launch graphs"). Each
// run here is checked against the CPU plan of the same graph, so a replay that read stale inputs,
// wrong sizes or another run's buffers fails; the plan's debug log says when a graph is recorded,
// so a plan that never recorded one fails too. Part of test-cuda-device-tensors (needs a GPU).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_writer.h"
#include "runtime/cuda/cuda_device.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

constexpr int64_t kWidth = 8, kClasses = 5, kMaxRows = 16;

std::vector<float> wave(size_t count, float scale) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = std::cos(static_cast<float>(i) * 0.61f) * scale;
  return values;
}

// Over x [n, 8]: a scaled ReLU, a matmul with a softmax per row, and the column sums over n rows.
std::string rows_plan(const std::string& device) {
  Dim n = size_variable("n", 0, kMaxRows);
  Tensor x = symbolic_graph_input("x", {n, kWidth}, ScalarType::Float32);
  Tensor scale = Tensor::from_vector(wave(kWidth, 1.5f), {kWidth});
  Tensor m = Tensor::from_vector(wave(kWidth * kClasses, 0.4f), {kWidth, kClasses});
  PlanWriteOptions options;
  options.device = device;
  return write_plan({{"x", x}}, {{"scaled", (x * scale).relu()}, {"scores", x.matmul(m).softmax(-1)}, {"columns", x.sum({0})}},
                    options);
}

// A loaded plan that keeps its debug log lines.
struct LoggedPlan {
  kiln_plan* plan = nullptr;
  std::vector<std::string> lines;
  explicit LoggedPlan(const std::string& bytes) {
    kiln_plan_options options;
    kiln_plan_options_init(&options);
    options.log = [](void* user_data, kiln_log_level, const char* message) {
      static_cast<LoggedPlan*>(user_data)->lines.emplace_back(message);
    };
    options.log_user_data = this;
    options.log_level = KILN_LOG_DEBUG;
    REQUIRE_MESSAGE(kiln_plan_load_buffer_v2(bytes.data(), bytes.size(), &options, &plan) == KILN_OK, kiln_error_message());
  }
  ~LoggedPlan() { kiln_plan_free(plan); }
  int graphs_recorded() const {
    int count = 0;
    for (const std::string& line : lines) count += line.find("recorded a launch graph") != std::string::npos;
    return count;
  }
};

struct Rows {
  std::vector<float> input, scaled, scores, columns;
};

// Runs `plan` at n rows on x = wave * scale (host buffers); the outputs start as -7 everywhere.
Rows run_rows(kiln_plan* plan, int64_t n, float scale) {
  Rows rows;
  auto count = [](int64_t elements) { return static_cast<size_t>(elements) + 1; };  // never empty
  rows.input = wave(count(n * kWidth), scale);
  rows.scaled.assign(count(n * kWidth), -7.0f);
  rows.scores.assign(count(n * kClasses), -7.0f);
  rows.columns.assign(kWidth, -7.0f);
  int64_t x_shape[] = {n, kWidth}, scores_shape[] = {n, kClasses}, columns_shape[] = {kWidth};
  auto bytes = [](int64_t elements) { return static_cast<size_t>(elements) * sizeof(float); };
  kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, rows.input.data(), bytes(n * kWidth)};
  kiln_tensor out[] = {{"scaled", KILN_DTYPE_FLOAT32, 2, x_shape, rows.scaled.data(), bytes(n * kWidth)},
                       {"scores", KILN_DTYPE_FLOAT32, 2, scores_shape, rows.scores.data(), bytes(n * kClasses)},
                       {"columns", KILN_DTYPE_FLOAT32, 1, columns_shape, rows.columns.data(), bytes(kWidth)}};
  REQUIRE_MESSAGE(kiln_plan_run(plan, &in, 1, out, 3) == KILN_OK, kiln_error_message());
  return rows;
}

void check_same(const std::vector<float>& got, const std::vector<float>& expected, size_t count) {
  for (size_t i = 0; i < count; ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-5));
}

void check_rows(const Rows& got, const Rows& expected, int64_t n) {
  check_same(got.scaled, expected.scaled, static_cast<size_t>(n * kWidth));
  check_same(got.scores, expected.scores, static_cast<size_t>(n * kClasses));
  check_same(got.columns, expected.columns, kWidth);
}

}  // namespace

TEST_CASE("a CUDA plan records a launch graph at a shape's second run and replays it with each run's inputs") {
  LoggedPlan cpu(rows_plan("")), gpu(rows_plan("cuda"));
  // n = 3 three times (direct, recorded, replayed), n = 5 twice, back to 3, then 0 and 16 once.
  int64_t sizes[] = {3, 3, 3, 5, 5, 3, 0, 16, 5};
  float scale = 1.0f;
  for (int64_t n : sizes) {
    scale = -scale * 1.25f;  // new input values every run: a replay must read this run's input
    CAPTURE(n);
    check_rows(run_rows(gpu.plan, n, scale), run_rows(cpu.plan, n, scale), n);
  }
  CHECK(gpu.graphs_recorded() == 2);  // n = 3 and n = 5
  CHECK(cpu.graphs_recorded() == 0);
}

TEST_CASE("KILN_CUDA_GRAPHS=0 at load: the plan launches kernel by kernel") {
  setenv("KILN_CUDA_GRAPHS", "0", 1);
  LoggedPlan gpu(rows_plan("cuda"));
  unsetenv("KILN_CUDA_GRAPHS");
  LoggedPlan cpu(rows_plan(""));
  for (int run = 0; run < 3; ++run) check_rows(run_rows(gpu.plan, 4, 1.0f + run), run_rows(cpu.plan, 4, 1.0f + run), 4);
  CHECK(gpu.graphs_recorded() == 0);
}

TEST_CASE("device tensors: each set of the caller's buffers gets its own graph") {
  LoggedPlan cpu(rows_plan("")), gpu(rows_plan("cuda"));
  CudaDevice& cuda = CudaDevice::instance();
  constexpr int64_t n = 6;
  int64_t x_shape[] = {n, kWidth}, scores_shape[] = {n, kClasses}, columns_shape[] = {kWidth};
  size_t x_bytes = n * kWidth * 4, scores_bytes = n * kClasses * 4, columns_bytes = kWidth * 4;
  struct Buffers {
    DeviceMemory x, scaled, scores, columns;
  };
  Buffers sets[2];
  for (Buffers& set : sets)
    set = {cuda.allocate(x_bytes), cuda.allocate(x_bytes), cuda.allocate(scores_bytes), cuda.allocate(columns_bytes)};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.tensors_on_device = 1;
  // Alternating sets, three runs each: each set's first run is direct, its second records.
  for (int run = 0; run < 6; ++run) {
    const Buffers& set = sets[run % 2];
    float scale = 0.5f + static_cast<float>(run);
    Rows expected = run_rows(cpu.plan, n, scale);
    cuda.copy_to_device(set.x, expected.input.data(), x_bytes);
    kiln_tensor in{"x", KILN_DTYPE_FLOAT32, 2, x_shape, set.x.handle, x_bytes};
    kiln_tensor out[] = {{"scaled", KILN_DTYPE_FLOAT32, 2, x_shape, set.scaled.handle, x_bytes},
                         {"scores", KILN_DTYPE_FLOAT32, 2, scores_shape, set.scores.handle, scores_bytes},
                         {"columns", KILN_DTYPE_FLOAT32, 1, columns_shape, set.columns.handle, columns_bytes}};
    REQUIRE_MESSAGE(kiln_plan_run_with_options(gpu.plan, &in, 1, out, 3, &options) == KILN_OK, kiln_error_message());
    Rows got;
    got.scaled.resize(n * kWidth);
    got.scores.resize(n * kClasses);
    got.columns.resize(kWidth);
    cuda.copy_to_host(got.scaled.data(), set.scaled, x_bytes);
    cuda.copy_to_host(got.scores.data(), set.scores, scores_bytes);
    cuda.copy_to_host(got.columns.data(), set.columns, columns_bytes);
    CAPTURE(run);
    check_rows(got, expected, n);
  }
  CHECK(gpu.graphs_recorded() == 2);
  for (Buffers& set : sets)
    for (DeviceMemory memory : {set.x, set.scaled, set.scores, set.columns}) cuda.free(memory);
}
