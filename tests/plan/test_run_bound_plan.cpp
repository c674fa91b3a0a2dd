// Sizes the run decides (docs/symbolic-shapes.md, stage 6), end to end in one process: Tensor graphs
// whose output size is a run-bound variable (a count a kernel computes, a value read from an input)
// go through write_plan and run through libkiln's C API, against plain C++ references; then what a
// caller can get wrong (a value out of range, a negative one, no output_shapes) and hand-made
// plans whose run bindings the loader must refuse.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_contents.h"
#include "plan/plan_format.h"
#include "plan/plan_writer.h"
#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

using namespace kiln;

namespace {

uint32_t format_version(const std::string& bytes) {
  uint32_t version = 0;
  std::memcpy(&version, bytes.data() + plan::header_field::format_version, sizeof version);
  return version;
}

kiln_plan* load(const std::string& bytes) {
  kiln_plan* plan = nullptr;
  REQUIRE_MESSAGE(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_OK, kiln_error_message());
  return plan;
}

// The positions of x's positive elements, as NonZero's plan path computes them: the count is
// run-bound, and position j is the element whose running count of positives is j + 1.
Tensor positive_positions(const Tensor& x, int64_t n) {
  Tensor positive = x.gt(Tensor::zeros({}, ScalarType::Float32));
  Tensor flags = positive.cast(ScalarType::Int64);
  Tensor count = flags.sum();
  Dim found = run_bound_size(count, "positives", 0, n, "test graph 'positives'");
  Tensor running = reshape_to(flags.cumsum(0), {1, n});
  Tensor column = arange_dim(found, ScalarType::Int64);
  Tensor hit = running.eq(reshape_to(column + Tensor::scalar(1, ScalarType::Int64), {found, 1}))
                   .logical_and(reshape_to(positive, {1, n}))
                   .cast(ScalarType::Int64);
  Tensor positions = (hit * reshape_to(Tensor::arange(n, ScalarType::Int64), {1, n})).sum({1});
  return column.lt(count).where(positions, Tensor::zeros({}, ScalarType::Int64));
}

constexpr int64_t kElements = 12;

std::string positives_plan() {
  Tensor x = graph_input("x", {kElements}, ScalarType::Float32);
  return write_plan({{"x", x}}, {{"positions", positive_positions(x, kElements)}, {"doubled", x * 2.0f}});
}

// Runs the positives plan on `values`; returns the positions (the shape the run reports).
std::vector<int64_t> run_positives(const kiln_plan* plan, const std::vector<float>& values) {
  int64_t x_shape[] = {kElements}, bound_shape[] = {kElements};
  alignas(64) int64_t positions[kElements + 4];
  alignas(64) float doubled[kElements];
  for (int64_t& p : positions) p = -7;  // the guard past the bound must survive
  kiln_tensor inputs[] = {{"x", KILN_DTYPE_FLOAT32, 1, x_shape, const_cast<float*>(values.data()), sizeof(float) * kElements}};
  kiln_tensor outputs[] = {{"positions", KILN_DTYPE_INT64, 1, bound_shape, positions, sizeof(int64_t) * kElements},
                           {"doubled", KILN_DTYPE_FLOAT32, 1, x_shape, doubled, sizeof doubled}};
  int64_t shapes[2] = {-1, -1};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.output_shapes = shapes;
  REQUIRE_MESSAGE(kiln_plan_run_with_options(plan, inputs, 1, outputs, 2, &options) == KILN_OK, kiln_error_message());
  CHECK(shapes[1] == kElements);
  for (int64_t i = 0; i < kElements; ++i) CHECK(doubled[i] == values[static_cast<size_t>(i)] * 2.0f);
  for (int64_t i = kElements; i < kElements + 4; ++i) CHECK(positions[i] == -7);
  REQUIRE(shapes[0] >= 0);
  REQUIRE(shapes[0] <= kElements);
  return {positions, positions + shapes[0]};
}

// k (an int64 scalar input) decides the length of the output: [0, 2, 4, ...) of k elements.
std::string input_valued_plan() {
  Tensor k = graph_input("k", {}, ScalarType::Int64);
  Dim length = run_bound_size(k, "k", 0, 8, "input 'k'");
  Tensor column = arange_dim(length, ScalarType::Int64);
  Tensor evens = column.lt(k).where(column * Tensor::scalar(2, ScalarType::Int64), Tensor::zeros({}, ScalarType::Int64));
  return write_plan({{"k", k}}, {{"evens", evens}});
}

kiln_status run_evens(const kiln_plan* plan, int64_t k, int64_t* out, size_t out_bytes, int64_t* out_length) {
  int64_t bound_shape[] = {8};
  kiln_tensor inputs[] = {{"k", KILN_DTYPE_INT64, 0, nullptr, &k, sizeof k}};
  kiln_tensor outputs[] = {{"evens", KILN_DTYPE_INT64, 1, bound_shape, out, out_bytes}};
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.output_shapes = out_length;
  return kiln_plan_run_with_options(plan, inputs, 1, outputs, 1, &options);
}

}  // namespace

