// What the neural-network composites share; see nn_helpers.h.
#include "tensor/nn_helpers.h"

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
#include "tensor/winograd.h"

namespace kiln::nn {

bool is_half(ScalarType type) { return DType(type).is_narrow_float(); }

bool is_float(ScalarType type) { return DType(type).is_float(); }

ScalarType compute_type(ScalarType type) { return is_half(type) ? ScalarType::Float32 : type; }

ScalarType float_result(ScalarType type) { return is_float(type) ? type : ScalarType::Float32; }

ScalarType promoted(const Tensor& a, const Tensor& b) {
  return promote_types(DType(a.dtype()), DType(b.dtype())).scalar();
}

void require_defined(const Tensor& t, std::string_view operation, std::string_view what) {
  if (!t.defined()) throw UserError(str_cat(operation, ": ", what, " is an empty (default-constructed) Tensor"));
}

Tensor with_axis_sizes(const Tensor& t, int64_t axis, const Shape& sizes) {
  Dims shape = dims_of(t);
  auto position = shape.erase(shape.begin() + axis);
  shape.insert(position, sizes.begin(), sizes.end());
  return reshape_to(t, shape);
}

std::string list_string(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::vector<int64_t> per_axis(const std::vector<int64_t>& values, size_t axes, int64_t fallback, int64_t minimum,
                              std::string_view operation, std::string_view name) {
  std::vector<int64_t> result = values.empty() ? std::vector<int64_t>(axes, fallback)
                                : values.size() == 1 ? std::vector<int64_t>(axes, values[0]) : values;
  if (result.size() != axes)
    throw UserError(str_cat(operation, ": ", name, " ", list_string(values), " must have one value per spatial axis (",
                            axes, ")"));
  for (int64_t v : result)
    if (v < minimum) throw UserError(str_cat(operation, ": ", name, " ", list_string(values), " must be >= ", minimum));
  return result;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> begin_end_pads(const std::vector<int64_t>& padding, size_t axes,
                                                                     bool allow_negative, std::string_view operation) {
  std::vector<int64_t> begin(axes, 0), end(axes, 0);
  if (padding.size() == 2 * axes) {
    std::copy(padding.begin(), padding.begin() + static_cast<std::ptrdiff_t>(axes), begin.begin());
    std::copy(padding.begin() + static_cast<std::ptrdiff_t>(axes), padding.end(), end.begin());
  } else if (padding.size() == axes || padding.size() == 1) {
    begin = end = std::vector<int64_t>(axes, padding[0]);
    if (padding.size() == axes) begin = end = padding;
  } else if (!padding.empty()) {
    throw UserError(str_cat(operation, ": padding ", list_string(padding), " must have ", 2 * axes,
                            " values (begin pads, then end pads) or ", axes));
  }
  if (!allow_negative)
    for (int64_t p : padding)
      if (p < 0) throw UserError(str_cat(operation, ": padding ", list_string(padding), " must not be negative"));
  return {begin, end};
}

std::vector<int64_t> spatial_pad_list(const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  std::vector<int64_t> pads{0, 0, 0, 0};
  for (size_t i = 0; i < begin.size(); ++i) {
    pads.push_back(begin[i]);
    pads.push_back(end[i]);
  }
  return pads;
}

Tensor window_axis(const Tensor& x, int64_t axis, int64_t kernel, int64_t stride, int64_t dilation,
                   const Dim& window_count);

Tensor window_axis_symbolic(const Tensor& x, int64_t axis, int64_t kernel, int64_t stride, int64_t dilation,
                            const Dim& windows) {
  Dim length = dim_of(x, axis);
  int64_t longest = length.max();
  int64_t most_windows = (longest - dilation * (kernel - 1) - 1) / stride + 1;
  if (most_windows < windows.max())
    throw UserError(str_cat("internal: ", windows, " windows of ", kernel, " taps over the axis of length ", length,
                            " exceed the ", most_windows, " at its largest length ", longest));
  Dims pads(2 * static_cast<size_t>(axis) + 2, 0);
  pads.back() = Dim(longest) - length;
  Tensor at_longest = pad_zero_dims(x, pads);
  Tensor all_windows = window_axis(at_longest, axis, kernel, stride, dilation, most_windows);
  DimRanges kept;
  for (const Dim& size : dims_of(all_windows)) kept.emplace_back(0, size);
  kept[static_cast<size_t>(axis)] = {0, windows};
  return shrink_to(all_windows, kept);
}

Tensor window_axis(const Tensor& x, int64_t axis, int64_t kernel, int64_t stride, int64_t dilation,
                   const Dim& window_count) {
  if (!dim_of(x, axis).is_known() || !window_count.is_known())
    return window_axis_symbolic(x, axis, kernel, stride, dilation, window_count);
  int64_t windows = window_count.value();
  int64_t i = x.dim(axis);
  if (dilation == 1 && kernel <= stride) {
    int64_t wanted = windows * stride;
    Tensor window = shrink_axis(x, axis, 0, std::min(i, wanted));
    if (wanted > i) {  // the tail lies past the last window's kernel: padding that is never read
      std::vector<int64_t> pads(2 * static_cast<size_t>(axis) + 2, 0);
      pads.back() = wanted - i;
      window = pad_zero(window, pads);
    }
    return shrink_axis(with_axis_sizes(window, axis, {windows, stride}), axis + 1, 0, kernel);
  }
  int64_t factor = std::max<int64_t>(1, (windows * stride - dilation + i - 1) / i);
  int64_t row = factor * i + dilation;
  int64_t copies = (kernel * row + i - 1) / i;
  Tensor tiled = x.unsqueeze(axis);
  Dims expanded = dims_of(tiled);
  expanded[static_cast<size_t>(axis)] = copies;
  Dims merged = dims_of(x);
  merged[static_cast<size_t>(axis)] = copies * i;
  Tensor rows = with_axis_sizes(shrink_axis(reshape_to(expand_to(tiled, expanded), merged), axis, 0, kernel * row),
                                axis, {kernel, row});
  Tensor strided = with_axis_sizes(shrink_axis(rows, axis + 1, 0, windows * stride), axis + 1, {windows, stride});
  Tensor picked = shrink_axis(strided, axis + 2, 0, 1);
  Dims kernel_then_windows = dims_of(picked);
  kernel_then_windows.erase(kernel_then_windows.begin() + axis + 2);
  // (kernel, windows) → (windows, kernel)
  std::vector<int64_t> order(kernel_then_windows.size());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<size_t>(axis)], order[static_cast<size_t>(axis) + 1]);
  return reshape_to(picked, kernel_then_windows).permute(order);
}

Tensor pool_windows(const Tensor& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                    const std::vector<int64_t>& dilation, const Dims& windows) {
  auto n = static_cast<int64_t>(kernel.size());
  int64_t pre = x.ndim() - n;
  Tensor result = x;
  // Last axis first, so the positions of the axes still to do do not move.
  for (int64_t i = n; i-- > 0;) {
    auto s = static_cast<size_t>(i);
    result = window_axis(result, pre + i, kernel[s], stride[s], dilation[s], windows[s]);
  }
  // Now (pre…, O1, K1, O2, K2, …).
  std::vector<int64_t> order(static_cast<size_t>(pre));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = 0; i < n; ++i) order.push_back(pre + 2 * i);
  for (int64_t i = 0; i < n; ++i) order.push_back(pre + 2 * i + 1);
  return result.permute(order);
}

