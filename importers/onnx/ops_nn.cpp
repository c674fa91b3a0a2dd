// ONNX neural-network operators: matrix products, convolutions, pooling, normalisations and
// Resize/Upsample. Attribute conventions shared by Conv and the pools (auto_pad, pads laid out as
// all begins then all ends) are resolved here into kiln's ConvOptions/PoolOptions, which use the
// same begin-then-end pad layout.
#include <algorithm>
#include <optional>
#include <cmath>

#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

Tensor constant(const Tensor& x, double value) { return Tensor::scalar(value, x.dtype()); }

// Python's floor division (ONNX's reference formulas use it; C++ truncates).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// An int list attribute with one entry per spatial axis, defaulting to `fill`.
std::vector<int64_t> per_axis(const OnnxNode& node, const std::string& name, size_t spatial, int64_t fill) {
  std::vector<int64_t> values = node.attr_ints(name, std::vector<int64_t>(spatial, fill));
  if (values.empty()) values.assign(spatial, fill);
  if (values.size() != spatial) node.fail(name + " must have " + std::to_string(spatial) + " entries");
  return values;
}

// Pads (all begins, then all ends) from auto_pad/pads for a forward window op (Conv and pools):
// SAME_* pads so that out = ceil(in / stride), the odd element at the end (UPPER) or begin (LOWER).
std::vector<int64_t> forward_pads(const OnnxNode& node, const Tensor& input, const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation) {
  size_t spatial = kernel.size();
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * spatial, 0);
  if (auto_pad == "NOTSET") {
    pads = node.attr_ints("pads", pads);
    if (pads.size() != 2 * spatial) node.fail("pads must have " + std::to_string(2 * spatial) + " entries");
    return pads;
  }
  if (auto_pad == "VALID") return pads;
  if (auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") node.fail("unsupported: auto_pad '" + auto_pad + "'");
  for (size_t i = 0; i < spatial; ++i) {
    int64_t in = input.dim(static_cast<int64_t>(2 + i));  // a spatial size (the batch may be symbolic)
    int64_t out = (in + stride[i] - 1) / stride[i];
    int64_t total = std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - in);
    int64_t small = total / 2, large = total - small;
    pads[i] = auto_pad == "SAME_UPPER" ? small : large;
    pads[i + spatial] = auto_pad == "SAME_UPPER" ? large : small;
  }
  return pads;
}

Outputs matmul(const OnnxNode& node) { return {node.input(0).matmul(node.input(1))}; }

Outputs gemm(const OnnxNode& node) {
  Tensor a = node.input(0), b = node.input(1);
  if (node.attr_int("transA", 0) != 0) a = a.transpose();
  if (node.attr_int("transB", 0) != 0) b = b.transpose();
  double alpha = node.attr_float("alpha", 1.0), beta = node.attr_float("beta", 1.0);
  Tensor result = a.matmul(b);
  if (alpha != 1.0) result = result * constant(result, alpha);
  // C became optional in opset 11; it broadcasts unidirectionally onto (M, N).
  if (node.has_input(2) && beta != 0.0) {
    Tensor c = node.input(2);
    result = result + (beta == 1.0 ? c : c * constant(c, beta));
  }
  return {result};
}

Outputs conv(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& weight = node.input(1);
  return {x.conv(weight, node.has_input(2) ? node.input(2) : Tensor(), conv_options(node, x, weight.shape()))};
}

