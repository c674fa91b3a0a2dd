// Symbolic plans end to end (docs/plan-format.md, "Symbolic plans"; stage 3 of
// docs/symbolic-shapes.md): a plan built by hand as PlanContents, its kernels compiled from ASTs
// with DEFINE_VARs (as tests/codegen/test_cpu_variables.cpp does) and linked with LLD, serialized,
// loaded with libkiln's C API and run at several values of its three variables against plain C++;
// the C API's variable, dimension and output-shape queries; and every misuse error of a run,
// after each of which the same plan runs correctly again.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "codegen_test_helpers.h"
#include "kiln/kiln.h"
#include "npy_file.h"
#include "plan/link_shared_object.h"
#include "plan/plan_contents.h"
#include "plan/plan_format.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

constexpr int64_t kMaxN = 64, kMaxRows = 8, kMaxCols = 16;

UOpPtr var_n() { return variable("n", 1, kMaxN); }
UOpPtr var_rows() { return variable("rows", 1, kMaxRows); }
UOpPtr var_cols() { return variable("cols", 1, kMaxCols); }

// t[i] = a[i] * 2 + b[i] for i < n: slots t (arena), a, b.
UOpPtr scale_add_kernel() {
  UOpPtr t = global(dtypes::f32, kMaxN, 0), a = global(dtypes::f32, kMaxN, 1), b = global(dtypes::f32, kMaxN, 2);
  UOpPtr i = range(var_n(), 0);
  return kernel("sym_scale_add",
                {store(index(t, i), load(index(a, i)) * const_float(dtypes::f32, 2.0) + load(index(b, i)))});
}

// y[j] = t[j // 2] + j % 2 for j < 2 * n: slots y (output), t (arena). Its extent is an expression.
UOpPtr interleave_kernel() {
  UOpPtr y = global(dtypes::f32, 2 * kMaxN, 0), t = global(dtypes::f32, kMaxN, 1);
  UOpPtr j = range(var_n() * 2, 0);
  return kernel("sym_interleave", {store(index(y, j), load(index(t, j / 2)) + cast(j % 2, dtypes::f32))});
}

// s[r] = sum over c < cols of x[r * cols + c] for r < rows: two variables, read in name order
// (cols, rows), which are plan variables 0 and 2.
UOpPtr row_sum_kernel() {
  UOpPtr s = global(dtypes::f32, kMaxRows, 0), x = global(dtypes::f32, kMaxRows * kMaxCols, 1);
  UOpPtr cols = var_cols(), r = range(var_rows(), 0), c = range(cols, 1);
  return kernel("sym_row_sums", {store(index(s, r), reduce(Ops::ADD, load(index(x, r * cols + c)), {c}))});
}

PlanSlotContents slot(plan_fb::SlotKind kind, int index, int64_t offset, Dim size) { return {kind, index, offset, size}; }

PlanValueContents value(const std::string& name, std::vector<Dim> shape) {
  PlanValueContents value;
  value.name = name;
  value.dtype = KILN_DTYPE_FLOAT32;
  value.shape = std::move(shape);
  return value;
}

PlanKernelContents kernel_contents(const std::string& symbol, std::vector<PlanSlotContents> slots, Dim extent,
                                   std::vector<std::string> variables) {
  PlanKernelContents kernel;
  kernel.symbol = symbol;
  kernel.slots = std::move(slots);
  kernel.parallel_extent = extent;
  kernel.variables = std::move(variables);
  return kernel;
}

