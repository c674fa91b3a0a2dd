// Parity tests of the neural-network composites (matmul, conv, conv_transpose, pooling, softmax,
// norms, interpolate) against direct reference loops in double precision, plus the kernel counts
// that the fusion design promises (matmul 1, conv + bias + relu 1, softmax 3).
//
// Inputs are multiples of 1/64 in [-1, 1): products are then exact in f32 and sums of a few hundred
// of them too, so most f32 results are exact; the tolerances below allow for a different summation
// order anyway. f16 results are rounded once from an f32 accumulation: half an f16 ulp (rtol 1e-3).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "nn_test_helpers.h"

namespace kiln {
namespace {

using nn_test::Array;
using nn_test::check_close;
using nn_test::check_error;
using nn_test::check_exact;
using nn_test::for_each_index;
using nn_test::kernel_count;
using nn_test::random_array;
using nn_test::random_integers;
using nn_test::to_permuted_view;
using nn_test::to_sliced_view;
using nn_test::to_tensor;

constexpr double kF32Atol = 1e-5, kF32Rtol = 1e-5;    // contractions of exact products
constexpr double kF64Tol = 1e-12;
constexpr double kF16Atol = 1e-3, kF16Rtol = 1e-3;   // one rounding to f16 (half ulp = 4.9e-4 rel)
constexpr double kTransAtol = 1e-5, kTransRtol = 1e-5;  // exp2/log2/sqrt-based ops in f32

// ---- matmul ----

Array ref_matmul(Array a, Array b) {
  bool vector_a = a.shape.size() == 1, vector_b = b.shape.size() == 1;
  if (vector_a) a.shape.insert(a.shape.begin(), 1);
  if (vector_b) b.shape.push_back(1);
  size_t rank = std::max(a.shape.size(), b.shape.size());
  auto batch_of = [&](const Shape& s) {
    Shape batch(rank - s.size(), 1);
    batch.insert(batch.end(), s.begin(), s.end() - 2);
    return batch;
  };
  Shape ba = batch_of(a.shape), bb = batch_of(b.shape), batch(rank - 2);
  for (size_t i = 0; i < batch.size(); ++i) batch[i] = std::max(ba[i], bb[i]);
  int64_t n = a.shape[a.shape.size() - 2], k = a.shape.back(), m = b.shape.back();
  Shape out_shape = batch;
  out_shape.push_back(n);
  out_shape.push_back(m);
  Array out(out_shape);
  for_each_index(out_shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> ia, ib;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (i >= rank - 2 - (a.shape.size() - 2)) ia.push_back(ba[i] == 1 ? 0 : index[i]);
      if (i >= rank - 2 - (b.shape.size() - 2)) ib.push_back(bb[i] == 1 ? 0 : index[i]);
    }
    int64_t row = index[rank - 2], column = index[rank - 1];
    double total = 0;
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> xa = ia, xb = ib;
      xa.push_back(row);
      xa.push_back(j);
      xb.push_back(j);
      xb.push_back(column);
      total += a.at(xa) * b.at(xb);
    }
    out.at(index) = total;
  });
  if (vector_a) out.shape.erase(out.shape.end() - 2);
  if (vector_b) out.shape.pop_back();
  return out;
}

