// Every ALU op, CAST and BITCAST of every dtype the device holds, run as OpenCL kernels on edge-case
// inputs and compared exactly with the IR evaluator (ir/evaluate.h, kiln's reference semantics).
// Elements where the evaluator calls the result undefined (division by zero, out-of-range shifts)
// are skipped; NaN equals NaN (its payload is not compared), zeros must agree in sign.
#include <cmath>
#include <limits>

#include "ir/evaluate.h"
#include "support/error.h"
#include "opencl_test_helpers.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<ScalarValue> edge_values(DType dtype) {
  std::vector<ScalarValue> values;
  if (dtype.is_float()) {
    const double inf = std::numeric_limits<double>::infinity();
    for (double v : {0.0, -0.0, 1.0, -1.5, 3.25, 2.5, -2.5, 0.1, 1e10, -1e-3, 65504.0, 7.0, inf, -inf, std::nan("")})
      values.push_back(ScalarValue{dtype, 0, v});
  } else if (dtype.is_bool()) {
    values = {ScalarValue{dtype, 0, 0.0}, ScalarValue{dtype, 1, 0.0}};
  } else {
    int128 low = min_value(dtype), high = max_value(dtype);
    for (int128 v : {int128{0}, int128{1}, int128{-1}, int128{7}, int128{-7}, int128{2}, int128{13}, int128{100},
                     int128{-128}, int128{33}, low, high, low + 1, high - 1})
      values.push_back(ScalarValue{dtype, wrap_integer(v, dtype), 0.0});
  }
  // Each value as stored in the buffer (floats rounded to the dtype).
  for (ScalarValue& v : values) {
    TestBuffer cell(dtype, 1);
    cell.set(0, v);
    v = cell.get(0);
  }
  return values;
}


// MAX of floats (docs/kernel-ast.md): NaN wins, and max(-0, +0) = +0.
ScalarValue float_max(const ScalarValue& x, const ScalarValue& y) {
  double a = x.real, b = y.real;
  double result = std::isnan(a) || std::isnan(b) ? std::nan("") : a > b ? a : b > a ? b : (std::signbit(a) ? b : a);
  return ScalarValue{x.dtype, 0, result};
}

DType result_of(Ops op, DType dtype) {
  return op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ ? dtypes::bool_ : dtype;
}

}  // namespace

