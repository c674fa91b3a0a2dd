// Neural-network composites (matmul, convolution, pooling, normalisation, softmax, resizing), built
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
#include "tensor/winograd.h"

namespace kiln {
namespace {

bool is_half(ScalarType type) { return DType(type).is_narrow_float(); }
bool is_float(ScalarType type) { return DType(type).is_float(); }

// The type products and sums are computed in: half floats widen to f32 (rounded once at the end).
ScalarType compute_type(ScalarType type) { return is_half(type) ? ScalarType::Float32 : type; }
// Float-only ops (softmax, norms, average pooling) turn integers and bool into f32, like mean().
ScalarType float_result(ScalarType type) { return is_float(type) ? type : ScalarType::Float32; }

ScalarType promoted(const Tensor& a, const Tensor& b) {
  return promote_types(DType(a.dtype()), DType(b.dtype())).scalar();
}

void require_defined(const Tensor& t, std::string_view operation, std::string_view what) {
  if (!t.defined()) throw UserError(str_cat(operation, ": ", what, " is an empty (default-constructed) Tensor"));
}

// (Dims: the other axes may be symbolic, a batch of any size.)
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

// A per-spatial-axis option: empty = `fallback` everywhere, one value = that value everywhere.
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

// Padding as (begin pads…, end pads…); n values mean the same pad at both ends, one value the
// same pad everywhere.
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

// pad() arguments for the spatial axes (after the first two).
std::vector<int64_t> spatial_pad_list(const std::vector<int64_t>& begin, const std::vector<int64_t>& end) {
  std::vector<int64_t> pads{0, 0, 0, 0};
  for (size_t i = 0; i < begin.size(); ++i) {
    pads.push_back(begin[i]);
    pads.push_back(end[i]);
  }
  return pads;
}

// Replaces `axis` (size i) by the two axes (windows, kernel): element [o, j] is x[o·s + j·d]. Needs
// (windows-1)·s + (kernel-1)·d < i. Only views, so the window is index arithmetic in the consumer.
//  - Windows that do not overlap (d = 1, k <= s): group the axis as (o, s) and keep k of each group.
//  - Otherwise (tinygrad's _pool trick): tile the axis, then read it as rows of length L = f·i + d.
//    Row j starts at j·L ≡ j·d (mod i), so row j is x shifted by j·d; then take every s-th column.
//    The index is (j·L + o·s) mod i, which the simplifier reduces to j·d + o·s from the bound above.
// Over a symbolic axis (an image or a signal of any length i; x already padded) the axis is first
// padded with zeros to its largest length, a known one, and windowed as above for the windows of
// that length; the windows axis is then cut to the count at i. No window that is kept reads the
// zeros, and the index stays j·d + o·s, which the simplifier reduces as for a known length from
// known bounds; the padding's compare against i on each load of x is decided true by the
// simplifier where the windows' loop end proves it (passes/loop_end_bounds.h), else it stays.
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

// Sliding windows over the last n axes: (pre…, I1…In) → (pre…, O1…On, K1…Kn).
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

// A per-channel parameter (C) as (1, C, 1, …) for an (N, C, …) tensor.
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

// Normalises over `axes` (kept as size 1): (x - mean) / sqrt(var + eps), two-pass for accuracy.
Tensor normalize(const Tensor& x, const std::vector<int64_t>& axes, double epsilon) {
  Tensor mean = x.mean(axes, true);
  Tensor centered = x - mean;
  Tensor variance = (centered * centered).mean(axes, true);
  return centered * (variance + epsilon).sqrt().reciprocal();
}

struct PoolGeometry {
  std::vector<int64_t> kernel, stride, dilation, pad_begin, pad_end;
  Dims windows;  // symbolic where the input's size is (an image of any size)
  std::vector<int64_t> extra_end;  // ceil_mode: padding past pad_end for the last partial window
};

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

// The lowest value of a type: max pooling pads with it.
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

// y[o] = x[clamp(floor((a·o + b) / c), 0, n-1)] along `axis`, o in [0, out), as views only: repeat
// each element c times (element j is x[j / c]), extend both ends with edge copies for the clamp,
// then take every a-th element from b. So a resize is index arithmetic, with no gather.
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

// A host-computed per-position vector along `axis` of an ndim tensor, as a broadcastable constant.
Tensor axis_constant(const std::vector<double>& values, int64_t axis, int64_t ndim, ScalarType type) {
  Shape shape(static_cast<size_t>(ndim), 1);
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(values.size());
  return Tensor::from_vector(values, shape).cast(type);
}

}  // namespace

// numpy matmul as one broadcast product and one sum: (…, n, 1, k) · (…, 1, m, k) summed over k.
// The batch axes broadcast in the product, so the expanded operands are never materialised.
namespace {
// Contractions and output widths from this size up read the right operand from a transposed copy.
constexpr int64_t kTransposeMinimum = 16;
// A right operand of at least this many elements is stored in panels of kPanelColumns columns:
// (K, N) → (N/32, K, 32). A register tile reads one row of 32 columns per step of K; in a
// row-major b those rows are N·4 bytes apart, which for power-of-two N maps every row of the strip
// to the same few cache sets (2048³ ran at 23 % of peak, the same as without tiles). In a panel
// they are adjacent.
constexpr int64_t kPanelColumns = 32;
constexpr int64_t kPanelMinimumElements = 64 * 1024;

// b (…, K, N) stored panel by panel, viewed again as (…, K, N). An N that is not a multiple of
// kPanelColumns is padded with zero columns up to one, which the view leaves out. A classifier's
// 1000 columns were read row-major before: a vector of 16 columns per step, its rows 4000 bytes
// apart, so each 64-byte line was split between two vectors that read it a whole pass over the
// weight apart (from memory twice). AlexNet's 4096 -> 1000 alone, one thread on the AVX-512
// Xeon: 1.43 -> 0.56 ms (onnxruntime 0.60).
Tensor in_panels(const Tensor& b) {
  int64_t rank = static_cast<int64_t>(b.ndim());
  int64_t columns = b.dim(-1), padded = (columns + kPanelColumns - 1) / kPanelColumns * kPanelColumns;
  Tensor source = b;
  if (padded != columns) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(rank), 0);
    pads.back() = padded - columns;
    source = b.pad(pads);
  }
  Shape split(source.shape().begin(), source.shape().end());
  split.back() = padded / kPanelColumns;
  split.push_back(kPanelColumns);  // (…, K, N/32, 32)
  std::vector<int64_t> to_panels, back;
  for (int64_t axis = 0; axis < rank - 2; ++axis) to_panels.push_back(axis);
  back = to_panels;
  to_panels.insert(to_panels.end(), {rank - 1, rank - 2, rank});  // (…, N/32, K, 32)
  back.insert(back.end(), {rank - 1, rank - 2, rank});            // the same swap undoes it
  Tensor panels = contiguous(source.reshape(split).permute(to_panels));
  Tensor viewed = panels.permute(back).reshape(source.shape());
  return padded == columns ? viewed : viewed.slice(-1, 0, columns);
}

// b (…, K, N), 8-bit, stored for 8-bit dot products over `lanes` columns (opt/dot_products.h) and
// viewed again as (…, K, N): panels of `lanes` columns, (…, N/lanes, K/4, lanes, 4), so that one
// instruction's operand (4 steps of the reduction for each of the lanes' columns, side by side) is
// 4·lanes consecutive bytes, one vector load; in row order it was four row pieces interleaved by
// shuffles, which cost more than the multiply-adds. K is a multiple of 4.
Tensor in_dot_product_panels(const Tensor& b, int64_t lanes) {
  const auto rank = static_cast<int64_t>(b.ndim());
  const int64_t k = b.dim(-2), columns = b.dim(-1), padded = (columns + lanes - 1) / lanes * lanes;
  Tensor source = b;
  if (padded != columns) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(rank), 0);
    pads.back() = padded - columns;
    source = b.pad(pads);
  }
  Shape split(source.shape().begin(), source.shape().end() - 2);
  split.insert(split.end(), {k / 4, 4, padded / lanes, lanes});  // (…, K/4, 4, N/lanes, lanes)
  std::vector<int64_t> order;
  for (int64_t axis = 0; axis < rank - 2; ++axis) order.push_back(axis);
  std::vector<int64_t> back = order;
  order.insert(order.end(), {rank, rank - 2, rank + 1, rank - 1});  // (…, N/lanes, K/4, lanes, 4)
  back.insert(back.end(), {rank - 1, rank + 1, rank - 2, rank});   // its inverse
  Tensor panels = contiguous(source.reshape(split).permute(order));
  Tensor viewed = panels.permute(back).reshape(source.shape());
  return padded == columns ? viewed : viewed.slice(-1, 0, columns);
}

