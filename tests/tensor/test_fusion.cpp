// Fusion: the kernel counts that the issue promises, asserted on the schedule, plus the values the
// fused kernels compute.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "codegen/target.h"
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

// The values of concat({sigmoid(a), b, sigmoid(c)}, 1) for a (2, 3, R), b (2, 4, R), c (2, 1, R).
void check_sigmoid_concat(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c) {
  auto row = static_cast<size_t>(a.shape()[2]);
  auto got = out.to_vector<float>();
  auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>();
  auto sigmoid = [](float v) { return 1.0 / (1.0 + std::exp(-static_cast<double>(v))); };
  for (size_t n = 0; n < 2; ++n)
    for (size_t ch = 0; ch < 8; ++ch)
      for (size_t i = 0; i < row; ++i) {
        double expected = ch < 3 ? sigmoid(va[(n * 3 + ch) * row + i])
                          : ch < 7 ? static_cast<double>(vb[(n * 4 + ch - 3) * row + i])
                                   : sigmoid(vc[n * row + i]);
        REQUIRE(got[(n * 8 + ch) * row + i] == doctest::Approx(expected).epsilon(1e-6));
      }
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

TEST_CASE("fusion: a sigmoid under a concatenation is stored by its own kernel") {
  // WHERE evaluates every arm of a concatenation, so a sigmoid computed inside the concat kernel
  // would run for every output element; stored first, the concat is a copy. A concat of cheap arms
  // (a chain of selects, however long) stays one kernel.
  Tensor a = ramp({2, 3, 5}), b = ramp({2, 4, 5}, 0.02f), c = ramp({2, 1, 5}, 0.05f, -1.0f);
  Tensor cheap = Tensor::concat({a + 1.0, b * 2.0, c - 3.0, a * a}, 1);
  CHECK(kernel_count(cheap) == 1);
  Tensor out = Tensor::concat({a.sigmoid(), b, c.sigmoid()}, 1);
  CHECK(kernel_count(out) == 3);
  check_sigmoid_concat(out, a, b, c);
}

TEST_CASE("fusion: a concatenation of whole-vector rows is stored by one kernel per input") {
  // Each input is computed over its own shape and stored at its offset (rangeify's concat stores):
  // the sigmoids go straight into the result, with no buffer of their own and no masked select.
  Tensor a = ramp({2, 3, 32}), b = ramp({2, 4, 32}, 0.02f), c = ramp({2, 1, 32}, 0.05f, -1.0f);
  Tensor out = Tensor::concat({a.sigmoid(), b, c.sigmoid()}, 1);
  Schedule schedule = create_schedule({out.data().node});
  CHECK(schedule.kernels.size() == 3);
  CHECK(schedule.intermediate_bytes == 0);
  check_sigmoid_concat(out, a, b, c);
  // Along the innermost axis (rows of 3 and 4) it stays one masked kernel: each input would be
  // stored in short strided pieces.
  Tensor inner = Tensor::concat({ramp({8, 3}).sigmoid(), ramp({8, 4})}, 1);
  CHECK(kernel_count(inner) == 2);  // the sigmoid, stored first, and the concatenation
}

TEST_CASE("fusion: reductions concatenated are stored at their offsets by their own kernels") {
  // Two contractions under one select would have shared a kernel, so each was stored on its own
  // and the concatenation copied them; stored one input at a time, each reduction's kernel stores
  // into its slice of the result directly.
  Tensor a = ramp({2, 4, 32, 8}), b = ramp({2, 4, 32, 8}, 0.02f), c = ramp({2, 3, 32, 8}, 0.03f);
  Tensor first = (a * b).sum({3}).relu(), second = (c * c).sum({3});
  Tensor out = Tensor::concat({first, second}, 1);
  Schedule schedule = create_schedule({out.data().node});
  CHECK(schedule.kernels.size() == 2);
  CHECK(schedule.intermediate_bytes == 0);
  auto got = out.to_vector<float>();
  auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>();
  for (size_t n = 0; n < 2; ++n)
    for (size_t ch = 0; ch < 7; ++ch)
      for (size_t i = 0; i < 32; ++i) {
        double expected = 0;
        for (size_t k = 0; k < 8; ++k)
          expected += ch < 4 ? static_cast<double>(va[((n * 4 + ch) * 32 + i) * 8 + k]) * vb[((n * 4 + ch) * 32 + i) * 8 + k]
                             : static_cast<double>(vc[((n * 3 + ch - 4) * 32 + i) * 8 + k]) * vc[((n * 3 + ch - 4) * 32 + i) * 8 + k];
        if (ch < 4) expected = std::max(expected, 0.0);
        REQUIRE(got[(n * 7 + ch) * 32 + i] == doctest::Approx(expected).epsilon(1e-5));
      }
}

TEST_CASE("fusion: a pool under a 1x1 conv is not recomputed per filter") {
  // The conv reads every pooled value once per filter (16 here), through a broadcast: fused, each
  // read would redo the 3x3 window sum. A reduction reached through a broadcast is stored, so the
  // pool is a kernel of its own.
  Tensor x = ramp({1, 4, 9, 9}), w = ramp({16, 4, 1, 1}, 0.03f, -0.2f);
  PoolOptions pool;
  pool.kernel = {3, 3};
  pool.stride = {1, 1};
  pool.padding = {1, 1, 1, 1};
  Tensor pooled = x.avg_pool(pool);
  Tensor out = pooled.conv(w, Tensor(), ConvOptions{});
  // The pool's kernels plus those of the same conv over a stored input (its weight panels, itself).
  CHECK(kernel_count(out) == kernel_count(pooled) + kernel_count(ramp({1, 4, 9, 9}).conv(w, Tensor(), ConvOptions{})));
  auto got = out.to_vector<float>();
  auto vp = pooled.to_vector<float>(), vw = w.to_vector<float>();
  for (size_t f = 0; f < 16; ++f)
    for (size_t p = 0; p < 81; ++p) {
      double expected = 0;
      for (size_t ch = 0; ch < 4; ++ch) expected += static_cast<double>(vw[f * 4 + ch]) * vp[ch * 81 + p];
      REQUIRE(got[f * 81 + p] == doctest::Approx(expected).epsilon(1e-5));
    }
}

TEST_CASE("fusion: at 13x13, whose width splits into no register tile rows, a conv's output stays NCHW") {
  // The next 1x1 conv reads a channels-last copy of it, but computed in the copy's order the conv
  // would take the 13 pixels of a row as its tile's rows, which 4 to 8 rows do not divide
  // (tensor_conv.cpp, Tensor::conv): it is stored NCHW and copied.
  int64_t channels = 2 * host_cpu_caps().vector_lanes(dtypes::f32);
  Tensor a = ramp({1, channels, 13, 13}, 0.01f, -0.3f);
  Tensor w1 = ramp({channels, channels, 1, 1}, 0.003f, -0.05f), w2 = ramp({channels, channels, 1, 1}, 0.002f, -0.04f);
  Tensor x = a.conv(w1, Tensor(), ConvOptions{}).relu();
  Tensor y = x.conv(w2, Tensor(), ConvOptions{});
  Schedule schedule = create_schedule({y.data().node});
  int64_t channels_last_convs = 0, copies = 0;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    if (kernel.name().rfind("r_13_13_", 0) == 0) ++channels_last_convs;
    if (kernel.name().rfind("E_13_13_" + std::to_string(channels) + "_", 0) == 0) ++copies;
  }
  CHECK(channels_last_convs == 0);
  CHECK(copies == 2);  // of a and of x
}

