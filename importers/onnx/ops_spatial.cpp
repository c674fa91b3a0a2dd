// ONNX spatial sampling and rearrangement operators: GridSample, AffineGrid, Col2Im, DeformConv,
// RoiAlign, MaxUnpool and NonMaxSuppression.
//
// The samplers share one scheme: along each spatial axis, every sampling coordinate gets a few
// interpolation taps (1 for nearest, 2 for linear, 4 for cubic) with weights; padding modes move
// or mask the taps; the taps of all axes combine into flat indices into the row-major spatial
// block, and one gather per op reads every tap of every sample. Masked taps read index 0 and are
// replaced by zero with `where` (not multiplied by a zero weight, so an inf or NaN elsewhere in the
// input cannot leak into the result).
//
// Data-dependent parts are computed at build time by realizing small inputs, like Range and
// OnnxNode::input_ints do: NonMaxSuppression's selection (its output size depends on the values),
// RoiAlign's adaptive sampling grid (sampling_ratio = 0), and MaxUnpool's check that every index
// lies in its own pooling window.
#include <algorithm>
#include <cmath>

#include "non_max_suppression_plan.h"
#include "op_helpers.h"
#include "op_registry.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// The float type the samplers compute in: f64 when an operand is f64, else f32 (half types widen).
ScalarType sampling_type(ScalarType a, ScalarType b = ScalarType::Float32) {
  return a == ScalarType::Float64 || b == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
}

Tensor constant_of(ScalarType type, double value) { return Tensor::scalar(value, type); }
Tensor zero_like_type(const Tensor& x) { return Tensor::scalar(0.0, x.dtype()); }

// An int list attribute with one entry per spatial axis (an empty list means the default).
std::vector<int64_t> per_axis(const OnnxNode& node, const std::string& name, size_t count, int64_t fill) {
  std::vector<int64_t> values = node.attr_ints(name, std::vector<int64_t>(count, fill));
  if (values.empty()) values.assign(count, fill);
  if (values.size() != count) node.fail(name + " must have " + std::to_string(count) + " entries");
  return values;
}

// Row-major strides of a shape.
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;) strides[i - 1] = strides[i] * sizes[i];
  return strides;
}

// ---- taps ----

// Interpolation taps along one axis for coordinates x (…): positions (…, T) as floats and their
// weights (undefined = all 1).
struct Taps {
  Tensor position, weight;
};

Taps nearest_taps(const Tensor& x) { return {x.round().unsqueeze(-1), Tensor()}; }  // ties to even

Taps linear_taps(const Tensor& x) {
  Tensor position = x.floor().unsqueeze(-1) + Tensor::arange(0, 2, 1, x.dtype());
  return {position, 1.0 - (position - x.unsqueeze(-1)).abs()};
}

// Keys' cubic convolution kernel with coefficient a over the 4 taps floor(x)−1 … floor(x)+2.
Taps cubic_taps(const Tensor& x, double a) {
  Tensor position = x.floor().unsqueeze(-1) + Tensor::arange(-1, 3, 1, x.dtype());
  Tensor s = (position - x.unsqueeze(-1)).abs();
  Tensor near = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
  Tensor far = ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
  Tensor zero = constant_of(x.dtype(), 0.0);
  Tensor one = constant_of(x.dtype(), 1.0), two = constant_of(x.dtype(), 2.0);
  return {position, s.le(one).where(near, s.lt(two).where(far, zero))};
}

enum class Padding { Zeros, Border, Reflection };

// x reflected back and forth into [low, high] until it lies inside.
Tensor reflect(const Tensor& x, double low, double high) {
  double span = high - low;
  if (span <= 0) return x * 0.0;
  Tensor distance = (x - low).abs();
  Tensor flips = (distance / span).floor();
  Tensor extra = distance - flips * span;
  Tensor even = flips.fmod(constant_of(x.dtype(), 2.0)).eq(constant_of(x.dtype(), 0.0));
  return even.where(low + extra, high - extra);
}

// Taps resolved against an axis of `size`: integer indices in [0, size), weights, and validity
// (undefined = all valid).
struct AxisSamples {
  Tensor index, weight, valid;
};

// Zeros: taps outside the axis are invalid. Border: taps clamp to the edge. Reflection: taps
// reflect about the borders (the corner pixels' centres with align_corners, else their outer
// edges), then clamp.
AxisSamples place_taps(const Taps& taps, int64_t size, Padding padding, bool align_corners) {
  Tensor position = taps.position;
  auto last = static_cast<double>(size - 1);
  Tensor valid;
  if (padding == Padding::Zeros) {
    valid = position.ge(constant_of(position.dtype(), 0.0)).logical_and(position.le(constant_of(position.dtype(), last)));
  } else if (padding == Padding::Reflection) {
    position = align_corners ? reflect(position, 0.0, last) : reflect(position, -0.5, static_cast<double>(size) - 0.5);
  }
  return {position.clip(0.0, last).cast(ScalarType::Int64), taps.weight, valid};
}