// True when t is its buffer in row-major order (a BUFFER, possibly reshaped): reading it row by
// row is already contiguous.
bool is_buffer_view(const Tensor& t) {
  const UOpPtr& node = t.data().node;
  return node->op() == Ops::BUFFER || (node->op() == Ops::RESHAPE && node->src(0)->op() == Ops::BUFFER);
}

// Whether every axis of t but the last has one element (the left operand of a matrix-vector product).
bool one_row(const Tensor& t) {
  Dims dims = dims_of(t);
  return std::all_of(dims.begin(), dims.end() - 1, [](const Dim& d) { return d.is(1); });
}

// Whether t is computed elementwise from one 8-bit integer buffer as large as t and from small
// parameters (a DequantizeLinear of a weight: (w − zero point) · scale per column), and is large
// enough (kPanelMinimumElements) that constant folding leaves it unfolded (4 bytes an element
// against 1: fold_constants.cpp's size rule); a small one is folded into f32 as before.
bool dequantized_weight(const Tensor& t) {
  if (has_symbolic_shape(t) || t.ndim() < 2 || t.numel() < kPanelMinimumElements) return false;
  const int64_t small = t.dim(-1) + t.dim(-2);
  int64_t large_integer_buffers = 0;
  for (const UOp* node : toposort(t.data().node)) {
    Ops op = node->op();
    if (op == Ops::REDUCE_AXIS || op == Ops::CONTIGUOUS) return false;
    if (op != Ops::BUFFER) continue;
    const int64_t elements = node->arg_list().at(1);
    DType type = node->dtype().base();
    if (elements >= t.numel() / 2 && type.is_int() && type.scalar_bytes() == 1 && type != dtypes::bool_)
      ++large_integer_buffers;
    else if (elements > small) return false;
  }
  return large_integer_buffers == 1;
}

// Whether t has arithmetic of its own (not only views of buffers and constants).
bool computes(const Tensor& t) {
  for (const UOp* node : toposort(t.data().node))
    if (op_is_alu(node->op()) || node->op() == Ops::REDUCE_AXIS) return true;
  return false;
}

// A view whose rows are not contiguous runs of its source: a permute that moves the last axis, or
// a reshape that merges permuted axes (attention heads (h, s, d) → (s, h·d)). Read as the left
// operand of a matmul, each row is gathered in pieces (BERT's output projection read 12 runs of 64
// per row, 3x slower than a contiguous row).
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

// The 8-bit integer value below `t` when t is that value widened to a larger integer (an integer
// matmul's operands: onnx/ops_quant.cpp); undefined otherwise.
Tensor widened_8bit_integer(const Tensor& t) {
  const UOpPtr& node = t.data().node;
  if (!widens_8bit_integer(node.get())) return Tensor();
  return make_tensor_dims(node->src(0), dims_of(t), node->src(0)->dtype(), {&t});
}
}  // namespace

namespace {

// Whether a matmul whose output columns are symbolic (attention's scores over keys of any count)
// takes its right operand row-major, (k, n), as for columns that are whole vectors: the tile then
// takes the columns in vector blocks, PADTO'd to whole vectors, and the rows of `a` as its rows, so
// each load of b feeds a row of FMAs, as in a fixed plan over a known key count. b goes through a
// transposing copy (K stored with its keys contiguous), which pays only when many rows read it:
// a decoder's one query row per step keeps (n, k). int8 BERT at 128 tokens, one thread: the
// scores 0.51 -> 0.29 ms (fixed plan 0.18, with the same copy).
bool symbolic_columns_in_rows(const Tensor& a, const Dim& n) {
  return !n.is_known() && n.max() >= kTransposeMinimum && a.ndim() >= 2 && dim_of(a, -2).max() >= kTransposeMinimum;
}

// Visits each node of the graph under `root` once, sources after their consumer; `visit(node)`
// says whether to go on into node's sources.
template <typename Visit>
void walk(const UOpPtr& root, Visit&& visit) {
  std::vector<const UOp*> stack{root.get()};
  std::unordered_set<const UOp*> seen;
  while (!stack.empty()) {
    const UOp* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second || !visit(node)) continue;
    for (const UOpPtr& source : node->srcs()) stack.push_back(source.get());
  }
}

// Whether t is computed by a reduction (and elementwise ops and views after it) that no CONTIGUOUS
// separates from it: a projection's output.
bool computed_by_reduction(const Tensor& t) {
  bool found = false;
  walk(t.data().node, [&](const UOp* node) {
    found = found || node->op() == Ops::REDUCE_AXIS;
    return !found && node->op() != Ops::CONTIGUOUS && node->op() != Ops::BUFFER;
  });
  return found;
}

}  // namespace

Tensor Tensor::matmul(const Tensor& other) const {
  require_defined(*this, "matmul", "the left operand");
  require_defined(other, "matmul", "the right operand");
  if (ndim() == 0 || other.ndim() == 0)
    throw UserError(str_cat("matmul: operands must have at least one axis, got ", dims_string(dims_of(*this)), " and ",
                            dims_string(dims_of(other))));
  // Sizes are Dims: rows, columns and batch axes may be symbolic (docs/symbolic-shapes.md). The
  // layout choices below only pick a faster form, so a symbolic size counts at its maximum there,
  // and the panel layout (which splits N) needs a known N.
  Tensor a = ndim() == 1 ? reshape_to(*this, {1, dim_of(*this, 0)}) : *this;
  Tensor b = other.ndim() == 1 ? reshape_to(other, {dim_of(other, 0), 1}) : other;
  Dim k = dim_of(a, -1), n = dim_of(b, -1);
  if (!(k == dim_of(b, -2)))
    throw UserError(str_cat("matmul: shapes ", dims_string(dims_of(*this)), " and ", dims_string(dims_of(other)),
                            " do not align (", k, " != ", dim_of(b, -2), ")"));
  ScalarType type = promoted(a, b), compute = compute_type(type);
  // A left operand whose rows are permuted pieces is made contiguous first: its producer (often the
  // reduction before it) then stores it in row order.
  if (k.max() >= kTransposeMinimum && a.ndim() >= 2 && dim_of(a, -2).max() >= kTransposeMinimum && rows_are_permuted(a))
    a = contiguous(a);
  // A computed 8-bit left operand (a dynamically quantized activation) is stored in its own width
  // and widened where the product reads it: each element is read once per output column, and the
  // fusion would otherwise store the widened value, or recompute the quantization per column.
  // Narrow operands are what 8-bit dot-product instructions multiply (opt/dot_products.h).
  if (Tensor narrow = widened_8bit_integer(a); narrow.defined() && computes(narrow))
    a = contiguous(narrow).cast(a.dtype());
  Tensor left = a.cast(compute).unsqueeze(-2);
  // The reduction reads a row of `left` and, per output column j, b[…, k, j]. Two layouts of b:
  //  - row-major (k, n), when n is a multiple of 4: the optimisation layer (src/opt/heuristics.h)
  //    vectorises the output columns, so each step of k loads contiguous lanes of one row of b and a
  //    register tile of rows shares them. A b that is not a row-major buffer is copied into that
  //    order first, and a large one into panels of 32 columns (folded into the weights when b is
  //    constant).
  //  - transposed (n, k) otherwise: a column of a row-major b is strided, which defeats the scalar
  //    loop (25-40x slower at 512³), so b goes through one transposing copy and k is read contiguously.
  // Small operands stay fused.
  bool large = k.max() >= kTransposeMinimum && n.max() >= kTransposeMinimum;
  Tensor right_rows;
  if (one_row(a) && dequantized_weight(b) && !graph_target_caps().output_grid) {
    // A matrix-vector product reads each element of b once: a b dequantized from 8-bit integers
    // (a QDQ model's classifier) is read as those integers and dequantized in the kernel,
    // along its rows (n, k), where folded into f32 panels it streamed 4x the bytes (QDQ
    // MobileNetV3's 1024 -> 1000 Gemm: 4 MB a run at 29 GB/s, 0.145 ms; now 0.096).
    right_rows = b.cast(compute).transpose(-1, -2);
  } else if ((n.is_known() && n.value() % 4 == 0) || symbolic_columns_in_rows(a, n)) {
    // Where narrow floats are stored wide (the CPU), the copy holds the widened b, as a conv's
    // filter panels do, so that a constant b folds into f32 panels: cast after the copy, the fold
    // realised the cast in b's own row-major order, and BERT-base fp16's FFN matmuls read rows of
    // their weight 3072 bytes apart (80 against 260 GFLOP/s in fp32). Elsewhere the copy keeps the
    // narrow type: half the bytes, and the f16 operand tensor cores take.
    bool widen_first = graph_target_caps().narrow_floats_stored_wide;
    Tensor rows_of_b = widen_first ? b.cast(compute) : b;
    // An 8-bit integer b (an integer matmul's weight) keeps its own width through the copy: a
    // quarter of the bytes of i32, and the operand 8-bit dot-product instructions take.
    Tensor narrow = widened_8bit_integer(b);
    if (narrow.defined()) rows_of_b = narrow;
    const int64_t dot_lanes = graph_target_caps().dot_product_bytes / 4;
    if (narrow.defined() && dot_lanes > 0 && !has_symbolic_shape(b) && b.dim(-2) % 4 == 0 && b.dim(-2) >= 16 &&
        n.value() >= dot_lanes)
      rows_of_b = in_dot_product_panels(rows_of_b, dot_lanes);
    else if (!has_symbolic_shape(b) && n.value() * b.dim(-2) >= kPanelMinimumElements)
      rows_of_b = in_panels(rows_of_b);
    else if (large && !is_buffer_view(b) && !n.is_known() && computed_by_reduction(b))
      // A symbolic b computed by a reduction (attention's keys, a projection's output) is stored in
      // its own order, then copied transposed (transposed_block_opts in symbolic_tiles.cpp): fused
      // into the projection, the copy made it scatter each vector of its stores a symbolic key
      // count apart (the legacy BERT's key projections 5-10 % slower and no faster scores).
      rows_of_b = contiguous(contiguous(rows_of_b.transpose(-1, -2)).transpose(-1, -2));
    else if (large && !is_buffer_view(b)) rows_of_b = contiguous(rows_of_b);
    right_rows = rows_of_b.cast(compute).transpose(-1, -2);
  } else {
    right_rows = b.cast(compute).transpose(-1, -2);
    if (large && !is_buffer_view(right_rows)) right_rows = contiguous(right_rows);
  }
  Tensor right = right_rows.unsqueeze(-3);
  Tensor product = left.mul(right).sum({-1});  // bool: AND, then the i64 count, then != 0 below
  if (ndim() == 1) product = product.squeeze({-2});
  if (other.ndim() == 1) product = product.squeeze({-1});
  // An empty contraction is all zeros; say so directly instead of emitting a loop of no iterations.
  if (k.is(0)) return expand_to(Tensor::scalar(0.0, type), dims_of(product));
  return product.cast(type);
}