TEST_CASE("fusion: a small-image 1x1 conv reads a channels-last copy; residual activations are computed once") {
  // A 1x1 conv at 7×7 (49 pixels fill no whole vector) reads its input through a copy in (N, H, W,
  // C) order. A residual chain a' = relu(conv(a) + a) reads each activation twice: the conv's copy
  // and the next add. The activation is stored once and both read it; recomputed instead, each add
  // would evaluate the chain back to its start, so the last kernel would read every earlier
  // conv's output. With 16 channels each activation is stored (C, H, W) and copied; with 32 (two
  // vectors of filters on this host, or more) the conv that computes it stores it channels-last
  // itself, and the next add reads that copy through its permutation: only the chain's input is
  // copied.
  int64_t lanes = host_cpu_caps().vector_lanes(dtypes::f32);
  for (int64_t channels : {int64_t{16}, 2 * lanes}) {
    CAPTURE(channels);
    auto c = static_cast<size_t>(channels);
    Tensor a = ramp({1, channels, 7, 7}, 0.01f, -0.3f);
    std::vector<Tensor> weights;
    for (int block = 0; block < 4; ++block)
      weights.push_back(ramp({channels, channels, 1, 1}, 0.002f * static_cast<float>(block + 1) * 16.0f / static_cast<float>(channels), -0.08f));
    Tensor x = a;
    for (const Tensor& w : weights) x = (x.conv(w, Tensor(), ConvOptions{}) + x).relu();
    Schedule schedule = create_schedule({x.data().node});
    std::string copy_prefix = "E_7_7_" + std::to_string(channels) + "_";
    int64_t copies = 0, channels_last_convs = 0;
    for (const ScheduledKernel& kernel : schedule.kernels) {
      if (kernel.name().rfind(copy_prefix, 0) == 0) ++copies;
      if (kernel.name().rfind("r_7_7_", 0) == 0) ++channels_last_convs;
      CHECK_MESSAGE(kernel.buffers.size() <= 4, kernel.name(), " reads ", kernel.buffers.size() - 1, " buffers");
    }
    if (channels == 16) {
      CHECK(copies > 0);
    } else {
      CHECK(copies == 1);  // of the chain's input, a ramp computed by no conv
      CHECK(channels_last_convs >= 3);  // every conv whose output the next conv reads
    }
    // Reference: the same chain in doubles.
    std::vector<double> value;
    for (float v : a.to_vector<float>()) value.push_back(v);
    for (const Tensor& w : weights) {
      auto vw = w.to_vector<float>();
      std::vector<double> next(value.size());
      for (size_t f = 0; f < c; ++f)
        for (size_t p = 0; p < 49; ++p) {
          double sum = value[f * 49 + p];
          for (size_t ch = 0; ch < c; ++ch) sum += static_cast<double>(vw[f * c + ch]) * value[ch * 49 + p];
          next[f * 49 + p] = std::max(sum, 0.0);
        }
      value = next;
    }
    auto got = x.to_vector<float>();
    for (size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(value[i]).epsilon(1e-5));
  }
}

