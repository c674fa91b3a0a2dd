// ONNX neural-network operators: matrix products, convolutions, pooling and normalisations
// (Resize/Upsample: ops_resize.cpp). Attribute conventions shared by Conv and the pools (auto_pad,
// pads laid out as all begins then all ends) are resolved here into kiln's ConvOptions/PoolOptions,
// which use the same begin-then-end pad layout.
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
    // With stride 1 the padding is the dilated kernel's span less one for any input size (so a
    // symbolic image's is known); otherwise it depends on the size, which must then be known.
    int64_t total = (kernel[i] - 1) * dilation[i];
    if (stride[i] != 1) {
      int64_t in = input.dim(static_cast<int64_t>(2 + i));
      int64_t out = (in + stride[i] - 1) / stride[i];
      total = std::max<int64_t>(0, (out - 1) * stride[i] + (kernel[i] - 1) * dilation[i] + 1 - in);
    }
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
}

}  // namespace kiln::onnx_import