namespace {

// Filters per panel of a conv weight: one vector of fp32 of the host (16 on AVX-512, 8 on AVX2),
// at least 8. With 16-filter panels on AVX2, whose register tile over 7 pixel rows is one 8-lane
// column, every reduction step used half of a 64-byte line and the weight strip took twice its
// size in L1 (ResNet-50 on an AVX2 Zen 3, one thread: 136-144 -> 132-134 ms, alternating runs).
int64_t filter_panel() {
  return std::clamp<int64_t>(host_cpu_caps().vector_lanes(dtypes::f32), 8, 16);
}

// The conv weight (F, C/g, K…) stored in panels of P = filter_panel() filters, (g, F/g/P, C/g, K…,
// P), and viewed again as (F, C/g, K…). One step of the reduction (a channel and a tap) then reads
// the weights of P consecutive filters side by side (P = 16: one 64-byte line), and the next step
// the ones after them, so the optimisation layer can make the filters a conv's vector axis: a strided conv's output pixels read
// strided input (a gather per lane), and a 7×7 image pads to 8 or 64 lanes, but a panel's filters
// are contiguous. A register tile over filters (the pixels as vector) reads its rows from one line
// too. (All filters innermost, (g, C/g, K…, F/g), was 3x slower on ResNet-50's 1x1 convs: with
// F = 1024 each row's next weight was 4 KB away.) A constant weight is reordered once at compile
// time (fold_constants); weights with fewer than P filters per group (depthwise) stay as they are.
Tensor filters_in_panels(const Tensor& weight, int64_t groups) {
  int64_t group_filters = weight.dim(0) / groups, panel = filter_panel();
  if (group_filters % panel != 0) return weight;
  Shape grouped{groups, group_filters / panel, panel};
  grouped.insert(grouped.end(), weight.shape().begin() + 1, weight.shape().end());
  int64_t rank = static_cast<int64_t>(grouped.size());
  std::vector<int64_t> to_panels{0, 1}, back{0, 1, rank - 1};
  for (int64_t axis = 3; axis < rank; ++axis) to_panels.push_back(axis);
  to_panels.push_back(2);
  for (int64_t axis = 2; axis < rank - 1; ++axis) back.push_back(axis);
  Tensor panels = contiguous(weight.reshape(grouped).permute(to_panels));
  return panels.permute(back).reshape(weight.shape());
}

// The orders of the channels-last copies Tensor::conv makes, which computed_channels_last also
// recognises: an activation (N, C, H, W) stored (N, H, W, C), a depthwise weight (C, 1, KH, KW)
// stored (KH, KW, C, 1).
const std::vector<int64_t> kChannelsLast{0, 2, 3, 1};
const std::vector<int64_t> kTapsFirst{2, 3, 0, 1};

// t copied into a buffer in `order` (a permutation of its axes) and viewed again in its own order.
Tensor stored_in_order(const Tensor& t, const std::vector<int64_t>& order) {
  std::vector<int64_t> back(order.size());
  for (size_t i = 0; i < order.size(); ++i) back[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return contiguous(t.permute(order)).permute(back);
}

// Whether a reduction reads a reordered copy, CONTIGUOUS(PERMUTE(…)): a conv's weight in filter
// panels (filters_in_panels) or its channels-last input. A depthwise conv over an NCHW input reads
// neither; computed in channels-last order it would gather each vector of channels from as many
// planes (MobileNetV2's depthwise convs at 14×14 without the pointwise hint: 0.39 -> 1.47 ms).
bool reads_reordered_copy(const UOp* reduction) {
  bool reordered = false;
  walk(reduction->src(0), [&](const UOp* node) {
    if (node->op() != Ops::CONTIGUOUS) return !reordered;
    reordered = reordered || node->src(0)->op() == Ops::PERMUTE;
    return false;
  });
  return reordered;
}

// Whether t is computed from sums of products that read a reordered copy (convs over filter
// panels: at least one reduction, every one a sum over a MUL, so no pool, and reads_reordered_copy)
// by elementwise ops and views, without a PAD between (a concatenation pads its inputs).
// CONTIGUOUS copies and buffers end the search.
bool computed_from_products_unpadded(const Tensor& t) {
  bool reduces = false, other = false;
  walk(t.data().node, [&](const UOp* node) {
    if (other || node->op() == Ops::CONTIGUOUS) return false;
    if (node->op() == Ops::PAD) other = true;
    if (node->op() != Ops::REDUCE_AXIS) return !other;
    bool sum_of_products = !node->arg_list().empty() && node->arg_list()[0] == static_cast<int64_t>(Ops::ADD) &&
                           node->src(0)->op() == Ops::MUL;
    other = other || !sum_of_products || !reads_reordered_copy(node);
    reduces = true;
    return false;
  });
  return reduces && !other;
}

// Whether a 2-D image of `windows` pixels fills whole vectors of the host's fp32 lanes.
bool fills_vectors(const std::vector<int64_t>& windows) {
  return (windows[0] * windows[1]) % host_cpu_caps().vector_lanes(dtypes::f32) == 0;
}

// The image test of reads_channels_last below: whether a 1x1 conv over `channels` input channels
// at the 2-D image `windows` reads a channels-last copy of its input on the host CPU.
bool channels_last_image(int64_t channels, const std::vector<int64_t>& windows) {
  constexpr int64_t kLongReduction = 256;
  if (graph_target_caps().output_grid) return false;  // a GPU thread per output reads NCHW coalesced
  const TargetCaps& caps = host_cpu_caps();
  int64_t lanes = caps.vector_lanes(dtypes::f32);
  if (channels < lanes) return false;
  return (windows[0] * windows[1]) % lanes != 0 || (caps.vector_registers >= 32 && channels >= kLongReduction);
}

// Whether a depthwise 2-D conv (one filter per channel) computes channels-last: its padded input is
// copied (or stored by its producer) in (N, H, W, C) order, its weight is stored (K…, C), and its
// output is computed in (N, H, W, C) order by the 1x1 conv that follows it. That is the case where
// that 1x1 conv reads a channels-last copy of this conv's output anyway (channels_last_image, the
// same test on the same image): MobileNetV2's blocks at 14×14 and 7×7. In NCHW the depthwise conv
// vectorised 14 or 7 pixels of a row in 16 lanes, and its output and input each went through a
// copy of their own (the 1x1 conv before it stored its filters, which it vectorises, one plane
// apart). Channels-last, each step loads one vector of consecutive channels from the input and
// the weights, the producer stores its filter vector contiguously into the padded buffer, and the
// output is stored in the order the next conv reads. One thread, AVX-512 Xeon: the 14×14 and 7×7
// depthwise convs 16-36 % faster, and per block two copy kernels gone (the padded input's, now
// small kernels that zero the border, and the 1x1 conv's channels-last copy); MobileNetV2 8 %
// faster at one and two threads. The readers come from the ONNX graph (`reader_filters`,
// ConvOptions::pointwise_reader_filters): without such a reader the output would be stored NCHW.
// Where the 1x1 conv after it reads NCHW (28×28 and 56×56 images of under 256 channels), a
// channels-last depthwise conv would store a transposed output: 7x slower on 192×28×28.
bool depthwise_channels_last(const Tensor& padded, const Shape& kernel, int64_t groups, int64_t filters,
                             const std::vector<int64_t>& windows, int64_t reader_filters) {
  if (kernel.size() != 2 || groups < 2 || groups != filters || groups != padded.dim(1)) return false;
  if (reader_filters <= 0 || reader_filters % filter_panel() != 0) return false;
  return channels_last_image(groups, windows);
}

// Whether t is computed by one reduction (and elementwise ops after it) that is a channels-last
// depthwise conv: it reads both copies that Tensor::conv makes for one, the input's
// CONTIGUOUS(PERMUTE(x, (0, 2, 3, 1))) and the weight's CONTIGUOUS(PERMUTE(w, (2, 3, 0, 1))).
// (Other convs that read a channels-last input, with their filters as the vector, were slower
// storing channels-last: SqueezeNet, DenseNet and Inception-v2 2-6 %.) The nodes behind a
// CONTIGUOUS are another kernel's and are not looked at.
bool computed_channels_last(const Tensor& t) {
  std::vector<const UOp*> reductions;
  walk(t.data().node, [&](const UOp* node) {
    if (node->op() == Ops::REDUCE_AXIS) reductions.push_back(node);
    return node->op() != Ops::CONTIGUOUS && node->op() != Ops::REDUCE_AXIS;
  });
  if (reductions.size() != 1) return false;
  bool input_copy = false, weight_copy = false;
  walk(reductions[0]->src(0), [&](const UOp* node) {
    if (node->op() != Ops::CONTIGUOUS) return true;
    const UOp* source = node->src(0).get();
    if (source->op() == Ops::PERMUTE) {
      input_copy |= source->arg_list() == kChannelsLast;
      weight_copy |= source->arg_list() == kTapsFirst;
    }
    return false;
  });
  return input_copy && weight_copy;
}

// Whether a conv reads its input through a channels-last copy (N, H, W, C), viewed again as
// (N, C, H, W): a 2-D 1x1 conv without padding whose output image does not fill whole vectors (7×7,
// 14×14, SqueezeNet's 13×13), over at least one panel of filters. Such a conv takes its filters as
// the vector (filters_in_panels) and its pixels as the register tile's rows, so every reduction step
// broadcasts one input value per row. In NCHW those values lie a whole image apart from one channel
// to the next: each step read new cache lines, and a long reduction's lines did not stay in L1
// (ResNet-50's 1x1 2048->512 at 7×7 ran at 28 GFLOP/s on an AVX2 Zen 3). Channels-last, each row
// reads one sequential stream (the same conv: 47 GFLOP/s). The copy is one pass over the input,
// which the conv reads F/P times. Images that fill whole vectors keep their pixels as the vector
// and read NCHW rows contiguously already -- except, with 32 vector registers, over a reduction of
// at least kLongReduction channels: there the register tile takes the filters as its vector even
// on whole vectors of pixels (two columns of up to 8 rows, symbolic_tiles.cpp), and the NCHW lines of a
// 28×28 or 56×56 image, one per step, leave L1 long before a row tile's reduction ends. ResNet-50's
// 1x1 512->128 at 28×28, one thread, AVX-512 Xeon: 112-117 GFLOP/s in NCHW, 161 channels-last
// (0.88 -> 0.64 ms, plus 0.14 ms for the copy); the model 0.95x at one thread, 0.99x at two. Shorter
// reductions (MobileNetV2's 144 channels at 56×56, YOLOX) keep NCHW: copying every 1x1 conv's input
// made those models 12-23 % slower.
bool reads_channels_last(const Tensor& input, const Shape& kernel, int64_t groups, int64_t filters,
                         const std::vector<int64_t>& windows) {
  if (kernel != Shape{1, 1} || groups != 1 || filters % filter_panel() != 0) return false;
  return channels_last_image(input.dim(1), windows);
}

// A padded 2-D conv whose padded input does not fit in half the L2 cache is copied into a
// channels-last (N, H, W, C) buffer instead of a padded NCHW one: the register tile takes the
// filters as its vector and broadcasts one input value per pixel row and reduction step, and in NCHW
// those values lie a whole image apart from one channel to the next, so every step of a 256-channel
// reduction touched a new page (VGG-19's 3x3 256->256 convs at 56x56: 114 GFLOP/s on a 180 GFLOP/s
// AVX-512 core, 27-31 beside another build; channels-last, where each pixel's channels are one
// sequential stream, 142 and 61-73). The copy is the padded copy's own pass, transposed, and slower
// than the plain copy (3 GB/s against 13), so it is made only where the conv reads its input several
// times over: inputs that fit in the cache (14x14 and smaller) keep NCHW, where the layouts ran the
// same, and so do convs of fewer than 64 filters (one or two register-tile strips): DenseNet-121's
// 128->32 at 56x56 ran no faster and the transposed copies made the model 7 % slower.
bool pads_channels_last(const Tensor& padded, const Shape& kernel, int64_t groups, int64_t filters,
                        const std::vector<int64_t>& stride) {
  constexpr int64_t kMinimumFilters = 64;
  if (kernel.size() != 2 || kernel == Shape{1, 1} || groups != 1 || filters % filter_panel() != 0 ||
      filters < kMinimumFilters)
    return false;
  if (std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; })) return false;
  if (graph_target_caps().output_grid) return false;
  if (has_symbolic_shape(padded)) return false;  // a symbolic batch keeps the NCHW copy (not measured)
  const TargetCaps& caps = host_cpu_caps();
  // (in the type the CPU stores it in: f32 for f16 and bf16, TargetCaps::narrow_floats_stored_wide)
  int64_t bytes = padded.numel() / std::max<int64_t>(padded.dim(0), 1) *
                  DType(compute_type(padded.dtype())).scalar_bytes();
  return padded.dim(1) >= caps.vector_lanes(dtypes::f32) && 2 * bytes > caps.l2_bytes;
}