Outputs conv_transpose(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& weight = node.input(1);
  size_t spatial = static_cast<size_t>(weight.ndim()) - 2;
  std::vector<int64_t> kernel(weight.shape().begin() + 2, weight.shape().end());
  ConvOptions options;
  options.stride = per_axis(node, "strides", spatial, 1);
  options.dilation = per_axis(node, "dilations", spatial, 1);
  options.groups = node.attr_int("group", 1);
  options.output_padding = per_axis(node, "output_padding", spatial, 0);
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> pads(2 * spatial, 0);
  std::vector<int64_t> output_shape = node.attr_ints("output_shape", std::vector<int64_t>{});
  if (output_shape.size() > spatial) output_shape.erase(output_shape.begin(), output_shape.end() - static_cast<std::ptrdiff_t>(spatial));
  if (output_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
    for (size_t i = 0; i < spatial; ++i) output_shape.push_back(x.shape()[2 + i] * options.stride[i]);
  if (!output_shape.empty()) {
    // The ONNX rule: total = stride·(in−1) + output_padding + (k−1)·d + 1 − out, split by
    // floor halves; SAME_UPPER puts the smaller half at the begin, everything else at the end.
    if (output_shape.size() != spatial) node.fail("output_shape must have one entry per spatial axis");
    for (size_t i = 0; i < spatial; ++i) {
      int64_t total = options.stride[i] * (x.shape()[2 + i] - 1) + options.output_padding[i] +
                      (kernel[i] - 1) * options.dilation[i] + 1 - output_shape[i];
      int64_t half = floor_div(total, 2);
      pads[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[i + spatial] = auto_pad == "SAME_UPPER" ? total - half : half;
    }
  } else if (auto_pad == "NOTSET") {
    pads = node.attr_ints("pads", pads);
    if (pads.size() != 2 * spatial) node.fail("pads must have " + std::to_string(2 * spatial) + " entries");
  } else if (auto_pad != "VALID") {
    node.fail("unsupported: auto_pad '" + auto_pad + "'");
  }
  // A negative end pad asks for more output than the full transposed convolution gives at the
  // end: that is exactly output_padding.
  for (size_t i = 0; i < spatial; ++i) {
    if (pads[i + spatial] < 0) {
      options.output_padding[i] -= pads[i + spatial];
      pads[i + spatial] = 0;
    }
    if (pads[i] < 0) node.fail("unsupported: ConvTranspose with a negative begin pad");
  }
  options.padding = pads;
  return {x.conv_transpose(weight, node.has_input(2) ? node.input(2) : Tensor(), options)};
}

PoolOptions pool_options(const OnnxNode& node, const Tensor& x) {
  PoolOptions options;
  options.kernel = node.attr_ints("kernel_shape");
  size_t spatial = options.kernel.size();
  if (static_cast<int64_t>(spatial) + 2 != x.ndim()) node.fail("kernel_shape does not match the input's rank");
  options.stride = per_axis(node, "strides", spatial, 1);
  options.dilation = per_axis(node, "dilations", spatial, 1);
  options.padding = forward_pads(node, x, options.kernel, options.stride, options.dilation);
  options.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  options.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
  return options;
}

// MaxPool's optional Indices output (opset 8): the flat row-major index into the whole input of
// each window's first maximum. Every kernel offset is one strided view of the (−∞-padded) input and
// of a matching tensor of flat indices; a running strict comparison keeps the first maximum.
Tensor max_pool_indices(const OnnxNode& node, const Tensor& x, const PoolOptions& options, const Shape& out_shape) {
  bool column_major = node.attr_int("storage_order", 0) != 0;
  if (!is_floating(x.dtype())) node.fail("unsupported: MaxPool Indices for non-float input");
  size_t spatial = options.kernel.size();
  std::vector<int64_t> pads(4, 0);
  pads.resize(2 * (spatial + 2), 0);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t begin = options.padding.empty() ? 0 : options.padding[i];
    int64_t end = options.padding.empty() ? 0 : options.padding[i + spatial];
    // Enough at the end for the last window (ceil_mode windows may run past the padding).
    int64_t needed = (out_shape[2 + i] - 1) * options.stride[i] + (options.kernel[i] - 1) * options.dilation[i] + 1;
    int64_t have = x.shape()[2 + i] + begin + end;
    pads[2 * (i + 2)] = begin;
    pads[2 * (i + 2) + 1] = end + std::max<int64_t>(0, needed - have);
  }
  Tensor values = x.pad(pads, PadMode::Constant, -INFINITY);
  // Flat index: (n·C + c)·prod(spatial) + the spatial offset, row-major (storage_order 0) or
  // column-major over the spatial axes (storage_order 1).
  const Shape& shape = x.shape();
  int64_t plane = shape_product(shape, 2, shape.size());
  Tensor positions = (Tensor::arange(shape[0] * shape[1]) * Tensor::scalar(static_cast<double>(plane), ScalarType::Int64))
                         .reshape(Shape{shape[0], shape[1]});
  for (size_t i = 0; i < spatial; ++i) positions = positions.unsqueeze(-1);
  for (size_t i = 0; i < spatial; ++i) {
    int64_t stride = column_major ? shape_product(shape, 2, 2 + i) : shape_product(shape, 3 + i, shape.size());
    Shape along(shape.size(), 1);
    along[2 + i] = shape[2 + i];
    positions = positions + (Tensor::arange(shape[2 + i]) * Tensor::scalar(static_cast<double>(stride), ScalarType::Int64)).reshape(along);
  }
  positions = positions.pad(pads, PadMode::Constant, -1.0);
  Tensor best, best_index;
  int64_t offsets = shape_product(options.kernel, 0, spatial);
  for (int64_t flat = 0; flat < offsets; ++flat) {
    Tensor candidate = values, candidate_index = positions;
    int64_t rest = flat;
    for (size_t i = spatial; i-- > 0;) {
      int64_t k = rest % options.kernel[i];
      rest /= options.kernel[i];
      auto axis = static_cast<int64_t>(i + 2);
      int64_t start = k * options.dilation[i];
      int64_t stop = start + (out_shape[2 + i] - 1) * options.stride[i] + 1;
      candidate = candidate.slice(axis, start, stop, options.stride[i]);
      candidate_index = candidate_index.slice(axis, start, stop, options.stride[i]);
    }
    if (flat == 0) {
      best = candidate;
      best_index = candidate_index;
      continue;
    }
    Tensor better = candidate.gt(best);
    best = better.where(candidate, best);
    best_index = better.where(candidate_index, best_index);
  }
  return best_index;
}

Outputs max_pool(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  PoolOptions options = pool_options(node, x);
  Tensor y = x.max_pool(options);
  if (node.output_count() < 2) return {y};
  return {y, max_pool_indices(node, x, options, y.shape())};
}

Outputs average_pool(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  return {x.avg_pool(pool_options(node, x))};
}

// (Σ|x|^p)^(1/p) over each window: the window sum is the padded average times the window size.
Outputs lp_pool(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  double p = static_cast<double>(node.attr_int("p", 2));
  PoolOptions options = pool_options(node, x);
  options.count_include_pad = true;
  double window = static_cast<double>(shape_product(options.kernel, 0, options.kernel.size()));
  Tensor powered = x.abs().pow(constant(x, p));
  return {(powered.avg_pool(options) * constant(x, window)).pow(constant(x, 1.0 / p))};
}

Outputs global_lp_pool(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  double p = static_cast<double>(node.attr_int("p", 2));
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  return {x.abs().pow(constant(x, p)).sum(axes, true).pow(constant(x, 1.0 / p))};
}

Outputs global_max_pool(const OnnxNode& node) { return {node.input(0).global_max_pool()}; }
Outputs global_average_pool(const OnnxNode& node) { return {node.input(0).global_avg_pool()}; }

// Training-mode batch norm (opset 14's training_mode=1): normalise with the batch's own statistics
// over every axis but 1, and return the updated running statistics
// (running · momentum + batch · (1 − momentum), with the population variance).
Outputs batch_norm_training(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  double epsilon = node.attr_float("epsilon", 1e-5), momentum = node.attr_float("momentum", 0.9);
  std::vector<int64_t> axes{0};
  for (int64_t i = 2; i < x.ndim(); ++i) axes.push_back(i);
  Shape channel_shape(static_cast<size_t>(x.ndim()), 1);
  channel_shape[1] = x.dim(1);
  Tensor mean = x.mean(axes, true);
  Tensor variance = (x - mean).square().mean(axes, true);
  Tensor y = (x - mean) * (variance + constant(x, epsilon)).rsqrt() * node.input(1).reshape(channel_shape) +
             node.input(2).reshape(channel_shape);
  Tensor keep = constant(x, momentum), take = constant(x, 1.0 - momentum);
  Tensor running_mean = node.input(3) * keep + mean.reshape({x.dim(1)}) * take;
  Tensor running_variance = node.input(4) * keep + variance.reshape({x.dim(1)}) * take;
  return declared_outputs(node, {y, running_mean, running_variance});
}

Outputs batch_norm(const OnnxNode& node) {
  if (node.opset() >= 14 && node.attr_int("training_mode", 0) != 0) return batch_norm_training(node);
  if (node.opset() < 9 && node.attr_int("spatial", 1) == 0) node.fail("unsupported: BatchNormalization spatial=0");
  double epsilon = node.attr_float("epsilon", 1e-5);
  return {node.input(0).batch_norm(node.input(1), node.input(2), node.input(3), node.input(4), epsilon)};
}

Outputs instance_norm(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Instance norm is group norm with one channel per group.
  return {x.group_norm(x.dim(1), node.input(1), node.input(2), node.attr_float("epsilon", 1e-5))};
}

// Whether to compute in f32 (stash_type = 1, the default) for a half-precision input.
bool widen(const OnnxNode& node, const Tensor& x) {
  return node.attr_int("stash_type", 1) == 1 && (x.dtype() == ScalarType::Float16 || x.dtype() == ScalarType::BFloat16);
}

Outputs layer_norm(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), input.ndim());
  double epsilon = node.attr_float("epsilon", 1e-5);
  bool wide = widen(node, input);
  auto prepare = [&](const Tensor& t) { return wide ? t.cast(ScalarType::Float32) : t; };
  Tensor x = prepare(input);
  Tensor scale = prepare(node.input(1));
  Tensor bias = node.has_input(2) ? prepare(node.input(2)) : Tensor();
  Tensor y = x.layer_norm(scale, bias, x.ndim() - axis, epsilon);
  // Mean and InvStdDev (optional outputs) keep the normalised axes as size 1.
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < x.ndim(); ++i) axes.push_back(i);
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor inv_std = ((centered * centered).mean(axes, true) + constant(x, epsilon)).rsqrt();
  return declared_outputs(node, {wide ? y.cast(input.dtype()) : y, mean, inv_std});
}