// The taps of every axis combined: flat row-major indices into the spatial block of `sizes`,
// weights multiplied, validity and-ed. Each axis' tensors are (B…, T_d) with broadcastable B…; the
// result is (B…, T_0·…·T_{r−1}).
AxisSamples combine_axes(const std::vector<AxisSamples>& axes, const std::vector<int64_t>& sizes) {
  size_t rank = axes.size();
  std::vector<int64_t> strides = row_major_strides(sizes);
  AxisSamples combined;
  for (size_t d = 0; d < rank; ++d) {
    auto place = [&](const Tensor& t) {
      Shape own(t.shape().begin(), t.shape().end() - 1);
      for (size_t e = 0; e < rank; ++e) own.push_back(e == d ? t.shape().back() : 1);
      return t.reshape(own);
    };
    Tensor index = place(axes[d].index) * Tensor::scalar(static_cast<double>(strides[d]), ScalarType::Int64);
    combined.index = combined.index.defined() ? combined.index + index : index;
    if (axes[d].weight.defined())
      combined.weight = combined.weight.defined() ? combined.weight * place(axes[d].weight) : place(axes[d].weight);
    if (axes[d].valid.defined())
      combined.valid = combined.valid.defined() ? combined.valid.logical_and(place(axes[d].valid)) : place(axes[d].valid);
  }
  // Broadcast everything to one shape, then merge the tap axes.
  Shape full = combined.index.shape();
  for (const Tensor* t : {&combined.weight, &combined.valid})
    if (t->defined())
      for (size_t i = 0; i < full.size(); ++i) full[i] = std::max(full[i], t->shape()[i]);
  auto flatten_taps = [&](const Tensor& t) {
    if (!t.defined()) return t;
    return t.expand(full).flatten(static_cast<int64_t>(full.size() - rank), -1);
  };
  return {flatten_taps(combined.index), flatten_taps(combined.weight), flatten_taps(combined.valid)};
}

// values[…, c, m] = data[…, c, index[…, m]] for data (B…, C, S) and index (B…, M).
Tensor gather_points(const Tensor& data, const Tensor& index) {
  Shape shape = data.shape();
  shape.back() = index.dim(-1);
  return data.gather(-1, index.unsqueeze(-2).expand(shape));
}

// ---- GridSample ----

enum class SampleMode { Nearest, Linear, Cubic };

SampleMode grid_sample_mode(const OnnxNode& node) {
  // Opset 20 renamed bilinear/bicubic to linear/cubic when it generalised the op to N-D.
  bool renamed = node.opset() >= 20;
  std::string mode = node.attr_string("mode", renamed ? "linear" : "bilinear");
  if (mode == "nearest") return SampleMode::Nearest;
  if (mode == (renamed ? "linear" : "bilinear")) return SampleMode::Linear;
  if (mode == (renamed ? "cubic" : "bicubic")) return SampleMode::Cubic;
  node.fail("unsupported: GridSample mode '" + mode + "'");
}

Padding grid_sample_padding(const OnnxNode& node) {
  std::string padding = node.attr_string("padding_mode", "zeros");
  if (padding == "zeros") return Padding::Zeros;
  if (padding == "border") return Padding::Border;
  if (padding == "reflection") return Padding::Reflection;
  node.fail("unsupported: GridSample padding_mode '" + padding + "'");
}

// Grid value g in [−1, 1] → pixel coordinate on an axis of `size`.
Tensor unnormalize(const Tensor& g, int64_t size, bool align_corners) {
  auto n = static_cast<double>(size);
  return align_corners ? (g + 1.0) * (0.5 * (n - 1.0)) : ((g + 1.0) * n - 1.0) * 0.5;
}

Outputs grid_sample(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& grid = node.input(1);
  int64_t rank = x.ndim() - 2;
  if (node.opset() < 20 && x.ndim() != 4) node.fail("X must be 4-D before opset 20");
  if (rank < 1) node.fail("X must have at least one spatial axis");
  if (grid.ndim() != rank + 2 || grid.dim(-1) != rank || grid.dim(0) != x.dim(0))
    node.fail("grid must have shape (N, out…, " + std::to_string(rank) + ") matching X");
  for (int64_t d = 2; d < x.ndim(); ++d)
    if (x.dim(d) == 0) node.fail("unsupported: GridSample on an empty spatial axis");
  SampleMode mode = grid_sample_mode(node);
  Padding padding = grid_sample_padding(node);
  bool align_corners = node.attr_int("align_corners", 0) != 0;
  ScalarType type = sampling_type(x.dtype(), grid.dtype());
  int64_t batch = x.dim(0), channels = x.dim(1);
  Shape out_dims(grid.shape().begin() + 1, grid.shape().end() - 1);
  int64_t points = shape_product(out_dims, 0, out_dims.size());
  Tensor coordinates = grid.cast(type).reshape({batch, points, rank});
  std::vector<AxisSamples> axes;
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = x.dim(2 + d);
    // The grid lists coordinates innermost axis first (x, y, z…).
    Tensor g = coordinates.slice(2, rank - 1 - d, rank - d).reshape({batch, points});
    Tensor position = unnormalize(g, size, align_corners);
    Taps taps = mode == SampleMode::Nearest ? nearest_taps(position)
                : mode == SampleMode::Linear ? linear_taps(position)
                                             : cubic_taps(position, -0.75);
    axes.push_back(place_taps(taps, size, padding, align_corners));
    sizes.push_back(size);
  }
  AxisSamples samples = combine_axes(axes, sizes);  // (N, P, T)
  int64_t taps = samples.index.dim(-1);
  bool interpolate = mode != SampleMode::Nearest;
  Tensor data = interpolate && x.dtype() != type ? x.cast(type) : x;
  data = data.reshape({batch, channels, shape_product(sizes, 0, sizes.size())});
  Tensor values = gather_points(data, samples.index.reshape({batch, points * taps})).reshape({batch, channels, points, taps});
  if (samples.valid.defined()) values = samples.valid.unsqueeze(1).where(values, zero_like_type(values));
  Tensor result = interpolate ? (values * samples.weight.unsqueeze(1)).sum({-1}) : values.squeeze({-1});
  // Integer inputs interpolate in floating point and are cast back at the end (the spec's rule).
  if (result.dtype() != x.dtype()) result = result.cast(x.dtype());
  Shape out_shape{batch, channels};
  out_shape.insert(out_shape.end(), out_dims.begin(), out_dims.end());
  return {result.reshape(out_shape)};
}