std::vector<int64_t> last_axes(int64_t count, int64_t ndim) {
  std::vector<int64_t> axes;
  for (int64_t i = ndim - count; i < ndim; ++i) axes.push_back(i);
  return axes;
}

Tensor per_channel(const Tensor& parameter, const Tensor& x, std::string_view operation, std::string_view name) {
  require_defined(parameter, operation, name);
  int64_t channels = x.dim(1);
  if (parameter.shape() != Shape{channels})
    throw UserError(str_cat(operation, ": ", name, " of shape ", shape_string(parameter.shape()), " must have shape (",
                            channels, ",) for input ", dims_string(dims_of(x))));
  Shape shape(static_cast<size_t>(x.ndim()), 1);
  shape[1] = channels;
  return parameter.reshape(shape);
}

void require_batch_channels(const Tensor& x, int64_t minimum_ndim, std::string_view operation) {
  if (x.ndim() < minimum_ndim)
    throw UserError(str_cat(operation, ": input of shape ", dims_string(dims_of(x)), " needs at least ", minimum_ndim,
                            " axes (N, C, …)"));
}

Tensor normalize(const Tensor& x, const std::vector<int64_t>& axes, double epsilon) {
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor variance = (centered * centered).mean(axes, true);
  return centered * (variance + epsilon).sqrt().reciprocal();
}