// RMSNormalization (opset 23): x / √(mean(x²) + ε) · scale over the axes from `axis` on.
Outputs rms_norm(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), input.ndim());
  double epsilon = node.attr_float("epsilon", 1e-5);
  bool wide = widen(node, input);
  Tensor x = wide ? input.cast(ScalarType::Float32) : input;
  Tensor scale = wide ? node.input(1).cast(ScalarType::Float32) : node.input(1);
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < x.ndim(); ++i) axes.push_back(i);
  Tensor y = x * (x.square().mean(axes, true) + constant(x, epsilon)).rsqrt() * scale;
  return {wide ? y.cast(input.dtype()) : y};
}

// MeanVarianceNormalization, as its ONNX function body: (x − E[x]) / (√(E[x²] − E[x]²) + 1e-9).
Outputs mean_variance_norm(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> axes = normalize_axes(node, node.attr_ints("axes", std::vector<int64_t>{0, 2, 3}), x.ndim());
  Tensor mean = x.mean(axes, true);
  Tensor variance = x.square().mean(axes, true) - mean.square();
  return {(x - mean) / (variance.sqrt() + constant(x, 1e-9))};
}

Outputs group_norm(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  int64_t groups = node.attr_int("num_groups");
  double epsilon = node.attr_float("epsilon", 1e-5);
  int64_t channels = input.dim(1);
  if (groups <= 0 || channels % groups != 0) node.fail("channels are not a multiple of num_groups");
  bool wide = node.opset() >= 21 && widen(node, input);
  Tensor x = wide ? input.cast(ScalarType::Float32) : input;
  Tensor scale = node.input(1), bias = node.input(2);
  // Opset 18 gave scale and bias per group; opset 21 changed them to per channel.
  if (node.opset() < 21 && scale.numel() == groups) {
    Shape per_group{groups, 1}, widened{groups, channels / groups};
    scale = scale.reshape(per_group).expand(widened).reshape({channels});
    bias = bias.reshape(per_group).expand(widened).reshape({channels});
  }
  if (wide) {
    scale = scale.cast(ScalarType::Float32);
    bias = bias.cast(ScalarType::Float32);
  }
  Tensor y = x.group_norm(groups, scale, bias, epsilon);
  return {wide ? y.cast(input.dtype()) : y};
}