// ---- AffineGrid ----

// The normalised centre of pixel i of n on [−1, 1] (a single pixel sits at 0).
double grid_position(int64_t i, int64_t n, bool align_corners) {
  if (n <= 1) return 0.0;
  auto fi = static_cast<double>(i), fn = static_cast<double>(n);
  return align_corners ? -1.0 + 2.0 * fi / (fn - 1.0) : (2.0 * fi + 1.0) / fn - 1.0;
}

Outputs affine_grid(const OnnxNode& node) {
  const Tensor& theta = node.input(0);
  std::vector<int64_t> size = node.input_ints(1);
  bool align_corners = node.attr_int("align_corners", 0) != 0;
  auto rank = static_cast<int64_t>(size.size()) - 2;
  if (rank != 2 && rank != 3) node.fail("size must be (N, C, H, W) or (N, C, D, H, W)");
  if (theta.ndim() != 3 || theta.dim(1) != rank || theta.dim(2) != rank + 1 || theta.dim(0) != size[0])
    node.fail("theta must have shape (N, " + std::to_string(rank) + ", " + std::to_string(rank + 1) + ")");
  std::vector<int64_t> dims(size.begin() + 2, size.end());
  int64_t count = shape_product(dims, 0, dims.size());
  // Homogeneous base positions (x, y, [z,] 1), x along the innermost axis, one row per pixel.
  std::vector<double> base;
  base.reserve(static_cast<size_t>(count * (rank + 1)));
  std::vector<int64_t> strides = row_major_strides(dims);
  for (int64_t flat = 0; flat < count; ++flat) {
    for (int64_t k = 0; k < rank; ++k) {
      auto axis = static_cast<size_t>(rank - 1 - k);
      base.push_back(grid_position((flat / strides[axis]) % dims[axis], dims[axis], align_corners));
    }
    base.push_back(1.0);
  }
  Tensor positions = Tensor::from_vector(base, {1, count, rank + 1}).cast(theta.dtype());
  Shape out_shape{size[0]};
  out_shape.insert(out_shape.end(), dims.begin(), dims.end());
  out_shape.push_back(rank);
  return {positions.matmul(theta.transpose(-1, -2)).reshape(out_shape)};
}

// ---- Col2Im ----

// Col2Im is a transposed convolution: column channel c·K + k holds kernel offset k of image channel
// c, so a grouped conv_transpose (one group per image channel) whose weight is the identity over
// kernel offsets adds every block back at its place, overlaps summed.
Outputs col2im(const OnnxNode& node) {
  const Tensor& input = node.input(0);
  std::vector<int64_t> image = node.input_ints(1), block = node.input_ints(2);
  size_t rank = image.size();
  if (rank == 0 || block.size() != rank) node.fail("image_shape and block_shape must have the same, non-zero length");
  if (input.ndim() != 3) node.fail("input must be 3-D (N, C·prod(block_shape), L)");
  std::vector<int64_t> strides = per_axis(node, "strides", rank, 1);
  std::vector<int64_t> dilations = per_axis(node, "dilations", rank, 1);
  std::vector<int64_t> pads = per_axis(node, "pads", 2 * rank, 0);
  int64_t kernel = shape_product(block, 0, rank);
  if (kernel <= 0 || input.dim(1) % kernel != 0) node.fail("input channels are not a multiple of prod(block_shape)");
  int64_t channels = input.dim(1) / kernel;
  Shape blocks_shape{input.dim(0), input.dim(1)};
  ConvOptions options;
  options.stride = strides;
  options.dilation = dilations;
  options.padding = pads;
  options.groups = channels;
  for (size_t i = 0; i < rank; ++i) {
    int64_t span = dilations[i] * (block[i] - 1) + 1;
    int64_t padded = image[i] + pads[i] + pads[i + rank];
    if (strides[i] <= 0 || padded < span) node.fail("block_shape does not fit the padded image");
    int64_t count = (padded - span) / strides[i] + 1;
    blocks_shape.push_back(count);
    // Image rows past the last block get nothing: they are the transposed conv's output padding.
    options.output_padding.push_back(padded - ((count - 1) * strides[i] + span));
  }
  if (shape_product(blocks_shape, 2, blocks_shape.size()) != input.dim(2))
    node.fail("the number of blocks L does not match image_shape, block_shape, strides, pads and dilations");
  Shape weight_shape{1, kernel, 1};
  weight_shape.insert(weight_shape.end(), block.begin(), block.end());
  Shape expanded = weight_shape;
  expanded[0] = channels;
  Shape merged{channels * kernel, 1};
  merged.insert(merged.end(), block.begin(), block.end());
  Tensor weight = Tensor::eye(kernel, kernel, 0, input.dtype()).reshape(weight_shape).expand(expanded).reshape(merged);
  return {input.reshape(blocks_shape).conv_transpose(weight, Tensor(), options)};
}