TEST_CASE("fusion: a 1x1 conv over a long reduction reads a channels-last copy where vectors are many") {
  // At 28×28 the pixels fill whole vectors. Over 256 channels the conv still reads a channels-last
  // copy on a target with 32 vector registers (tensor_conv.cpp, reads_channels_last); over 64 it
  // reads NCHW.
  bool many_registers = host_cpu_caps().vector_registers >= 32;
  for (int64_t channels : {256, 64}) {
    CAPTURE(channels);
    Tensor x = ramp({1, channels, 28, 28}, 0.0007f, -0.2f), w = ramp({32, channels, 1, 1}, 0.0003f, -0.4f);
    Tensor y = x.conv(w, Tensor(), ConvOptions{});
    Schedule schedule = create_schedule({y.data().node});
    std::string copy_prefix = "E_28_28_" + std::to_string(channels) + "_";
    bool channels_last_copy = false;
    for (const ScheduledKernel& kernel : schedule.kernels)
      channels_last_copy = channels_last_copy || kernel.name().rfind(copy_prefix, 0) == 0;
    CHECK(channels_last_copy == (many_registers && channels == 256));
    auto vx = x.to_vector<float>(), vw = w.to_vector<float>(), got = y.to_vector<float>();
    REQUIRE(got.size() == size_t{32} * 784);
    for (size_t f = 0; f < 32; ++f)
      for (size_t p = 0; p < 784; ++p) {
        double expected = 0;
        for (size_t ch = 0; ch < static_cast<size_t>(channels); ++ch)
          expected += static_cast<double>(vw[f * channels + ch]) * vx[ch * 784 + p];
        REQUIRE(got[f * 784 + p] == doctest::Approx(expected).epsilon(1e-4).scale(1.0));
      }
  }
}