Outputs lp_norm(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), x.ndim());
  int64_t p = node.attr_int("p", 2);
  // A zero norm divides by 1 instead (the reference's rule), so all-zero lanes stay zero.
  auto safe = [&](const Tensor& norm) { return norm.eq(constant(norm, 0.0)).where(constant(norm, 1.0), norm); };
  if (p == 1) return {x / safe(x.abs().sum({axis}, true))};
  if (p == 2) return {x / safe(x.square().sum({axis}, true).sqrt())};
  node.fail("unsupported: LpNormalization p=" + std::to_string(p));
}

Outputs lrn(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  double alpha = node.attr_float("alpha", 1e-4), beta = node.attr_float("beta", 0.75), bias = node.attr_float("bias", 1.0);
  int64_t size = node.attr_int("size");
  int64_t channels = x.dim(1);
  // Sum of squares over channels [c − ⌊(size−1)/2⌋, c + ⌈(size−1)/2⌉]: pad the channel axis and add
  // `size` shifted views.
  std::vector<int64_t> pads{0, 0, (size - 1) / 2, size / 2};
  Tensor padded = x.square().pad(pads);
  Tensor window_sum = padded.slice(1, 0, channels);
  for (int64_t i = 1; i < size; ++i) window_sum = window_sum + padded.slice(1, i, i + channels);
  Tensor denominator = (window_sum * constant(x, alpha / static_cast<double>(size)) + constant(x, bias)).pow(constant(x, beta));
  return {x / denominator};
}