// Whether a conv's input, weight and bias have shapes that fit one another (channels, groups,
// bias length). The rewrites below slice the weight; shapes that do not fit go to Tensor::conv as
// they are, whose error then names the weight the caller gave, not a slice of it.
bool shapes_fit_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options) {
  if (!x.defined() || !weight.defined() || x.ndim() < 3 || weight.ndim() != x.ndim()) return false;
  const int64_t groups = options.groups;
  const Dim channels = dim_of(x, 1);
  return channels.is_known() && groups >= 1 && weight.dim(1) * groups == channels.value() &&
         weight.dim(0) % groups == 0 && (!bias.defined() || bias.shape() == Shape{weight.dim(0)});
}

// A conv whose kernel taps at one end of a spatial axis read only zero padding, for every output
// and every image size the plan allows (the largest decides: a smaller image has fewer live
// taps), with those taps gone: the weight sliced to the live taps and the pads reduced by what
// they covered, so that the output keeps its size. An atrous conv over a small feature map is
// the case: DeepLabV3's ASPP branches of dilation 24 and 36 (pads alike) over 14×14 features read
// the image with their centre tap only, and computed 9 taps over a copy of 86×86 padded rows (2 of
// the model's 10 ms at one thread, 224² input). nullopt where every tap may read the image, or
// where a crop (a negative pad) would be needed over an image of symbolic size.
struct LiveTaps {
  Tensor weight;
  ConvOptions options;
};
std::optional<LiveTaps> without_dead_taps(const Tensor& x, const Tensor& weight, const ConvOptions& options) {
  if (!shapes_fit_conv(x, weight, Tensor(), options)) return std::nullopt;
  const size_t n = static_cast<size_t>(x.ndim()) - 2;
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  Tensor live = weight;
  bool trimmed = false;
  for (size_t i = 0; i < n; ++i) {
    const auto axis = static_cast<int64_t>(i) + 2;
    const Dim size = dim_of(x, axis);
    const int64_t image = size.max(), taps = weight.dim(axis), d = dilation[i], s = stride[i];
    const int64_t span_left = image + pad_begin[i] + pad_end[i] - d * (taps - 1) - 1;
    if (image <= 0 || span_left < 0 || taps <= 1) continue;  // no output: the conv says so itself
    const int64_t outputs = span_left / s + 1;
    // Tap k reads image row o·s + k·d − pad for outputs o < `outputs`: live when one lands inside.
    auto reads_image = [&](int64_t k) {
      int64_t offset = k * d - pad_begin[i];
      int64_t first = offset >= 0 ? 0 : (-offset + s - 1) / s;  // the first output at or past row 0
      return first < outputs && first * s + offset < image;
    };
    int64_t low = 0, high = taps - 1;
    while (low <= high && !reads_image(low)) ++low;
    while (high >= low && !reads_image(high)) --high;
    if (low > high || (low == 0 && high == taps - 1)) continue;
    const int64_t begin = pad_begin[i] - low * d, end = pad_end[i] - (taps - 1 - high) * d;
    if (!size.is_known() && (begin < 0 || end < 0)) continue;
    live = live.slice(axis, low, high + 1);
    pad_begin[i] = begin;
    pad_end[i] = end;
    trimmed = true;
  }
  if (!trimmed) return std::nullopt;
  ConvOptions reduced = options;
  reduced.stride = stride;
  reduced.dilation = dilation;
  reduced.padding = pad_begin;
  reduced.padding.insert(reduced.padding.end(), pad_end.begin(), pad_end.end());
  return LiveTaps{live, reduced};
}