TEST_CASE("a count decided by the run: positions of the positive elements, against plain C++") {
  std::string bytes = positives_plan();
  CHECK(format_version(bytes) == plan::kPlanFormatVersionRunBound);
  kiln_plan* plan = load(bytes);

  REQUIRE(kiln_plan_variable_count(plan) == 1);
  kiln_variable_source source = KILN_VARIABLE_FROM_SHAPES;
  const char* name = nullptr;
  int64_t min = -1, max = -1;
  REQUIRE(kiln_plan_variable_info(plan, 0, &name, &min, &max) == KILN_OK);
  CHECK(std::string(name) == "positives");
  CHECK(min == 0);
  CHECK(max == kElements);
  REQUIRE(kiln_plan_variable_source(plan, 0, &source) == KILN_OK);
  CHECK(source == KILN_VARIABLE_FROM_RUN);
  CHECK(kiln_plan_variable_source(plan, 1, &source) == KILN_ERROR_INVALID_ARGUMENT);

  // Before the run the output's shape is its upper bound: the buffer any run fits in.
  int64_t x_shape[] = {kElements};
  kiln_tensor shape_only[] = {{"x", KILN_DTYPE_FLOAT32, 1, x_shape, nullptr, 0}};
  int64_t bound = -1;
  size_t rank = 0;
  REQUIRE(kiln_plan_output_shape(plan, shape_only, 1, 0, &bound, 1, &rank) == KILN_OK);
  CHECK(rank == 1);
  CHECK(bound == kElements);

  std::vector<std::vector<float>> cases = {
      std::vector<float>(kElements, -1.0f),                                  // none: an empty output
      std::vector<float>(kElements, 3.0f),                                   // all
      {-1, 2, 0, 5, -3, 7, 7, 0, -0.5f, 9, -2, 1},                           // some
      {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4},                                  // the last only
      {1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1},                       // the first only
  };
  for (const std::vector<float>& values : cases) {
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < kElements; ++i)
      if (values[static_cast<size_t>(i)] > 0) expected.push_back(i);
    CHECK(run_positives(plan, values) == expected);
  }
  kiln_plan_free(plan);
}

TEST_CASE("an output whose shape the run decides needs output_shapes") {
  kiln_plan* plan = load(positives_plan());
  std::vector<float> values(kElements, 1.0f);
  alignas(64) int64_t positions[kElements];
  alignas(64) float doubled[kElements];
  int64_t x_shape[] = {kElements};
  kiln_tensor inputs[] = {{"x", KILN_DTYPE_FLOAT32, 1, x_shape, values.data(), sizeof(float) * kElements}};
  kiln_tensor outputs[] = {{"positions", KILN_DTYPE_INT64, 1, x_shape, positions, sizeof positions},
                           {"doubled", KILN_DTYPE_FLOAT32, 1, x_shape, doubled, sizeof doubled}};
  CHECK(kiln_plan_run(plan, inputs, 1, outputs, 2) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()) ==
        "kiln_plan_run: output 'positions' has a shape the run decides, (positives); run with "
        "kiln_run_options.output_shapes to learn it");
  // A buffer below the upper bound is refused before anything runs, whatever the run would decide.
  kiln_tensor small[] = {{"positions", KILN_DTYPE_INT64, 1, x_shape, positions, sizeof(int64_t) * (kElements - 1)},
                         {"doubled", KILN_DTYPE_FLOAT32, 1, x_shape, doubled, sizeof doubled}};
  int64_t shapes[2];
  kiln_run_options options;
  kiln_run_options_init(&options);
  options.output_shapes = shapes;
  CHECK(kiln_plan_run_with_options(plan, inputs, 1, small, 2, &options) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()) == "kiln_plan_run: output 'positions' has a buffer of 88 bytes, it needs 96");
  CHECK(run_positives(plan, values).size() == static_cast<size_t>(kElements));
  kiln_plan_free(plan);
}