TEST_SUITE("tensor") {

struct MatmulCase {
  Shape a, b;
};

// Each product of random operands against the reference, and its kernel count against
// `kernels(case)` (for non-empty outputs).
template <typename KernelCount>
void check_matmul_cases(const std::vector<MatmulCase>& cases, uint64_t seed, double atol, double rtol, KernelCount kernels) {
  for (const MatmulCase& c : cases) {
    CAPTURE(shape_string(c.a));
    CAPTURE(shape_string(c.b));
    Array a = random_array(c.a, seed++), b = random_array(c.b, seed++);
    Tensor out = to_tensor(a).matmul(to_tensor(b));
    check_close(out, ref_matmul(a, b), atol, rtol);
    if (out.numel() > 0) CHECK(kernel_count(out) == kernels(c));
  }
}

TEST_CASE("matmul: shapes, 1-D operands, batch broadcasting, one kernel (two for a wide b with N % 4 != 0)") {
  const std::vector<MatmulCase> cases{
      {{3, 4}, {4, 5}},       {{1, 7}, {7, 1}},          {{5, 1}, {1, 6}},    {{4}, {4, 3}},
      {{2, 4}, {4}},          {{6}, {6}},                {{3, 0}, {0, 2}},    {{0, 3}, {3, 4}},
      {{2, 1, 3, 4}, {5, 4, 6}}, {{4, 3}, {2, 3, 2}},    {{2, 3, 4}, {4}},    {{5}, {3, 5, 2}},
      {{64, 96}, {96, 80}},   {{64, 96}, {96, 34}}};
  // A row-major right operand with K and N >= 16 is read in place when N is a multiple of 4 (the
  // output columns vectorise) and first transposed into its own buffer otherwise (Tensor::matmul).
  check_matmul_cases(cases, 100, kF32Atol, kF32Rtol, [](const MatmulCase& c) {
    bool transposed_first = c.b.size() >= 2 && c.a.back() >= 16 && c.b.back() >= 16 && c.b.back() % 4 != 0;
    return transposed_first ? 2u : 1u;
  });
}

TEST_CASE("matmul: a large right operand whose N is no multiple of 32 is read from zero-padded panels") {
  // (K, N) is stored as (ceil(N/32), K, 32) with the extra columns zero, and read through a view
  // that leaves them out: one copy kernel and the product. A classifier's 1000 columns (63 vectors
  // of 16, paired by the heuristics: one of them computed twice), a batched operand padded 200 ->
  // 224, and a product with rows.
  const std::vector<MatmulCase> cases{{{1, 2048}, {2048, 1000}}, {{2, 3, 400}, {2, 400, 200}}, {{37, 300}, {300, 1000}}};
  check_matmul_cases(cases, 130, 1e-4, 1e-5, [](const MatmulCase&) { return 2u; });
}

TEST_CASE("matmul: non-contiguous operands and dtypes") {
  Array a = random_array({3, 5, 4}, 120), b = random_array({3, 4, 6}, 121);
  Array expected = ref_matmul(a, b);
  check_close(to_permuted_view(a).matmul(to_sliced_view(b)), expected, kF32Atol, kF32Rtol);
  // An expanded (broadcast) operand.
  Array row = random_array({1, 4, 6}, 122);
  Tensor expanded = to_tensor(row).expand({3, 4, 6});
  Array row3({3, 4, 6});
  for_each_index(row3.shape, [&](const std::vector<int64_t>& i) { row3.at(i) = row.at({0, i[1], i[2]}); });
  check_close(to_tensor(a).matmul(expanded), ref_matmul(a, row3), kF32Atol, kF32Rtol);
  // The transpose of a matmul result feeding another matmul.
  Array c = random_array({5, 3}, 123);
  Tensor chained = to_tensor(a).matmul(to_tensor(b)).transpose().matmul(to_tensor(c).unsqueeze(0));
  Array ab_t({3, 6, 5});
  for_each_index(ab_t.shape, [&](const std::vector<int64_t>& i) { ab_t.at(i) = expected.at({i[0], i[2], i[1]}); });
  Array c1 = c;
  c1.shape = {1, 5, 3};
  check_close(chained, ref_matmul(ab_t, c1), 1e-4, 1e-5);
  check_close(to_tensor(a, ScalarType::Float64).matmul(to_tensor(b, ScalarType::Float64)), expected, kF64Tol, kF64Tol);
  Tensor half = to_tensor(a, ScalarType::Float16).matmul(to_tensor(b, ScalarType::Float16));
  CHECK(half.dtype() == ScalarType::Float16);
  check_close(half, expected, kF16Atol, kF16Rtol);
  Array ia = random_integers({4, 3}, 124, -9, 9), ib = random_integers({3, 2}, 125, -9, 9);
  Tensor ints = to_tensor(ia, ScalarType::Int32).matmul(to_tensor(ib, ScalarType::Int32));
  CHECK(ints.dtype() == ScalarType::Int32);
  check_exact(ints, ref_matmul(ia, ib));
  // Mixed dtypes promote (i32 · f32 → f32).
  check_close(to_tensor(ia, ScalarType::Int32).matmul(to_tensor(ib)), ref_matmul(ia, ib), kF32Atol, kF32Rtol);
  // bool: any(a AND b).
  Array fa = random_integers({3, 4}, 126, 0, 2), fb = random_integers({4, 2}, 127, 0, 2);
  Tensor logical = to_tensor(fa, ScalarType::Bool).matmul(to_tensor(fb, ScalarType::Bool));
  CHECK(logical.dtype() == ScalarType::Bool);
  Array any = ref_matmul(fa, fb);
  for (double& v : any.values) v = v != 0 ? 1 : 0;
  check_exact(logical, any);
  check_error([&] { (void)to_tensor(a).matmul(to_tensor(a)); }, "matmul: shapes (3, 5, 4) and (3, 5, 4) do not align");
  check_error([&] { (void)to_tensor(a).matmul(Tensor::scalar(2)); }, "matmul: operands must have at least one axis");
  check_error([&] { (void)to_tensor(a).matmul(Tensor::zeros({2, 4, 1})); }, "do not broadcast");
}

// ---- convolution ----

struct ConvCase {
  Shape input, weight;
  ConvOptions options;
  bool bias = true;
};

// Spatial parameters filled in from ConvOptions the way kiln.hpp documents them.
struct Spatial {
  std::vector<int64_t> stride, dilation, begin, end, output_padding;
};

Spatial spatial_of(const ConvOptions& o, size_t n) {
  Spatial s;
  auto fill = [&](const std::vector<int64_t>& v, int64_t fallback) {
    return v.empty() ? std::vector<int64_t>(n, fallback) : v.size() == 1 ? std::vector<int64_t>(n, v[0]) : v;
  };
  s.stride = fill(o.stride, 1);
  s.dilation = fill(o.dilation, 1);
  s.output_padding = fill(o.output_padding, 0);
  s.begin.assign(n, 0);
  s.end.assign(n, 0);
  if (o.padding.size() == 2 * n) {
    for (size_t i = 0; i < n; ++i) s.begin[i] = o.padding[i], s.end[i] = o.padding[n + i];
  } else if (o.padding.size() == n) {
    s.begin = s.end = o.padding;
  } else if (o.padding.size() == 1) {
    s.begin = s.end = std::vector<int64_t>(n, o.padding[0]);
  }
  return s;
}

Array ref_conv(const Array& x, const Array& w, const std::optional<Array>& bias, const ConvOptions& options) {
  size_t n = x.shape.size() - 2;
  Spatial s = spatial_of(options, n);
  int64_t groups = options.groups, filters = w.shape[0], group_channels = w.shape[1];
  Shape out_shape{x.shape[0], filters};
  for (size_t i = 0; i < n; ++i)
    out_shape.push_back((x.shape[i + 2] + s.begin[i] + s.end[i] - s.dilation[i] * (w.shape[i + 2] - 1) - 1) / s.stride[i] + 1);
  Shape kernel(w.shape.begin() + 2, w.shape.end());
  Shape reduce{group_channels};
  reduce.insert(reduce.end(), kernel.begin(), kernel.end());
  Array out(out_shape);
  for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
    int64_t f = o[1], group = f / (filters / groups);
    double total = bias ? bias->values[static_cast<size_t>(f)] : 0.0;
    for_each_index(reduce, [&](const std::vector<int64_t>& r) {
      std::vector<int64_t> xi{o[0], group * group_channels + r[0]}, wi{f, r[0]};
      for (size_t i = 0; i < n; ++i) {
        int64_t p = o[i + 2] * s.stride[i] - s.begin[i] + r[i + 1] * s.dilation[i];
        if (p < 0 || p >= x.shape[i + 2]) return;
        xi.push_back(p);
        wi.push_back(r[i + 1]);
      }
      total += x.at(xi) * w.at(wi);
    });
    out.at(o) = total;
  });
  return out;
}

// Scatter form of the transposed convolution: each input element adds its weighted kernel.
Array ref_conv_transpose(const Array& x, const Array& w, const std::optional<Array>& bias, const ConvOptions& options) {
  size_t n = x.shape.size() - 2;
  Spatial s = spatial_of(options, n);
  int64_t groups = options.groups, channels = x.shape[1], group_filters = w.shape[1];
  int64_t group_channels = channels / groups;
  Shape out_shape{x.shape[0], group_filters * groups};
  for (size_t i = 0; i < n; ++i)
    out_shape.push_back((x.shape[i + 2] - 1) * s.stride[i] - s.begin[i] - s.end[i] + s.dilation[i] * (w.shape[i + 2] - 1) +
                        s.output_padding[i] + 1);
  Array out(out_shape);
  for_each_index(out_shape, [&](const std::vector<int64_t>& o) {
    out.at(o) = bias ? bias->values[static_cast<size_t>(o[1])] : 0.0;
  });
  Shape weight_tail(w.shape.begin() + 1, w.shape.end());
  for_each_index(x.shape, [&](const std::vector<int64_t>& xi) {
    int64_t group = xi[1] / group_channels;
    for_each_index(weight_tail, [&](const std::vector<int64_t>& r) {
      std::vector<int64_t> oi{xi[0], group * group_filters + r[0]}, wi{xi[1], r[0]};
      for (size_t i = 0; i < n; ++i) {
        int64_t p = xi[i + 2] * s.stride[i] - s.begin[i] + r[i + 1] * s.dilation[i];
        if (p < 0 || p >= out_shape[i + 2]) return;
        oi.push_back(p);
        wi.push_back(r[i + 1]);
      }
      out.at(oi) += x.at(xi) * w.at(wi);
    });
  });
  return out;
}

ConvOptions conv_options(std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
                         int64_t groups, std::vector<int64_t> output_padding = {}) {
  ConvOptions o;
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.dilation = std::move(dilation);
  o.groups = groups;
  o.output_padding = std::move(output_padding);
  return o;
}

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases{
      // 1-D
      {{2, 4, 11}, {6, 4, 3}, conv_options({}, {}, {}, 1)},
      {{2, 4, 11}, {6, 4, 3}, conv_options({2}, {1, 2}, {2}, 1)},
      {{1, 4, 10}, {6, 2, 2}, conv_options({3}, {1}, {}, 2), false},
      {{2, 4, 9}, {8, 1, 1}, conv_options({}, {}, {}, 4)},  // depthwise, 1x1
      {{1, 3, 7}, {2, 3, 7}, conv_options({}, {}, {}, 1)},  // kernel = input: one output
      {{1, 1, 1}, {1, 1, 1}, conv_options({}, {}, {}, 1)},
      // 2-D
      {{2, 3, 9, 8}, {4, 3, 3, 2}, conv_options({}, {1, 1}, {}, 1)},
      {{2, 3, 9, 8}, {4, 3, 3, 2}, conv_options({2, 3}, {0, 1, 2, 0}, {2, 1}, 1)},
      {{1, 6, 7, 7}, {6, 2, 3, 3}, conv_options({2}, {1}, {}, 3)},
      {{1, 4, 8, 6}, {4, 1, 3, 3}, conv_options({1, 2}, {2, 2}, {2, 2}, 4), false},
      {{3, 2, 5, 5}, {3, 2, 1, 1}, conv_options({2}, {}, {}, 1)},
      {{1, 2, 6, 7}, {3, 2, 2, 3}, conv_options({3, 2}, {1, 0, 0, 2}, {1, 2}, 1)},
      {{2, 16, 20, 20}, {32, 16, 3, 3}, conv_options({}, {1}, {}, 1)},  // larger
      // 3-D
      {{1, 2, 5, 6, 4}, {3, 2, 3, 2, 2}, conv_options({2}, {1}, {1, 2, 1}, 1)},
      {{2, 4, 4, 5, 3}, {4, 2, 2, 3, 1}, conv_options({1, 2, 1}, {0, 1, 0, 1, 0, 2}, {}, 2)},
  };
  return cases;
}