// A stride-1 conv whose output keeps the input's size and whose taps along some axis reach few of
// its rows, computed as one conv per tap over the rows that tap reaches. Dilated (atrous) convs
// over small feature maps: DeepLabV3's ASPP branch of dilation 12 over 14×14 features reaches 14 +
// 2 + 2 rows with its three taps, where the conv computed 3 × 14 over a copy padded by 12 on each
// side. And in a plan for images of any size, a tap may read only padding at small sizes and the
// image at large ones (dilation 24 over 14×14 to 32×32 features), which without_dead_taps cannot
// drop and the conv computed in full.
// A tap at offset o reads input rows [max(o, 0), H + min(o, 0)) for output rows shifted by -o, an
// extent of max(|o|, H) - |o| (0 where the tap is dead: its kernels then run no iterations); its
// conv's output is zero-padded back to H rows (by min(H, |o|) on the side it does not reach), the
// taps' convs are summed and the bias added once. An axis of a dilated conv goes by tap where at
// its largest size the taps reach at most 3/4 of the rows a padded conv computes (dilation 12 over
// 32 rows: 32 + 20 + 20 of 3 × 32, a 2-D conv then computing 56 % of the padded one's work, which
// measured faster still); other axes keep their taps and pads in each tap's conv. DeepLabV3, one
// thread: 224² 5.9 -> 5.2 ms, 512² 47.6 -> 43-45; the plan for 224² to 512² at 224² 8.1-8.5 -> 6.0-6.2.
// nullopt where no axis qualifies, or where more than kMaxTapConvs convs would result.
constexpr int64_t kMaxTapConvs = 16;
std::optional<Tensor> conv_by_tap_regions(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                          const ConvOptions& options) {
  if (!shapes_fit_conv(x, weight, bias, options)) return std::nullopt;
  const size_t n = static_cast<size_t>(x.ndim()) - 2;
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  std::vector<bool> by_tap(n, false);
  int64_t convs = 1;
  for (size_t i = 0; i < n; ++i) {
    const Dim size = dim_of(x, static_cast<int64_t>(i) + 2);
    const int64_t taps = weight.dim(static_cast<int64_t>(i) + 2), d = dilation[i];
    if (stride[i] != 1 || taps <= 1 || pad_begin[i] < 0 || pad_end[i] < 0 ||
        pad_begin[i] + pad_end[i] != d * (taps - 1))
      continue;
    // Tap k (offset o = k·d - pad_begin) reads max(0, H - |o|) image rows at size H: by tap where
    // at the largest size (the share only falls with H) the taps reach at most 3/4 of the rows a
    // padded conv computes. Dilated convs only: with dilation 1 that takes an image smaller than
    // about the kernel, where without_dead_taps has already dropped what reads only padding.
    const int64_t largest = size.max();
    int64_t reached = 0;
    for (int64_t k = 0; k < taps; ++k) reached += std::max<int64_t>(0, largest - std::abs(k * d - pad_begin[i]));
    by_tap[i] = d > 1 && 4 * reached <= 3 * taps * largest;
    if (by_tap[i]) convs *= taps;
  }
  if (convs == 1 || convs > kMaxTapConvs) return std::nullopt;
  // Each tap's conv reads the input: a computed one is stored once rather than computed by each.
  Tensor source = computes(x) ? contiguous(x) : x;
  Dims out_dims = dims_of(x);
  out_dims[1] = weight.dim(0);
  Tensor sum;
  for (int64_t index = 0; index < convs; ++index) {
    // This conv's tap along each by-tap axis (index in mixed radix over those axes).
    DimRanges crop, place;
    Dims pads;
    for (int64_t axis = 0; axis < 2; ++axis) {
      crop.emplace_back(0, dim_of(source, axis));
      pads.insert(pads.end(), {0, 0});
    }
    Tensor tap_weight = weight;
    ConvOptions tap_options = options;
    tap_options.stride = stride;
    tap_options.dilation = dilation;
    std::vector<int64_t> begins = pad_begin, ends = pad_end;
    int64_t rest = index;
    for (size_t i = 0; i < n; ++i) {
      const auto axis = static_cast<int64_t>(i) + 2;
      const Dim size = dim_of(source, axis);
      if (!by_tap[i]) {
        crop.emplace_back(0, size);
        pads.insert(pads.end(), {0, 0});
        continue;
      }
      const int64_t taps = weight.dim(axis), k = rest % taps;
      rest /= taps;
      const int64_t offset = k * dilation[i] - pad_begin[i], reach = std::abs(offset);
      tap_weight = tap_weight.slice(axis, k, k + 1);
      begins[i] = ends[i] = 0;
      const Dim rows = max(Dim(reach), size) - reach;  // the rows this tap reads, 0 where it is dead
      const Dim fill = min(size, Dim(reach));          // the output rows it does not reach
      if (offset >= 0) {
        crop.emplace_back(offset, offset + rows);
        pads.insert(pads.end(), {0, fill});
      } else {
        crop.emplace_back(0, rows);
        pads.insert(pads.end(), {fill, 0});
      }
    }
    tap_options.padding = begins;
    tap_options.padding.insert(tap_options.padding.end(), ends.begin(), ends.end());
    Tensor part = shrink_within(source, crop).conv(tap_weight, Tensor(), tap_options);
    DimRanges whole;
    for (const Dim& size : out_dims) whole.emplace_back(0, size);
    part = shrink_within(pad_zero_dims(part, pads), whole);
    sum = sum.defined() ? sum + part : part;
  }
  // The bias once, over the whole output (a tap's conv covers only the rows its tap reaches).
  if (bias.defined()) return sum + per_channel(bias.cast(sum.dtype()), sum, "conv", "bias");
  return sum;
}

// Whether spatial pads (before, after) add anything: negative pads crop and zeros do nothing.
bool pads_anything(const std::vector<int64_t>& before, const std::vector<int64_t>& after) {
  auto positive = [](int64_t p) { return p > 0; };
  return std::any_of(before.begin(), before.end(), positive) || std::any_of(after.begin(), after.end(), positive);
}

}  // namespace

bool is_broadcast_value(const Tensor& t) {
  int64_t stored = 0;
  for (const UOp* node : toposort(t.data().node))
    if (node->op() == Ops::BUFFER) stored += node->arg_list().at(1);
  return stored < t.numel();
}