PoolGeometry pool_geometry(const Tensor& x, const PoolOptions& options, std::string_view operation) {
  require_batch_channels(x, 3, operation);
  size_t n = static_cast<size_t>(x.ndim()) - 2;
  PoolGeometry g;
  if (options.kernel.size() != n)
    throw UserError(str_cat(operation, ": kernel ", list_string(options.kernel), " must have one size per spatial axis of ",
                            dims_string(dims_of(x))));
  g.kernel = per_axis(options.kernel, n, 1, 1, operation, "kernel");
  g.stride = per_axis(options.stride.empty() ? g.kernel : options.stride, n, 1, 1, operation, "stride");
  g.dilation = per_axis(options.dilation, n, 1, 1, operation, "dilation");
  std::tie(g.pad_begin, g.pad_end) = begin_end_pads(options.padding, n, false, operation);
  for (size_t i = 0; i < n; ++i) {
    Dim input = dim_of(x, static_cast<int64_t>(i) + 2);
    int64_t span = g.dilation[i] * (g.kernel[i] - 1) + 1, s = g.stride[i];
    Dim total = input + Dim(g.pad_begin[i] + g.pad_end[i]);
    if (total.min() < span)
      throw UserError(str_cat(input.is_known() ? "" : "unsupported: ", operation, ": the padded input of shape ",
                              dims_string(dims_of(x)), " (padding ", list_string(options.padding), ")",
                              input.is_known() ? " is" : " may be", " smaller than the kernel ", list_string(g.kernel),
                              " with dilation ", list_string(g.dilation)));
    if (!input.is_known()) {
      // The same counts as expressions; ceil_mode's last window, which must start inside the input
      // or its begin padding, as a min. Its extra padding is the most any size needs (windows past
      // the count are cut, so what they would read does not matter).
      Dim windows = (total - Dim(span)) / Dim(s) + Dim(1);
      if (options.ceil_mode)
        windows = min((total - Dim(span) + Dim(s - 1)) / Dim(s) + Dim(1), (input + Dim(g.pad_begin[i]) - Dim(1)) / Dim(s) + Dim(1));
      g.windows.push_back(windows);
      g.extra_end.push_back(options.ceil_mode ? s - 1 : 0);
      continue;
    }
    int64_t known_total = total.value();
    int64_t windows = options.ceil_mode ? (known_total - span + s - 1) / s + 1 : (known_total - span) / s + 1;
    // PyTorch's rule: the last window must start inside the input or its begin padding.
    if (options.ceil_mode && (windows - 1) * s >= input.value() + g.pad_begin[i]) --windows;
    g.windows.push_back(windows);
    g.extra_end.push_back(std::max<int64_t>(0, (windows - 1) * s + span - known_total));
  }
  return g;
}

double lowest_value(ScalarType type) {
  switch (type) {
    case ScalarType::Bool: return 0;
    case ScalarType::Int8: return std::numeric_limits<int8_t>::lowest();
    case ScalarType::Int16: return std::numeric_limits<int16_t>::lowest();
    case ScalarType::Int32: return std::numeric_limits<int32_t>::lowest();
    case ScalarType::Int64: return static_cast<double>(std::numeric_limits<int64_t>::lowest());
    case ScalarType::UInt8: case ScalarType::UInt16: case ScalarType::UInt32: case ScalarType::UInt64: return 0;
    default: return -std::numeric_limits<double>::infinity();
  }
}

Tensor affine_index_map(const Tensor& x, int64_t axis, int64_t a, int64_t b, int64_t c, int64_t out) {
  int64_t n = x.shape()[static_cast<size_t>(axis)];
  if (out == 0) return shrink_axis(x, axis, 0, 0);
  int64_t common = std::gcd(std::gcd(a, b < 0 ? -b : b), c);
  a /= common, b /= common, c /= common;
  Tensor repeated = x;
  if (c > 1) {
    Tensor column = x.unsqueeze(axis + 1);
    Shape expanded = column.shape();
    expanded[static_cast<size_t>(axis) + 1] = c;
    Shape merged = x.shape();
    merged[static_cast<size_t>(axis)] = n * c;
    repeated = column.expand(expanded).reshape(merged);
  }
  int64_t first = b, last = a * (out - 1) + b;
  int64_t before = std::max<int64_t>(0, -first), after = std::max<int64_t>(0, last - (n * c - 1));
  if (before > 0 || after > 0) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(axis) + 2, 0);
    pads[2 * static_cast<size_t>(axis)] = before;
    pads.back() = after;
    repeated = repeated.pad(pads, PadMode::Edge);
  }
  return repeated.slice(axis, first + before, last + before + 1, a);
}

Tensor axis_constant(const std::vector<double>& values, int64_t axis, int64_t ndim, ScalarType type) {
  Shape shape(static_cast<size_t>(ndim), 1);
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(values.size());
  return Tensor::from_vector(values, shape).cast(type);
}

Tensor stored_in_order(const Tensor& t, const std::vector<int64_t>& order) {
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return contiguous(t.permute(order)).permute(back);
}

bool computes(const Tensor& t) {
  for (const UOp* node : toposort(t.data().node))
    if (op_is_alu(node->op()) || node->op() == Ops::REDUCE_AXIS) return true;
  return false;
}

bool rows_are_permuted(const Tensor& t) {
  const UOpPtr& node = t.data().node;
  auto moves_axes = [](const UOp* permute) {
    const auto& order = permute->arg_list();
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i] != static_cast<int64_t>(i)) return true;
    return false;
  };
  if (node->op() == Ops::PERMUTE) {
    const auto& order = node->arg_list();
    return !order.empty() && order.back() != static_cast<int64_t>(order.size()) - 1;
  }
  return node->op() == Ops::RESHAPE && node->src(0)->op() == Ops::PERMUTE && moves_axes(node->src(0).get());
}

bool pads_anything(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  auto positive = [](int64_t p) { return p > 0; };
  return std::any_of(before.begin(), before.end(), positive) || std::any_of(after.begin(), after.end(), positive);
}

}  // namespace kiln::nn
