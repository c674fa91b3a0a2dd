// ONNX Resize and Upsample.
//
// Every mode is separable: each resized axis is a weighted sum of a few input positions per output
// position ("taps"). Where the axis' sizes are known, the taps are computed on the host from the
// ONNX formulas and applied as one take + weighted sum along that axis. Where the input or output
// length is symbolic (an image size known only when a plan runs, docs/symbolic-shapes.md), the
// same formulas are built as a small graph over the output positions and materialised as a short
// vector of positions and one of weights per axis, so that the resize kernel reads them from
// buffers as the fixed plan reads its constants.
#include <algorithm>
#include <cmath>
#include <optional>

#include "op_helpers.h"
#include "op_registry.h"
#include "support/error.h"
#include "tensor/tensor_internal.h"  // Dim helpers and contiguous(), beyond the public Tensor API

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

struct ResizeParams {
  std::string mode = "nearest";
  std::string coordinates = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

// One resized axis. The lengths may be symbolic; the scale is a number when scales (or a
// keep-aspect policy) give it or both lengths are known, and out / in, known only when the plan
// runs, for a symbolic length given by sizes.
struct AxisResize {
  int64_t axis = 0;
  Dim in = 0, out = 0;
  std::optional<double> scale;
  double roi_start = 0.0, roi_end = 1.0;
  // in · scale before flooring (the reference's align_corners, pytorch_half_pixel,
  // half_pixel_symmetric and tf_crop_and_resize formulas use this real-valued output length);
  // for sizes given by a symbolic length, the output length itself.
  std::optional<double> out_length;
  bool is_known() const { return in.is_known() && out.is_known() && scale && out_length; }
};

// ---- known lengths: taps on the host ----

double source_coordinate(const OnnxNode& node, const ResizeParams& params, const AxisResize& plan, int64_t o) {
  double x = static_cast<double>(o), in = static_cast<double>(plan.in.value()), out = *plan.out_length;
  double scale = *plan.scale;
  const std::string& mode = params.coordinates;
  if (mode == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(plan.out.value()) / out;
    double center = in / 2.0;
    return center * (1.0 - adjustment) + (x + 0.5) / scale - 0.5;
  }
  if (mode == "pytorch_half_pixel") return out > 1.0 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners") return out == 1.0 ? 0.0 : x * (in - 1.0) / (out - 1.0);
  if (mode == "asymmetric") return x / scale;
  if (mode == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
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
  // Dims: the other axes (a batch) may be symbolic.
  Dims repeated = dims_of(x), merged = dims_of(x);
  repeated.insert(repeated.begin() + axis + 1, k);
  merged[static_cast<size_t>(axis)] = merged[static_cast<size_t>(axis)] * Dim(k);
  return reshape_to(expand_to(x.unsqueeze(axis + 1), repeated), merged);
}

// The first tap's offset from ⌊source⌋ and the tap count. Linear/cubic taps: kernel(scale'·(j − r))
// for j in [start, 1 − start], where scale' < 1 only with antialias when downsampling (widening the
// filter, as ONNX's reference does).
struct TapWindow {
  int64_t start = 0, taps = 1;
  double filter_scale = 1.0;
};

TapWindow tap_window(const OnnxNode& node, const ResizeParams& params, const AxisResize& plan) {
  bool nearest = params.mode == "nearest";
  bool cubic = params.mode == "cubic";
  if (!nearest && !cubic && params.mode != "linear") node.fail("unsupported: Resize mode '" + params.mode + "'");
  if (nearest) return {};
  TapWindow window;
  if (params.antialias) {
    if (!plan.scale)
      node.fail(str_cat("unsupported: antialias on axis ", plan.axis, " resized from ", plan.in, " to ", plan.out,
                        ": the filter width depends on a scale known only when the plan runs"));
    window.filter_scale = std::min(*plan.scale, 1.0);
  }
  double support = cubic ? 2.0 : 1.0;
  window.start = static_cast<int64_t>(std::floor(-support / window.filter_scale) + 1.0);
  window.taps = 2 - 2 * window.start;
  return window;
}

Tensor resize_known_axis(const OnnxNode& node, const Tensor& x, const ResizeParams& params, const AxisResize& plan) {
  bool nearest = params.mode == "nearest";
  bool cubic = params.mode == "cubic";
  TapWindow window = tap_window(node, params, plan);
  int64_t start = window.start, taps = window.taps, in = plan.in.value(), out = plan.out.value();
  bool crop = params.coordinates == "tf_crop_and_resize";
  std::vector<int64_t> indices(static_cast<size_t>(out * taps), 0);
  std::vector<double> weights(indices.size(), 0.0);
  std::vector<uint8_t> outside(static_cast<size_t>(out), 0);
  for (int64_t o = 0; o < out; ++o) {
    double source = source_coordinate(node, params, plan, o);
    if (crop && (source < 0.0 || source > static_cast<double>(in - 1))) outside[static_cast<size_t>(o)] = 1;
    size_t base = static_cast<size_t>(o * taps);
    if (nearest) {
      indices[base] = std::clamp<int64_t>(nearest_index(node, params.nearest_mode, source), 0, in - 1);
      weights[base] = 1.0;
      continue;
    }
    double floor_source = std::floor(source);
    double ratio = source - floor_source;
    auto first = static_cast<int64_t>(floor_source);
    double total = 0.0;
    for (int64_t j = 0; j < taps; ++j) {
      int64_t position = first + start + j;
      double argument = window.filter_scale * (static_cast<double>(start + j) - ratio);
      double weight = cubic ? cubic_kernel(argument, params.cubic_a) : linear_kernel(argument);
      if (params.exclude_outside && (position < 0 || position >= in)) weight = 0.0;
      indices[base + static_cast<size_t>(j)] = std::clamp<int64_t>(position, 0, in - 1);
      weights[base + static_cast<size_t>(j)] = weight;
      total += weight;
    }
    if (total != 0.0)
      for (int64_t j = 0; j < taps; ++j) weights[base + static_cast<size_t>(j)] /= total;
  }
  int64_t trailing = x.ndim() - plan.axis - 1;
  Tensor result;
  if (nearest) {
    std::optional<int64_t> k = repeat_factor(indices, in);
    result = k ? repeat_each(x, plan.axis, *k) : x.take(int64_vector(indices), plan.axis);
  } else {
    // Non-float data is interpolated in f32 and rounded back.
    Tensor source = is_floating(x.dtype()) ? x : x.cast(ScalarType::Float32);
    Tensor gathered = source.take(int64_vector(indices).reshape({out, taps}), plan.axis);
    Shape weight_shape{out, taps};
    weight_shape.insert(weight_shape.end(), static_cast<size_t>(trailing), 1);
    Tensor weight = Tensor::from_vector(weights, weight_shape).cast(source.dtype());
    result = (gathered * weight).sum({plan.axis + 1});
    if (!is_floating(x.dtype())) result = result.round().cast(x.dtype());
  }
  if (crop && std::find(outside.begin(), outside.end(), 1) != outside.end()) {
    Shape mask_shape{out};
    mask_shape.insert(mask_shape.end(), static_cast<size_t>(trailing), 1);
    std::vector<uint8_t> mask_values(outside);
    Tensor mask = Tensor::from_data(mask_values.data(), mask_shape, ScalarType::Bool);
    result = mask.where(Tensor::scalar(params.extrapolation, result.dtype()), result);
  }
  return result;
}

// ---- symbolic lengths: taps as a graph ----
//
// The host formulas above, over f64 tensors: `o` the output positions (a vector of out), `in` and
// `out` scalars computed from the plan's variables. The same operations in the same order, so a
// symbolic plan picks the same taps and weights as the plan compiled for its shape.

Tensor f64(double value) { return Tensor::scalar(value, ScalarType::Float64); }

Tensor source_coordinates(const OnnxNode& node, const ResizeParams& params, const AxisResize& plan, const Tensor& o) {
  Tensor in = dim_tensor(plan.in, ScalarType::Float64), out = dim_tensor(plan.out, ScalarType::Float64);
  Tensor scale = plan.scale ? f64(*plan.scale) : out / in;
  Tensor out_length = plan.out_length ? f64(*plan.out_length) : plan.scale ? in * *plan.scale : out;
  const std::string& mode = params.coordinates;
  if (mode == "half_pixel") return (o + 0.5) / scale - 0.5;
  if (mode == "half_pixel_symmetric") {
    Tensor adjustment = out / out_length;
    Tensor center = in / 2.0;
    return (center * (f64(1.0) - adjustment) + (o + 0.5) / scale) - 0.5;
  }
  if (mode == "pytorch_half_pixel") return out_length.gt(f64(1.0)).where((o + 0.5) / scale - 0.5, f64(0.0));
  if (mode == "align_corners") return out_length.eq(f64(1.0)).where(f64(0.0), o * (in - 1.0) / (out_length - 1.0));
  if (mode == "asymmetric") return o / scale;
  if (mode == "tf_half_pixel_for_nn") return (o + 0.5) / scale;
  if (mode == "tf_crop_and_resize")
    node.fail(str_cat("unsupported: tf_crop_and_resize on axis ", plan.axis, " resized from ", plan.in, " to ", plan.out,
                      ", a symbolic length (its out-of-roi mask is built on the host)"));
  node.fail("unsupported: Resize coordinate_transformation_mode '" + mode + "'");
}

Tensor nearest_indices(const OnnxNode& node, const std::string& mode, const Tensor& x) {
  // round_prefer_floor rounds halves down: ⌈x − ½⌉; round_prefer_ceil rounds them up: ⌊x + ½⌋.
  if (mode == "round_prefer_floor") return (x - 0.5).ceil();
  if (mode == "round_prefer_ceil") return (x + 0.5).floor();
  if (mode == "floor") return x.floor();
  if (mode == "ceil") return x.ceil();
  node.fail("unsupported: Resize nearest_mode '" + mode + "'");
}

Tensor linear_kernel(const Tensor& s) { return (f64(1.0) - s.abs()).maximum(f64(0.0)); }

Tensor cubic_kernel(const Tensor& signed_s, double a) {
  Tensor s = signed_s.abs();
  Tensor near = ((s * (a + 2.0) - (a + 3.0)) * s * s) + 1.0;
  Tensor far = (((s * a - 5.0 * a) * s + 8.0 * a) * s) - 4.0 * a;
  return s.le(f64(1.0)).where(near, s.lt(f64(2.0)).where(far, f64(0.0)));
}

Tensor clamp_position(const Tensor& position, const Tensor& in) {
  return position.maximum(f64(0.0)).minimum(in - 1.0).cast(ScalarType::Int64);
}

Tensor resize_symbolic_axis(const OnnxNode& node, const Tensor& x, const ResizeParams& params, const AxisResize& plan) {
  TapWindow window = tap_window(node, params, plan);
  Dims dims = dims_of(x);
  int64_t trailing = x.ndim() - plan.axis - 1;
  Dims resized = dims;
  resized[static_cast<size_t>(plan.axis)] = plan.out;
  // One input position: every tap reads it, and the weights add up to one.
  if (plan.in.is(1) && !params.exclude_outside) return expand_to(x, resized);
  Tensor in = dim_tensor(plan.in, ScalarType::Float64);
  Tensor source = source_coordinates(node, params, plan, arange_dim(plan.out, ScalarType::Float64));
  if (params.mode == "nearest") {
    Tensor index = contiguous(clamp_position(nearest_indices(node, params.nearest_mode, source), in));
    return x.take(index, plan.axis);
  }
  // (out, taps): position ⌊source⌋ + start + j, weight kernel(scale'·(start + j − ratio)).
  Tensor floor_source = reshape_to(source.floor(), {plan.out, 1});
  Tensor ratio = reshape_to(source, {plan.out, 1}) - floor_source;
  Tensor offset = (Tensor::arange(window.taps, ScalarType::Int64) + window.start).cast(ScalarType::Float64).reshape({1, window.taps});
  Tensor position = floor_source + offset;
  Tensor argument = (offset - ratio) * window.filter_scale;
  Tensor weight = params.mode == "cubic" ? cubic_kernel(argument, params.cubic_a) : linear_kernel(argument);
  if (params.exclude_outside) weight = (position.lt(f64(0.0)).logical_or(position.ge(in))).where(f64(0.0), weight);
  Tensor total = weight.sum({1}, true);
  weight = total.ne(f64(0.0)).where(weight / total, weight);
  Tensor index = contiguous(clamp_position(position, in));
  Tensor data = is_floating(x.dtype()) ? x : x.cast(ScalarType::Float32);
  Dims weight_shape{plan.out, window.taps};
  weight_shape.insert(weight_shape.end(), static_cast<size_t>(trailing), 1);
  Tensor tap_weight = reshape_to(contiguous(weight.cast(data.dtype())), weight_shape);
  Tensor result = (data.take(index, plan.axis) * tap_weight).sum({plan.axis + 1});
  if (!is_floating(x.dtype())) result = result.round().cast(x.dtype());
  return result;
}

Tensor resize(const OnnxNode& node, const Tensor& x, const ResizeParams& params, const std::vector<AxisResize>& plans) {
  Tensor result = x;
  bool crop = params.coordinates == "tf_crop_and_resize";
  for (const AxisResize& plan : plans) {
    bool unchanged = plan.in == plan.out && (plan.scale ? *plan.scale == 1.0 : true);
    if (unchanged && !crop) continue;
    result = plan.is_known() ? resize_known_axis(node, result, params, plan) : resize_symbolic_axis(node, result, params, plan);
  }
  return result;
}

// ⌊in · scale⌋ for a symbolic `in`, as the size expression in·p/q: a scale that is a fraction p/q
// with a small q (2, 0.5, 1.5 and their float32 roundings) gives the same floor for every value
// `in` may take, which is checked over its range.
Dim scaled_length(const OnnxNode& node, const Dim& in, double scale, int64_t axis) {
  constexpr int64_t kLargestDenominator = 64;
  constexpr int64_t kLongestCheckedRange = 1 << 20;
  int64_t low = in.min(), high = in.max();
  if (high - low <= kLongestCheckedRange) {
    for (int64_t q = 1; q <= kLargestDenominator; ++q) {
      auto p = static_cast<int64_t>(std::llround(scale * static_cast<double>(q)));
      bool same = p > 0;
      for (int64_t v = low; same && v <= high; ++v)
        same = static_cast<int64_t>(std::floor(static_cast<double>(v) * scale)) == v * p / q;
      if (same) return in * Dim(p) / Dim(q);
    }
  }
  node.fail(str_cat("unsupported: scale ", scale, " on axis ", axis, " of symbolic length ", in,
                    ": the output length ⌊length · scale⌋ is not a whole fraction of the length over its range"));
}

// Axis plans from scales (out = ⌊in·scale⌋, the scale itself drives the coordinates).
std::vector<AxisResize> plans_from_scales(const OnnxNode& node, const Tensor& x, const std::vector<double>& scales,
                                          const std::vector<int64_t>& axes) {
  if (scales.size() != axes.size()) node.fail("scales must have one entry per resized axis");
  std::vector<AxisResize> plans;
  for (size_t i = 0; i < axes.size(); ++i) {
    AxisResize plan;
    plan.axis = axes[i];
    plan.in = dim_of(x, axes[i]);
    if (scales[i] <= 0) node.fail("scales must be positive");
    plan.scale = scales[i];
    if (plan.in.is_known()) {
      auto in = static_cast<double>(plan.in.value());
      plan.out = static_cast<int64_t>(std::floor(in * scales[i]));
      plan.out_length = in * scales[i];
    } else {
      plan.out = scaled_length(node, plan.in, scales[i], axes[i]);
    }
    plans.push_back(plan);
  }
  return plans;
}

// Axis plans from sizes, under keep_aspect_ratio_policy (opset 18).
std::vector<AxisResize> plans_from_sizes(const OnnxNode& node, const Tensor& x, const Dims& sizes,
                                         const std::vector<int64_t>& axes) {
  if (sizes.size() != axes.size()) node.fail("sizes must have one entry per resized axis");
  std::string policy = node.opset() >= 18 ? node.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    node.fail("unsupported: keep_aspect_ratio_policy '" + policy + "'");
  std::vector<AxisResize> plans;
  for (size_t i = 0; i < axes.size(); ++i) {
    AxisResize plan;
    plan.axis = axes[i];
    plan.in = dim_of(x, axes[i]);
    plan.out = sizes[i];
    if (policy != "stretch" && !(plan.in.is_known() && plan.out.is_known()))
      node.fail(str_cat("unsupported: keep_aspect_ratio_policy '", policy, "' over axis ", axes[i], " resized from ",
                        plan.in, " to ", plan.out, ", a symbolic length"));
    if (plan.in.is_known() && plan.out.is_known()) {
      plan.scale = static_cast<double>(plan.out.value()) / static_cast<double>(plan.in.value());
      plan.out_length = static_cast<double>(plan.out.value());
    }
    plans.push_back(plan);
  }
  if (policy == "stretch") return plans;
  double common = policy == "not_smaller" ? 0.0 : INFINITY;
  for (const AxisResize& plan : plans)
    common = policy == "not_larger" ? std::min(common, *plan.scale) : std::max(common, *plan.scale);
  for (AxisResize& plan : plans) {
    plan.scale = common;
    plan.out = static_cast<int64_t>(std::floor(common * static_cast<double>(plan.in.value()) + 0.5));
    plan.out_length = common * static_cast<double>(plan.in.value());
  }
  return plans;
}

std::vector<int64_t> every_axis(const Tensor& x) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  return axes;
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
  return {resize(node, x, params, plans_from_scales(node, x, scales, every_axis(x)))};
}

Outputs resize_op(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  ResizeParams params;
  params.mode = node.attr_string("mode", "nearest");
  if (node.opset() < 11) {
    // Resize-10 had only X and scales and behaved like Upsample (asymmetric, floor).
    params.coordinates = "asymmetric";
    params.nearest_mode = "floor";
    return {resize(node, x, params, plans_from_scales(node, x, node.input_doubles(1), every_axis(x)))};
  }
  // Opset 11: X, roi, scales, sizes and the coordinate attributes; 18 added antialias, axes and
  // keep_aspect_ratio_policy; 19 added half_pixel_symmetric.
  params.coordinates = node.attr_string("coordinate_transformation_mode", "half_pixel");
  params.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
  params.cubic_a = node.attr_float("cubic_coeff_a", -0.75);
  params.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
  params.extrapolation = node.attr_float("extrapolation_value", 0.0);
  params.antialias = node.opset() >= 18 && node.attr_int("antialias", 0) != 0;
  std::vector<int64_t> axes = node.opset() >= 18 && node.has_attribute("axes")
                                  ? normalize_axes(node, node.attr_ints("axes"), x.ndim())
                                  : every_axis(x);
  auto present = [&](size_t i) { return node.has_input(i) && !dims_numel(dims_of(node.input(i))).is(0); };
  std::vector<AxisResize> plans;
  if (present(3)) {
    plans = plans_from_sizes(node, x, node.input_dims(3), axes);
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

void register_resize_ops(OpRegistry& registry) {
  registry.add("Upsample", upsample, 7);
  registry.add("Resize", resize_op, 10);
}

}  // namespace kiln::onnx_import
