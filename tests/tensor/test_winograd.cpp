// Winograd F(2x2, 3x3) convolution (src/tensor/winograd.cpp) against the direct convolution and a
// double-precision reference: odd and even image sizes, padding 0/1 and asymmetric, batch > 1,
// with and without bias, and the dispatch rule of Tensor::conv.
//
// Tolerance: the inputs here are uniform in [-1, 1) (not the 1/64 grid of test_nn.cpp, which would
// make the direct conv exact and hide nothing). Against a float64 reference, the largest error of
// these cases was 0.5-2.5e-7·sqrt(C)·max|y| for Winograd (C = 1 the worst); the direct conv's was
// 0.8-2x Winograd's (it sums 9·C products in one accumulator, each Winograd product sums C).
// The bound, 1e-6·sqrt(C)·max|y|, leaves a margin of 4x or more; a wrong tap, tile or pad gives
// errors of order max|y|/10 and fails by orders of magnitude.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <optional>

#include "codegen/target.h"
#include "nn_test_helpers.h"
#include "tensor/winograd.h"

namespace kiln {
namespace {

using nn_test::Array;
using nn_test::for_each_index;

Array uniform_array(const Shape& shape, uint64_t seed) {
  Array a(shape);
  nn_test::Random random(seed);
  for (double& v : a.values) v = static_cast<float>(2.0 * random.uniform() - 1.0);
  return a;
}

// The convolution in double precision, stride 1, 3x3 (pads: top, left, bottom, right).
Array reference_conv(const Array& x, const Array& w, const std::optional<Array>& bias, std::array<int64_t, 4> pads) {
  int64_t filters = w.shape[0], channels = x.shape[1];
  Shape out_shape{x.shape[0], filters, x.shape[2] + pads[0] + pads[2] - 2, x.shape[3] + pads[1] + pads[3] - 2};
  Array out(out_shape);
  for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
    double total = bias ? bias->values[static_cast<size_t>(o[1])] : 0.0;
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t b = 0; b < 3; ++b) {
          int64_t y = o[2] - pads[0] + a, z = o[3] - pads[1] + b;
          if (y < 0 || z < 0 || y >= x.shape[2] || z >= x.shape[3]) continue;
          total += x.at({o[0], c, y, z}) * w.at({o[1], c, a, b});
        }
    out.at(o) = total;
  });
  return out;
}

double expected_scale(const Array& a) {
  double scale = 0;
  for (double v : a.values) scale = std::max(scale, std::fabs(v));
  return scale;
}

struct Errors {
  double max_abs = 0, max_reference = 0;
};

Errors errors(const Tensor& actual, const Array& expected) {
  REQUIRE(actual.shape() == expected.shape);
  std::vector<double> got = actual.to_vector<double>();
  Errors e;
  for (size_t i = 0; i < got.size(); ++i) {
    e.max_abs = std::max(e.max_abs, std::fabs(got[i] - expected.values[i]));
    e.max_reference = std::max(e.max_reference, std::fabs(expected.values[i]));
  }
  return e;
}

// Restores the mode a test changed.
struct ModeGuard {
  WinogradMode saved = winograd_mode();
  ~ModeGuard() { set_winograd_mode(saved); }
};

struct WinogradCase {
  Shape input;
  int64_t filters;
  std::vector<int64_t> padding;  // as ConvOptions takes it
  std::array<int64_t, 4> pads;   // the same, as (top, left, bottom, right)
  bool bias;
};

TEST_CASE("winograd conv equals the direct conv within its rounding error") {
  ModeGuard guard;
  const WinogradCase cases[] = {
      {{1, 1, 3, 3}, 1, {}, {0, 0, 0, 0}, false},        // one output, one tile, cropped
      {{1, 3, 8, 8}, 4, {1}, {1, 1, 1, 1}, true},        // even output, whole tiles
      {{1, 5, 7, 9}, 6, {1}, {1, 1, 1, 1}, true},        // odd outputs: the last tile row/column cropped
      {{2, 4, 6, 5}, 3, {}, {0, 0, 0, 0}, true},         // batch 2, padding 0, 4 x 3 output
      {{3, 8, 11, 10}, 16, {1, 0}, {1, 0, 1, 0}, false},  // batch 3, padding on rows only
      {{1, 6, 9, 7}, 5, {0, 1, 2, 0}, {0, 1, 2, 0}, true},  // asymmetric begin/end padding
      {{2, 64, 14, 14}, 32, {1}, {1, 1, 1, 1}, true},    // ResNet-like: many channels
      {{1, 32, 5, 5}, 64, {1}, {1, 1, 1, 1}, true},      // fewer tiles than lanes
  };
  uint64_t seed = 900;
  for (const WinogradCase& c : cases) {
    CAPTURE(shape_string(c.input));
    CAPTURE(c.filters);
    CAPTURE(c.pads);
    Array x = uniform_array(c.input, seed++), w = uniform_array({c.filters, c.input[1], 3, 3}, seed++);
    std::optional<Array> bias;
    if (c.bias) bias = uniform_array({c.filters}, seed++);
    ConvOptions options;
    options.padding = c.padding;
    Tensor xt = nn_test::to_tensor(x), wt = nn_test::to_tensor(w), bt = bias ? nn_test::to_tensor(*bias) : Tensor();
    REQUIRE(winograd_eligible(xt, wt, bt, options));
    Array expected = reference_conv(x, w, bias, c.pads);

    set_winograd_mode(WinogradMode::Off);
    Tensor direct = xt.conv(wt, bt, options);
    Tensor winograd = winograd_conv(xt, wt, bt, options);
    Errors direct_error = errors(direct, expected), winograd_error = errors(winograd, expected);
    double bound = 1e-6 * std::sqrt(static_cast<double>(c.input[1])) * expected_scale(expected);
    CAPTURE(direct_error.max_abs);
    CAPTURE(winograd_error.max_abs);
    CHECK(winograd_error.max_abs <= bound);
    CHECK(errors(winograd, nn_test::to_array(direct)).max_abs <= 2 * bound);

    // Always: Tensor::conv itself takes the Winograd path (the same values).
    set_winograd_mode(WinogradMode::Always);
    CHECK(errors(xt.conv(wt, bt, options), nn_test::to_array(winograd)).max_abs == 0.0);
  }
}