// ---- DeformConv ----

// Each output position o and kernel offset k sample X bilinearly at o·stride − pad + k·dilation
// plus the learned offset (zero outside X), scaled by the mask; the samples ("columns", one per
// input channel and kernel offset) then meet the weight in one grouped matrix product.
Outputs deform_conv(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& w = node.input(1);
  const Tensor& offset = node.input(2);
  int64_t rank = x.ndim() - 2;
  auto spatial = static_cast<size_t>(rank);
  if (rank < 1 || w.ndim() != x.ndim()) node.fail("X and W must have the same rank, at least 3");
  std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  if (node.has_attribute("kernel_shape") && node.attr_ints("kernel_shape") != kernel) node.fail("kernel_shape does not match W");
  int64_t groups = node.attr_int("group", 1), offset_groups = node.attr_int("offset_group", 1);
  int64_t batch = x.dim(0), channels = x.dim(1), out_channels = w.dim(0);
  if (groups <= 0 || channels % groups != 0 || out_channels % groups != 0 || w.dim(1) != channels / groups)
    node.fail("channels of X and W do not match group");
  if (offset_groups <= 0 || channels % offset_groups != 0) node.fail("channels are not a multiple of offset_group");
  std::vector<int64_t> strides = per_axis(node, "strides", spatial, 1);
  std::vector<int64_t> dilations = per_axis(node, "dilations", spatial, 1);
  std::vector<int64_t> pads = per_axis(node, "pads", 2 * spatial, 0);
  std::vector<int64_t> in_dims(x.shape().begin() + 2, x.shape().end()), out_dims;
  for (size_t i = 0; i < spatial; ++i) {
    int64_t extent = in_dims[i] + pads[i] + pads[i + spatial] - dilations[i] * (kernel[i] - 1) - 1;
    if (strides[i] <= 0 || extent < 0) node.fail("the kernel does not fit the padded input");
    out_dims.push_back(extent / strides[i] + 1);
  }
  int64_t offsets = shape_product(kernel, 0, spatial), points = shape_product(out_dims, 0, spatial);
  Shape offset_shape{batch, offset_groups * offsets * rank};
  offset_shape.insert(offset_shape.end(), out_dims.begin(), out_dims.end());
  if (offset.shape() != offset_shape) node.fail("offset must have shape (N, offset_group·prod(kernel)·" + std::to_string(rank) + ", out…)");
  ScalarType type = sampling_type(x.dtype());
  Tensor shifts = offset.cast(type).reshape({batch, offset_groups, offsets, rank, points});
  std::vector<int64_t> kernel_strides = row_major_strides(kernel), out_strides = row_major_strides(out_dims);
  std::vector<AxisSamples> axes;
  for (size_t d = 0; d < spatial; ++d) {
    std::vector<double> base(static_cast<size_t>(offsets * points));
    for (int64_t k = 0; k < offsets; ++k)
      for (int64_t p = 0; p < points; ++p) {
        int64_t kd = (k / kernel_strides[d]) % kernel[d], od = (p / out_strides[d]) % out_dims[d];
        base[static_cast<size_t>(k * points + p)] = static_cast<double>(od * strides[d] - pads[d] + kd * dilations[d]);
      }
    auto axis = static_cast<int64_t>(d);
    Tensor position = Tensor::from_vector(base, {1, 1, offsets, points}).cast(type) +
                      shifts.slice(3, axis, axis + 1).reshape({batch, offset_groups, offsets, points});
    axes.push_back(place_taps(linear_taps(position), in_dims[d], Padding::Zeros, false));
  }
  AxisSamples samples = combine_axes(axes, in_dims);  // (N, G, K, P, T)
  int64_t taps = samples.index.dim(-1);
  Tensor weight = samples.weight;
  if (node.has_input(4)) {
    const Tensor& mask = node.input(4);
    if (mask.numel() != batch * offset_groups * offsets * points) node.fail("mask must have shape (N, offset_group·prod(kernel), out…)");
    weight = weight * mask.cast(type).reshape({batch, offset_groups, offsets, points, 1});
  }
  int64_t group_channels = channels / offset_groups;
  Tensor data = x.cast(type).reshape({batch, offset_groups, group_channels, shape_product(in_dims, 0, spatial)});
  Tensor values = gather_points(data, samples.index.reshape({batch, offset_groups, offsets * points * taps}))
                      .reshape({batch, offset_groups, group_channels, offsets, points, taps});
  values = samples.valid.unsqueeze(2).where(values, zero_like_type(values));
  Tensor columns = (values * weight.unsqueeze(2)).sum({-1}).reshape({batch, groups, channels / groups * offsets, points});
  Tensor weights = w.cast(type).reshape({1, groups, out_channels / groups, channels / groups * offsets});
  Shape out_shape{batch, out_channels};
  out_shape.insert(out_shape.end(), out_dims.begin(), out_dims.end());
  Tensor y = weights.matmul(columns).reshape(out_shape);
  if (node.has_input(3)) {
    Shape bias_shape(static_cast<size_t>(x.ndim() - 1), 1);
    bias_shape[0] = out_channels;
    y = y + node.input(3).cast(type).reshape(bias_shape);
  }
  return {y.dtype() == x.dtype() ? y : y.cast(x.dtype())};
}