// ---- Resize / Upsample ----
//
// Every mode is separable: each resized axis is a weighted sum of a few input positions per output
// position ("taps"), computed on the host from the ONNX formulas and applied as one take + weighted
// sum along that axis.

struct ResizeParams {
  std::string mode = "nearest";
  std::string coordinates = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

struct AxisResize {
  int64_t axis = 0, in = 0, out = 0;
  double scale = 1.0, roi_start = 0.0, roi_end = 1.0;
  // in · scale before flooring: the reference's align_corners, pytorch_half_pixel,
  // half_pixel_symmetric and tf_crop_and_resize formulas use this real-valued output length.
  double out_length = 0.0;
};

double source_coordinate(const OnnxNode& node, const ResizeParams& params, const AxisResize& plan, int64_t o) {
  double x = static_cast<double>(o), in = static_cast<double>(plan.in), out = plan.out_length;
  const std::string& mode = params.coordinates;
  if (mode == "half_pixel") return (x + 0.5) / plan.scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(plan.out) / out;
    double center = in / 2.0;
    return center * (1.0 - adjustment) + (x + 0.5) / plan.scale - 0.5;
  }
  if (mode == "pytorch_half_pixel") return out > 1.0 ? (x + 0.5) / plan.scale - 0.5 : 0.0;
  if (mode == "align_corners") return out == 1.0 ? 0.0 : x * (in - 1.0) / (out - 1.0);
  if (mode == "asymmetric") return x / plan.scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / plan.scale;
  if (mode == "tf_crop_and_resize") {
    if (out > 1.0) return plan.roi_start * (in - 1.0) + x * (plan.roi_end - plan.roi_start) * (in - 1.0) / (out - 1.0);
    return 0.5 * (plan.roi_start + plan.roi_end) * (in - 1.0);
  }
  node.fail("unsupported: Resize coordinate_transformation_mode '" + mode + "'");
}

int64_t nearest_index(const OnnxNode& node, const std::string& mode, double x) {
  double below = std::floor(x);
  bool half = x - below == 0.5;
  if (mode == "round_prefer_floor") return static_cast<int64_t>(half ? below : std::round(x));
  if (mode == "round_prefer_ceil") return static_cast<int64_t>(half ? below + 1.0 : std::round(x));
  if (mode == "floor") return static_cast<int64_t>(below);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  node.fail("unsupported: Resize nearest_mode '" + mode + "'");
}

double linear_kernel(double s) { return std::max(0.0, 1.0 - std::abs(s)); }

double cubic_kernel(double s, double a) {
  s = std::abs(s);
  if (s <= 1.0) return ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
  if (s < 2.0) return ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
  return 0.0;
}