TEST_CASE("fusion: a conv's BatchNorm is stored with the conv, not recomputed by the next conv") {
  // conv1 → x·a + b (a BatchNorm's scale and shift, no activation) → conv2. The second conv reads
  // its input once per filter row; the affine epilogue is stored by conv1's kernel, so conv2 reads
  // one stored input and its weights, not conv1's raw sums plus a and b.
  Tensor x = ramp({1, 8, 8, 8}), w1 = ramp({16, 8, 1, 1}, 0.02f, -0.4f), w2 = ramp({16, 16, 1, 1}, 0.015f, -0.3f);
  Tensor a = ramp({1, 16, 1, 1}, 0.1f, 0.5f), b = ramp({1, 16, 1, 1}, 0.05f, -0.2f);
  Tensor y = x.conv(w1, Tensor(), ConvOptions{}) * a + b;
  Tensor out = y.conv(w2, Tensor(), ConvOptions{});
  Schedule schedule = create_schedule({out.data().node});
  const ScheduledKernel& last = schedule.kernels.back();
  CHECK_MESSAGE(last.buffers.size() == 3, last.name(), " binds ", last.buffers.size(), " buffers");
  auto vx = x.to_vector<float>(), v1 = w1.to_vector<float>(), v2 = w2.to_vector<float>();
  auto va = a.to_vector<float>(), vb = b.to_vector<float>();
  std::vector<double> mid(16 * 64);
  for (size_t f = 0; f < 16; ++f)
    for (size_t p = 0; p < 64; ++p) {
      double sum = 0;
      for (size_t ch = 0; ch < 8; ++ch) sum += static_cast<double>(v1[f * 8 + ch]) * vx[ch * 64 + p];
      mid[f * 64 + p] = sum * va[f] + vb[f];
    }
  auto got = out.to_vector<float>();
  for (size_t f = 0; f < 16; ++f)
    for (size_t p = 0; p < 64; ++p) {
      double expected = 0;
      for (size_t ch = 0; ch < 16; ++ch) expected += static_cast<double>(v2[f * 16 + ch]) * mid[ch * 64 + p];
      REQUIRE(got[f * 64 + p] == doctest::Approx(expected).epsilon(1e-5));
    }
}

TEST_CASE("fusion: an expensive value read by a whole-tensor min and max and by other work is computed once") {
  // DynamicQuantizeLinear's reads of a GELU: its min, its max and the quantization. Each of the
  // three kernels recomputed the GELU; now one kernel stores it and the others read it.
  auto total_flops = [](const std::vector<Tensor>& outputs) {
    std::vector<UOpPtr> roots;
    for (const Tensor& t : outputs) roots.push_back(t.data().node);
    double flops = 0;
    for (const ScheduledKernel& kernel : create_schedule(roots).kernels) flops += kernel.estimated_flops;
    return flops;
  };
  Tensor x = ramp({64, 256}, 0.05f, -2.0f);
  Tensor y = x.gelu();
  Tensor low = y.min(), high = y.max();
  Tensor scaled = (y - low) / (high - low);
  double gelu_alone = total_flops({y});
  // The min, max and scaling add some 15 ops per element to one GELU's ~60; recomputing the GELU in
  // each of their kernels would make it three GELUs.
  CHECK(total_flops({low, high, scaled}) < 1.5 * gelu_alone);
  // Only the GELU's value is stored: one kernel computes it whole (its inner erf terms, read
  // several times within it, stay inline), then the min, the max and the scaling read it.
  std::vector<UOpPtr> roots{low.data().node, high.data().node, scaled.data().node};
  CHECK(create_schedule(roots).kernels.size() == 4);
  auto values = y.to_vector<float>();
  float expected_low = *std::min_element(values.begin(), values.end());
  float expected_high = *std::max_element(values.begin(), values.end());
  CHECK(low.item() == expected_low);
  CHECK(high.item() == expected_high);
  auto got = scaled.to_vector<float>();
  for (size_t i = 0; i < got.size(); i += 97)
    CHECK(got[i] == doctest::Approx((values[i] - expected_low) / (expected_high - expected_low)).epsilon(1e-6));
  // From 64K elements the min and max are taken in parts (Tensor's reduce), 64 values then one:
  // the GELU is still computed once.
  Tensor big = ramp({256, 512}, 0.01f, -2.0f).gelu();
  Tensor big_low = big.min(), big_high = big.max();
  Tensor big_scaled = (big - big_low) / (big_high - big_low);
  CHECK(total_flops({big_low, big_high, big_scaled}) < 1.5 * total_flops({big}));
  auto big_values = big.to_vector<float>();
  CHECK(big_high.item() == *std::max_element(big_values.begin(), big_values.end()));
  CHECK(big_low.item() == *std::min_element(big_values.begin(), big_values.end()));
  // A per-row reduction (softmax's sum of exp) keeps recomputing: only a reduction to one value
  // makes the value stored.
  Tensor rows = x.exp();
  Tensor softmax = rows / rows.sum({1}, true);
  CHECK(kernel_count(softmax) == 2);
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
