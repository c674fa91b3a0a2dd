// Fusion: the kernel counts that the issue promises, asserted on the schedule, plus the values the
// fused kernels compute.
#include <doctest/doctest.h>

#include <cmath>

#include "kiln/kiln.hpp"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

size_t kernel_count(const Tensor& t) { return create_schedule({t.data().node}).kernels.size(); }

Tensor ramp(Shape shape, float scale = 0.01f, float offset = -0.5f) {
  std::vector<float> values(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = offset + scale * static_cast<float>(i % 97);
  return Tensor::from_vector(values, shape);
}

TEST_SUITE("tensor") {

TEST_CASE("fusion: (a*b+c).relu() is one kernel") {
  Tensor a = ramp({64, 33}), b = ramp({64, 33}, 0.02f), c = ramp({33}, 0.03f, -0.2f);
  Tensor out = (a * b + c).relu();
  CHECK(kernel_count(out) == 1);
  auto got = out.to_vector<float>();
  auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i) {
    float expected = std::max(va[i] * vb[i] + vc[i % 33], 0.0f);
    REQUIRE(got[i] == doctest::Approx(expected).epsilon(1e-6));
  }
}

TEST_CASE("fusion: (a*b).sum(axis) is one kernel") {
  Tensor a = ramp({16, 40, 8}), b = ramp({16, 40, 8}, 0.005f);
  for (int64_t axis : {0, 1, 2}) {
    Tensor out = (a * b).sum({axis});
    CHECK(kernel_count(out) == 1);
  }
  Tensor out = (a * b).sum({1});
  auto got = out.to_vector<float>();
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t k = 0; k < 8; ++k) {
      double expected = 0;
      for (int64_t j = 0; j < 40; ++j) {
        size_t at = static_cast<size_t>((i * 40 + j) * 8 + k);
        expected += static_cast<double>(va[at]) * vb[at];
      }
      REQUIRE(got[static_cast<size_t>(i * 8 + k)] == doctest::Approx(expected).epsilon(1e-5));
    }
}

TEST_CASE("fusion: softmax over one axis is at most 3 kernels") {
  Tensor x = ramp({12, 50}, 0.1f, -2.0f);
  for (int64_t axis : {0, 1}) {
    Tensor out = x.softmax(axis);
    CHECK(kernel_count(out) <= 3);
  }
  auto got = x.softmax(1).to_vector<float>();
  auto vx = x.to_vector<float>();
  for (size_t row = 0; row < 12; ++row) {
    double max = -INFINITY, total = 0;
    for (size_t j = 0; j < 50; ++j) max = std::max<double>(max, vx[row * 50 + j]);
    for (size_t j = 0; j < 50; ++j) total += std::exp(vx[row * 50 + j] - max);
    for (size_t j = 0; j < 50; ++j)
      REQUIRE(got[row * 50 + j] == doctest::Approx(std::exp(vx[row * 50 + j] - max) / total).epsilon(1e-5));
  }
}

TEST_CASE("fusion: convolution + bias + relu is one kernel") {
  Tensor x = ramp({2, 3, 12, 12}), w = ramp({4, 3, 3, 3}, 0.02f, -0.3f), bias = ramp({4}, 0.1f, -0.1f);
  ConvOptions options;
  CHECK(kernel_count(x.conv(w, bias, options).relu()) == 1);
  options.stride = {2, 2};
  options.dilation = {2, 1};
  CHECK(kernel_count(x.conv(w, bias, options).relu()) == 1);
  // With padding, the input is first copied into a zero-padded buffer (one more kernel), so that
  // the conv's loads carry no bounds tests; the bias and relu stay in the conv's kernel.
  options.padding = {1, 1, 1, 1};
  CHECK(kernel_count(x.conv(w, bias, options).relu()) == 2);
  CHECK(kernel_count(x.conv(w, bias, options)) == 2);
}

TEST_CASE("fusion: a matmul and its bias are one kernel; so is a reduction's epilogue") {
  Tensor a = ramp({32, 48}), bias = ramp({24});
  // A row-major (K, N) operand with N a multiple of 4 is read in place: the vectorised output
  // columns load contiguous lanes of its rows.
  Tensor b = ramp({48, 24});
  CHECK(kernel_count(a.matmul(b) + bias) == 1);
  // Weights stored (N, K), as Gemm's transB gives them, are copied into (K, N) order first (folded
  // into the weights when constant).
  Tensor weight_rows = ramp({24, 48});
  CHECK(kernel_count(a.matmul(weight_rows.transpose()) + bias) == 2);
  // With N not a multiple of 4 the layouts swap: (N, K) rows are read in place, a (K, N) operand is
  // transposed first so that the scalar loop over K reads contiguously.
  CHECK(kernel_count(a.matmul(ramp({22, 48}).transpose()) + ramp({22})) == 1);
  CHECK(kernel_count(a.matmul(ramp({48, 22})) + ramp({22})) == 2);
  CHECK(kernel_count(a.matmul(ramp({48, 8})) + ramp({8})) == 1);  // a narrow operand stays fused
  CHECK(kernel_count((a.sum({1}) * 3.0).sqrt()) == 1);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