TEST_CASE("conv: 1-D, 2-D and 3-D with stride, padding, dilation and groups") {
  uint64_t seed = 200;
  for (const ConvCase& c : conv_cases()) {
    CAPTURE(shape_string(c.input));
    CAPTURE(shape_string(c.weight));
    CAPTURE(c.options.groups);
    Array x = random_array(c.input, seed++), w = random_array(c.weight, seed++);
    std::optional<Array> bias;
    if (c.bias) bias = random_array({c.weight[0]}, seed++);
    Tensor out = to_tensor(x).conv(to_tensor(w), bias ? to_tensor(*bias) : Tensor(), c.options);
    check_close(out, ref_conv(x, w, bias, c.options), kF32Atol, kF32Rtol);
    // The conv is one kernel; a weight with a multiple of P filters per group is first copied into
    // panels of P filters (a kernel which fold_constants computes at compile time when the weight
    // is constant), and a padded input into a zero-padded buffer (a kernel that runs every time).
    // P is the host's fp32 lanes (16 with AVX-512, 8 with AVX2); every case here has 32 filters
    // per group or fewer than 8, so the test holds for both.
    bool panels = (c.weight[0] / c.options.groups) % 16 == 0;
    bool pads = std::any_of(c.options.padding.begin(), c.options.padding.end(), [](int64_t p) { return p > 0; });
    CHECK(kernel_count(out) == 1u + (panels ? 1u : 0u) + (pads ? 1u : 0u));
  }
}

TEST_CASE("conv: kernel taps that read only padding are dropped, the output unchanged") {
  // An atrous conv over a small map (DeepLabV3's ASPP): dilation 6 and pads 6 over 6×6 leave the
  // centre tap only, a 1x1 conv with no padding: one kernel, no padded copy of the input.
  Array x = random_array({1, 8, 6, 6}, 31), w = random_array({4, 8, 3, 3}, 32), b = random_array({4}, 33);
  ConvOptions atrous = conv_options({}, {6, 6, 6, 6}, {6, 6}, 1);
  Tensor out = to_tensor(x).conv(to_tensor(w), to_tensor(b), atrous);
  check_close(out, ref_conv(x, w, b, atrous), kF32Atol, kF32Rtol);
  CHECK(kernel_count(out) == 1u);
  // One end only, asymmetric pads, 1-D: dilation 3, pads (7, 1) over 5 samples: tap 0 reads
  // padding for all 7 outputs, taps 1 and 2 reach the signal.
  Array x1 = random_array({1, 2, 5}, 34), w1 = random_array({3, 2, 3}, 35);
  ConvOptions one_end = conv_options({}, {7, 1}, {3}, 1);
  check_close(to_tensor(x1).conv(to_tensor(w1), Tensor(), one_end), ref_conv(x1, w1, std::nullopt, one_end), kF32Atol,
              kF32Rtol);
  // Stride 2, dilation 4, pads 4 before over 5×5: one output row and column, which the first
  // tap's row and column (-4) miss.
  Array x2 = random_array({1, 3, 5, 5}, 36), w2 = random_array({2, 3, 3, 3}, 37);
  ConvOptions strided = conv_options({2, 2}, {4, 4, 0, 0}, {4, 4}, 1);
  check_close(to_tensor(x2).conv(to_tensor(w2), Tensor(), strided), ref_conv(x2, w2, std::nullopt, strided), kF32Atol,
              kF32Rtol);
}

TEST_CASE("a depthwise conv whose reader is a 1x1 conv computes channels-last") {
  // MobileNetV2's block tail at 14x14: depthwise 3x3 (pad 1) + bias, relu, 1x1 conv. With the hint
  // (ConvOptions::pointwise_reader_filters, which the ONNX importer sets) the depthwise conv reads
  // a channels-last padded copy and stores its relu'd output in the channels-last order the 1x1
  // conv reads: 3 kernels on activations (padded copy, depthwise, 1x1). Without it, 4: the NCHW
  // padded copy, the depthwise conv, the 1x1 conv's channels-last copy of its output, the 1x1
  // conv. (Kernels that only re-order a weight are not counted: fold_constants computes them at
  // compile time for constant weights.) 14x14 is no whole number of vectors of 8 or 16 lanes, so
  // the 1x1 conv reads channels-last on AVX2 and AVX-512 hosts alike.
  const int64_t channels = 32, side = 14;
  Array x = random_array({1, channels, side, side}, 240), dw = random_array({channels, 1, 3, 3}, 241);
  Array db = random_array({channels}, 242), pw = random_array({channels, channels, 1, 1}, 243);
  ConvOptions depthwise = conv_options({}, {1}, {}, channels);
  Array expected_depthwise = ref_conv(x, dw, db, depthwise);
  for (double& v : expected_depthwise.values) v = std::max(v, 0.0);
  Array expected = ref_conv(expected_depthwise, pw, std::nullopt, conv_options({}, {}, {}, 1));
  for (int64_t hint : {int64_t{0}, channels}) {
    CAPTURE(hint);
    depthwise.pointwise_reader_filters = hint;
    Tensor out = to_tensor(x).conv(to_tensor(dw), to_tensor(db), depthwise).relu().conv(to_tensor(pw));
    check_close(out, expected, kF32Atol, kF32Rtol);
    // A kernel works on activations when it reads an intermediate buffer or the input x (the only
    // input with x's element count; the weights and the bias are smaller).
    Schedule schedule = create_schedule({out.data().node});
    size_t on_activations = 0;
    for (const ScheduledKernel& kernel : schedule.kernels) {
      bool reads_activation = false;
      for (size_t slot = 1; slot < kernel.buffers.size(); ++slot) {
        const ScheduledBuffer& buffer = schedule.buffers[static_cast<size_t>(kernel.buffers[slot])];
        reads_activation |= buffer.kind == ScheduledBuffer::Kind::Intermediate ||
                            (buffer.kind == ScheduledBuffer::Kind::Input && buffer.count == x.numel());
      }
      on_activations += reads_activation ? 1 : 0;
    }
    CHECK(on_activations == (hint != 0 ? 3u : 4u));
  }
}

