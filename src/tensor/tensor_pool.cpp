// Max and average pooling over sliding windows (views), and the global pools.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_set>
#include <vector>

#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"
#include "tensor/matmul_precision.h"
#include "tensor/nn_helpers.h"
#include "tensor/winograd.h"

namespace kiln {

using namespace nn;

namespace {

// Loads per output element of a max pool done one spatial axis at a time, last axis first, over
// the padded input: the stage for axis i keeps the earlier axes at their padded size.
double separable_pool_loads(const PoolGeometry& g, const Shape& padded) {
  size_t n = g.kernel.size();
  size_t pre = padded.size() - n;
  double outputs = 1;
  for (const Dim& window : g.windows) outputs *= static_cast<double>(window.value());
  double loads = 0;
  for (size_t i = n; i-- > 0;) {
    double stage_outputs = 1;
    for (size_t j = 0; j < n; ++j)
      stage_outputs *= static_cast<double>(j < i ? padded[pre + j] : g.windows[j].value());
    loads += stage_outputs * static_cast<double>(g.kernel[i]);
  }
  return loads / outputs;
}

// Whether `node`, through movement ops, is the constant 0.
bool is_zero_constant(const UOp* node) {
  while (op_group(node->op()) == OpGroup::Movement) node = node->src(0).get();
  return node->op() == Ops::CONST && !node->dtype().is_bool() && node->arg_float() == 0.0;
}

// Whether `node` is movement ops over a store (a CONTIGUOUS or a buffer): reading it computes nothing.
bool views_a_store(const UOp* node) {
  while (op_group(node->op()) == OpGroup::Movement) node = node->src(0).get();
  return node->op() == Ops::CONTIGUOUS || node->op() == Ops::BUFFER;
}

// y where t is relu(y) (where(y < 0, 0, y): Tensor::relu) over a y that computes nothing (a view of
// stored values); else an undefined tensor.
Tensor relu_of_stored(const Tensor& t) {
  const UOp* node = t.data().node.get();
  if (node->op() != Ops::WHERE) return Tensor();
  const UOp* test = node->src(0).get();
  const UOpPtr& y = node->src(2);
  if (test->op() != Ops::CMPLT || test->src(0) != y || !is_zero_constant(test->src(1).get()) ||
      !is_zero_constant(node->src(1).get()))
    return Tensor();
  if (!views_a_store(y.get())) return Tensor();
  return make_tensor_dims(y, dims_of(t), t.data().dtype, {&t});
}

// Whether every window of the pool holds at least one element of the input (none lies wholly in
// the padding), along each spatial axis.
bool windows_meet_input(const Tensor& x, const PoolGeometry& g) {
  const int64_t spatial = static_cast<int64_t>(g.kernel.size());
  for (int64_t i = 0; i < spatial; ++i) {
    const auto axis = static_cast<size_t>(i);
    if (!dims_of(x)[static_cast<size_t>(x.ndim() - spatial + i)].is_known() || !g.windows[axis].is_known()) return false;
    const int64_t length = x.dim(x.ndim() - spatial + i);
    const int64_t last_start = (g.windows[axis].value() - 1) * g.stride[axis] - g.pad_begin[axis];
    if (g.pad_begin[axis] > (g.kernel[axis] - 1) * g.dilation[axis] || last_start > length - 1) return false;
  }
  return true;
}

}  // namespace

// A max over a k1×…×kn window is the max over axis 1 of maxes over axis 2, and so on, so a large
// window can be pooled one axis at a time with each stage's result stored: YOLOX's SPP pools 13×13
// windows with stride 1, 169 masked loads per output directly and 13 + 13 (+ 2/13 for the padded
// rows) in two stages. Done where it at least halves the loads, which leaves the 2×2 and 3×3 pools
// of the classifiers as one kernel (3×3 with stride 1 would go from 9 to 6.5 loads, not worth a
// second pass over memory).
Tensor Tensor::max_pool(const PoolOptions& options) const {
  require_defined(*this, "max_pool", "the input");
  PoolGeometry g = pool_geometry(*this, options, "max_pool");
  // max commutes with relu, which never lowers a value: a pool of relu(y) over stored y is relu of
  // y's pool, so the pool reads y where it lies (under `--precision bf16`, the rows of ResNet-50's
  // stem conv, with their dropped positions) and nothing stores relu(y) for it (0.38 of 15 ms).
  // Only where each window holds an input element: one wholly in the padding gives the lowest
  // value, which relu would turn into 0.
  if (bf16_products()) {
    if (Tensor y = relu_of_stored(*this); y.defined() && windows_meet_input(y, g)) return y.max_pool(options).relu();
  }
  std::vector<int64_t> ends;
  for (size_t i = 0; i < g.pad_end.size(); ++i) ends.push_back(g.pad_end[i] + g.extra_end[i]);
  // A computed input with padding is realised first, as Tensor::conv does. Otherwise the padded
  // value (where(inside, x, lowest)) is what the windows read several times, so it is stored, and
  // that kernel computes the input through a mask per element on rows of odd width: Inception-v2's
  // stem BatchNorm + ReLU into a ceil_mode pool's 113×113 rows ran at 3.5 GB/s.
  bool pads = pads_anything(g.pad_begin, ends);
  // Under `--precision bf16` with AMX the convs around a pool compute channels-last
  // (tensor_conv_bf16.cpp), and so are the values it stores: in NCHW order each would be gathered
  // across their rows (ResNet-50 bf16's stem ReLU before the pool: 2.5 ms at 4 GB/s).
  const bool channels_last = bf16_products() && ndim() == 4;
  auto stored = [&](const Tensor& t) { return channels_last ? stored_in_order(t, {0, 2, 3, 1}) : contiguous(t); };
  // (channels-last, a view of stored rows is read where it lies: the rows of a bf16 conv, whose
  // dropped positions the view skips)
  const bool stored_view = channels_last && views_a_store(data().node.get());
  Tensor source = pads && computes(*this) && !stored_view ? stored(*this) : *this;
  Tensor padded = source.pad(spatial_pad_list(g.pad_begin, ends), PadMode::Constant, lowest_value(dtype()));
  auto n = static_cast<int64_t>(g.kernel.size());
  double direct_loads = 1;
  for (int64_t k : g.kernel) direct_loads *= static_cast<double>(k);
  if (n < 2 || has_symbolic_shape(padded) || 2 * separable_pool_loads(g, padded.shape()) > direct_loads) {
    Tensor view = pool_windows(padded, g.kernel, g.stride, g.dilation, g.windows);
    return view.max(last_axes(n, view.ndim()));
  }
  Tensor pooled = padded;
  for (int64_t i = n; i-- > 0;) {
    std::vector<int64_t> kernel(static_cast<size_t>(n), 1), stride = kernel, dilation = kernel;
    Dims windows;
    auto axis = static_cast<size_t>(i);
    kernel[axis] = g.kernel[axis];
    stride[axis] = g.stride[axis];
    dilation[axis] = g.dilation[axis];
    for (int64_t j = 0; j < n; ++j) windows.push_back(pooled.dim(pooled.ndim() - n + j));
    windows[axis] = g.windows[axis];
    Tensor view = pool_windows(pooled, kernel, stride, dilation, windows);
    pooled = view.max(last_axes(n, view.ndim()));
    if (i > 0) pooled = stored(pooled);
  }
  return pooled;
}

namespace {

// avg_pool's count of positions per window along spatial axis i of an input of length `input`, a
// symbolic one: the kernel size where every window lies inside what is counted, else counted per
// window by the graph (a (windows, kernel) compare of positions against the counted range, summed),
// as a (1, 1, …, windows, …, 1) tensor.
Tensor symbolic_window_counts(const PoolGeometry& g, size_t i, const Dim& input, bool count_include_pad, int64_t ndim,
                              ScalarType compute) {
  bool ceil_tail = g.extra_end[i] > 0;
  if (!ceil_tail && (count_include_pad || (g.pad_begin[i] == 0 && g.pad_end[i] == 0)))
    return Tensor::scalar(static_cast<double>(g.kernel[i]), compute);
  int64_t low = count_include_pad ? 0 : g.pad_begin[i];
  Dim high = input + Dim(g.pad_begin[i] + (count_include_pad ? g.pad_end[i] : 0));
  std::vector<double> taps;
  for (int64_t k = 0; k < g.kernel[i]; ++k) taps.push_back(static_cast<double>(k * g.dilation[i]));
  Tensor starts = (arange_dim(g.windows[i], ScalarType::Int64) * Tensor::scalar(static_cast<double>(g.stride[i]), ScalarType::Int64))
                      .unsqueeze(1);
  Tensor positions = starts + Tensor::from_vector(taps, {1, g.kernel[i]}).cast(ScalarType::Int64);
  Tensor counted = positions.ge(Tensor::scalar(static_cast<double>(low), ScalarType::Int64))
                       .logical_and(positions.lt(dim_tensor(high, ScalarType::Int64)));
  Dims shape(static_cast<size_t>(ndim), Dim(1));
  shape[i + 2] = g.windows[i];
  return reshape_to(counted.cast(compute).sum({1}), shape);
}

}  // namespace

// Average pooling: a window sum divided by the number of elements counted. A window is a box, so
// the count is a product of per-axis counts; they depend only on shapes, so they are computed here
// and enter the kernel as small constant vectors (no second kernel for a pooled mask).
Tensor Tensor::avg_pool(const PoolOptions& options) const {
  require_defined(*this, "avg_pool", "the input");
  PoolGeometry g = pool_geometry(*this, options, "avg_pool");
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  std::vector<int64_t> ends;
  for (size_t i = 0; i < g.pad_end.size(); ++i) ends.push_back(g.pad_end[i] + g.extra_end[i]);
  Tensor padded = cast(compute).pad(spatial_pad_list(g.pad_begin, ends));
  Tensor view = pool_windows(padded, g.kernel, g.stride, g.dilation, g.windows);
  Tensor result = view.sum(last_axes(static_cast<int64_t>(g.kernel.size()), view.ndim()));
  Tensor divisor;
  for (size_t i = 0; i < g.kernel.size(); ++i) {
    if (!g.windows[i].is_known()) {
      Tensor axis_counts = symbolic_window_counts(g, i, dim_of(*this, static_cast<int64_t>(i) + 2), options.count_include_pad,
                                                  ndim(), compute);
      divisor = divisor.defined() ? divisor * axis_counts : axis_counts;
      continue;
    }
    // Positions counted, in padded coordinates: the input, or the input and its explicit padding
    // (never the extra ceil_mode tail, like PyTorch).
    int64_t input = dim(static_cast<int64_t>(i) + 2);
    int64_t low = options.count_include_pad ? 0 : g.pad_begin[i];
    int64_t high = options.count_include_pad ? input + g.pad_begin[i] + g.pad_end[i] : g.pad_begin[i] + input;
    std::vector<double> counts;
    for (int64_t o = 0; o < g.windows[i].value(); ++o) {
      int64_t count = 0;
      for (int64_t k = 0; k < g.kernel[i]; ++k) {
        int64_t position = o * g.stride[i] + k * g.dilation[i];
        count += position >= low && position < high;
      }
      counts.push_back(static_cast<double>(count));
    }
    bool uniform = std::all_of(counts.begin(), counts.end(), [&](double c) { return c == counts[0]; });
    Tensor axis_counts = counts.empty() || uniform ? Tensor::scalar(counts.empty() ? 1.0 : counts[0], compute)
                                                   : axis_constant(counts, static_cast<int64_t>(i) + 2, ndim(), compute);
    divisor = divisor.defined() ? divisor * axis_counts : axis_counts;
  }
  return (result / divisor).cast(type);
}

Tensor Tensor::global_max_pool() const {
  require_batch_channels(*this, 2, "global_max_pool");
  if (ndim() == 2) return *this;
  return max(last_axes(ndim() - 2, ndim()), true);
}

Tensor Tensor::global_avg_pool() const {
  require_batch_channels(*this, 2, "global_avg_pool");
  ScalarType type = float_result(dtype());
  if (ndim() == 2) return cast(type);
  return cast(compute_type(type)).mean(last_axes(ndim() - 2, ndim()), true).cast(type);
}

}  // namespace kiln