// ---- RoiAlign ----

// Each output bin of a RoI averages (or takes the max of) a grid of bilinear samples. A sample
// outside [−1, size] on an axis reads 0; inside, its coordinate is clamped to [0, size − 1] first.
// Grid sizes per RoI: sampling_ratio, or (when 0) ceil(roi extent / bins), which needs the RoI
// values, so they are realized at build time and every RoI uses the largest grid with the extra
// samples masked out.
Outputs roi_align(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& rois = node.input(1);
  const Tensor& batch_indices = node.input(2);
  if (x.ndim() != 4) node.fail("X must be 4-D");
  if (rois.ndim() != 2 || rois.dim(1) != 4) node.fail("rois must have shape (num_rois, 4)");
  int64_t count = rois.dim(0);
  if (batch_indices.numel() != count) node.fail("batch_indices must have one entry per RoI");
  std::string mode = node.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") node.fail("unsupported: RoiAlign mode '" + mode + "'");
  // Opset 16 added coordinate_transformation_mode; before, output_half_pixel was the behaviour.
  std::string transform = node.opset() >= 16 ? node.attr_string("coordinate_transformation_mode", "half_pixel") : "output_half_pixel";
  if (transform != "half_pixel" && transform != "output_half_pixel")
    node.fail("unsupported: RoiAlign coordinate_transformation_mode '" + transform + "'");
  bool half_pixel = transform == "half_pixel";
  int64_t out_h = node.attr_int("output_height", 1), out_w = node.attr_int("output_width", 1);
  int64_t sampling_ratio = node.attr_int("sampling_ratio", 0);
  double scale = node.attr_float("spatial_scale", 1.0);
  if (out_h <= 0 || out_w <= 0 || sampling_ratio < 0) node.fail("output sizes must be positive and sampling_ratio non-negative");
  int64_t channels = x.dim(1), height = x.dim(2), width = x.dim(3);
  if (height == 0 || width == 0) node.fail("unsupported: RoiAlign on an empty spatial axis");
  if (count == 0) return {Tensor::zeros({0, channels, out_h, out_w}, x.dtype())};
  ScalarType type = sampling_type(x.dtype());
  double shift = half_pixel ? 0.5 : 0.0;
  Tensor boxes = rois.cast(type) * scale - shift;
  auto column = [&](int64_t i) { return boxes.slice(1, i, i + 1).reshape({count}); };
  Tensor start_w = column(0), start_h = column(1);
  Tensor extent_w = column(2) - start_w, extent_h = column(3) - start_h;
  if (!half_pixel) {
    // The legacy mode forces RoIs to be at least one pixel large.
    extent_w = extent_w.maximum(constant_of(type, 1.0));
    extent_h = extent_h.maximum(constant_of(type, 1.0));
  }
  Tensor bin_h = extent_h / static_cast<double>(out_h), bin_w = extent_w / static_cast<double>(out_w);
  // Sampling grid per RoI (grid_h, grid_w) and the largest, which sets the tensor shapes.
  int64_t max_h = sampling_ratio, max_w = sampling_ratio;
  Tensor grid_h = constant_of(type, static_cast<double>(sampling_ratio)), grid_w = grid_h;
  if (sampling_ratio == 0) {
    Tensor realized_h = extent_h, realized_w = extent_w;
    std::vector<double> heights = realized_h.realize().to_vector<double>(), widths = realized_w.realize().to_vector<double>();
    std::vector<double> per_h, per_w;
    for (size_t r = 0; r < heights.size(); ++r) {
      per_h.push_back(std::max(0.0, std::ceil(heights[r] / static_cast<double>(out_h))));
      per_w.push_back(std::max(0.0, std::ceil(widths[r] / static_cast<double>(out_w))));
    }
    max_h = std::max<int64_t>(1, static_cast<int64_t>(*std::max_element(per_h.begin(), per_h.end())));
    max_w = std::max<int64_t>(1, static_cast<int64_t>(*std::max_element(per_w.begin(), per_w.end())));
    grid_h = Tensor::from_vector(per_h, {count}).cast(type);
    grid_w = Tensor::from_vector(per_w, {count}).cast(type);
  } else {
    grid_h = grid_h.expand({count});
    grid_w = grid_w.expand({count});
  }
  // Sample coordinates over (RoI, bin_y, bin_x, sample_y, sample_x).
  auto sample_offsets = [&](int64_t bins, int64_t samples, const Tensor& grid, const Tensor& bin, bool vertical) {
    Shape bin_shape = vertical ? Shape{1, bins, 1, 1, 1} : Shape{1, 1, bins, 1, 1};
    Shape sample_shape = vertical ? Shape{1, 1, 1, samples, 1} : Shape{1, 1, 1, 1, samples};
    Shape roi_shape{count, 1, 1, 1, 1};
    Tensor b = Tensor::arange(0, static_cast<double>(bins), 1, type).reshape(bin_shape);
    Tensor s = Tensor::arange(0, static_cast<double>(samples), 1, type).reshape(sample_shape);
    Tensor per_roi_bin = bin.reshape(roi_shape), per_roi_grid = grid.reshape(roi_shape);
    Tensor used = s.lt(per_roi_grid);
    return std::pair{b * per_roi_bin + (s + 0.5) * per_roi_bin / per_roi_grid.maximum(constant_of(type, 1.0)), used};
  };
  auto [dy, used_y] = sample_offsets(out_h, max_h, grid_h, bin_h, true);
  auto [dx, used_x] = sample_offsets(out_w, max_w, grid_w, bin_w, false);
  Tensor y = start_h.reshape({count, 1, 1, 1, 1}) + dy, xs = start_w.reshape({count, 1, 1, 1, 1}) + dx;
  auto axis_samples = [&](const Tensor& c, int64_t size, Tensor& inside) {
    auto n = static_cast<double>(size);
    inside = c.ge(constant_of(type, -1.0)).logical_and(c.le(constant_of(type, n)));
    return place_taps(linear_taps(c.clip(0.0, n - 1.0)), size, Padding::Border, false);
  };
  Tensor inside_y, inside_x;
  AxisSamples along_y = axis_samples(y, height, inside_y), along_x = axis_samples(xs, width, inside_x);
  AxisSamples samples = combine_axes({along_y, along_x}, {height, width});  // (R, oh, ow, gh, gw, 4)
  Tensor data = x.cast(type).reshape({x.dim(0), channels, height * width}).take(batch_indices.cast(ScalarType::Int64), 0);
  Shape sample_shape{count, out_h, out_w, max_h, max_w};
  int64_t per_roi = out_h * out_w * max_h * max_w * 4;
  Tensor values = gather_points(data, samples.index.reshape({count, per_roi})).reshape({count, channels, out_h, out_w, max_h, max_w, 4});
  Tensor weighted = values * samples.weight.reshape({count, 1, out_h, out_w, max_h, max_w, 4});
  Tensor inside = inside_y.logical_and(inside_x).unsqueeze(1);  // (R, 1, oh, ow, gh, gw)
  Tensor used = used_y.logical_and(used_x).unsqueeze(1);
  Tensor zero = constant_of(type, 0.0);
  Tensor result;
  if (mode == "avg") {
    Tensor per_sample = inside.where(weighted.sum({-1}), zero);
    Tensor total = used.where(per_sample, zero).sum({-2, -1});
    result = total / (grid_h * grid_w).maximum(constant_of(type, 1.0)).reshape({count, 1, 1, 1});
  } else {
    // Max mode takes the largest weighted tap of each sample, then the largest sample.
    Tensor per_sample = inside.where(weighted.max({-1}), zero);
    Tensor best = used.where(per_sample, constant_of(type, -INFINITY)).max({-2, -1});
    Tensor any = (grid_h * grid_w).gt(zero).reshape({count, 1, 1, 1});
    result = any.where(best, zero);
  }
  return {result.dtype() == x.dtype() ? result : result.cast(x.dtype())};
}