TEST_CASE("conv + bias + relu is one kernel; non-contiguous inputs; dtypes") {
  Array x = random_array({2, 3, 8, 7}, 230), w = random_array({5, 3, 3, 3}, 231), b = random_array({5}, 232);
  ConvOptions options = conv_options({2, 1}, {1, 1, 0, 1}, {1, 2}, 1);
  Array expected = ref_conv(x, w, b, options);
  check_close(to_permuted_view(x).conv(to_sliced_view(w), to_sliced_view(b), options), expected, kF32Atol, kF32Rtol);
  // An input that is itself computed (an elementwise op on a view) is realised before the copy of
  // the padded input (here in a kernel of its own), then copied, then convolved; without padding,
  // it fuses into the conv.
  Tensor computed = (to_permuted_view(x) * 1.0).conv(to_tensor(w), to_tensor(b), options);
  CHECK(kernel_count(computed) == 3);
  ConvOptions unpadded = conv_options({2, 1}, {}, {1, 2}, 1);
  CHECK(kernel_count((to_permuted_view(x) * 1.0).conv(to_tensor(w), to_tensor(b), unpadded)) == 1);
  check_close(computed, expected, kF32Atol, kF32Rtol);
  check_close(to_tensor(x, ScalarType::Float64).conv(to_tensor(w, ScalarType::Float64), to_tensor(b, ScalarType::Float64),
                                                     options),
              expected, kF64Tol, kF64Tol);
  Tensor half = to_tensor(x, ScalarType::Float16).conv(to_tensor(w, ScalarType::Float16), to_tensor(b, ScalarType::Float16),
                                                       options);
  CHECK(half.dtype() == ScalarType::Float16);
  check_close(half, expected, kF16Atol, kF16Rtol);
  Array xi = random_integers({1, 2, 5, 5}, 233, -5, 5), wi = random_integers({3, 2, 2, 2}, 234, -5, 5);
  Tensor ints = to_tensor(xi, ScalarType::Int32).conv(to_tensor(wi, ScalarType::Int32), Tensor(), conv_options({}, {1}, {}, 1));
  CHECK(ints.dtype() == ScalarType::Int32);
  check_exact(ints, ref_conv(xi, wi, std::nullopt, conv_options({}, {1}, {}, 1)));
  // A zero-sized batch.
  Tensor empty = Tensor::zeros({0, 3, 8, 7}).conv(to_tensor(w), to_tensor(b), options);
  CHECK(empty.shape() == Shape{0, 5, 4, 5});
  // The bias add and a relu after the convolution are its epilogue: no kernel of their own (the
  // other kernel is the padded input's copy).
  Tensor fused = to_tensor(x).conv(to_tensor(w), to_tensor(b), options).relu();
  CHECK(kernel_count(fused) == 2);
  Array relu = expected;
  for (double& v : relu.values) v = std::max(v, 0.0);
  check_close(fused, relu, kF32Atol, kF32Rtol);
}

TEST_CASE("conv: errors name the op and the shapes") {
  Tensor x = Tensor::zeros({1, 4, 5, 5}), w = Tensor::zeros({6, 2, 3, 3});
  check_error([&] { (void)x.conv(w); }, "conv: input (1, 4, 5, 5) and weight (6, 2, 3, 3) do not fit groups = 1");
  check_error([&] { (void)x.conv(Tensor::zeros({6, 4, 3})); }, "conv: weight of shape (6, 4, 3) must have 4 axes");
  check_error([&] { (void)x.conv(Tensor::zeros({6, 4, 7, 7})); }, "smaller than the dilated kernel");
  check_error([&] { (void)x.conv(Tensor::zeros({6, 4, 3, 3}), Tensor::zeros({5})); }, "conv: bias of shape (5,)");
  check_error([&] { (void)x.conv(Tensor::zeros({6, 4, 3, 3}), Tensor(), conv_options({1, 1, 1}, {}, {}, 1)); },
              "conv: stride [1, 1, 1] must have one value per spatial axis");
  check_error([&] { (void)Tensor::zeros({4, 5}).conv(w); }, "conv: input of shape (4, 5) needs at least 3 axes");
  // Dilated convs whose taps are dropped (dilation 6: only the centre reaches a 5×5 image) or split
  // one conv per tap (dilation 2) still name the weight as given, not a slice of it.
  ConvOptions dead_taps, few_rows;
  dead_taps.padding = {6, 6, 6, 6};
  dead_taps.dilation = {6, 6};
  few_rows.padding = {2, 2, 2, 2};
  few_rows.dilation = {2, 2};
  check_error([&] { (void)x.conv(w, Tensor(), dead_taps); },
              "conv: input (1, 4, 5, 5) and weight (6, 2, 3, 3) do not fit groups = 1");
  check_error([&] { (void)x.conv(w, Tensor(), few_rows); },
              "conv: input (1, 4, 5, 5) and weight (6, 2, 3, 3) do not fit groups = 1");
  check_error([&] { (void)x.conv(Tensor::zeros({6, 4, 3, 3}), Tensor::zeros({5}), few_rows); },
              "conv: bias of shape (5,)");
}

// Strided transposed convolutions are split by output phase (tensor_conv_transpose.cpp): one direct conv per
// residue combination that some kernel tap reaches, plus one kernel that interleaves them.
size_t conv_transpose_kernel_bound(const ConvOptions& options, size_t n) {
  Spatial s = spatial_of(options, n);
  size_t phases = 1;
  for (int64_t stride : s.stride) phases *= static_cast<size_t>(stride);
  // Stride 1: one direct conv, after a copy of its input padded by the kernel's reach.
  return phases == 1 ? 2 : phases + 1;
}