TEST_SUITE("opencl") {

TEST_CASE("every ALU op of every dtype matches the IR evaluator") {
  for (DType dtype : opencl_dtypes()) {
    CAPTURE(dtype.name());
    std::vector<ScalarValue> values = edge_values(dtype);
    auto n = static_cast<int64_t>(values.size() * values.size());
    TestBuffer a_data(dtype, n), b_data(dtype, n), c_data(dtype, n);
    for (int64_t k = 0; k < n; ++k) {
      a_data.set(k, values[static_cast<size_t>(k) / values.size()]);
      b_data.set(k, values[static_cast<size_t>(k) % values.size()]);
      c_data.set(k, values[static_cast<size_t>(k * 7 + 3) % values.size()]);
    }
    UOpPtr i = range(n, 0);
    UOpPtr a = load(index(global(dtype, n, 0), i)), b = load(index(global(dtype, n, 1), i));
    UOpPtr c = load(index(global(dtype, n, 2), i));
    std::vector<Ops> ops = alu_ops_of(dtype);
    std::vector<UOpPtr> stores;
    std::vector<std::unique_ptr<TestBuffer>> outputs;
    std::vector<TestBuffer*> buffers{&a_data, &b_data, &c_data};
    for (size_t o = 0; o < ops.size(); ++o) {
      Ops op = ops[o];
      DType result = result_of(op, dtype);
      std::vector<UOpPtr> sources{a};
      if (op == Ops::WHERE) sources = {UOp::make(Ops::CMPLT, dtypes::bool_, {a, b}), b, c};
      else if (op == Ops::MULACC) sources = {a, b, c};
      else if (op_group(op) == OpGroup::Binary) sources.push_back(b);
      outputs.push_back(std::make_unique<TestBuffer>(result, n));
      buffers.push_back(outputs.back().get());
      UOpPtr out = global(result, n, static_cast<int64_t>(3 + o));
      stores.push_back(store(index(out, i), UOp::make(op, result, sources)));
    }
    run_opencl_kernel(kernel("alu_" + dtype.name(), stores), buffers, n);
    for (size_t o = 0; o < ops.size(); ++o) {
      CAPTURE(op_name(ops[o]));
      int checked = 0;
      for (int64_t k = 0; k < n; ++k) {
        ScalarValue x = a_data.get(k), y = b_data.get(k), z = c_data.get(k);
        std::optional<ScalarValue> expected;
        if (ops[o] == Ops::WHERE) {
          std::optional<ScalarValue> condition = fold_alu(Ops::CMPLT, dtypes::bool_, std::vector<ScalarValue>{x, y});
          if (condition) expected = condition->integer != 0 ? y : z;
        } else if (ops[o] == Ops::MULACC) {
          expected = fold_alu(ops[o], dtype, std::vector<ScalarValue>{x, y, z});
        } else if (ops[o] == Ops::MAX && dtype.is_float()) {
          expected = float_max(x, y);  // the evaluator does not fold float MAX
        } else if (op_group(ops[o]) == OpGroup::Binary) {
          expected = fold_alu(ops[o], result_of(ops[o], dtype), std::vector<ScalarValue>{x, y});
        } else {
          expected = fold_alu(ops[o], dtype, std::vector<ScalarValue>{x});
        }
        if (!expected) continue;
        TestBuffer stored(expected->dtype, 1);
        stored.set(0, *expected);
        ScalarValue got = outputs[o]->get(k);
        INFO(op_name(ops[o]), "(", describe(x), ", ", describe(y), ", ", describe(z), "): got ", describe(got),
             ", expected ", describe(stored.get(0)));
        CHECK(same_value(got, stored.get(0)));
        ++checked;
      }
      CHECK(checked > 0);
    }
  }
}

TEST_CASE("CAST and BITCAST between every pair of dtypes match the IR evaluator") {
  std::vector<DType> all = opencl_dtypes();
  for (DType from : all) {
    CAPTURE(from.name());
    std::vector<ScalarValue> values = edge_values(from);
    if (from.is_float())  // values that saturate, truncate and round in the narrower types
      for (double v : {1e20, -1e20, 300.7, -300.7, 70000.5, 4294967296.0, 2147483647.5, -0.75, 0.99, 1.0000001})
        values.push_back(ScalarValue{from, 0, v});
    auto n = static_cast<int64_t>(values.size());
    TestBuffer input(from, n);
    for (int64_t k = 0; k < n; ++k) input.set(k, values[static_cast<size_t>(k)]);
    UOpPtr i = range(n, 0);
    UOpPtr x = load(index(global(from, n, 0), i));
    std::vector<UOpPtr> stores;
    std::vector<std::unique_ptr<TestBuffer>> outputs;
    std::vector<TestBuffer*> buffers{&input};
    struct Conversion { Ops op; DType to; };
    std::vector<Conversion> conversions;
    for (DType to : all) {
      conversions.push_back({Ops::CAST, to});
      if (to.scalar_bytes() == from.scalar_bytes() && to != from) conversions.push_back({Ops::BITCAST, to});
    }
    for (size_t o = 0; o < conversions.size(); ++o) {
      outputs.push_back(std::make_unique<TestBuffer>(conversions[o].to, n));
      buffers.push_back(outputs.back().get());
      UOpPtr out = global(conversions[o].to, n, static_cast<int64_t>(1 + o));
      stores.push_back(store(index(out, i), UOp::make(conversions[o].op, conversions[o].to, {x})));
    }
    run_opencl_kernel(kernel("cast_" + from.name(), stores), buffers, n);
    for (size_t o = 0; o < conversions.size(); ++o) {
      CAPTURE(op_name(conversions[o].op));
      CAPTURE(conversions[o].to.name());
      for (int64_t k = 0; k < n; ++k) {
        std::optional<ScalarValue> expected =
            fold_alu(conversions[o].op, conversions[o].to, std::vector<ScalarValue>{input.get(k)});
        if (!expected) continue;
        TestBuffer stored(conversions[o].to, 1);
        stored.set(0, *expected);
        ScalarValue got = outputs[o]->get(k);
        // A bitcast to a float may make a NaN whose payload the device need not keep.
        INFO(describe(input.get(k)), " → ", describe(got), ", expected ", describe(stored.get(0)));
        CHECK(same_value(got, stored.get(0)));
      }
    }
  }
}

TEST_CASE("masked loads read nothing outside the mask, masked stores write only inside it") {
  const int64_t n = 40;
  TestBuffer input(dtypes::f32, 10), output(dtypes::f32, n);
  for (int64_t k = 0; k < 10; ++k) input.set_real(k, static_cast<double>(k) + 0.5);
  UOpPtr i = range(n, 0);
  // out[i] = i < 10 ? in[i] : -1 for even i; odd i untouched (0xA5 bytes stay).
  UOpPtr in_range = UOp::make(Ops::CMPLT, dtypes::bool_, {i, idx(10)});
  UOpPtr even = UOp::make(Ops::CMPEQ, dtypes::bool_, {UOp::make(Ops::MOD, dtypes::index, {i, idx(2)}), idx(0)});
  UOpPtr value = load(index(global(dtypes::f32, 10, 1), i, in_range), const_float(dtypes::f32, -1.0));
  run_opencl_kernel(kernel("masked", {store(index(global(dtypes::f32, n, 0), i, even), value)}), {&output, &input}, n);
  for (int64_t k = 0; k < n; ++k) {
    CAPTURE(k);
    if (k % 2 == 1) CHECK(output.bytes()[k * 4] == 0xA5);
    else CHECK(output.get(k).real == (k < 10 ? static_cast<double>(k) + 0.5 : -1.0));
  }
}

TEST_CASE("vector values: contiguous vector loads and stores, VECTORIZE, GEP and a vector accumulator") {
  // out[4r .. 4r+3] = Σ_j in[j*16 + 4r .. +3] + (lane 3, 2, 1, 0 of the same), r < 4, j < 5
  const int64_t rows = 4, steps = 5;
  DType f32x4 = DType(ScalarType::Float32, 4);
  TestBuffer input(dtypes::f32, 16 * steps), output(dtypes::f32, 16);
  for (int64_t k = 0; k < 16 * steps; ++k) input.set_real(k, static_cast<double>(k % 7) * 0.25 + static_cast<double>(k));
  UOpPtr r = range(rows, 0), j = range(steps, 1000);
  UOpPtr in = global(dtypes::f32, 16 * steps, 1);
  UOpPtr at = UOp::make(Ops::ADD, dtypes::index, {UOp::make(Ops::MUL, dtypes::index, {j, idx(16)}),
                                                  UOp::make(Ops::MUL, dtypes::index, {r, idx(4)})});
  UOpPtr vector = UOp::make(Ops::LOAD, f32x4, {index(in, at)});
  std::vector<UOpPtr> reversed;
  for (int64_t lane = 3; lane >= 0; --lane) reversed.push_back(UOp::make(Ops::GEP, dtypes::f32, {vector}, std::vector<int64_t>{lane}));
  UOpPtr sum = UOp::make(Ops::ADD, f32x4, {vector, UOp::make(Ops::VECTORIZE, f32x4, reversed)});
  UOpPtr total = reduce(Ops::ADD, sum, {j});
  UOpPtr out_at = UOp::make(Ops::MUL, dtypes::index, {r, idx(4)});
  run_opencl_kernel(kernel("vectors", {store(index(global(dtypes::f32, 16, 0), out_at), total)}), {&output, &input}, rows);
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t lane = 0; lane < 4; ++lane) {
      float expected = 0;
      for (int64_t step = 0; step < steps; ++step)
        expected += static_cast<float>(input.get(step * 16 + row * 4 + lane).real) +
                    static_cast<float>(input.get(step * 16 + row * 4 + 3 - lane).real);
      CAPTURE(row);
      CAPTURE(lane);
      CHECK(output.get(row * 4 + lane).real == doctest::Approx(expected).epsilon(1e-6));
    }
}