// ---- MaxUnpool ----

// Output element j (per spatial axis, in the unpooled layout) can only come from the pooling
// windows that cover it: inputs i = ⌊(j + pad)/stride⌋ − c for c < ⌈kernel/stride⌉. Each candidate
// is a strided view of X (repeat every element `stride` times, then shift), so the unpooling is a
// few compare-and-selects: out[j] = X[i] where I[i] equals j's flat index. That needs every index
// to point into its own window, which MaxPool's indices do; the indices are realized once at build
// time to check it, and anything else is refused instead of being dropped silently.
struct UnpoolGeometry {
  std::vector<int64_t> kernel, strides, pads, in_dims, out_dims;
};

void check_indices_in_window(const OnnxNode& node, const Tensor& indices, const UnpoolGeometry& g) {
  std::vector<int64_t> values = indices.to_vector<int64_t>();
  size_t spatial = g.kernel.size();
  int64_t out_plane = shape_product(g.out_dims, 0, spatial), in_plane = shape_product(g.in_dims, 0, spatial);
  std::vector<int64_t> in_strides = row_major_strides(g.in_dims), out_strides = row_major_strides(g.out_dims);
  for (size_t flat = 0; flat < values.size(); ++flat) {
    auto position = static_cast<int64_t>(flat);
    int64_t plane = position / in_plane, local = position % in_plane, value = values[flat];
    bool ok = value >= plane * out_plane && value < (plane + 1) * out_plane;
    for (size_t d = 0; ok && d < spatial; ++d) {
      int64_t i = (local / in_strides[d]) % g.in_dims[d];
      int64_t j = ((value - plane * out_plane) / out_strides[d]) % g.out_dims[d];
      int64_t start = i * g.strides[d] - g.pads[d];
      ok = j >= start && j < start + g.kernel[d];
    }
    if (!ok)
      node.fail("unsupported: MaxUnpool index " + std::to_string(value) + " at input position " + std::to_string(flat) +
                " lies outside its pooling window (only MaxPool-style indices are supported)");
  }
}