// Inputs a [n], b [n], x [rows, cols]; outputs y [2 * n], s [rows]; the arena holds t [n].
PlanContents symbolic_contents() {
  Dim n(var_n()), rows(var_rows()), cols(var_cols());
  PlanContents contents;
  set_host_target(contents);
  contents.variables = {{"rows", 1, kMaxRows}, {"n", 1, kMaxN}, {"cols", 1, kMaxCols}};  // sorted by the writer
  contents.inputs = {value("a", {n}), value("b", {n}), value("x", {rows, cols})};
  contents.outputs = {value("y", {n * 2}), value("s", {rows})};
  contents.arena_bytes = 4 * kMaxN;
  using K = plan_fb::SlotKind;
  contents.kernels = {
      kernel_contents("sym_scale_add",
                      {slot(K::SlotKind_Arena, 0, 0, n * 4), slot(K::SlotKind_GraphInput, 0, 0, n * 4),
                       slot(K::SlotKind_GraphInput, 1, 0, n * 4)},
                      n, {"n"}),
      kernel_contents("sym_interleave",
                      {slot(K::SlotKind_GraphOutput, 0, 0, n * 8), slot(K::SlotKind_Arena, 0, 0, n * 4)}, n * 2, {"n"}),
      kernel_contents("sym_row_sums",
                      {slot(K::SlotKind_GraphOutput, 1, 0, rows * 4), slot(K::SlotKind_GraphInput, 2, 0, rows * cols * 4)},
                      rows, {"rows", "cols"}),
  };
  std::vector<std::string> objects;
  for (const UOpPtr& ast : {scale_add_kernel(), interleave_kernel(), row_sum_kernel()})
    objects.push_back(cpu_compile_kernel(ast).object);
  contents.code = link_shared_object(objects);
  return contents;
}

// The plan file, compiled once for all test cases.
const std::string& symbolic_plan() {
  static const std::string plan = serialize_plan(symbolic_contents());
  return plan;
}

struct PlanDeleter {
  void operator()(kiln_plan* plan) const { kiln_plan_free(plan); }
};
using PlanPointer = std::unique_ptr<kiln_plan, PlanDeleter>;

PlanPointer load_symbolic_plan() {
  kiln_plan* plan = nullptr;
  kiln_status status = kiln_plan_load_buffer(symbolic_plan().data(), symbolic_plan().size(), &plan);
  INFO(kiln_error_message());
  REQUIRE(status == KILN_OK);
  return PlanPointer(plan);
}

// A float buffer, 64-byte aligned, or deliberately 4 bytes off (the staging path).
class Floats {
 public:
  Floats(size_t count, bool misaligned = false)
      : storage_(static_cast<float*>(std::aligned_alloc(64, (4 * count + 127) / 64 * 64))) {
    data_ = storage_.get() + (misaligned ? 1 : 0);
    for (size_t i = 0; i < count; ++i) data_[i] = -1000.0f;
    count_ = count;
  }
  float* data() { return data_; }
  float& operator[](size_t i) { return data_[i]; }
  size_t bytes() const { return 4 * count_; }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> storage_;
  float* data_;
  size_t count_;
};

// One run's tensors at (n, rows, cols), with inputs filled and the expected outputs computed in C++.
struct Case {
  int64_t n, rows, cols;
  bool misaligned = false;
  int64_t a_shape[1], b_shape[1], x_shape[2], y_shape[1], s_shape[1];
  Floats a, b, x, y, s;
  std::vector<float> expected_y, expected_s;

  Case(int64_t n_, int64_t rows_, int64_t cols_, bool misaligned_ = false)
      : n(n_), rows(rows_), cols(cols_), misaligned(misaligned_), a_shape{n_}, b_shape{n_}, x_shape{rows_, cols_},
        y_shape{2 * n_}, s_shape{rows_}, a(static_cast<size_t>(n_), misaligned_), b(static_cast<size_t>(n_)),
        x(static_cast<size_t>(rows_ * cols_), misaligned_), y(static_cast<size_t>(2 * n_), misaligned_),
        s(static_cast<size_t>(rows_)) {
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<float>(i % 11) - 4.5f;
      b[static_cast<size_t>(i)] = static_cast<float>(i % 5) * 0.25f;
    }
    for (int64_t k = 0; k < rows * cols; ++k) x[static_cast<size_t>(k)] = static_cast<float>(k * 3 % 17) - 8.0f;
    for (int64_t j = 0; j < 2 * n; ++j) {
      size_t i = static_cast<size_t>(j / 2);
      expected_y.push_back(a[i] * 2.0f + b[i] + static_cast<float>(j % 2));
    }
    for (int64_t r = 0; r < rows; ++r) {
      float sum = 0.0f;  // small integers: any summation order gives this exactly
      for (int64_t c = 0; c < cols; ++c) sum += x[static_cast<size_t>(r * cols + c)];
      expected_s.push_back(sum);
    }
  }
  std::vector<kiln_tensor> inputs() {
    return {{"a", KILN_DTYPE_FLOAT32, 1, a_shape, a.data(), a.bytes()},
            {"b", KILN_DTYPE_FLOAT32, 1, b_shape, b.data(), b.bytes()},
            {"x", KILN_DTYPE_FLOAT32, 2, x_shape, x.data(), x.bytes()}};
  }
  std::vector<kiln_tensor> outputs() {
    return {{"y", KILN_DTYPE_FLOAT32, 1, y_shape, y.data(), y.bytes()},
            {"s", KILN_DTYPE_FLOAT32, 1, s_shape, s.data(), s.bytes()}};
  }
  kiln_status run(const kiln_plan* plan) {
    std::vector<kiln_tensor> in = inputs(), out = outputs();
    return kiln_plan_run(plan, in.data(), in.size(), out.data(), out.size());
  }
  void check_outputs() {
    for (int64_t j = 0; j < 2 * n; ++j) {
      CAPTURE(j);
      CHECK(y[static_cast<size_t>(j)] == expected_y[static_cast<size_t>(j)]);
    }
    for (int64_t r = 0; r < rows; ++r) {
      CAPTURE(r);
      CHECK(s[static_cast<size_t>(r)] == expected_s[static_cast<size_t>(r)]);
    }
  }
};