TEST_CASE("conv_transpose: stride, padding, dilation, groups and output_padding") {
  struct Case {
    Shape input, weight;
    ConvOptions options;
  };
  const std::vector<Case> cases{
      {{2, 3, 5}, {3, 4, 3}, conv_options({}, {}, {}, 1)},
      {{2, 3, 5}, {3, 4, 3}, conv_options({2}, {1}, {}, 1, {1})},
      {{1, 4, 6}, {4, 3, 4}, conv_options({3}, {2, 1}, {2}, 2, {2})},
      {{2, 2, 4, 3}, {2, 3, 3, 3}, conv_options({2, 2}, {1, 1}, {}, 1, {1, 0})},
      {{1, 4, 3, 4}, {4, 1, 2, 3}, conv_options({1, 3}, {0, 1, 1, 2}, {2, 1}, 4)},
      {{1, 6, 5, 5}, {6, 2, 3, 3}, conv_options({2}, {2}, {1}, 3)},  // pads larger than d·(K-1): cropping
      {{1, 2, 3, 2, 3}, {2, 2, 2, 3, 2}, conv_options({2, 1, 2}, {1, 0, 0, 0, 1, 1}, {1, 1, 2}, 1, {1, 0, 0})},
      // The phase split: stride 2 and 3, dilation sharing a factor with the stride (a phase no tap
      // reaches), kernels shorter than the stride, groups, output_padding, 1-D to 3-D.
      {{1, 3, 6, 5}, {3, 2, 3, 3}, conv_options({2}, {1}, {}, 1, {1})},
      {{2, 2, 4, 5}, {2, 3, 3, 4}, conv_options({3}, {1, 2, 0, 1}, {}, 1, {2, 1})},
      {{1, 2, 5, 4}, {2, 3, 3, 3}, conv_options({2}, {1}, {2}, 1, {1})},
      {{1, 2, 4, 4}, {2, 2, 4, 3}, conv_options({2, 4}, {2, 1, 3, 0}, {2, 2}, 1, {0, 1})},
      {{1, 2, 4, 3}, {2, 3, 2, 1}, conv_options({3, 2}, {}, {}, 1)},  // kernel < stride
      {{2, 3, 5}, {3, 2, 1}, conv_options({4}, {}, {}, 1, {3})},       // 1x1 kernel, stride 4
      {{1, 4, 3, 3}, {4, 3, 3, 3}, conv_options({2}, {1}, {}, 2, {1})},  // groups
      {{1, 6, 4}, {6, 1, 5}, conv_options({3}, {2, 4}, {2}, 6, {1})},    // depthwise, 1-D
      {{2, 3, 7}, {3, 2, 6}, conv_options({4}, {3}, {2}, 1)},            // d = 2, s = 4: half the phases empty
      {{1, 1, 1}, {1, 1, 1}, conv_options({2}, {2, 0}, {}, 1, {3})},     // a phase that reads only padding
      {{1, 2, 3, 3, 2}, {2, 2, 3, 2, 3}, conv_options({2, 2, 3}, {1, 0, 1, 0, 1, 2}, {1, 2, 1}, 1, {1, 1, 0})},
      {{1, 4, 2, 3, 3}, {4, 1, 2, 3, 2}, conv_options({3, 2, 2}, {0}, {}, 2, {2, 0, 1})},
  };
  uint64_t seed = 300;
  for (const Case& c : cases) {
    CAPTURE(shape_string(c.input));
    CAPTURE(shape_string(c.weight));
    Array x = random_array(c.input, seed++), w = random_array(c.weight, seed++);
    Array b = random_array({c.weight[1] * c.options.groups}, seed++);
    Tensor out = to_tensor(x).conv_transpose(to_tensor(w), to_tensor(b), c.options);
    check_close(out, ref_conv_transpose(x, w, b, c.options), kF32Atol, kF32Rtol);
    size_t bound = conv_transpose_kernel_bound(c.options, c.input.size() - 2);
    CHECK(kernel_count(out) <= bound);
    // A relu after it joins the last kernel.
    CHECK(kernel_count(out.relu()) == kernel_count(out));
    check_close(to_permuted_view(x).conv_transpose(to_permuted_view(w), Tensor(), c.options),
                ref_conv_transpose(x, w, std::nullopt, c.options), kF32Atol, kF32Rtol);
  }
  Array x = random_array({1, 2, 4, 4}, 320), w = random_array({2, 3, 3, 3}, 321);
  ConvOptions options = conv_options({2}, {1}, {}, 1, {1});
  check_close(to_tensor(x, ScalarType::Float64).conv_transpose(to_tensor(w, ScalarType::Float64), Tensor(), options),
              ref_conv_transpose(x, w, std::nullopt, options), kF64Tol, kF64Tol);
  check_close(to_tensor(x, ScalarType::Float16).conv_transpose(to_tensor(w, ScalarType::Float16), Tensor(), options),
              ref_conv_transpose(x, w, std::nullopt, options), kF16Atol, kF16Rtol);
  Array xi = random_integers({1, 2, 4, 3}, 322, -5, 5), wi = random_integers({2, 2, 3, 2}, 323, -5, 5);
  Array bi = random_integers({2}, 324, -5, 5);
  Tensor ints = to_tensor(xi, ScalarType::Int32).conv_transpose(to_tensor(wi, ScalarType::Int32),
                                                                to_tensor(bi, ScalarType::Int32), options);
  CHECK(ints.dtype() == ScalarType::Int32);
  check_exact(ints, ref_conv_transpose(xi, wi, bi, options));
  Tensor empty = Tensor::zeros({0, 2, 4, 4}).conv_transpose(to_tensor(w), Tensor(), options);
  CHECK(empty.shape() == Shape{0, 3, 8, 8});
  check_error([&] { (void)to_tensor(x).conv_transpose(Tensor::zeros({3, 3, 3, 3})); },
              "conv_transpose: input (1, 2, 4, 4) and weight (3, 3, 3, 3) do not fit groups = 1");
  check_error([&] { (void)to_tensor(x).conv_transpose(to_tensor(w), Tensor::zeros({5}), options); },
              "conv_transpose: bias of shape (5,) must have shape (3,)");
  check_error([&] { (void)to_tensor(x).conv_transpose(to_tensor(w), Tensor(), conv_options({2}, {6}, {}, 1)); },
              "conv_transpose: padding [6] leaves no output");
}

// The phase split multiplies no inserted zeros. The formulation it replaced (spread the input with
// stride-1 zeros, then slide the flipped kernel over it) is written out here with views as the
// yardstick: a stride-2 2-D transposed conv must now cost about a quarter of its estimated work,
// a stride-3 1-D one about a third.
TEST_CASE("conv_transpose: strided work does not scale with the inserted zeros") {
  auto total_flops = [](const Tensor& t) {
    double flops = 0;
    for (const ScheduledKernel& kernel : create_schedule({t.data().node}).kernels) flops += kernel.estimated_flops;
    return flops;
  };
  Array x = random_array({1, 16, 16, 16}, 330), w = random_array({16, 8, 3, 3}, 331);
  ConvOptions options = conv_options({2}, {1}, {}, 1, {1});
  Tensor transposed = to_tensor(x).conv_transpose(to_tensor(w), Tensor(), options);
  // (1, 16, 16, 16) → (1, 16, 16, 2, 16, 2) with zeros at [·, 1] → (1, 16, 31, 31).
  Tensor spread = to_tensor(x).reshape({1, 16, 16, 1, 16, 1}).pad({0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1});
  spread = spread.reshape({1, 16, 32, 32}).shrink({{0, 1}, {0, 16}, {0, 31}, {0, 31}});
  // The pads as a view (not conv padding, which copies the input first), as the phases read theirs.
  Tensor zeros_way = spread.pad({0, 0, 0, 0, 1, 2, 1, 2})
                         .conv(to_tensor(w).permute({1, 0, 2, 3}).flip({2, 3}), Tensor(), conv_options({}, {}, {}, 1));
  // Both formulations give the reference result; the phase split costs below `bound` of the other.
  auto check_cheaper = [&](const Tensor& phases, const Tensor& zeros, const Array& expected, double bound) {
    check_close(phases, expected, kF32Atol, kF32Rtol);
    check_close(zeros, expected, kF32Atol, kF32Rtol);
    double ratio = total_flops(phases) / total_flops(zeros);
    CAPTURE(ratio);
    CHECK(ratio < bound);
  };
  check_cheaper(transposed, zeros_way, ref_conv_transpose(x, w, std::nullopt, options), 0.3);

  Array x1 = random_array({1, 16, 40}, 332), w1 = random_array({16, 8, 3}, 333);
  ConvOptions options1 = conv_options({3}, {}, {}, 1);
  Tensor transposed1 = to_tensor(x1).conv_transpose(to_tensor(w1), Tensor(), options1);
  Tensor spread1 = to_tensor(x1).reshape({1, 16, 40, 1}).pad({0, 0, 0, 0, 0, 0, 0, 2}).reshape({1, 16, 120});
  Tensor zeros_way1 = spread1.shrink({{0, 1}, {0, 16}, {0, 118}})
                          .conv(to_tensor(w1).permute({1, 0, 2}).flip({2}), Tensor(), conv_options({}, {2}, {}, 1));
  check_cheaper(transposed1, zeros_way1, ref_conv_transpose(x1, w1, std::nullopt, options1), 0.4);
}

// ---- pooling ----

struct PoolCase {
  Shape input;
  PoolOptions options;
};

PoolOptions pool_options(std::vector<int64_t> kernel, std::vector<int64_t> stride, std::vector<int64_t> padding,
                         std::vector<int64_t> dilation, bool ceil_mode, bool count_include_pad = false) {
  PoolOptions o;
  o.kernel = std::move(kernel);
  o.stride = std::move(stride);
  o.padding = std::move(padding);
  o.dilation = std::move(dilation);
  o.ceil_mode = ceil_mode;
  o.count_include_pad = count_include_pad;
  return o;
}