// Direct convolution as a broadcast product of a window view and the weight, summed over
// (C/groups, K1…Kn): (N, g, F/g, O…, C/g, K…) · (1, g, F/g, 1…, C/g, K…). One kernel, with the
// bias add (and whatever elementwise op follows) in its epilogue.
Tensor Tensor::conv(const Tensor& weight, const Tensor& bias, const ConvOptions& options) const {
  if (std::optional<LiveTaps> live = without_dead_taps(*this, weight, options)) return conv(live->weight, bias, live->options);
  if (std::optional<Tensor> by_taps = conv_by_tap_regions(*this, weight, bias, options)) return *by_taps;
  // 3x3 stride-1 float32 convolutions where F(2x2, 3x3) is faster (winograd.cpp, docs/winograd.md).
  if (use_winograd(*this, weight, bias, options)) return winograd_conv(*this, weight, bias, options);
  require_defined(*this, "conv", "the input");
  require_defined(weight, "conv", "the weight");
  require_batch_channels(*this, 3, "conv");
  size_t n = static_cast<size_t>(ndim()) - 2;
  // The batch may be symbolic (a plan over any batch size); channels and image sizes are known.
  Dim batch = dim_of(*this, 0);
  int64_t channels = dim(1), groups = options.groups;
  std::string input_shape = dims_string(dims_of(*this));
  if (weight.ndim() != ndim())
    throw UserError(str_cat("conv: weight of shape ", shape_string(weight.shape()), " must have ", ndim(),
                            " axes (F, C/groups, K…) for input ", input_shape));
  int64_t filters = weight.dim(0);
  if (groups < 1 || channels % groups != 0 || filters % groups != 0 || weight.dim(1) * groups != channels)
    throw UserError(str_cat("conv: input ", input_shape, " and weight ", shape_string(weight.shape()),
                            " do not fit groups = ", groups, " (need C and F divisible by groups, weight axis 1 = C/groups)"));
  if (bias.defined() && bias.shape() != Shape{filters})
    throw UserError(str_cat("conv: bias of shape ", shape_string(bias.shape()), " must have shape (", filters, ",)"));
  if (!options.output_padding.empty() &&
      std::any_of(options.output_padding.begin(), options.output_padding.end(), [](int64_t p) { return p != 0; }))
    throw UserError("conv: output_padding applies to conv_transpose only");
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv", "dilation");
  // Negative pads crop; conv_transpose relies on that.
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, true, "conv");
  Shape kernel(weight.shape().begin() + 2, weight.shape().end());

  ScalarType type = bias.defined() ? promote_types(DType(promoted(*this, weight)), DType(bias.dtype())).scalar()
                                   : promoted(*this, weight);
  if (type == ScalarType::Bool) throw UserError("conv: bool tensors are not supported");
  ScalarType compute = compute_type(type);
  // An input that is a permuted view (ShuffleNet's channel shuffle: reshape, transpose, reshape)
  // would put the permutation's divisions into every load of the window, which hides the
  // contiguity of the output pixels from the optimisation layer (those depthwise convs stayed
  // scalar). One copy into plain order costs a pass over the input.
  Tensor source = rows_are_permuted(*this) ? contiguous(*this) : *this;
  // A zero-padded input is copied once into a padded buffer: read through the pad view, every
  // window load carries a bounds test, which on AVX2 became branches and spills in the register
  // tile (bench-tensor, 3x3 256->256 @14: 56 -> 135 GFLOP/s, 3x3 64->64 @56: 76 -> 117). The copy
  // is one pass over the input, which the conv reads K·F/g times; depthwise convs (K reads) were
  // no slower with it (MobileNetV2, YOLOX).
  // Computed values are realised before the copy (a ReLU or Clip in the previous conv's store, a
  // SiLU in an elementwise kernel of its own, vectorised either way): computed inside the copy,
  // YOLOX's SiLU ran through the copy's masked border lanes scalar (5 GFLOP/s on the 208×208
  // stem; the model 64 -> 46 ms at one thread on an AVX2 Zen 3).
  bool pads = pads_anything(pad_begin, pad_end);
  if (pads && computes(source)) source = contiguous(source);
  // The copies below hold the input in its own type, widened to `compute` only where the conv
  // reads it (the view below): a copy of the value itself is one that its other readers (a
  // residual add) read too (rangeify's contiguous_copy_of), where a copy of its widened value
  // left an f16 ResNet's residual chain to be recomputed by every later block's copy; and a GPU
  // conv then reads f16 operands, which tensor cores take.
  Tensor padded = source.pad(spatial_pad_list(pad_begin, pad_end));
  // Image sizes may be symbolic (an image or a signal of any size): the windows are then counted by
  // expressions, and the CPU's layout choices below, made for known images, are skipped.
  Dims window_dims;
  for (size_t i = 0; i < n; ++i) {
    int64_t span = dilation[i] * (kernel[i] - 1) + 1;
    Dim size = dim_of(padded, static_cast<int64_t>(i) + 2);
    // (A 1-wide window over rows that may be none gives no windows there: a tap's conv over the
    // rows it reaches, conv_by_tap_regions.)
    if (size.min() < span && !(span == 1 && stride[i] == 1 && size.min() >= 0))
      throw UserError(str_cat(size.is_known() ? "" : "unsupported: ", "conv: the padded input of shape ",
                              dims_string(dims_of(padded)), size.is_known() ? " is" : " may be",
                              " smaller than the dilated kernel of weight ", shape_string(weight.shape()),
                              " (dilation ", list_string(dilation), ")"));
    window_dims.push_back((size - span) / stride[i] + 1);
  }
  bool symbolic_image = !all_known(window_dims);
  std::vector<int64_t> windows = symbolic_image ? std::vector<int64_t>{} : known_sizes(window_dims);
  bool depthwise_last = pads && !symbolic_image &&
                        depthwise_channels_last(padded, kernel, groups, filters, windows, options.pointwise_reader_filters);
  if (pads && (depthwise_last || pads_channels_last(padded, kernel, groups, filters, stride)))
    padded = stored_in_order(padded, kChannelsLast);
  else if (pads) padded = contiguous(padded);
  int64_t group_channels = channels / groups, group_filters = filters / groups;
  if (!pads && !symbolic_image && reads_channels_last(padded, kernel, groups, filters, windows)) {
    // A strided 1x1 conv reads every s-th pixel: only those are copied, and the conv reads them
    // at stride 1. A computed input is realised in its own layout first (an activation that a
    // residual add also reads would otherwise be recomputed by both, each time from the start of
    // the residual chain) -- unless it is a channels-last depthwise conv's output (that conv
    // stores straight into the copy's order, depthwise_channels_last), or an image that does not
    // fill whole vectors read at stride 1. There the conv that computes the input has its filters
    // as the vector too, and stores them contiguously into the channels-last copy instead of one
    // NCHW plane per lane; other readers of the value (the next residual add) read the copy
    // through its permutation (rangeify's contiguous_copy_of). ResNet-50's blocks at 14×14 and
    // 7×7 lose a transposing copy each, and their convs their scattered stores.
    // Only sums (convs, not a max pool) of small images (14×14, 7×7: at most kSmallImage pixels,
    // where the convs take their filters as the vector), and no concatenation: DenseNet's,
    // Inception's and SqueezeNet's concatenations computed in the copy's order ran 1.1-2x slower,
    // and so did SqueezeNet's 55×55 max pool and its 1x1 convs there.
    // The conv computing the input then takes the image's rows as its register tile's rows, so the
    // image's width must split into 4 to 8 of them: SqueezeNet's 13×13 squeeze convs (64 filters)
    // got a tile of one row and ran 0.13 -> 0.42 ms that way (14×14 and 7×7 split into 7 rows).
    constexpr int64_t kSmallImage = 256;
    bool strided = std::any_of(stride.begin(), stride.end(), [](int64_t s) { return s != 1; });
    bool rows_split = false;
    for (int64_t rows = 4; rows <= 8; ++rows) rows_split = rows_split || windows[1] % rows == 0;
    bool small_image = windows[0] * windows[1] <= kSmallImage && !fills_vectors(windows) && rows_split &&
                       padded.dim(1) % (2 * host_cpu_caps().vector_lanes(dtypes::f32)) == 0;
    bool computed_in_copy_order =
        computed_channels_last(padded) || (!strided && small_image && computed_from_products_unpadded(padded));
    if (computes(padded) && !computed_in_copy_order) padded = contiguous(padded);
    Tensor picked = padded;
    for (size_t i = 0; i < n; ++i) {
      auto axis = static_cast<int64_t>(i) + 2;
      if (stride[i] != 1) picked = picked.slice(axis, 0, (windows[i] - 1) * stride[i] + 1, stride[i]);
    }
    padded = stored_in_order(picked, kChannelsLast);
    stride.assign(n, 1);
  }
  Tensor view = pool_windows(padded, kernel, stride, dilation, window_dims).cast(compute);  // (N, C, O…, K…)
  // (N, g, C/g, O…, K…) → (N, g, 1, O…, C/g, K…)
  Dims grouped{batch, groups, group_channels};
  Dims view_dims = dims_of(view);
  grouped.insert(grouped.end(), view_dims.begin() + 2, view_dims.end());
  std::vector<int64_t> order{0, 1};
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(i));
  order.push_back(2);
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(n + i));
  Tensor input = reshape_to(view, grouped).permute(order).unsqueeze(2);
  // (F, C/g, K…) → (1, g, F/g, 1…, C/g, K…)
  Shape weight_shape{1, groups, group_filters};
  weight_shape.insert(weight_shape.end(), n, 1);
  weight_shape.push_back(group_channels);
  weight_shape.insert(weight_shape.end(), kernel.begin(), kernel.end());
  // A channels-last depthwise conv reads one vector of consecutive channels per tap: its weight
  // (C, 1, K…) is stored (K…, C) (folded at compile time).
  Tensor weights = depthwise_last ? stored_in_order(weight.cast(compute), kTapsFirst)
                                  : filters_in_panels(weight.cast(compute), groups);
  weights = weights.reshape(weight_shape);
  Tensor result = input.mul(weights).sum(last_axes(static_cast<int64_t>(n) + 1, input.ndim()));
  Dims out_shape{batch, filters};
  out_shape.insert(out_shape.end(), window_dims.begin(), window_dims.end());
  result = reshape_to(result, out_shape);
  if (bias.defined()) result = result + per_channel(bias.cast(compute), result, "conv", "bias");
  return result.cast(type);
}