void check_runs(const kiln_plan* plan, int64_t n, int64_t rows, int64_t cols, bool misaligned = false) {
  CAPTURE(n);
  CAPTURE(rows);
  CAPTURE(cols);
  Case run(n, rows, cols, misaligned);
  kiln_status status = run.run(plan);
  INFO(kiln_error_message());
  REQUIRE(status == KILN_OK);
  run.check_outputs();
}

// The status and message of one call.
struct Outcome {
  kiln_status status;
  std::string message;
};
Outcome outcome(kiln_status status) { return {status, kiln_error_message()}; }

}  // namespace

TEST_SUITE("symbolic plans") {

TEST_CASE("a symbolic plan is format version 2, a fixed one keeps version 1") {
  const std::string& plan = symbolic_plan();
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(plan.data()) + plan::header_field::format_version) == 2);
  PlanContents fixed;
  set_host_target(fixed);
  fixed.outputs = {value("y", {Dim(4)})};
  std::string fixed_plan = serialize_plan(fixed);
  CHECK(plan::read_u32(reinterpret_cast<const unsigned char*>(fixed_plan.data()) + plan::header_field::format_version) ==
        1);
}

TEST_CASE("runs at many values of its three variables equal a plain C++ reference") {
  PlanPointer plan = load_symbolic_plan();
  for (auto [n, rows, cols] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {7, 3, 5}, {33, 8, 16}, {64, 2, 9}, {12, 5, 1}, {64, 8, 16}, {2, 1, 16}})
    check_runs(plan.get(), n, rows, cols);
  // Unaligned buffers go through the staging space, which is sized for the maxima and copied at
  // this run's sizes.
  check_runs(plan.get(), 13, 6, 7, true);
  check_runs(plan.get(), kMaxN, kMaxRows, kMaxCols, true);
}

TEST_CASE("one thread, a capped run and many runs in turn give the same outputs") {
  PlanPointer plan = load_symbolic_plan();
  kiln_run_options options;
  kiln_run_options_init(&options);
  for (int threads : {1, 2}) {
    options.thread_count = threads;
    for (int64_t n : {int64_t{3}, int64_t{40}}) {
      Case run(n, 4, 3);
      std::vector<kiln_tensor> in = run.inputs(), out = run.outputs();
      kiln_status status = kiln_plan_run_with_options(plan.get(), in.data(), in.size(), out.data(), out.size(), &options);
      INFO(kiln_error_message());
      REQUIRE(status == KILN_OK);
      run.check_outputs();
    }
  }
}