// PyTorch's pooling semantics written directly: output sizes with the ceil_mode rule, windows that
// skip padding (max) or count it per count_include_pad (avg; never the ceil_mode tail).
Array ref_pool(const Array& x, const PoolOptions& o, bool average) {
  size_t n = x.shape.size() - 2;
  auto fill = [&](const std::vector<int64_t>& v, int64_t fallback) {
    return v.empty() ? std::vector<int64_t>(n, fallback) : v.size() == 1 ? std::vector<int64_t>(n, v[0]) : v;
  };
  std::vector<int64_t> k = o.kernel, s = o.stride.empty() ? k : fill(o.stride, 1), d = fill(o.dilation, 1);
  std::vector<int64_t> pb(n, 0), pe(n, 0);
  if (o.padding.size() == 2 * n) {
    for (size_t i = 0; i < n; ++i) pb[i] = o.padding[i], pe[i] = o.padding[n + i];
  } else if (o.padding.size() == n) {
    pb = pe = o.padding;
  } else if (o.padding.size() == 1) {
    pb = pe = std::vector<int64_t>(n, o.padding[0]);
  }
  Shape out_shape{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < n; ++i) {
    double span = static_cast<double>(x.shape[i + 2] + pb[i] + pe[i] - d[i] * (k[i] - 1) - 1) / static_cast<double>(s[i]);
    int64_t size = static_cast<int64_t>(o.ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
    if (o.ceil_mode && (size - 1) * s[i] >= x.shape[i + 2] + pb[i]) --size;
    out_shape.push_back(size);
  }
  Array out(out_shape);
  for_each_index(out_shape, [&](const std::vector<int64_t>& oi) {
    double best = -std::numeric_limits<double>::infinity(), total = 0, count = 1;
    for (size_t i = 0; i < n; ++i) {
      int64_t c = 0;
      for (int64_t j = 0; j < k[i]; ++j) {
        int64_t p = oi[i + 2] * s[i] - pb[i] + j * d[i];
        c += o.count_include_pad ? (p >= -pb[i] && p < x.shape[i + 2] + pe[i]) : (p >= 0 && p < x.shape[i + 2]);
      }
      count *= static_cast<double>(c);
    }
    for_each_index(Shape(k.begin(), k.end()), [&](const std::vector<int64_t>& ki) {
      std::vector<int64_t> xi{oi[0], oi[1]};
      for (size_t i = 0; i < n; ++i) {
        int64_t p = oi[i + 2] * s[i] - pb[i] + ki[i] * d[i];
        if (p < 0 || p >= x.shape[i + 2]) return;
        xi.push_back(p);
      }
      best = std::max(best, x.at(xi));
      total += x.at(xi);
    });
    out.at(oi) = average ? total / count : best;
  });
  return out;
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases{
      {{2, 3, 10}, pool_options({3}, {}, {}, {}, false)},
      {{2, 3, 10}, pool_options({3}, {2}, {1}, {}, true)},
      {{1, 2, 11}, pool_options({2}, {3}, {1, 0}, {2}, true)},
      {{1, 2, 9}, pool_options({4}, {1}, {2}, {1}, false, true)},
      {{2, 2, 8, 8}, pool_options({2, 2}, {}, {}, {}, false)},
      {{1, 3, 7, 9}, pool_options({3, 3}, {2, 2}, {1, 1}, {}, true)},
      {{1, 3, 7, 9}, pool_options({3, 3}, {2, 2}, {1, 1}, {}, true, true)},
      {{1, 2, 10, 9}, pool_options({3, 2}, {2, 3}, {1, 0, 1, 1}, {2, 1}, false)},
      {{1, 2, 6, 7}, pool_options({2, 3}, {1, 2}, {0, 1}, {2, 2}, true, true)},
      {{1, 1, 5, 6, 7}, pool_options({2, 3, 2}, {2, 2, 3}, {1, 1, 0}, {}, true)},
      {{1, 2, 4, 5, 6}, pool_options({2, 2, 2}, {1, 2, 2}, {0, 1, 1}, {1, 1, 2}, false, true)},
      {{1, 1, 1, 1}, pool_options({1, 1}, {}, {}, {}, false)},
  };
  return cases;
}

TEST_CASE("max_pool and avg_pool: ceil_mode, count_include_pad, dilation, 1-D to 3-D") {
  uint64_t seed = 400;
  for (const PoolCase& c : pool_cases()) {
    CAPTURE(shape_string(c.input));
    CAPTURE(c.options.ceil_mode);
    CAPTURE(c.options.count_include_pad);
    Array x = random_array(c.input, seed++);
    Tensor max_out = to_tensor(x).max_pool(c.options);
    check_exact(max_out, ref_pool(x, c.options, false));
    CHECK(kernel_count(max_out) == 1);
    Tensor avg_out = to_tensor(x).avg_pool(c.options);
    // A window sum of exact values divided once: one f32 rounding.
    check_close(avg_out, ref_pool(x, c.options, true), 1e-6, 1e-6);
    CHECK(kernel_count(avg_out) == 1);
  }
}

TEST_CASE("max_pool over large windows runs one spatial axis at a time, exactly") {
  // YOLOX's SPP (13x13, stride 1, same padding) and windows with stride, dilation, ceil_mode, 3-D.
  const std::vector<PoolCase> cases{
      {{1, 2, 13, 13}, pool_options({13, 13}, {1, 1}, {6, 6}, {}, false)},
      {{1, 3, 12, 11}, pool_options({7, 5}, {1, 2}, {3, 1, 3, 2}, {1, 2}, true)},
      {{1, 1, 7, 8, 9}, pool_options({3, 5, 5}, {1, 1, 1}, {1, 2, 2}, {}, false)},
  };
  uint64_t seed = 420;
  for (const PoolCase& c : cases) {
    CAPTURE(shape_string(c.input));
    Array x = random_array(c.input, seed++);
    Tensor out = to_tensor(x).max_pool(c.options);
    check_exact(out, ref_pool(x, c.options, false));
    CHECK(kernel_count(out) == static_cast<int>(c.input.size()) - 2);  // one per spatial axis
  }
  // Integers pad with their lowest value, also between the stages.
  Array ints = random_array({1, 2, 9, 10}, 425);
  for (double& v : ints.values) v = std::floor(v * 100) - 200;
  PoolOptions options = pool_options({9, 9}, {1, 1}, {4, 4}, {}, false);
  Tensor out = to_tensor(ints, ScalarType::Int32).max_pool(options);
  CHECK(out.dtype() == ScalarType::Int32);
  check_exact(out, ref_pool(ints, options, false));
}

TEST_CASE("max_pool of a computed input with padding stores the input, not its padded copy") {
  // ReLU(x) pooled 3x3, stride 2, padding 1, ceil_mode: the ReLU is stored at 16 x 16 (whole
  // vectors a row) and the pool reads it with masks; no kernel stores the 19 x 19 padded value
  // (padding 1 and 1, and one more column and row for the ceil_mode window).
  Array x = random_array({1, 4, 16, 16}, 426);
  for (double& v : x.values) v -= 0.5;
  Array relu = x;
  for (double& v : relu.values) v = std::max(v, 0.0);
  PoolOptions options = pool_options({3, 3}, {2, 2}, {1, 1}, {}, true);
  Tensor out = to_tensor(x).relu().max_pool(options);
  check_exact(out, ref_pool(relu, options, false));
  Schedule schedule = create_schedule({out.data().node});
  CHECK(schedule.kernels.size() == 2);
  bool stores_input = false;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    CHECK(kernel.name().rfind("E_4_19_19_", 0) == std::string::npos);
    stores_input = stores_input || kernel.name().rfind("E_4_16_16_", 0) == 0;
  }
  CHECK(stores_input);
}