TEST_CASE("a value read from an input decides a size; out of range or negative is refused, nothing written past") {
  std::string bytes = input_valued_plan();
  CHECK(format_version(bytes) == plan::kPlanFormatVersionRunBound);
  kiln_plan* plan = load(bytes);
  alignas(64) int64_t out[12];
  int64_t length = -1;
  for (int64_t k : {int64_t{0}, int64_t{3}, int64_t{8}, int64_t{1}}) {
    for (int64_t& value : out) value = -7;
    REQUIRE_MESSAGE(run_evens(plan, k, out, sizeof(int64_t) * 8, &length) == KILN_OK, kiln_error_message());
    CHECK(length == k);
    for (int64_t i = 0; i < k; ++i) CHECK(out[i] == 2 * i);
    for (int64_t i = 8; i < 12; ++i) CHECK(out[i] == -7);
  }
  for (int64_t k : {int64_t{9}, int64_t{-1}, int64_t{1} << 40}) {
    for (int64_t& value : out) value = -7;
    CHECK(run_evens(plan, k, out, sizeof(int64_t) * 8, &length) == KILN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(kiln_error_message()) ==
          "kiln_plan_run: input 'k' decided k=" + std::to_string(k) + " in this run; the plan allows 0..8");
    for (int64_t value : out) CHECK(value == -7);  // refused before any kernel that depends on it
  }
  REQUIRE_MESSAGE(run_evens(plan, 5, out, sizeof(int64_t) * 8, &length) == KILN_OK, kiln_error_message());
  CHECK(length == 5);
  CHECK(out[4] == 8);
  kiln_plan_free(plan);
}

TEST_CASE("plans without run-bound sizes keep their format versions") {
  Tensor x = graph_input("x", {4}, ScalarType::Float32);
  CHECK(format_version(write_plan({{"x", x}}, {{"y", x * 3.0f}})) == plan::kPlanFormatVersionFixedShapes);
  Tensor s = symbolic_graph_input("s", {size_variable("n", 1, 9)}, ScalarType::Float32);
  CHECK(format_version(write_plan({{"s", s}}, {{"y", s * 3.0f}})) == plan::kPlanFormatVersionSymbolic);
}

// Hand-made plans with no kernels: an int64 input 'k' whose value is variable 'k', and an output
// of k int64 elements. The writer's and the loader's refusals of bad bindings.
namespace {

PlanContents kernel_less_contents() {
  PlanContents contents;
  set_host_target(contents);
  contents.variables = {{"k", 0, 8}};
  contents.inputs = {{"k", KILN_DTYPE_INT64, {}, -1}};
  contents.outputs = {{"y", KILN_DTYPE_INT64, {size_variable("k", 0, 8)}, -1}};
  PlanRunBindingContents binding;
  binding.variable = "k";
  binding.source = PlanSlotContents{plan_fb::SlotKind_GraphInput, 0, 0, 8};
  binding.dtype = KILN_DTYPE_INT64;
  binding.origin = "input 'k'";
  contents.run_bindings = {binding};
  return contents;
}

std::string load_error(const PlanContents& contents) {
  std::string bytes = serialize_plan(contents);
  kiln_plan* plan = nullptr;
  kiln_status status = kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan);
  kiln_plan_free(plan);
  return status == KILN_ERROR_INVALID_PLAN ? kiln_error_message() : "status " + std::to_string(status);
}

}  // namespace