// Nearest resizing by a whole factor k reads input o / k at output o (YOLOX's 2x upsampling): each
// element repeated k times, a view. take() would build a one-hot reduction over the whole axis per
// output element (26-52 multiply-adds for one copy).
std::optional<int64_t> repeat_factor(const std::vector<int64_t>& indices, int64_t in) {
  auto out = static_cast<int64_t>(indices.size());
  if (in <= 0 || out % in != 0) return std::nullopt;
  int64_t k = out / in;
  for (int64_t o = 0; o < out; ++o)
    if (indices[static_cast<size_t>(o)] != o / k) return std::nullopt;
  return k;
}

Tensor repeat_each(const Tensor& x, int64_t axis, int64_t k) {
  Shape repeated = x.shape(), merged = x.shape();
  repeated.insert(repeated.begin() + axis + 1, k);
  merged[static_cast<size_t>(axis)] *= k;
  return x.unsqueeze(axis + 1).expand(repeated).reshape(merged);
}

Tensor resize_axis(const OnnxNode& node, const Tensor& x, const ResizeParams& params, const AxisResize& plan) {
  bool nearest = params.mode == "nearest";
  bool cubic = params.mode == "cubic";
  if (!nearest && !cubic && params.mode != "linear") node.fail("unsupported: Resize mode '" + params.mode + "'");
  // Linear/cubic taps: kernel(scale'·(j − r)) for j in [start, 1 − start], where scale' < 1 only
  // with antialias when downsampling (widening the filter, as ONNX's reference does).
  double support = cubic ? 2.0 : 1.0;
  double filter_scale = (params.antialias && !nearest) ? std::min(plan.scale, 1.0) : 1.0;
  auto start = static_cast<int64_t>(std::floor(-support / filter_scale) + 1.0);
  int64_t taps = nearest ? 1 : 2 - 2 * start;
  bool crop = params.coordinates == "tf_crop_and_resize";
  std::vector<int64_t> indices(static_cast<size_t>(plan.out * taps), 0);
  std::vector<double> weights(indices.size(), 0.0);
  std::vector<uint8_t> outside(static_cast<size_t>(plan.out), 0);
  for (int64_t o = 0; o < plan.out; ++o) {
    double source = source_coordinate(node, params, plan, o);
    if (crop && (source < 0.0 || source > static_cast<double>(plan.in - 1))) outside[static_cast<size_t>(o)] = 1;
    size_t base = static_cast<size_t>(o * taps);
    if (nearest) {
      indices[base] = std::clamp<int64_t>(nearest_index(node, params.nearest_mode, source), 0, plan.in - 1);
      weights[base] = 1.0;
      continue;
    }
    double floor_source = std::floor(source);
    double ratio = source - floor_source;
    auto first = static_cast<int64_t>(floor_source);
    double total = 0.0;
    for (int64_t j = 0; j < taps; ++j) {
      int64_t position = first + start + j;
      double argument = filter_scale * (static_cast<double>(start + j) - ratio);
      double weight = cubic ? cubic_kernel(argument, params.cubic_a) : linear_kernel(argument);
      if (params.exclude_outside && (position < 0 || position >= plan.in)) weight = 0.0;
      indices[base + static_cast<size_t>(j)] = std::clamp<int64_t>(position, 0, plan.in - 1);
      weights[base + static_cast<size_t>(j)] = weight;
      total += weight;
    }
    if (total != 0.0)
      for (int64_t j = 0; j < taps; ++j) weights[base + static_cast<size_t>(j)] /= total;
  }
  int64_t trailing = x.ndim() - plan.axis - 1;
  Tensor result;
  if (nearest) {
    std::optional<int64_t> k = repeat_factor(indices, plan.in);
    result = k ? repeat_each(x, plan.axis, *k) : x.take(int64_vector(indices), plan.axis);
  } else {
    // Non-float data is interpolated in f32 and rounded back.
    Tensor source = is_floating(x.dtype()) ? x : x.cast(ScalarType::Float32);
    Tensor gathered = source.take(int64_vector(indices).reshape({plan.out, taps}), plan.axis);
    Shape weight_shape{plan.out, taps};
    weight_shape.insert(weight_shape.end(), static_cast<size_t>(trailing), 1);
    Tensor weight = Tensor::from_vector(weights, weight_shape).cast(source.dtype());
    result = (gathered * weight).sum({plan.axis + 1});
    if (!is_floating(x.dtype())) result = result.round().cast(x.dtype());
  }
  if (crop && std::find(outside.begin(), outside.end(), 1) != outside.end()) {
    Shape mask_shape{plan.out};
    mask_shape.insert(mask_shape.end(), static_cast<size_t>(trailing), 1);
    std::vector<uint8_t> mask_values(outside);
    Tensor mask = Tensor::from_data(mask_values.data(), mask_shape, ScalarType::Bool);
    result = mask.where(Tensor::scalar(params.extrapolation, result.dtype()), result);
  }
  return result;
}