TEST_CASE("pooling: dtypes, non-contiguous input, global pools, errors") {
  Array x = random_array({2, 3, 7, 6}, 430);
  PoolOptions options = pool_options({3, 2}, {2, 2}, {1, 1}, {}, true);
  check_exact(to_permuted_view(x).max_pool(options), ref_pool(x, options, false));
  check_close(to_sliced_view(x).avg_pool(options), ref_pool(x, options, true), 1e-6, 1e-6);
  check_exact(to_tensor(x, ScalarType::Float64).max_pool(options), ref_pool(x, options, false));
  check_close(to_tensor(x, ScalarType::Float64).avg_pool(options), ref_pool(x, options, true), kF64Tol, kF64Tol);
  check_close(to_tensor(x, ScalarType::Float16).avg_pool(options), ref_pool(x, options, true), kF16Atol, kF16Rtol);
  // Integer max pooling pads with the type's minimum, so negative values win over padding.
  Array ints = random_integers({1, 2, 5, 5}, 431, -100, -50);
  for (ScalarType type : {ScalarType::Int8, ScalarType::Int32, ScalarType::Int64}) {
    CAPTURE(scalar_type_name(type));
    Tensor out = to_tensor(ints, type).max_pool(options);
    CHECK(out.dtype() == type);
    check_exact(out, ref_pool(ints, options, false));
  }
  Array unsigned_values = random_integers({1, 2, 5, 5}, 432, 0, 200);
  check_exact(to_tensor(unsigned_values, ScalarType::UInt8).max_pool(options), ref_pool(unsigned_values, options, false));
  // Global pools keep the spatial axes as size 1.
  Array g = random_array({2, 3, 4, 5}, 433);
  Array g_max({2, 3, 1, 1}), g_avg({2, 3, 1, 1});
  for_each_index({2, 3}, [&](const std::vector<int64_t>& i) {
    double best = -1e9, total = 0;
    for_each_index({4, 5}, [&](const std::vector<int64_t>& j) {
      best = std::max(best, g.at({i[0], i[1], j[0], j[1]}));
      total += g.at({i[0], i[1], j[0], j[1]});
    });
    g_max.at({i[0], i[1], 0, 0}) = best;
    g_avg.at({i[0], i[1], 0, 0}) = total / 20;
  });
  check_exact(to_permuted_view(g).global_max_pool(), g_max);
  check_close(to_tensor(g).global_avg_pool(), g_avg, 1e-6, 1e-6);
  check_close(to_tensor(g, ScalarType::Float16).global_avg_pool(), g_avg, kF16Atol, kF16Rtol);
  check_error([&] { (void)to_tensor(x).max_pool(pool_options({3}, {}, {}, {}, false)); },
              "max_pool: kernel [3] must have one size per spatial axis of (2, 3, 7, 6)");
  check_error([&] { (void)to_tensor(x).avg_pool(pool_options({9, 2}, {}, {}, {}, false)); }, "smaller than the kernel");
  check_error([&] { (void)to_tensor(x).max_pool(pool_options({2, 2}, {0}, {}, {}, false)); }, "stride [0] must be >= 1");
}

// ---- softmax and norms ----

Array ref_softmax(const Array& x, int64_t axis, bool log) {
  Array out(x.shape);
  Shape outer = x.shape;
  outer[static_cast<size_t>(axis)] = 1;
  int64_t n = x.shape[static_cast<size_t>(axis)];
  for_each_index(outer, [&](const std::vector<int64_t>& base) {
    std::vector<int64_t> i = base;
    double best = -std::numeric_limits<double>::infinity(), total = 0;
    for (i[static_cast<size_t>(axis)] = 0; i[static_cast<size_t>(axis)] < n; ++i[static_cast<size_t>(axis)])
      best = std::max(best, x.at(i));
    for (i[static_cast<size_t>(axis)] = 0; i[static_cast<size_t>(axis)] < n; ++i[static_cast<size_t>(axis)])
      total += std::exp(x.at(i) - best);
    for (i[static_cast<size_t>(axis)] = 0; i[static_cast<size_t>(axis)] < n; ++i[static_cast<size_t>(axis)])
      out.at(i) = log ? x.at(i) - best - std::log(total) : std::exp(x.at(i) - best) / total;
  });
  return out;
}

TEST_CASE("softmax and log_softmax: stable, any axis, at most three kernels") {
  Array x = random_array({3, 5, 7}, 500, -4, 4);
  for (int64_t axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    int64_t a = axis < 0 ? axis + 3 : axis;
    Tensor soft = to_permuted_view(x).softmax(axis);
    check_close(soft, ref_softmax(x, a, false), kTransAtol, kTransRtol);
    CHECK(kernel_count(soft) <= 3);
    check_close(to_tensor(x).log_softmax(axis), ref_softmax(x, a, true), kTransAtol, kTransRtol);
  }
  // Stability: huge logits do not overflow.
  Array big = random_array({4, 9}, 501, 900, 1000);
  check_close(to_tensor(big).softmax(1), ref_softmax(big, 1, false), kTransAtol, kTransRtol);
  check_close(to_tensor(big).log_softmax(1), ref_softmax(big, 1, true), 1e-4, kTransRtol);
  // -inf logits get probability 0.
  Tensor with_inf = Tensor::from_vector(std::vector<float>{0, -INFINITY, 1, -INFINITY}, {1, 4}).softmax();
  std::vector<float> p = with_inf.to_vector<float>();
  CHECK(p[1] == 0.0f);
  CHECK(p[3] == 0.0f);
  CHECK(p[0] + p[2] == doctest::Approx(1.0));
  check_close(to_tensor(x, ScalarType::Float64).softmax(1), ref_softmax(x, 1, false), kF64Tol, kF64Tol);
  Tensor half = to_tensor(x, ScalarType::Float16).softmax(2);
  CHECK(half.dtype() == ScalarType::Float16);
  check_close(half, ref_softmax(x, 2, false), kF16Atol, kF16Rtol);
  CHECK(to_tensor(Array({2, 0})).softmax(1).shape() == Shape{2, 0});
  Array single = random_array({3, 1}, 502);
  check_close(to_tensor(single).softmax(1), Array({3, 1}, 1.0), 0, 0);
  // Larger rows.
  Array wide = random_array({8, 1000}, 503, -8, 8);
  check_close(to_tensor(wide).softmax(-1), ref_softmax(wide, 1, false), 1e-6, 1e-4);
}

// (x - mean) / sqrt(var + eps) over the elements of each group in `groups` (flat blocks of `size`).
Array ref_normalize_blocks(const Array& x, int64_t size, double epsilon) {
  Array out(x.shape);
  for (size_t start = 0; start < x.values.size(); start += static_cast<size_t>(size)) {
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < size; ++i) mean += x.values[start + static_cast<size_t>(i)];
    mean /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) variance += std::pow(x.values[start + static_cast<size_t>(i)] - mean, 2);
    variance /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i)
      out.values[start + static_cast<size_t>(i)] = (x.values[start + static_cast<size_t>(i)] - mean) / std::sqrt(variance + epsilon);
  }
  return out;
}