// ---- Transposed convolution ----
//
// Along one spatial axis, a transposed convolution scatters: input element i, through kernel tap k,
// adds to output t = i·s + k·d of the full (unpadded) output, and the output we return is
// o = t - pad_begin. The textbook way to compute it as a gather puts s-1 zeros between the input
// elements and slides the flipped kernel over that: simple, but (s-1)/s of the products per axis
// (3/4 of them for a 2-D stride 2) multiply an inserted zero.
//
// The phase split avoids them. Write t = q·s + r with 0 <= r < s. Since i·s ≡ 0 (mod s), only taps
// with k·d ≡ r (mod s) reach positions of residue r. With g = gcd(s, d), k·d mod s repeats with
// period s/g in k, so those taps are k0, k0 + s/g, k0 + 2·s/g, … (J of them, k0 < s/g the smallest
// one), or none at all when no k < s/g hits r (g does not divide r, or K is too short). Tap
// k = k0 + j·s/g reads input i = (t - k·d)/s = q - m0 - j·(d/g), where m0 = (k0·d - r)/s >= 0. So
// phase r is y_r[q] = Σ_j x[q - m0 - j·d/g] · w[k0 + j·s/g]: a stride-1 transposed convolution of
// the input itself (no zeros) with the sub-kernel w[k0::s/g] at dilation d/g, shifted by m0; that
// is an ordinary direct conv with the flipped sub-kernel and begin pad m0 + (J-1)·d/g - q_first.
// Per axis the phases' taps partition the kernel, so summed over phases the multiply-adds are
// exactly the non-zero ones: a 1/s share of the zero-insertion count per axis.
//
// In n dimensions a phase is a choice of residue per axis (Π s phases), each one direct conv whose
// sub-kernel is a strided slice of the weight on every axis. Each phase is computed only for the q
// whose t falls inside the requested output, then zero-padded onto a q grid shared by all phases of
// the axis; stacking the phases of an axis on a new axis after it and merging the two gives
// position q·s + r from phase r (a view and a select per element, like concat), and a final crop
// removes the grid's ragged ends. A phase no tap reaches, or whose reads fall entirely in padding,
// is a zero constant. The phases are reductions under padding, so each is a kernel of its own, and
// the interleave (with the bias and any elementwise op that follows) is one more kernel.
namespace {

int64_t floor_divide(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Residue r of one spatial axis (see above).
struct AxisPhase {
  int64_t taps = 0;        // J: kernel taps reaching the phase; 0 = none (the phase is zero)
  int64_t first_tap = 0;   // k0; the others follow every tap_step taps
  int64_t tap_step = 1;    // s/g
  int64_t input_step = 1;  // d/g: the sub-kernel's dilation
  int64_t shift = 0;       // m0 = (k0·d - r)/s
  int64_t first = 0, count = 0;  // the q with q·s + r in [pad_begin, pad_begin + output)
};

struct AxisPhases {
  int64_t stride = 1, input = 0;
  int64_t begin = 0, length = 0;  // the q grid shared by all phases: [begin, begin + length)
  int64_t offset = 0, output = 0;  // the output is [offset, offset + output) of the interleaved grid
  std::vector<AxisPhase> phases;   // by residue
};

AxisPhases axis_phases(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                       int64_t output) {
  AxisPhases axis;
  axis.stride = stride;
  axis.input = input;
  axis.output = output;
  axis.begin = pad_begin / stride;
  axis.length = (pad_begin + output + stride - 1) / stride - axis.begin;
  axis.offset = pad_begin - axis.begin * stride;
  int64_t common = std::gcd(stride, dilation);
  for (int64_t r = 0; r < stride; ++r) {
    AxisPhase phase;
    phase.tap_step = stride / common;
    phase.input_step = dilation / common;
    for (int64_t k = 0; k < std::min(kernel, phase.tap_step); ++k)
      if (k * dilation % stride == r) {
        phase.first_tap = k;
        phase.taps = (kernel - 1 - k) / phase.tap_step + 1;
        break;
      }
    if (phase.taps > 0) {
      phase.shift = (phase.first_tap * dilation - r) / stride;
      phase.first = -floor_divide(r - pad_begin, stride);  // ceil((pad_begin - r) / s)
      int64_t last = floor_divide(pad_begin + output - 1 - r, stride);
      phase.count = std::max<int64_t>(0, last - phase.first + 1);
    }
    axis.phases.push_back(phase);
  }
  return axis;
}

// One phase (a residue per axis) on the shared q grid, (N, F, length…). `weight` is (F, C/g, K…),
// not flipped; input and weight are already in the compute type.
Tensor phase_output(const Tensor& input, const Tensor& weight, int64_t groups, const std::vector<AxisPhases>& axes,
                    const std::vector<const AxisPhase*>& phase) {
  size_t n = axes.size();
  Shape grid{input.dim(0), weight.dim(0)};
  for (const AxisPhases& a : axes) grid.push_back(a.length);
  ConvOptions direct;
  direct.groups = groups;
  std::vector<int64_t> begin, end, grid_pads{0, 0, 0, 0};
  Tensor sub = weight;
  for (size_t i = 0; i < n; ++i) {
    const AxisPhase& p = *phase[i];
    const AxisPhases& a = axes[i];
    if (p.taps == 0 || p.count == 0) return Tensor::zeros(grid, input.dtype());
    int64_t reach = (p.taps - 1) * p.input_step;
    int64_t before = p.shift + reach - p.first;            // may be negative: a crop
    int64_t after = p.count + reach - a.input - before;    // so that the conv gives `count` outputs
    // The reads span input indices [-before, input + after): none inside means only zeros.
    if (before <= -a.input || after <= -a.input) return Tensor::zeros(grid, input.dtype());
    begin.push_back(before);
    end.push_back(after);
    direct.dilation.push_back(p.input_step);
    auto axis = static_cast<int64_t>(i) + 2;
    sub = sub.slice(axis, p.first_tap, p.first_tap + (p.taps - 1) * p.tap_step + 1, p.tap_step);
    grid_pads.push_back(p.first - a.begin);
    grid_pads.push_back(a.begin + a.length - p.first - p.count);
  }
  // The phase's pads (and crops) as a view of the input, not conv padding: conv would copy a padded
  // input into a buffer of its own, one more kernel for every phase of these small convs.
  Tensor flipped = sub.flip(last_axes(static_cast<int64_t>(n), sub.ndim()));
  Tensor padded = input.pad(spatial_pad_list(begin, end));
  return pad_zero(padded.conv(flipped, Tensor(), direct), grid_pads);
}

// Interleaves the phases of axes i… (residues of axes before i fixed in `phase`): the phases of
// axis i are stacked on a new axis after it, and (length, s) merges into length·s.
Tensor interleave_phases(const Tensor& input, const Tensor& weight, int64_t groups, const std::vector<AxisPhases>& axes,
                         std::vector<const AxisPhase*>& phase, size_t i) {
  if (i == axes.size()) return phase_output(input, weight, groups, axes, phase);
  std::vector<Tensor> parts;
  for (const AxisPhase& p : axes[i].phases) {
    phase[i] = &p;
    parts.push_back(interleave_phases(input, weight, groups, axes, phase, i + 1));
  }
  if (parts.size() == 1) return parts[0];
  auto axis = static_cast<int64_t>(i) + 2;
  Shape merged = parts[0].shape();
  merged[static_cast<size_t>(axis)] *= axes[i].stride;
  return Tensor::stack(parts, axis + 1).reshape(merged);
}

}  // namespace

// Stride 1 everywhere: a direct convolution with the flipped kernel (channel axes swapped per
// group), padded by d·(K-1) - pad (negative pads crop) plus output_padding at the end. Any stride
// above 1: the phase split above.
namespace {

// x with `stride` - 1 zeros after each element along `axis` but the last: length (n - 1)·stride + 1.
Tensor spread_with_zeros(const Tensor& x, int64_t axis, int64_t stride) {
  Tensor column = x.unsqueeze(axis + 1);
  Dims pads(2 * static_cast<size_t>(axis) + 4, 0);
  pads.back() = stride - 1;
  Dims merged = dims_of(x);
  Dim length = merged[static_cast<size_t>(axis)];
  merged[static_cast<size_t>(axis)] = length * Dim(stride);
  // (…, n, stride, …) → (…, n·stride, …)
  Tensor spread = reshape_within(pad_zero_dims(column, pads), merged);
  DimRanges kept;
  for (const Dim& size : merged) kept.emplace_back(0, size);
  kept[static_cast<size_t>(axis)] = {0, length * Dim(stride) - Dim(stride - 1)};
  return shrink_within(spread, kept);
}

}  // namespace

Tensor Tensor::conv_transpose(const Tensor& weight, const Tensor& bias, const ConvOptions& options) const {
  require_defined(*this, "conv_transpose", "the input");
  require_defined(weight, "conv_transpose", "the weight");
  require_batch_channels(*this, 3, "conv_transpose");
  size_t n = static_cast<size_t>(ndim()) - 2;
  int64_t channels = dim(1), groups = options.groups;
  if (weight.ndim() != ndim())
    throw UserError(str_cat("conv_transpose: weight of shape ", shape_string(weight.shape()), " must have ", ndim(),
                            " axes (C, F/groups, K…) for input ", dims_string(dims_of(*this))));
  if (groups < 1 || channels % groups != 0 || weight.dim(0) != channels)
    throw UserError(str_cat("conv_transpose: input ", dims_string(dims_of(*this)), " and weight ", shape_string(weight.shape()),
                            " do not fit groups = ", groups, " (need weight axis 0 = C, divisible by groups)"));
  std::vector<int64_t> stride = per_axis(options.stride, n, 1, 1, "conv_transpose", "stride");
  std::vector<int64_t> dilation = per_axis(options.dilation, n, 1, 1, "conv_transpose", "dilation");
  std::vector<int64_t> output_padding = per_axis(options.output_padding, n, 0, 0, "conv_transpose", "output_padding");
  auto [pad_begin, pad_end] = begin_end_pads(options.padding, n, false, "conv_transpose");
  bool symbolic_image = false;
  for (size_t i = 0; i < n; ++i) {
    Dim size = dim_of(*this, static_cast<int64_t>(i) + 2);
    if (size.is(0))
      throw UserError(str_cat("conv_transpose: input of shape ", dims_string(dims_of(*this)), " has an empty spatial axis"));
    symbolic_image = symbolic_image || !size.is_known();
  }
  // Over an image of any size the phases below (known lengths) are not available: a strided axis
  // is spread instead, s - 1 zeros after each element, and the stride-1 form below runs over it.
  // Correct for every size, at s times the multiply-adds per strided axis (the zeros' products).
  Tensor source = *this;
  if (symbolic_image)
    for (size_t i = 0; i < n; ++i)
      if (stride[i] > 1) {
        source = spread_with_zeros(source, static_cast<int64_t>(i) + 2, stride[i]);
        stride[i] = 1;
      }

  int64_t group_channels = channels / groups, group_filters = weight.dim(1), filters = groups * group_filters;
  Shape kernel(weight.shape().begin() + 2, weight.shape().end());
  // (C, F/g, K…) → (g, C/g, F/g, K…) → (g, F/g, C/g, K…) → (F, C/g, K…).
  Shape split{groups, group_channels, group_filters};
  split.insert(split.end(), kernel.begin(), kernel.end());
  std::vector<int64_t> order{0, 2, 1};
  for (size_t i = 0; i < n; ++i) order.push_back(3 + static_cast<int64_t>(i));
  Shape merged{filters, group_channels};
  merged.insert(merged.end(), kernel.begin(), kernel.end());
  Tensor regrouped = weight.reshape(split).permute(order).reshape(merged);

  if (std::all_of(stride.begin(), stride.end(), [](int64_t s) { return s == 1; })) {
    ConvOptions direct;
    direct.dilation = dilation;
    direct.groups = groups;
    std::vector<int64_t> begin, end;
    for (size_t i = 0; i < n; ++i) {
      begin.push_back(dilation[i] * (kernel[i] - 1) - pad_begin[i]);
      end.push_back(dilation[i] * (kernel[i] - 1) - pad_end[i] + output_padding[i]);
    }
    direct.padding = begin;
    direct.padding.insert(direct.padding.end(), end.begin(), end.end());
    return source.conv(regrouped.flip(last_axes(static_cast<int64_t>(n), ndim())), bias, direct);
  }

  if (bias.defined() && bias.shape() != Shape{filters})
    throw UserError(str_cat("conv_transpose: bias of shape ", shape_string(bias.shape()), " must have shape (", filters,
                            ",)"));
  ScalarType type = bias.defined() ? promote_types(DType(promoted(*this, weight)), DType(bias.dtype())).scalar()
                                   : promoted(*this, weight);
  if (type == ScalarType::Bool) throw UserError("conv_transpose: bool tensors are not supported");
  ScalarType compute = compute_type(type);
  std::vector<AxisPhases> axes;
  for (size_t i = 0; i < n; ++i) {
    int64_t input = dim(static_cast<int64_t>(i) + 2);
    int64_t output = (input - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - pad_begin[i] - pad_end[i] +
                     output_padding[i];
    if (output < 1)
      throw UserError(str_cat("conv_transpose: padding ", list_string(options.padding), " leaves no output of input ",
                              shape_string(shape()), " with weight ", shape_string(weight.shape()), " (spatial axis ",
                              i, ")"));
    axes.push_back(axis_phases(input, kernel[i], stride[i], dilation[i], pad_begin[i], output));
  }
  std::vector<const AxisPhase*> phase(n, nullptr);
  Tensor result = interleave_phases(cast(compute), regrouped.cast(compute), groups, axes, phase, 0);
  Ranges crop = full_ranges(result);
  for (size_t i = 0; i < n; ++i) crop[i + 2] = {axes[i].offset, axes[i].offset + axes[i].output};
  result = result.shrink(crop);
  if (bias.defined()) result = result + per_channel(bias.cast(compute), result, "conv_transpose", "bias");
  return result.cast(type);
}

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
  std::vector<int64_t> ends;
  for (size_t i = 0; i < g.pad_end.size(); ++i) ends.push_back(g.pad_end[i] + g.extra_end[i]);
  // A computed input with padding is realised first, as Tensor::conv does. Otherwise the padded
  // value (where(inside, x, lowest)) is what the windows read several times, so it is stored, and
  // that kernel computes the input through a mask per element on rows of odd width: Inception-v2's
  // stem BatchNorm + ReLU into a ceil_mode pool's 113×113 rows ran at 3.5 GB/s.
  bool pads = pads_anything(g.pad_begin, ends);
  Tensor source = pads && computes(*this) ? contiguous(*this) : *this;
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
    if (i > 0) pooled = contiguous(pooled);
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