Tensor resize(const OnnxNode& node, const Tensor& x, const ResizeParams& params, std::vector<AxisResize> plans) {
  Tensor result = x;
  for (const AxisResize& plan : plans)
    if (plan.in != plan.out || plan.scale != 1.0 || params.coordinates == "tf_crop_and_resize")
      result = resize_axis(node, result, params, plan);
  return result;
}

// Axis plans from scales (out = ⌊in·scale⌋, the scale itself drives the coordinates).
std::vector<AxisResize> plans_from_scales(const OnnxNode& node, const Tensor& x, const std::vector<double>& scales,
                                          const std::vector<int64_t>& axes) {
  if (scales.size() != axes.size()) node.fail("scales must have one entry per resized axis");
  std::vector<AxisResize> plans;
  for (size_t i = 0; i < axes.size(); ++i) {
    AxisResize plan;
    plan.axis = axes[i];
    plan.in = x.dim(axes[i]);
    if (scales[i] <= 0) node.fail("scales must be positive");
    plan.out = static_cast<int64_t>(std::floor(static_cast<double>(plan.in) * scales[i]));
    plan.scale = scales[i];
    plan.out_length = static_cast<double>(plan.in) * scales[i];
    plans.push_back(plan);
  }
  return plans;
}

Outputs upsample(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Upsample: scales an attribute in opset 7, an input from opset 9; always asymmetric
  // coordinates with floor for nearest.
  std::vector<double> scales = node.opset() < 9 ? node.attr_floats("scales") : node.input_doubles(1);
  ResizeParams params;
  params.mode = node.attr_string("mode", "nearest");
  if (params.mode == "bilinear") params.mode = "linear";
  params.coordinates = "asymmetric";
  params.nearest_mode = "floor";
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  return {resize(node, x, params, plans_from_scales(node, x, scales, axes))};
}