TEST_CASE("hostile run bindings are refused at load, naming the binding") {
  {
    PlanContents contents = kernel_less_contents();
    kiln_plan* plan = load(serialize_plan(contents));  // the well-formed one loads
    kiln_plan_free(plan);
  }
  PlanContents outside = kernel_less_contents();
  outside.run_bindings[0].source = PlanSlotContents{plan_fb::SlotKind_Arena, 0, 64, 8};
  CHECK(load_error(outside) ==
        "invalid plan: run binding 0 ('k') reads an element outside the arena or a fixed-size input or output");
  PlanContents past_input = kernel_less_contents();
  past_input.run_bindings[0].source.offset = 8;
  CHECK(load_error(past_input) ==
        "invalid plan: run binding 0 ('k') reads an element outside the arena or a fixed-size input or output");
  PlanContents wrong_type = kernel_less_contents();
  wrong_type.run_bindings[0].dtype = KILN_DTYPE_FLOAT64;
  CHECK(load_error(wrong_type) == "invalid plan: run binding 0 ('k') reads a value of dtype " +
                                      std::to_string(KILN_DTYPE_FLOAT64) + " (int32 or int64 is required)");
  PlanContents wrong_size = kernel_less_contents();
  wrong_size.run_bindings[0].source.size = 4;
  CHECK(load_error(wrong_size) == "invalid plan: run binding 0 ('k') reads 4 bytes for one int64");
  PlanContents late = kernel_less_contents();
  late.run_bindings[0].after_kernel = 0;
  CHECK(load_error(late) == "invalid plan: run binding 0 ('k') is read after kernel 0 (the plan has 0)");

  // What the writer refuses itself: a binding twice, one of an undefined variable, and a variable
  // that is an input's dimension as well.
  PlanContents twice = kernel_less_contents();
  twice.run_bindings.push_back(twice.run_bindings[0]);
  CHECK_THROWS_WITH_AS(serialize_plan(twice), "variable 'k' is bound twice by the run", UserError);
  PlanContents unknown = kernel_less_contents();
  unknown.run_bindings[0].variable = "m";
  CHECK_THROWS_WITH_AS(serialize_plan(unknown), "a run binding of 'm', which the plan does not define", UserError);
  PlanContents shaped = kernel_less_contents();
  shaped.inputs.push_back({"x", KILN_DTYPE_FLOAT32, {size_variable("k", 0, 8)}, -1});
  CHECK_THROWS_WITH_AS(serialize_plan(shaped), "input 'x' has a shape over 'k', which only the run decides", UserError);
}

// A kernel-less plan compiled for one value of input 'p' (int64 [2]): (3, 4).
namespace {

PlanContents pinned_contents() {
  PlanContents contents;
  set_host_target(contents);
  contents.inputs = {{"p", KILN_DTYPE_INT64, {2}, -1}};
  contents.outputs = {{"o", KILN_DTYPE_FLOAT32, {1}, -1}};
  int64_t value[] = {3, 4};
  contents.pinned_inputs = {{0, std::string(reinterpret_cast<const char*>(value), sizeof value)}};
  return contents;
}

kiln_status run_pinned(const kiln_plan* plan, int64_t first, int64_t second) {
  alignas(64) int64_t p[] = {first, second};
  alignas(64) float o[1];
  int64_t p_shape[] = {2}, o_shape[] = {1};
  kiln_tensor inputs[] = {{"p", KILN_DTYPE_INT64, 1, p_shape, p, sizeof p}};
  kiln_tensor outputs[] = {{"o", KILN_DTYPE_FLOAT32, 1, o_shape, o, sizeof o}};
  return kiln_plan_run(plan, inputs, 1, outputs, 1);
}

}  // namespace

TEST_CASE("a pinned input: format version 6, its value checked on every run, hostile pins refused") {
  std::string bytes = serialize_plan(pinned_contents());
  CHECK(format_version(bytes) == plan::kPlanFormatVersionRunBound);
  kiln_plan* plan = load(bytes);
  CHECK(run_pinned(plan, 3, 4) == KILN_OK);
  CHECK(run_pinned(plan, 3, 5) == KILN_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(kiln_error_message()) ==
        "kiln_plan_run: input 'p' holds (3, 5); this plan was compiled for (3, 4) only (kiln compile --value p=...)");
  CHECK(run_pinned(plan, 3, 4) == KILN_OK);
  kiln_plan_free(plan);

  PlanContents short_bytes = pinned_contents();
  short_bytes.pinned_inputs[0].bytes.resize(4);
  CHECK(load_error(short_bytes) == "invalid plan: the pinned value of input 'p' has 4 bytes; the input has 16");
  PlanContents twice = pinned_contents();
  twice.pinned_inputs.push_back(twice.pinned_inputs[0]);
  CHECK(load_error(twice) == "invalid plan: input 'p' is pinned twice");
  PlanContents missing = pinned_contents();
  missing.pinned_inputs[0].input = 3;
  CHECK_THROWS_WITH_AS(serialize_plan(missing), "a pinned value of input 3, which the plan does not have", UserError);
  PlanContents device = pinned_contents();
  device.device = "opencl";
  CHECK_THROWS_WITH_AS(serialize_plan(device), "unsupported: inputs compiled for one value (kiln compile --value) in a device plan",
                       UserError);
}