// t viewed along `axis` so that element j reads t[⌊(j + pad)/stride⌋ − c] (fill outside t).
Tensor window_candidate(const Tensor& t, int64_t axis, int64_t stride, int64_t pad, int64_t c, int64_t out, double fill) {
  Shape repeated = t.shape(), spread = t.shape();
  int64_t in = t.dim(axis);
  spread.insert(spread.begin() + axis + 1, 1);
  Shape widened = spread;
  widened[static_cast<size_t>(axis + 1)] = stride;
  repeated[static_cast<size_t>(axis)] = in * stride;
  Tensor u = t.reshape(spread).expand(widened).reshape(repeated);
  int64_t begin = pad - c * stride;  // u index of output element 0
  int64_t before = std::max<int64_t>(0, -begin), after = std::max<int64_t>(0, begin + out - in * stride);
  std::vector<int64_t> pads(static_cast<size_t>(2 * (axis + 1)), 0);
  pads[static_cast<size_t>(2 * axis)] = before;
  pads[static_cast<size_t>(2 * axis + 1)] = after;
  return u.pad(pads, PadMode::Constant, fill).slice(axis, begin + before, begin + before + out);
}

Outputs max_unpool(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  const Tensor& indices = node.input(1);
  UnpoolGeometry g;
  g.kernel = node.attr_ints("kernel_shape");
  size_t spatial = g.kernel.size();
  if (x.ndim() != static_cast<int64_t>(spatial) + 2) node.fail("kernel_shape does not match the input's rank");
  if (indices.shape() != x.shape()) node.fail("I must have the shape of X");
  g.strides = per_axis(node, "strides", spatial, 1);
  g.pads = per_axis(node, "pads", 2 * spatial, 0);
  g.in_dims.assign(x.shape().begin() + 2, x.shape().end());
  for (size_t d = 0; d < spatial; ++d) {
    if (g.strides[d] <= 0 || g.kernel[d] <= 0) node.fail("kernel_shape and strides must be positive");
    g.out_dims.push_back((g.in_dims[d] - 1) * g.strides[d] - g.pads[d] - g.pads[d + spatial] + g.kernel[d]);
    if (g.out_dims.back() <= 0) node.fail("the unpooled shape is empty");
  }
  Tensor realized = indices.cast(ScalarType::Int64);
  realized.realize();
  check_indices_in_window(node, realized, g);
  // Flat index of every output element in the unpooled layout.
  Shape out_shape{x.dim(0), x.dim(1)};
  out_shape.insert(out_shape.end(), g.out_dims.begin(), g.out_dims.end());
  Tensor own_index = Tensor::arange(shape_product(out_shape, 0, out_shape.size())).reshape(out_shape);
  std::vector<int64_t> reach(spatial);
  for (size_t d = 0; d < spatial; ++d) reach[d] = (g.kernel[d] + g.strides[d] - 1) / g.strides[d];
  int64_t combinations = shape_product(reach, 0, spatial);
  Tensor result = Tensor::zeros(out_shape, x.dtype());
  // Later candidates are earlier inputs; a duplicate index means the same pooled element anyway.
  for (int64_t combo = 0; combo < combinations; ++combo) {
    Tensor value = x, index = realized;
    int64_t rest = combo;
    for (size_t d = spatial; d-- > 0;) {
      int64_t c = rest % reach[d];
      rest /= reach[d];
      auto axis = static_cast<int64_t>(d + 2);
      value = window_candidate(value, axis, g.strides[d], g.pads[d], c, g.out_dims[d], 0.0);
      index = window_candidate(index, axis, g.strides[d], g.pads[d], c, g.out_dims[d], -1.0);
    }
    result = index.eq(own_index).where(value, result);
  }
  if (node.has_input(2)) {
    // output_shape: the pads are generated to reach it; the indices still address the unpooled
    // layout, so the result is extended with zeros (or cut) at the end of each axis.
    std::vector<int64_t> wanted = node.input_ints(2);
    if (wanted.size() != out_shape.size() || wanted[0] != out_shape[0] || wanted[1] != out_shape[1])
      node.fail("output_shape must be (N, C, spatial…) of X's N and C");
    std::vector<int64_t> pads(2 * out_shape.size(), 0);
    for (size_t d = 2; d < out_shape.size(); ++d) {
      if (wanted[d] < out_shape[d]) result = result.slice(static_cast<int64_t>(d), 0, wanted[d]);
      else pads[2 * d + 1] = wanted[d] - out_shape[d];
    }
    result = result.pad(pads);
  }
  return {result};
}