TEST_CASE("a kernel whose dtype the device lacks (f64) is refused with an error naming the dtype and the op") {
  UOpPtr i = range(4, 0);
  CDeviceFeatures no_extensions = opencl_features();
  no_extensions.f16 = false;
  no_extensions.f64 = false;
  UOpPtr f64_kernel = kernel("f64_copy", {store(index(global(dtypes::f64, 4, 0), i), load(index(global(dtypes::f64, 4, 1), i)))});
  CHECK_THROWS_WITH_AS(opencl_render_kernel(f64_kernel, no_extensions),
                       doctest::Contains("unsupported: f64 (DEFINE_GLOBAL in kernel 'f64_copy')"), UserError);
  CHECK_THROWS_WITH_AS(opencl_render_kernel(f64_kernel, no_extensions), doctest::Contains("cl_khr_fp64"), UserError);
  // A device without cl_khr_fp16 still runs f16 (bits converted by vload_half and vstore_half_rte)
  // and bf16 (bits and shifts): neither needs an extension.
  UOpPtr f16_kernel = kernel("f16_copy", {store(index(global(dtypes::f16, 4, 0), i), load(index(global(dtypes::f16, 4, 1), i)))});
  CHECK(opencl_render_kernel(f16_kernel, no_extensions).source.find("__global const ushort* data1") != std::string::npos);
  UOpPtr bf16_kernel = kernel("bf16_copy", {store(index(global(dtypes::bf16, 4, 0), i), load(index(global(dtypes::bf16, 4, 1), i)))});
  CHECK(opencl_render_kernel(bf16_kernel, no_extensions).source.find("__global const ushort* data1") != std::string::npos);
}

}  // TEST_SUITE