TEST_CASE("winograd conv: the epilogue after it, and non-contiguous inputs") {
  ModeGuard guard;
  Array x = uniform_array({2, 4, 9, 6}, 950), w = uniform_array({8, 4, 3, 3}, 951), b = uniform_array({8}, 952);
  ConvOptions options;
  options.padding = {1};
  Array expected = reference_conv(x, w, b, {1, 1, 1, 1});
  for (double& v : expected.values) v = std::max(v, 0.0);
  set_winograd_mode(WinogradMode::Always);
  Tensor y = nn_test::to_permuted_view(x).conv(nn_test::to_sliced_view(w), nn_test::to_tensor(b), options).relu();
  nn_test::check_close(y, expected, 2e-5, 1e-5);
}

TEST_CASE("winograd dispatch: only eligible convolutions, and KILN_WINOGRAD=0 turns it off") {
  ModeGuard guard;
  Tensor x = Tensor::zeros({1, 64, 14, 14}), w = Tensor::zeros({64, 64, 3, 3}), b = Tensor::zeros({64});
  ConvOptions same;
  same.padding = {1};
  CHECK(winograd_eligible(x, w, b, same));
  ConvOptions strided = same;
  strided.stride = {2};
  CHECK_FALSE(winograd_eligible(x, w, b, strided));
  ConvOptions dilated = same;
  dilated.dilation = {1, 2};
  CHECK_FALSE(winograd_eligible(x, w, b, dilated));
  ConvOptions grouped = same;
  grouped.groups = 2;
  CHECK_FALSE(winograd_eligible(x, Tensor::zeros({64, 32, 3, 3}), b, grouped));
  CHECK_FALSE(winograd_eligible(x, Tensor::zeros({64, 64, 1, 1}), b, same));
  CHECK_FALSE(winograd_eligible(x.cast(ScalarType::Float16), w.cast(ScalarType::Float16), Tensor(), same));
  CHECK_FALSE(winograd_eligible(Tensor::zeros({1, 64, 14}), Tensor::zeros({64, 64, 3}), b, same));
  ConvOptions cropped = same;
  cropped.padding = {-1};
  CHECK_FALSE(winograd_eligible(x, w, b, cropped));
  // A stride list of the wrong length stays an error of the direct path, even when forced.
  set_winograd_mode(WinogradMode::Always);
  ConvOptions wrong = same;
  wrong.stride = {1, 1, 1};
  CHECK_FALSE(use_winograd(x, w, b, wrong));
  CHECK_THROWS_AS((void)x.conv(w, b, wrong), Error);
  // Auto: 14x14 outputs stay direct (the transformed weights would be read cold for 49 tiles);
  // 56x56 takes Winograd where the rule is measured (32 vector registers).
  // (A weight of distinct values: one broadcast value stays direct at any size.)
  set_winograd_mode(WinogradMode::Auto);
  Tensor trained = nn_test::to_tensor(uniform_array({64, 64, 3, 3}, 77));
  CHECK_FALSE(use_winograd(x, trained, b, same));
  Tensor large = Tensor::zeros({1, 64, 56, 56});
  CHECK(use_winograd(large, trained, b, same) == (host_cpu_caps().vector_registers >= 32));
  CHECK_FALSE(use_winograd(large, w, b, same));
  set_winograd_mode(WinogradMode::Off);
  CHECK_FALSE(use_winograd(x, w, b, same));
  // The direct conv: the padded input's copy, the weight's panels and the conv (with the relu).
  CHECK(nn_test::kernel_count(x.conv(w, b, same).relu()) == 3);
}

}  // namespace
}  // namespace kiln