Outputs resize_op(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  ResizeParams params;
  params.mode = node.attr_string("mode", "nearest");
  if (node.opset() < 11) {
    // Resize-10 had only X and scales and behaved like Upsample (asymmetric, floor).
    params.coordinates = "asymmetric";
    params.nearest_mode = "floor";
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
    return {resize(node, x, params, plans_from_scales(node, x, node.input_doubles(1), axes))};
  }
  // Opset 11: X, roi, scales, sizes and the coordinate attributes; 18 added antialias, axes and
  // keep_aspect_ratio_policy; 19 added half_pixel_symmetric.
  params.coordinates = node.attr_string("coordinate_transformation_mode", "half_pixel");
  params.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
  params.cubic_a = node.attr_float("cubic_coeff_a", -0.75);
  params.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  params.extrapolation = node.attr_float("extrapolation_value", 0.0);
  params.antialias = node.opset() >= 18 && node.attr_int("antialias", 0) != 0;
  std::vector<int64_t> axes;
  if (node.opset() >= 18 && node.has_attribute("axes")) {
    axes = normalize_axes(node, node.attr_ints("axes"), x.ndim());
  } else {
    for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  }
  auto present = [&](size_t i) { return node.has_input(i) && node.input(i).numel() > 0; };
  std::vector<AxisResize> plans;
  if (present(3)) {
    std::vector<int64_t> sizes = node.input_ints(3);
    if (sizes.size() != axes.size()) node.fail("sizes must have one entry per resized axis");
    std::string policy = node.opset() >= 18 ? node.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    double common = policy == "not_smaller" ? 0.0 : INFINITY;
    for (size_t i = 0; i < axes.size(); ++i) {
      double ratio = static_cast<double>(sizes[i]) / static_cast<double>(x.dim(axes[i]));
      if (policy == "not_larger") common = std::min(common, ratio);
      else if (policy == "not_smaller") common = std::max(common, ratio);
      else if (policy != "stretch") node.fail("unsupported: keep_aspect_ratio_policy '" + policy + "'");
    }
    for (size_t i = 0; i < axes.size(); ++i) {
      AxisResize plan;
      plan.axis = axes[i];
      plan.in = x.dim(axes[i]);
      if (policy == "stretch") {
        plan.out = sizes[i];
        plan.scale = static_cast<double>(plan.out) / static_cast<double>(plan.in);
      } else {
        plan.scale = common;
        plan.out = static_cast<int64_t>(std::floor(common * static_cast<double>(plan.in) + 0.5));
      }
      plan.out_length = policy == "stretch" ? static_cast<double>(plan.out) : plan.scale * static_cast<double>(plan.in);
      plans.push_back(plan);
    }
  } else if (present(2)) {
    plans = plans_from_scales(node, x, node.input_doubles(2), axes);
  } else {
    node.fail("neither scales nor sizes is given");
  }
  if (params.coordinates == "tf_crop_and_resize") {
    if (!present(1)) node.fail("tf_crop_and_resize needs roi");
    std::vector<double> roi = node.input_doubles(1);
    size_t count = plans.size();
    bool all_axes = roi.size() == 2 * static_cast<size_t>(x.ndim());
    if (roi.size() != 2 * count && !all_axes) node.fail("roi must hold a start and an end per resized axis");
    for (size_t i = 0; i < count; ++i) {
      size_t at = all_axes ? static_cast<size_t>(plans[i].axis) : i;
      size_t half = roi.size() / 2;
      plans[i].roi_start = roi[at];
      plans[i].roi_end = roi[at + half];
    }
  }
  return {resize(node, x, params, plans)};
}

}  // namespace

ConvOptions conv_options(const OnnxNode& node, const Tensor& x, const Shape& w_shape) {
  if (w_shape.size() < 3) node.fail("the weight must have rank 3 or more");
  size_t spatial = w_shape.size() - 2;
  std::vector<int64_t> kernel(w_shape.begin() + 2, w_shape.end());
  if (node.has_attribute("kernel_shape") && node.attr_ints("kernel_shape") != kernel) node.fail("kernel_shape does not match the weight");
  ConvOptions options;
  options.stride = per_axis(node, "strides", spatial, 1);
  options.dilation = per_axis(node, "dilations", spatial, 1);
  options.groups = node.attr_int("group", 1);
  options.padding = forward_pads(node, x, kernel, options.stride, options.dilation);
  options.pointwise_reader_filters = node.pointwise_reader_filters();
  return options;
}

void register_nn_ops(OpRegistry& registry) {
  registry.add("MatMul", matmul);
  registry.add("Gemm", gemm);
  registry.add("Conv", conv);
  registry.add("ConvTranspose", conv_transpose);
  registry.add("MaxPool", max_pool);
  registry.add("AveragePool", average_pool);
  registry.add("LpPool", lp_pool);
  registry.add("GlobalMaxPool", global_max_pool);
  registry.add("GlobalAveragePool", global_average_pool);
  registry.add("GlobalLpPool", global_lp_pool, 2);
  registry.add("BatchNormalization", batch_norm);
  registry.add("InstanceNormalization", instance_norm);
  registry.add("LayerNormalization", layer_norm, 17);
  registry.add("GroupNormalization", group_norm, 18);
  registry.add("RMSNormalization", rms_norm, 23);
  registry.add("MeanVarianceNormalization", mean_variance_norm, 9);
  registry.add("LpNormalization", lp_norm);
  registry.add("LRN", lrn);
  registry.add("Upsample", upsample, 7);
  registry.add("Resize", resize_op, 10);
}

}  // namespace kiln::onnx_import
