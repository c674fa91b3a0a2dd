// Neural-network composites: softmax, the normalisations and resizing here; matmul, convolution and
// pooling in tensor_matmul.cpp, tensor_conv.cpp, tensor_conv_transpose.cpp and tensor_pool.cpp. Built
// only from primitives and other Tensor methods. Products are broadcasts followed by one sum, so
// each contraction is one kernel; sliding windows are views (pool_windows), so a convolution reads
// its input directly with no im2col buffer, and a bias and activation after it fuse into its kernel.
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
#include "tensor/nn_helpers.h"
#include "tensor/winograd.h"

namespace kiln {

using namespace nn;

// Stable softmax: exp(x - max) / Σ exp(x - max). Three kernels: the max, the sum (which recomputes
// the exponentials), and the division (which recomputes them again instead of storing them).
// exp(v) is written exp2(v·log2 e), the primitive every exp lowers to.
Tensor Tensor::softmax(int64_t axis) const {
  require_defined(*this, "softmax", "the input");
  int64_t a = normalize_axis(axis, ndim(), "softmax");
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  Tensor x = cast(compute);
  if (dims_numel(dims_of(*this)).is(0)) return cast(type);
  Tensor exponentials = ((x - x.max({a}, true)) * std::numbers::log2e).exp2();
  return (exponentials / exponentials.sum({a}, true)).cast(type);
}

// log_softmax = (x - max) - log Σ exp(x - max); the log is log2(·)·ln 2.
Tensor Tensor::log_softmax(int64_t axis) const {
  require_defined(*this, "log_softmax", "the input");
  int64_t a = normalize_axis(axis, ndim(), "log_softmax");
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  Tensor x = cast(compute);
  if (dims_numel(dims_of(*this)).is(0)) return cast(type);
  Tensor shifted = x - x.max({a}, true);
  Tensor total = (shifted * std::numbers::log2e).exp2().sum({a}, true);
  return (shifted - total.log2() * std::numbers::ln2).cast(type);
}

Tensor Tensor::layer_norm(const Tensor& weight, const Tensor& bias, int64_t normalized_dims, double epsilon) const {
  require_defined(*this, "layer_norm", "the input");
  if (normalized_dims < 1 || normalized_dims > ndim())
    throw UserError(str_cat("layer_norm: normalized_dims = ", normalized_dims, " is out of range for shape ",
                            shape_string(shape())));
  Dims dims = dims_of(*this);
  Dims normalized(dims.end() - normalized_dims, dims.end());
  for (const Tensor* parameter : {&weight, &bias})
    if (parameter->defined() && parameter->ndim() > normalized_dims)
      throw UserError(str_cat("layer_norm: a weight or bias of shape ", dims_string(dims_of(*parameter)),
                              " must broadcast to the normalized shape ", dims_string(normalized)));
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  Tensor y = normalize(cast(compute), last_axes(normalized_dims, ndim()), epsilon);
  if (weight.defined()) y = y * weight.cast(compute);
  if (bias.defined()) y = y + bias.cast(compute);
  if (!(dims_of(y) == dims))
    throw UserError(str_cat("layer_norm: a weight or bias does not broadcast to the normalized shape ",
                            dims_string(normalized)));
  return y.cast(type);
}

Tensor Tensor::group_norm(int64_t groups, const Tensor& weight, const Tensor& bias, double epsilon) const {
  require_defined(*this, "group_norm", "the input");
  require_batch_channels(*this, 2, "group_norm");
  // The batch and the other axes may be symbolic (a signal of any length); the channels are known.
  int64_t channels = dim(1);
  Dims dims = dims_of(*this);
  if (groups < 1 || channels % groups != 0)
    throw UserError(str_cat("group_norm: ", channels, " channels of shape ", dims_string(dims),
                            " do not split into ", groups, " groups"));
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  Dim per_group = dims[0].is(0) || channels == 0
                      ? Dim(0)
                      : std::accumulate(dims.begin() + 2, dims.end(), Dim(channels / groups), std::multiplies<>());
  Tensor grouped = reshape_to(cast(compute), {dims[0], groups, per_group});
  Tensor y = reshape_to(normalize(grouped, {2}, epsilon), dims);
  if (weight.defined()) y = y * per_channel(weight.cast(compute), y, "group_norm", "weight");
  if (bias.defined()) y = y + per_channel(bias.cast(compute), y, "group_norm", "bias");
  return y.cast(type);
}

Tensor Tensor::batch_norm(const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& variance,
                          double epsilon) const {
  require_defined(*this, "batch_norm", "the input");
  require_batch_channels(*this, 2, "batch_norm");
  ScalarType type = float_result(dtype()), compute = compute_type(type);
  auto channel = [&](const Tensor& p, std::string_view name) { return per_channel(p, *this, "batch_norm", name).cast(compute); };
  // Fold the per-channel factors first: they are C values, the subtraction and product per element.
  Tensor factor = (channel(variance, "variance") + epsilon).sqrt().reciprocal();
  if (scale.defined()) factor = factor * channel(scale, "scale");
  Tensor y = (cast(compute) - channel(mean, "mean")) * factor;
  if (bias.defined()) y = y + channel(bias, "bias");
  return y.cast(type);
}

// Resizing, one spatial axis after another. Source positions depend on shapes only, so they are
// index maps (affine_index_map), not gathers:
//  - nearest: src = floor(o·in/out);
//  - linear: half-pixel centres, src = max(0, (o + ½)·in/out - ½), y = x[i0]·(1-λ) + x[i1]·λ with
//    i0 = floor(src), i1 = min(i0 + 1, in - 1), λ = src - i0 (computed exactly, from integers).
Tensor Tensor::interpolate(const std::vector<int64_t>& size, InterpolationMode mode) const {
  require_defined(*this, "interpolate", "the input");
  require_batch_channels(*this, 3, "interpolate");
  if (static_cast<int64_t>(size.size()) != ndim() - 2)
    throw UserError(str_cat("interpolate: size ", list_string(size), " must have one entry per spatial axis of ",
                            shape_string(shape())));
  for (int64_t s : size)
    if (s < 0) throw UserError(str_cat("interpolate: negative output size in ", list_string(size)));
  if (mode == InterpolationMode::Linear && !is_float(dtype()))
    throw UserError(str_cat("interpolate: linear mode needs a float tensor, got ", scalar_type_name(dtype())));
  ScalarType compute = compute_type(dtype());
  Tensor y = mode == InterpolationMode::Linear ? cast(compute) : *this;
  for (size_t i = 0; i < size.size(); ++i) {
    auto axis = static_cast<int64_t>(i) + 2;
    int64_t in = dim(axis), out = size[i];
    if (in == out) continue;
    if (in == 0 && out > 0)
      throw UserError(str_cat("interpolate: cannot resize the empty axis ", axis, " of ", shape_string(shape()),
                              " to ", out));
    if (out == 0 || mode == InterpolationMode::Nearest) {
      y = affine_index_map(y, axis, in, 0, out, out);
      continue;
    }
    // 2·out·src = (2o + 1)·in - out, so i0 = floor(((2o + 1)·in - out) / (2·out)) with the clamp at 0.
    std::vector<double> low_weight, high_weight;
    for (int64_t o = 0; o < out; ++o) {
      int64_t numerator = std::max<int64_t>(0, (2 * o + 1) * in - out);
      double lambda = static_cast<double>(numerator % (2 * out)) / static_cast<double>(2 * out);
      low_weight.push_back(1.0 - lambda);
      high_weight.push_back(lambda);
    }
    std::vector<int64_t> pads(2 * static_cast<size_t>(axis) + 2, 0);
    pads.back() = 1;
    Tensor next = shrink_axis(y.pad(pads, PadMode::Edge), axis, 1, in + 1);  // next[i] = y[min(i + 1, in - 1)]
    Tensor low = affine_index_map(y, axis, 2 * in, in - out, 2 * out, out);
    Tensor high = affine_index_map(next, axis, 2 * in, in - out, 2 * out, out);
    y = low * axis_constant(low_weight, axis, ndim(), compute) + high * axis_constant(high_weight, axis, ndim(), compute);
  }
  return y.cast(dtype());
}

}  // namespace kiln