TEST_CASE("the C API lists the variables and each dimension's symbolic form") {
  PlanPointer plan = load_symbolic_plan();
  REQUIRE(kiln_plan_variable_count(plan.get()) == 3);
  const char* names[] = {"cols", "n", "rows"};
  int64_t maxima[] = {kMaxCols, kMaxN, kMaxRows};
  for (size_t v = 0; v < 3; ++v) {
    const char* name = nullptr;
    int64_t min = 0, max = 0;
    REQUIRE(kiln_plan_variable_info(plan.get(), v, &name, &min, &max) == KILN_OK);
    CHECK(std::string(name) == names[v]);
    CHECK(min == 1);
    CHECK(max == maxima[v]);
  }
  CHECK(kiln_plan_variable_info(plan.get(), 3, nullptr, nullptr, nullptr) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("index 3 is out of range (the plan has 3 variables)") != std::string::npos);
  CHECK(kiln_plan_variable_info(nullptr, 0, nullptr, nullptr, nullptr) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(kiln_plan_variable_count(nullptr) == 0);

  // x [rows, cols]: both dims are variables.
  size_t rank = 0;
  const int64_t* shape = nullptr;
  const char* const* dims = nullptr;
  const int64_t* variables = nullptr;
  REQUIRE(kiln_plan_input_info_v2(plan.get(), 2, nullptr, nullptr, &rank, &shape, &dims, &variables) == KILN_OK);
  REQUIRE(rank == 2);
  CHECK(shape[0] == -1);
  CHECK(shape[1] == -1);
  CHECK(std::string(dims[0]) == "rows");
  CHECK(std::string(dims[1]) == "cols");
  CHECK(variables[0] == 2);
  CHECK(variables[1] == 0);
  // y [2 * n]: an expression, no single variable. The old call reports -1 for it.
  const char* name = nullptr;
  kiln_dtype dtype{};
  REQUIRE(kiln_plan_output_info_v2(plan.get(), 0, &name, &dtype, &rank, &shape, &dims, &variables) == KILN_OK);
  CHECK(std::string(name) == "y");
  CHECK(dtype == KILN_DTYPE_FLOAT32);
  REQUIRE(rank == 1);
  CHECK(shape[0] == -1);
  CHECK(std::string(dims[0]) == "n * 2");
  CHECK(variables[0] == -1);
  REQUIRE(kiln_plan_output_info(plan.get(), 0, nullptr, nullptr, &rank, &shape) == KILN_OK);
  CHECK(shape[0] == -1);
  CHECK(kiln_plan_input_info_v2(plan.get(), 3, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr) ==
        KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()).find("kiln_plan_input_info_v2: index 3 is out of range") != std::string::npos);
  // The kernels' extents at the maxima.
  int64_t extent = 0;
  REQUIRE(kiln_plan_kernel_info(plan.get(), 1, nullptr, &extent) == KILN_OK);
  CHECK(extent == 2 * kMaxN);
}

TEST_CASE("kiln_plan_output_shape computes each output's shape from the inputs' shapes") {
  PlanPointer plan = load_symbolic_plan();
  for (auto [n, rows, cols] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{1, 1, 1}, {9, 4, 2}, {64, 8, 16}}) {
    int64_t a_shape[] = {n}, x_shape[] = {rows, cols};
    // Only names, dtypes, ranks and shapes are read: no data, no byte sizes.
    kiln_tensor inputs[] = {{"x", KILN_DTYPE_FLOAT32, 2, x_shape, nullptr, 0},
                            {"a", KILN_DTYPE_FLOAT32, 1, a_shape, nullptr, 0},
                            {"b", KILN_DTYPE_FLOAT32, 1, a_shape, nullptr, 0}};
    int64_t shape[4] = {-7, -7, -7, -7};
    size_t rank = 99;
    REQUIRE(kiln_plan_output_shape(plan.get(), inputs, 3, 0, shape, 4, &rank) == KILN_OK);
    CHECK(rank == 1);
    CHECK(shape[0] == 2 * n);
    CHECK(shape[1] == -7);
    REQUIRE(kiln_plan_output_shape(plan.get(), inputs, 3, 1, shape, 1, nullptr) == KILN_OK);
    CHECK(shape[0] == rows);
  }
  int64_t a_shape[] = {5}, bad_shape[] = {6}, x_shape[] = {2, 2};
  kiln_tensor inputs[] = {{"a", KILN_DTYPE_FLOAT32, 1, a_shape, nullptr, 0},
                          {"b", KILN_DTYPE_FLOAT32, 1, bad_shape, nullptr, 0},
                          {"x", KILN_DTYPE_FLOAT32, 2, x_shape, nullptr, 0}};
  int64_t shape[1] = {-7};
  size_t rank = 99;
  auto call = [&](const kiln_plan* p, size_t output, int64_t* out, size_t capacity) {
    return outcome(kiln_plan_output_shape(p, inputs, 3, output, out, capacity, &rank));
  };
  Outcome mismatch = call(plan.get(), 0, shape, 1);
  CHECK(mismatch.status == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(mismatch.message == "kiln_plan_output_shape: 'a' gives n=5, 'b' gives n=6");
  CHECK(shape[0] == -7);  // untouched on an error
  CHECK(rank == 99);
  inputs[1].shape = a_shape;
  CHECK(call(plan.get(), 0, shape, 0).message == "kiln_plan_output_shape: capacity 0 is less than the rank of output 'y' (1)");
  CHECK(call(plan.get(), 0, nullptr, 1).message == "kiln_plan_output_shape: out_shape is NULL");
  CHECK(call(plan.get(), 2, shape, 1).message ==
        "kiln_plan_output_shape: output_index 2 is out of range (the plan has 2 outputs)");
  CHECK(call(nullptr, 0, shape, 1).message == "kiln_plan_output_shape: plan is NULL");
  CHECK(call(plan.get(), 0, shape, 1).status == KILN_OK);
  CHECK(shape[0] == 10);
}