// ---- NonMaxSuppression ----

// The selection's size depends on the data, so in process it is computed on the host at build time
// from the realized inputs, and the output is a constant (num_selected, 3) i64 tensor; in a plan it
// is computed by kernels (non_max_suppression_plan.h).
struct Box {
  double y1, x1, y2, x2;
  double area() const { return (y2 - y1) * (x2 - x1); }
};

Box make_box(const double* v, bool center_point) {
  if (center_point) return {v[1] - v[3] / 2.0, v[0] - v[2] / 2.0, v[1] + v[3] / 2.0, v[0] + v[2] / 2.0};
  // Any two opposite corners: normalise to (min, max).
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

double intersection_over_union(const Box& a, const Box& b) {
  double area_a = a.area(), area_b = b.area();
  if (area_a <= 0.0 || area_b <= 0.0) return 0.0;
  double h = std::min(a.y2, b.y2) - std::max(a.y1, b.y1), w = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (h <= 0.0 || w <= 0.0) return 0.0;
  double overlap = h * w;
  return overlap / (area_a + area_b - overlap);
}

double optional_scalar(const OnnxNode& node, size_t index, double fallback) {
  if (!node.has_input(index) || node.input(index).numel() == 0) return fallback;
  if (node.input(index).numel() != 1) node.fail("input " + std::to_string(index) + " must hold one value");
  return node.input_doubles(index)[0];
}

Outputs non_max_suppression(const OnnxNode& node) {
  const Tensor& boxes_in = node.input(0);
  const Tensor& scores_in = node.input(1);
  Dims box_dims = dims_of(boxes_in), score_dims = dims_of(scores_in);
  if (box_dims.size() != 3 || !(box_dims[2] == Dim(4))) node.fail("boxes must have shape (batches, boxes, 4)");
  if (score_dims.size() != 3 || !(score_dims[0] == box_dims[0]) || !(score_dims[2] == box_dims[1]))
    node.fail("scores must have shape (batches, classes, boxes) matching boxes");
  int64_t center = node.attr_int("center_point_box", 0);
  if (center != 0 && center != 1) node.fail("unsupported: center_point_box " + std::to_string(center));
  int64_t limit = 0;
  if (node.has_input(2) && node.input(2).numel() > 0) limit = node.input_ints(2).at(0);
  double iou_threshold = optional_scalar(node, 3, 0.0);
  bool has_score_threshold = node.has_input(4) && node.input(4).numel() > 0;
  double score_threshold = optional_scalar(node, 4, 0.0);
  // In a plan the boxes or scores are known only when it runs: the selection is kernels.
  if (non_max_suppression_at_run_time(node))
    return {non_max_suppression_in_plan(node, std::max<int64_t>(limit, 0), iou_threshold,
                                        has_score_threshold ? std::optional<double>(score_threshold) : std::nullopt)};
  int64_t batches = boxes_in.dim(0), count = boxes_in.dim(1), classes = scores_in.dim(1);
  std::vector<double> box_values = boxes_in.to_vector<double>(), score_values = scores_in.to_vector<double>();
  std::vector<int64_t> selected;
  for (int64_t b = 0; b < batches && limit > 0; ++b) {
    std::vector<Box> boxes;
    for (int64_t i = 0; i < count; ++i) boxes.push_back(make_box(&box_values[static_cast<size_t>((b * count + i) * 4)], center == 1));
    for (int64_t c = 0; c < classes; ++c) {
      const double* scores = &score_values[static_cast<size_t>((b * classes + c) * count)];
      std::vector<int64_t> order;
      for (int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || scores[i] > score_threshold) order.push_back(i);
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return scores[l] > scores[r]; });
      std::vector<int64_t> kept;
      for (int64_t candidate : order) {
        if (static_cast<int64_t>(kept.size()) >= limit) break;
        bool suppressed = std::any_of(kept.begin(), kept.end(), [&](int64_t k) {
          return intersection_over_union(boxes[static_cast<size_t>(k)], boxes[static_cast<size_t>(candidate)]) > iou_threshold;
        });
        if (!suppressed) kept.push_back(candidate);
      }
      for (int64_t k : kept) selected.insert(selected.end(), {b, c, k});
    }
  }
  auto rows = static_cast<int64_t>(selected.size() / 3);
  if (rows == 0) return {Tensor::zeros({0, 3}, ScalarType::Int64)};
  return {Tensor::from_vector(selected, {rows, 3})};
}

}  // namespace

void register_spatial_ops(OpRegistry& registry) {
  registry.add("GridSample", grid_sample, 16);
  registry.add("AffineGrid", affine_grid, 20);
  registry.add("Col2Im", col2im, 18);
  registry.add("DeformConv", deform_conv, 19);
  registry.add("RoiAlign", roi_align, 10);
  registry.add("MaxUnpool", max_unpool, 9);
  registry.add("NonMaxSuppression", non_max_suppression, 10);
}

}  // namespace kiln::onnx_import