TEST_CASE("layer_norm, group_norm and batch_norm") {
  // layer_norm over the last two axes with a weight and bias of that shape.
  Array x = random_array({3, 4, 5}, 600, -2, 2), w = random_array({4, 5}, 601), b = random_array({4, 5}, 602);
  Array expected = ref_normalize_blocks(x, 20, 1e-5);
  for (size_t i = 0; i < expected.values.size(); ++i)
    expected.values[i] = expected.values[i] * w.values[i % 20] + b.values[i % 20];
  check_close(to_permuted_view(x).layer_norm(to_tensor(w), to_tensor(b), 2), expected, 1e-5, 1e-5);
  check_close(to_tensor(x, ScalarType::Float64).layer_norm(to_tensor(w, ScalarType::Float64), to_tensor(b, ScalarType::Float64), 2),
              expected, 1e-10, 1e-10);
  check_close(to_tensor(x, ScalarType::Float16).layer_norm(to_tensor(w, ScalarType::Float16), to_tensor(b, ScalarType::Float16), 2),
              expected, 4e-3, 2e-3);
  // Over the last axis, without weight and bias; a weight that broadcasts (shape (5,)).
  check_close(to_tensor(x).layer_norm(Tensor(), Tensor()), ref_normalize_blocks(x, 5, 1e-5), 1e-5, 1e-5);
  CHECK(kernel_count(to_tensor(x).layer_norm(Tensor(), Tensor())) <= 3);
  check_error([&] { (void)to_tensor(x).layer_norm(Tensor(), Tensor(), 4); }, "layer_norm: normalized_dims = 4");

  // group_norm: (N, C, H, W) with C = 6 in 3 groups, per-channel affine.
  Array g = random_array({2, 6, 3, 4}, 610, -3, 3), gw = random_array({6}, 611), gb = random_array({6}, 612);
  Array g_expected = ref_normalize_blocks(g, 2 * 12, 1e-5);
  for_each_index(g.shape, [&](const std::vector<int64_t>& i) {
    g_expected.at(i) = g_expected.at(i) * gw.values[static_cast<size_t>(i[1])] + gb.values[static_cast<size_t>(i[1])];
  });
  check_close(to_sliced_view(g).group_norm(3, to_tensor(gw), to_tensor(gb)), g_expected, 1e-5, 1e-5);
  check_close(to_tensor(g).group_norm(6, Tensor(), Tensor(), 1e-3), ref_normalize_blocks(g, 12, 1e-3), 1e-5, 1e-5);
  check_close(to_tensor(g).group_norm(1, Tensor(), Tensor()), ref_normalize_blocks(g, 72, 1e-5), 1e-5, 1e-5);
  check_error([&] { (void)to_tensor(g).group_norm(4, Tensor(), Tensor()); }, "group_norm: 6 channels");

  // batch_norm with running statistics over axis 1.
  Array bx = random_array({2, 3, 5}, 620, -2, 2), scale = random_array({3}, 621), shift = random_array({3}, 622);
  Array mean = random_array({3}, 623), variance = random_array({3}, 624, 0.1, 2);
  Array b_expected(bx.shape);
  for_each_index(bx.shape, [&](const std::vector<int64_t>& i) {
    auto c = static_cast<size_t>(i[1]);
    b_expected.at(i) = (bx.at(i) - mean.values[c]) / std::sqrt(variance.values[c] + 1e-5) * scale.values[c] + shift.values[c];
  });
  Tensor bn = to_permuted_view(bx).batch_norm(to_tensor(scale), to_tensor(shift), to_tensor(mean), to_tensor(variance));
  check_close(bn, b_expected, 1e-5, 1e-5);
  CHECK(kernel_count(bn) == 1);
  check_close(to_tensor(bx, ScalarType::Float16)
                  .batch_norm(to_tensor(scale, ScalarType::Float16), to_tensor(shift, ScalarType::Float16),
                              to_tensor(mean, ScalarType::Float16), to_tensor(variance, ScalarType::Float16)),
              b_expected, 4e-3, 2e-3);
  check_error([&] { (void)to_tensor(bx).batch_norm(to_tensor(scale), to_tensor(shift), to_tensor(x), to_tensor(variance)); },
              "batch_norm: mean of shape (3, 4, 5) must have shape (3,)");
}

// ---- interpolate ----

// Separable reference: nearest = floor(o·in/out) in exact integer arithmetic; linear = half-pixel
// source max(0, (o+½)·in/out - ½) between floor and the next index (clamped).
Array ref_interpolate(const Array& x, const std::vector<int64_t>& size, InterpolationMode mode) {
  Array current = x;
  for (size_t i = 0; i < size.size(); ++i) {
    size_t axis = i + 2;
    int64_t in = current.shape[axis], out = size[i];
    Shape shape = current.shape;
    shape[axis] = out;
    Array next(shape);
    for_each_index(shape, [&](const std::vector<int64_t>& index) {
      std::vector<int64_t> source = index;
      int64_t o = index[axis];
      if (mode == InterpolationMode::Nearest) {
        source[axis] = o * in / out;
        next.at(index) = current.at(source);
        return;
      }
      double src = std::max(0.0, (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5);
      auto low = static_cast<int64_t>(std::floor(src));
      int64_t high = std::min(low + 1, in - 1);
      double lambda = src - static_cast<double>(low);
      source[axis] = low;
      double a = current.at(source);
      source[axis] = high;
      next.at(index) = a * (1 - lambda) + current.at(source) * lambda;
    });
    current = next;
  }
  return current;
}

TEST_CASE("interpolate: nearest and linear, up and down, non-integer ratios") {
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases{
      {{1, 2, 5}, {10}}, {{1, 2, 6}, {3}}, {{2, 1, 5}, {7}}, {{1, 1, 7}, {4}}, {{1, 2, 4, 5}, {8, 3}},
      {{1, 1, 3, 3}, {7, 5}}, {{2, 2, 5, 4}, {5, 9}}, {{1, 1, 2, 3, 4}, {3, 5, 2}}, {{1, 1, 1, 4}, {3, 1}},
      {{1, 2, 4}, {0}}};
  uint64_t seed = 700;
  for (const auto& [shape, size] : cases) {
    CAPTURE(shape_string(shape));
    CAPTURE(shape_string(size));
    Array x = random_array(shape, seed++);
    Tensor nearest = to_tensor(x).interpolate(size, InterpolationMode::Nearest);
    check_exact(nearest, ref_interpolate(x, size, InterpolationMode::Nearest));
    if (nearest.numel() > 0) CHECK(kernel_count(nearest) == 1);
    // Linear: weights rounded to f32 once; sums of two or four terms.
    check_close(to_permuted_view(x).interpolate(size, InterpolationMode::Linear),
                ref_interpolate(x, size, InterpolationMode::Linear), 1e-6, 1e-5);
  }
  Array x = random_array({1, 2, 3, 4}, 720);
  std::vector<int64_t> size{5, 7};
  Array ints = random_integers({1, 2, 3, 4}, 721, -9, 9);
  check_exact(to_tensor(ints, ScalarType::Int32).interpolate(size), ref_interpolate(ints, size, InterpolationMode::Nearest));
  check_close(to_tensor(x, ScalarType::Float64).interpolate(size, InterpolationMode::Linear),
              ref_interpolate(x, size, InterpolationMode::Linear), kF64Tol, kF64Tol);
  check_close(to_tensor(x, ScalarType::Float16).interpolate(size, InterpolationMode::Linear),
              ref_interpolate(x, size, InterpolationMode::Linear), kF16Atol, kF16Rtol);
  check_error([&] { (void)to_tensor(x).interpolate({5}); }, "interpolate: size [5] must have one entry per spatial axis");
  check_error([&] { (void)to_tensor(ints, ScalarType::Int32).interpolate(size, InterpolationMode::Linear); },
              "linear mode needs a float tensor");
}

}  // TEST_SUITE

}  // namespace
}  // namespace kiln