TEST_CASE("misuse: each error names what is wrong, and the plan runs correctly afterwards") {
  PlanPointer plan = load_symbolic_plan();
  struct Misuse {
    const char* what;
    std::function<Outcome(Case&)> call;
    std::string message;
  };
  auto run_with = [&](Case& run, const std::function<void(std::vector<kiln_tensor>&, std::vector<kiln_tensor>&)>& edit) {
    std::vector<kiln_tensor> in = run.inputs(), out = run.outputs();
    edit(in, out);
    return outcome(kiln_plan_run(plan.get(), in.data(), in.size(), out.data(), out.size()));
  };
  int64_t too_long[] = {kMaxN + 1}, six[] = {6}, flat[] = {6}, zero[] = {0}, eleven[] = {11}, three_rows[] = {3, 0};
  std::vector<Misuse> cases = {
      {"a variable above its range",
       [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[0].shape = too_long; in[1].shape = too_long; }); },
       "kiln_plan_run: input 'a' axis 0 (n) is 65; the plan allows 1..64"},
      {"a variable below its range",
       [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[2].shape = three_rows; }); },
       "kiln_plan_run: input 'x' axis 1 (cols) is 0; the plan allows 1..16"},
      {"an empty input where the range starts at 1",
       [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[0].shape = zero; }); },
       "kiln_plan_run: input 'a' axis 0 (n) is 0; the plan allows 1..64"},
      {"wrong rank", [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[2].rank = 1; in[2].shape = flat; }); },
       "kiln_plan_run: input 'x' has shape (6), rank 1; the plan expects rank 2: (rows, cols)"},
      {"two inputs giving one variable different values",
       [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[1].shape = six; }); },
       "kiln_plan_run: 'a' gives n=5, 'b' gives n=6"},
      {"an output whose shape is not the computed one",
       [&](Case& run) { return run_with(run, [&](auto&, auto& out) { out[0].shape = eleven; }); },
       "kiln_plan_run: output 'y' has shape (11), the plan computes (10) for these inputs"},
      {"an output buffer too small for this run",
       [&](Case& run) { return run_with(run, [&](auto&, auto& out) { out[0].byte_size = 36; }); },
       "kiln_plan_run: output 'y' has a buffer of 36 bytes, it needs 40"},
      {"an input buffer too small for this run",
       [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[2].byte_size = 4; }); },
       "kiln_plan_run: input 'x' has a buffer of 4 bytes, it needs 24"},
      {"NULL input data", [&](Case& run) { return run_with(run, [&](auto& in, auto&) { in[1].data = nullptr; }); },
       "kiln_plan_run: input 'b' has NULL data"},
  };
  for (const Misuse& misuse : cases) {
    CAPTURE(misuse.what);
    Case run(5, 2, 3);
    Outcome result = misuse.call(run);
    CHECK(result.status == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(result.message == misuse.message);
    check_runs(plan.get(), 5, 2, 3);
    check_runs(plan.get(), 17, 7, 11);
  }
}

