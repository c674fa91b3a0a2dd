// Small models built with the Tensor API against plain C++ references computed in double:
// a 2-layer MLP and a small CNN. Tolerance: the norm-wise relative error ||got - ref|| / ||ref||
// and the largest element error relative to the largest |ref| are both at most 1e-5.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "kiln/kiln.hpp"

namespace kiln {
namespace {

struct Data {
  std::vector<float> values;
  Shape shape;
  Tensor tensor() const { return Tensor::from_vector(values, shape); }
};

Data random_data(Shape shape, uint32_t seed, float scale) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(-scale, scale);
  Data data{std::vector<float>(1), shape};
  int64_t count = 1;
  for (int64_t s : shape) count *= s;
  data.values.resize(static_cast<size_t>(count));
  for (float& v : data.values) v = distribution(generator);
  return data;
}

void check_close(const std::vector<float>& got, const std::vector<double>& expected) {
  REQUIRE(got.size() == expected.size());
  double error = 0, norm = 0, max_error = 0, max_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double d = got[i] - expected[i];
    error += d * d;
    norm += expected[i] * expected[i];
    max_error = std::max(max_error, std::abs(d));
    max_ref = std::max(max_ref, std::abs(expected[i]));
  }
  INFO("relative error " << std::sqrt(error / norm) << ", max error " << max_error << " of " << max_ref);
  CHECK(std::sqrt(error / norm) <= 1e-5);
  CHECK(max_error <= 1e-5 * max_ref);
}

// y[n][o] = sum_i x[n][i] * w[i][o] + b[o]
std::vector<double> linear(const std::vector<double>& x, int64_t n, int64_t in, const Data& w, const Data& b) {
  int64_t out = w.shape[1];
  std::vector<double> y(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double total = b.values[static_cast<size_t>(o)];
      for (int64_t i = 0; i < in; ++i) total += x[static_cast<size_t>(r * in + i)] * w.values[static_cast<size_t>(i * out + o)];
      y[static_cast<size_t>(r * out + o)] = total;
    }
  return y;
}

// Direct 2-D convolution, NCHW, square padding and stride.
std::vector<double> conv2d(const std::vector<double>& x, Shape xs, const Data& w, const Data& b, int64_t pad, int64_t stride,
                           Shape& out_shape) {
  int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], f = w.shape[0], k = w.shape[2];
  int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (wd + 2 * pad - k) / stride + 1;
  out_shape = {n, f, oh, ow};
  std::vector<double> y(static_cast<size_t>(n * f * oh * ow));
  for (int64_t in = 0; in < n; ++in)
    for (int64_t of = 0; of < f; ++of)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double total = b.values[static_cast<size_t>(of)];
          for (int64_t ic = 0; ic < c; ++ic)
            for (int64_t ky = 0; ky < k; ++ky)
              for (int64_t kx = 0; kx < k; ++kx) {
                int64_t iy = oy * stride - pad + ky, ix = ox * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                total += x[static_cast<size_t>(((in * c + ic) * h + iy) * wd + ix)] *
                         w.values[static_cast<size_t>(((of * c + ic) * k + ky) * k + kx)];
              }
          y[static_cast<size_t>(((in * f + of) * oh + oy) * ow + ox)] = total;
        }
  return y;
}

void relu_in_place(std::vector<double>& v) {
  for (double& x : v) x = std::max(x, 0.0);
}

std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

TEST_SUITE("tensor") {

TEST_CASE("model: a 2-layer MLP matches a double-precision reference") {
  Data x = random_data({16, 64}, 1, 1.0f);
  Data w1 = random_data({64, 48}, 2, 0.2f), b1 = random_data({48}, 3, 0.1f);
  Data w2 = random_data({48, 10}, 4, 0.2f), b2 = random_data({10}, 5, 0.1f);
  Tensor hidden = (x.tensor().matmul(w1.tensor()) + b1.tensor()).relu();
  Tensor logits = hidden.matmul(w2.tensor()) + b2.tensor();

  std::vector<double> h = linear(to_double(x.values), 16, 64, w1, b1);
  relu_in_place(h);
  check_close(logits.to_vector<float>(), linear(h, 16, 48, w2, b2));
}

TEST_CASE("model: a small CNN matches a double-precision reference") {
  Data x = random_data({2, 3, 16, 16}, 11, 1.0f);
  Data c1w = random_data({8, 3, 3, 3}, 12, 0.3f), c1b = random_data({8}, 13, 0.1f);
  Data c2w = random_data({16, 8, 3, 3}, 14, 0.2f), c2b = random_data({16}, 15, 0.1f);
  Data fw = random_data({16, 10}, 16, 0.3f), fb = random_data({10}, 17, 0.1f);

  ConvOptions same;
  same.padding = {1, 1, 1, 1};
  ConvOptions strided;
  strided.stride = {2, 2};
  PoolOptions pool;
  pool.kernel = {2, 2};
  Tensor y = x.tensor().conv(c1w.tensor(), c1b.tensor(), same).relu().max_pool(pool);
  y = y.conv(c2w.tensor(), c2b.tensor(), strided).relu().global_avg_pool().reshape({2, 16});
  Tensor logits = y.matmul(fw.tensor()) + fb.tensor();

  Shape s1, s2;
  std::vector<double> r = conv2d(to_double(x.values), x.shape, c1w, c1b, 1, 1, s1);
  relu_in_place(r);
  // 2×2 max pooling, stride 2.
  Shape ps{s1[0], s1[1], s1[2] / 2, s1[3] / 2};
  std::vector<double> pooled(static_cast<size_t>(ps[0] * ps[1] * ps[2] * ps[3]));
  for (int64_t n = 0; n < ps[0]; ++n)
    for (int64_t c = 0; c < ps[1]; ++c)
      for (int64_t i = 0; i < ps[2]; ++i)
        for (int64_t j = 0; j < ps[3]; ++j) {
          double best = -INFINITY;
          for (int64_t di = 0; di < 2; ++di)
            for (int64_t dj = 0; dj < 2; ++dj)
              best = std::max(best, r[static_cast<size_t>(((n * s1[1] + c) * s1[2] + 2 * i + di) * s1[3] + 2 * j + dj)]);
          pooled[static_cast<size_t>(((n * ps[1] + c) * ps[2] + i) * ps[3] + j)] = best;
        }
  std::vector<double> r2 = conv2d(pooled, ps, c2w, c2b, 0, 2, s2);
  relu_in_place(r2);
  std::vector<double> features(static_cast<size_t>(s2[0] * s2[1]));
  int64_t area = s2[2] * s2[3];
  for (int64_t i = 0; i < s2[0] * s2[1]; ++i) {
    double total = 0;
    for (int64_t p = 0; p < area; ++p) total += r2[static_cast<size_t>(i * area + p)];
    features[static_cast<size_t>(i)] = total / static_cast<double>(area);
  }
  check_close(logits.to_vector<float>(), linear(features, 2, 16, fw, fb));
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