TEST_CASE("a size that is not monotone in its variable is refused at run time where it passes its buffer") {
  // Slot 0 of the first kernel (the arena) claims 4 * (80 - n) bytes: 64 at the maximum, which the
  // load-time checks accept, but 316 (past the 256-byte arena) at n = 1. The runtime checks every
  // slot's size for the run's values before any kernel runs (defence in depth).
  PlanContents contents = symbolic_contents();
  contents.kernels[0].slots[0].size = (Dim(80) - Dim(var_n())) * 4;
  std::string bytes = serialize_plan(contents);
  kiln_plan* loaded = nullptr;
  REQUIRE(kiln_plan_load_buffer(bytes.data(), bytes.size(), &loaded) == KILN_OK);
  PlanPointer plan(loaded);
  Case small(1, 1, 1);
  Outcome refused = outcome(small.run(plan.get()));
  CHECK(refused.status == KILN_ERROR_INVALID_PLAN);
  CHECK(refused.message == "kiln_plan_run: kernel sym_scale_add slot 0 would touch 316 bytes at these shapes, "
                           "where its buffer has 256");
  check_runs(plan.get(), 20, 2, 2);
}

TEST_CASE("serialize_plan refuses variables the reader would refuse") {
  PlanContents contents;
  set_host_target(contents);
  Dim n(var_n());
  contents.variables = {{"n", 1, kMaxN}};
  contents.outputs = {value("y", {n})};
  CHECK_THROWS_WITH_AS(serialize_plan(contents), doctest::Contains("plan variable 'n' is no input's dimension"), UserError);
  contents.inputs = {value("a", {n * 2})};
  CHECK_THROWS_WITH_AS(serialize_plan(contents), doctest::Contains("plan variable 'n' is no input's dimension"), UserError);
  contents.inputs = {value("a", {n})};
  contents.variables = {{"n", 1, kMaxN}, {"n", 1, 2}};
  CHECK_THROWS_WITH_AS(serialize_plan(contents), doctest::Contains("two plan variables are named 'n'"), UserError);
  contents.variables = {{"n", 5, 2}};
  CHECK_THROWS_WITH_AS(serialize_plan(contents), doctest::Contains("plan variable 'n' has the range 5..2"), UserError);
  contents.variables = {{"m", 1, 4}};
  CHECK_THROWS_WITH_AS(serialize_plan(contents),
                       doctest::Contains("a size expression reads variable 'n', which the plan does not define"),
                       UserError);
}

// For run_symbolic_tools.sh (test plan-symbolic-tools): with KILN_SYMBOLIC_PLAN_DIR set, writes the
// plan, inputs at n = 5, rows = 2, cols = 3 and the expected outputs there as .npy files, so that
// `kiln inspect` and `kiln run` can be checked on a symbolic plan.
TEST_CASE("writes the plan and its files for the tools test") {
  const char* directory = std::getenv("KILN_SYMBOLIC_PLAN_DIR");
  if (directory == nullptr) return;
  std::string dir = directory;
  {
    std::ofstream plan(dir + "/symbolic.kiln", std::ios::binary | std::ios::trunc);
    plan.write(symbolic_plan().data(), static_cast<std::streamsize>(symbolic_plan().size()));
    REQUIRE(plan.good());
  }
  Case run(5, 2, 3);
  auto write = [&](const std::string& name, std::vector<int64_t> shape, const void* data, size_t bytes) {
    tools::write_npy_file(dir + "/" + name + ".npy",
                          {KILN_DTYPE_FLOAT32, std::move(shape), std::string(static_cast<const char*>(data), bytes)});
  };
  write("a", {5}, run.a.data(), run.a.bytes());
  write("b", {5}, run.b.data(), run.b.bytes());
  write("x", {2, 3}, run.x.data(), run.x.bytes());
  write("expected_y", {10}, run.expected_y.data(), 4 * run.expected_y.size());
  write("expected_s", {2}, run.expected_s.data(), 4 * run.expected_s.size());
}

}  // TEST_SUITE
