// Movement composites (transpose … cumsum), built only from the primitives of tensor.cpp and other
// Tensor methods. Wherever possible an op is a chain of views, so it costs nothing by itself: rangeify
// turns it into index arithmetic inside whichever kernel reads it. Where a value comes from data
// (gather/take indices) the op becomes a one-hot reduction; its cost is documented at the op.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "support/error.h"
#include "tensor/tensor_internal.h"

namespace kiln {

Ranges full_ranges(const Tensor& t) {
  Ranges ranges;
  for (int64_t size : t.shape()) ranges.emplace_back(0, size);
  return ranges;
}

Tensor shrink_axis(const Tensor& t, int64_t axis, int64_t begin, int64_t end) {
  // (Dims: the other axes stay whole even when they are symbolic.)
  DimRanges ranges;
  for (const Dim& size : dims_of(t)) ranges.emplace_back(0, size);
  ranges[static_cast<size_t>(axis)] = {begin, end};
  return shrink_to(t, ranges);
}

namespace {


// Zero padding of one axis.
Tensor pad_axis_zero(const Tensor& t, int64_t axis, int64_t before, int64_t after) {
  std::vector<int64_t> pads(2 * static_cast<size_t>(axis) + 2, 0);
  pads[2 * static_cast<size_t>(axis)] = before;
  pads[2 * static_cast<size_t>(axis) + 1] = after;
  return pad_zero(t, pads);
}

// Replaces axis `axis` of `t` (which must have `sizes`' product elements) with the axes `sizes`.
Tensor split_axis(const Tensor& t, int64_t axis, const Shape& sizes) {
  Shape shape = t.shape();
  auto position = shape.begin() + axis;
  position = shape.erase(position);
  shape.insert(position, sizes.begin(), sizes.end());
  return t.reshape(shape);
}

// Replaces axes [axis, axis + count) with one axis holding their product.
Tensor merge_axes(const Tensor& t, int64_t axis, int64_t count) {
  Dims shape = dims_of(t);
  auto first = shape.begin() + axis, last = first + count;
  Dim product = std::accumulate(first, last, Dim(1), std::multiplies<>());
  first = shape.erase(first, last);
  shape.insert(first, product);
  return reshape_to(t, shape);
}

// `t` repeated `times` times along `axis` as a view: (…, n, …) → (…, times·n, …), tile order.
Tensor tile_axis(const Tensor& t, int64_t axis, int64_t times) {
  Tensor with_repeat_axis = t.unsqueeze(axis);
  Shape expanded = with_repeat_axis.shape();
  expanded[static_cast<size_t>(axis)] = times;
  return merge_axes(with_repeat_axis.expand(expanded), axis, 2);
}

// A bool tensor of `t`'s padded shape that is true where the padded value comes from `t` (a padded
// constant true: rangeify lowers it to the bounds test of the padding itself, so it is free).
Tensor padded_mask(const Dims& shape, const Dims& pads) {
  return pad_zero_dims(broadcast_to(Tensor::scalar(1.0, ScalarType::Bool), shape), pads);
}

// The one-element slice [index, index+1) of an axis, broadcast to `count` elements.
Tensor edge_block(const Tensor& t, int64_t axis, int64_t index, int64_t count) {
  Tensor edge = shrink_axis(t, axis, index, index + 1);
  Shape shape = edge.shape();
  shape[static_cast<size_t>(axis)] = count;
  return edge.expand(shape);
}

// Reflect padding of one axis by (before, after) >= 0, numpy's "reflect" (the edge is not repeated).
// Pads below the axis size take two flipped slices and a concat; larger pads use the general form:
// the reflected sequence is periodic with period 2(n-1), so it is one period tiled and shrunk.
Tensor reflect_axis(const Tensor& t, int64_t axis, int64_t before, int64_t after) {
  int64_t n = t.shape()[static_cast<size_t>(axis)];
  if (before == 0 && after == 0) return t;
  if (n == 0) throw UserError(str_cat("pad: reflect padding of an empty axis ", axis, " of shape ", shape_string(t.shape())));
  if (n == 1) {  // a period of length 0: every reflection is the one element (numpy agrees)
    return Tensor::concat({edge_block(t, axis, 0, before), t, edge_block(t, axis, 0, after)}, axis);
  }
  if (before < n && after < n) {
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(shrink_axis(t, axis, 1, before + 1).flip({axis}));
    parts.push_back(t);
    if (after > 0) parts.push_back(shrink_axis(t, axis, n - 1 - after, n - 1).flip({axis}));
    return Tensor::concat(parts, axis);
  }
  int64_t period = 2 * (n - 1);
  Tensor one_period = Tensor::concat({t, shrink_axis(t, axis, 1, n - 1).flip({axis})}, axis);
  int64_t total = before + n + after;
  int64_t start = ((-before) % period + period) % period;
  int64_t copies = (start + total + period - 1) / period;
  return shrink_axis(tile_axis(one_period, axis, copies), axis, start, start + total);
}

Tensor edge_axis(const Tensor& t, int64_t axis, int64_t before, int64_t after) {
  int64_t n = t.shape()[static_cast<size_t>(axis)];
  if (before == 0 && after == 0) return t;
  if (n == 0) throw UserError(str_cat("pad: edge padding of an empty axis ", axis, " of shape ", shape_string(t.shape())));
  std::vector<Tensor> parts;
  if (before > 0) parts.push_back(edge_block(t, axis, 0, before));
  parts.push_back(t);
  if (after > 0) parts.push_back(edge_block(t, axis, n - 1, after));
  return Tensor::concat(parts, axis);
}

// x[..., indices, ...] along `axis` of `prepared` by a one-hot reduction. `prepared` has the data
// axis (size n) at `axis` and size-1 axes where the index axes go; `index` (already wrapped to
// [0, n)) has size 1 at `axis`. Both broadcast to one shape; the data axis is then summed away.
// Each output element costs n compares and adds (O(out·n)); an index outside [0, n) selects
// nothing and gives 0. A sum of one selected value and zeros is exact, except that -0.0 becomes 0.0.
Tensor one_hot_select(const Tensor& prepared, const Tensor& index, int64_t axis, const Dim& n) {
  Dims arange_shape(static_cast<size_t>(prepared.ndim()), 1);
  arange_shape[static_cast<size_t>(axis)] = n;
  // (A symbolic n, a batch·sequence axis, is a reduction over a symbolic axis.)
  Tensor positions = reshape_to(arange_dim(n, index.dtype()), arange_shape);
  Tensor hit = index.eq(positions);
  Tensor zero = Tensor::scalar(0.0, prepared.dtype());
  Tensor picked = hit.where(prepared, zero);
  // bool has no exact sum in its own type (sum counts as i64): "any" is max.
  if (prepared.dtype() == ScalarType::Bool) return picked.max({axis});
  return picked.sum({axis});
}

// Indices as a signed integer tensor with negative entries counted from the end of an axis of n.
Tensor wrap_indices(const Tensor& indices, const Dim& n, std::string_view operation) {
  ScalarType type = indices.dtype();
  if (type == ScalarType::Float16 || type == ScalarType::BFloat16 || type == ScalarType::Float32 ||
      type == ScalarType::Float64 || type == ScalarType::Bool)
    throw UserError(str_cat(operation, ": indices must be integers, got ", scalar_type_name(type)));
  Tensor wide = indices.cast(ScalarType::Int64);
  Tensor size = dim_tensor(n, ScalarType::Int64);
  return wide.lt(Tensor::scalar(0.0, ScalarType::Int64)).where(wide + size, wide);
}

// Σ_{j ≤ i} x[j] (inclusive) or Σ_{j < i} x[j] along `axis` as one masked reduction: x gets a new
// axis i in front of `axis`, and the mask keeps j ≤ i (or j < i).
Tensor masked_prefix_sum(const Tensor& x, int64_t axis, bool inclusive) {
  int64_t n = x.shape()[static_cast<size_t>(axis)];
  Tensor rows = x.unsqueeze(axis);
  Shape expanded = rows.shape();
  expanded[static_cast<size_t>(axis)] = n;
  Shape i_shape(expanded.size(), 1), j_shape(expanded.size(), 1);
  i_shape[static_cast<size_t>(axis)] = n;
  j_shape[static_cast<size_t>(axis) + 1] = n;
  Tensor i = Tensor::arange(n, ScalarType::Int32).reshape(i_shape);
  Tensor j = Tensor::arange(n, ScalarType::Int32).reshape(j_shape);
  Tensor dropped = inclusive ? i.lt(j) : i.lt(j + 1);  // j > i, or j >= i
  Tensor zero = Tensor::scalar(0.0, x.dtype());
  return dropped.where(zero, rows.expand(expanded)).sum({axis + 1});
}

}  // namespace

Tensor Tensor::transpose(int64_t axis_a, int64_t axis_b) const {
  int64_t a = normalize_axis(axis_a, ndim(), "transpose"), b = normalize_axis(axis_b, ndim(), "transpose");
  std::vector<int64_t> order(static_cast<size_t>(ndim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<size_t>(a)], order[static_cast<size_t>(b)]);
  return permute(order);
}

Tensor Tensor::squeeze(std::vector<int64_t> axes) const {
  Dims dims = dims_of(*this);
  std::vector<bool> drop(dims.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < drop.size(); ++i) drop[i] = dims[i].is(1);
  } else {
    for (int64_t axis : normalize_axes(axes, ndim(), "squeeze")) {
      if (!dims[static_cast<size_t>(axis)].is(1))
        throw UserError(str_cat("squeeze: axis ", axis, " of shape ", dims_string(dims), " has size ",
                                dims[static_cast<size_t>(axis)], ", not 1"));
      drop[static_cast<size_t>(axis)] = true;
    }
  }
  Dims kept;
  for (size_t i = 0; i < drop.size(); ++i)
    if (!drop[i]) kept.push_back(dims[i]);
  return reshape_to(*this, kept);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  int64_t position = normalize_axis(axis, ndim() + 1, "unsqueeze");
  Dims out = dims_of(*this);
  out.insert(out.begin() + position, 1);
  return reshape_to(*this, out);
}

Tensor Tensor::flatten(int64_t start_axis, int64_t end_axis) const {
  if (ndim() == 0) {  // a scalar flattens to one element, like torch
    if ((start_axis != 0 && start_axis != -1) || (end_axis != 0 && end_axis != -1))
      throw UserError(str_cat("flatten: axes (", start_axis, ", ", end_axis, ") are out of range for a scalar"));
    return reshape({1});
  }
  int64_t start = normalize_axis(start_axis, ndim(), "flatten"), end = normalize_axis(end_axis, ndim(), "flatten");
  if (start > end)
    throw UserError(str_cat("flatten: start axis ", start_axis, " comes after end axis ", end_axis, " for shape ",
                            shape_string(shape())));
  return merge_axes(*this, start, end - start + 1);
}

Tensor Tensor::pad(std::vector<int64_t> pads, PadMode mode, double value) const {
  if (pads.size() % 2 != 0 || static_cast<int64_t>(pads.size()) > 2 * ndim())
    throw UserError(str_cat("pad: ", pads.size(), " pads for a tensor of shape ", dims_string(dims_of(*this)),
                            " (need (before, after) pairs for at most ", ndim(), " axes)"));
  // Negative pads crop first, in every mode; what remains is non-negative padding. Padding an axis
  // needs no size (it may be symbolic); cropping one does.
  DimRanges crop;
  for (const Dim& size : dims_of(*this)) crop.emplace_back(0, size);
  std::vector<int64_t> grow(pads.size(), 0);
  for (size_t axis = 0; axis < pads.size() / 2; ++axis) {
    int64_t before = pads[2 * axis], after = pads[2 * axis + 1];
    int64_t cut_before = std::max<int64_t>(0, -before), cut_after = std::max<int64_t>(0, -after);
    if (cut_before + cut_after > 0) {  // cropping needs the size (padding a symbolic axis does not)
      int64_t size = dim(static_cast<int64_t>(axis));
      if (cut_before + cut_after > size)
        throw UserError(str_cat("pad: pads (", before, ", ", after, ") crop more than the ", size,
                                " elements of axis ", axis, " of shape ", dims_string(dims_of(*this))));
      crop[axis] = {cut_before, size - cut_after};
    }
    grow[2 * axis] = std::max<int64_t>(0, before);
    grow[2 * axis + 1] = std::max<int64_t>(0, after);
  }
  Tensor cropped = shrink_to(*this, crop);
  switch (mode) {
    case PadMode::Constant: {
      Tensor padded = pad_zero(cropped, grow);
      // Zero padding is the primitive; -0.0 is not zero padding (its sign must survive).
      if ((value == 0.0 && !std::signbit(value)) || dims_of(padded) == dims_of(cropped)) return padded;
      // Padding with a value v: where(inside, x, v). The mask costs no memory (see padded_mask).
      Tensor fill = Tensor::scalar(value, dtype());
      return padded_mask(dims_of(cropped), to_dims(grow)).where(padded, fill);
    }
    case PadMode::Reflect: {
      Tensor result = cropped;
      for (size_t axis = 0; axis < grow.size() / 2; ++axis)
        result = reflect_axis(result, static_cast<int64_t>(axis), grow[2 * axis], grow[2 * axis + 1]);
      return result;
    }
    case PadMode::Edge: {
      Tensor result = cropped;
      for (size_t axis = 0; axis < grow.size() / 2; ++axis)
        result = edge_axis(result, static_cast<int64_t>(axis), grow[2 * axis], grow[2 * axis + 1]);
      return result;
    }
  }
  throw UserError("pad: unknown pad mode");
}

// A strided slice is a view: shrink to whole groups of `step` elements, reshape (count, step) and
// keep column 0, so element i reads source index start + i·step. That is a pure affine index that
// fuses into any consumer at no cost; a gather would instead be a one-hot reduction over the axis.
// Negative steps flip the axis first (index n-1-i), which is again only index arithmetic.
// The smaller of two sizes (Dim's min, which Tensor's own min hides inside its members).
static Dim smaller_dim(const Dim& a, const Dim& b) { return min(a, b); }

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  int64_t a = normalize_axis(axis, ndim(), "slice");
  if (step == 0) throw UserError("slice: step must not be zero");
  Dim size = dim_of(*this, a);
  if (!size.is_known()) {
    // A symbolic axis: the whole of it (start 0, stop past its largest size), or a fixed prefix
    // range within its smallest size (shrink_axis refuses anything else, naming the axis).
    if (step == 1 && start == 0 && stop >= size.max()) return *this;
    // A stop counted from the end (x[:, :-1], as torch's same-padding trims a conv's extra frame)
    // cuts a known count off the end, where the axis always holds more than it.
    if (step == 1 && start >= 0 && stop < 0 && stop > -size.min() + start) {
      DimRanges ranges;
      for (const Dim& length : dims_of(*this)) ranges.emplace_back(0, length);
      ranges[static_cast<size_t>(a)] = {start, size + stop};
      return shrink_within(*this, ranges);
    }
    // A stop past the axis' smallest size clamps to it, as Python's slice does: the first `stop`
    // elements, or all when fewer (a detector's first 300 detections of a count the run decides).
    if (step == 1 && start >= 0 && start <= size.min() && stop >= start && stop > size.min()) {
      DimRanges ranges;
      for (const Dim& length : dims_of(*this)) ranges.emplace_back(0, length);
      ranges[static_cast<size_t>(a)] = {Dim(start), smaller_dim(Dim(stop), size)};
      return shrink_within(*this, ranges);
    }
    if (step != 1 || start < 0 || stop < 0)
      throw UserError(str_cat("unsupported: slice [", start, ":", stop, ":", step, "] of axis ", a, " of symbolic size ", size));
    return shrink_axis(*this, a, start, std::max(start, stop));
  }
  int64_t n = size.value();
  // Python's slice.indices(n): negative bounds count from the end, then clamp.
  auto clamp_bound = [&](int64_t bound, int64_t low, int64_t high) {
    if (bound < 0) bound += n;
    return std::clamp(bound, low, high);
  };
  int64_t first, last;  // the first index taken, and the bound it runs toward
  if (step > 0) {
    first = clamp_bound(start, 0, n);
    last = clamp_bound(stop, 0, n);
  } else {
    first = clamp_bound(start, -1, n - 1);
    last = clamp_bound(stop, -1, n - 1);
  }
  int64_t count = step > 0 ? (last > first ? (last - first + step - 1) / step : 0)
                           : (first > last ? (first - last + (-step) - 1) / (-step) : 0);
  Tensor source = *this;
  int64_t stride = step;
  if (step < 0) {
    source = flip({a});
    first = n - 1 - first;  // index in the flipped axis
    stride = -step;
  }
  if (count == 0) return shrink_axis(source, a, 0, 0);
  if (stride == 1) return shrink_axis(source, a, first, first + count);
  // Take count·stride elements from `first`, padding the tail when the source is too short (the
  // padding lies in the discarded columns, so it is never read).
  int64_t available = n - first, wanted = count * stride;
  Tensor window = shrink_axis(source, a, first, first + std::min(available, wanted));
  if (available < wanted) window = pad_axis_zero(window, a, 0, wanted - available);
  Tensor grouped = split_axis(window, a, {count, stride});
  return merge_axes(shrink_axis(grouped, a + 1, 0, 1), a, 2);
}

// Concatenation pads every input to the full length of the axis and picks each element from the
// one input whose range holds it: a chain of where() on padding masks. The masks are bounds tests
// and each input's load is guarded by its own padding, so the whole concat is one kernel that
// loads exactly one input per element. (Adding the zero-padded inputs would fuse too, but turns
// -0.0 into 0.0 and needs a sum per dtype; where is exact for every dtype, bool included.)
Tensor Tensor::concat(const std::vector<Tensor>& tensors, int64_t axis) {
  if (tensors.empty()) throw UserError("concat: no tensors");
  for (const Tensor& t : tensors)
    if (!t.defined()) throw UserError("concat: an input is an empty (default-constructed) Tensor");
  const Tensor& first = tensors[0];
  if (first.ndim() == 0) throw UserError("concat: cannot concatenate scalars (0-d tensors)");
  int64_t a = normalize_axis(axis, first.ndim(), "concat");
  ScalarType type = first.dtype();
  Dim total = 0;
  // Any axis may be symbolic: the others where every part has the same expression (a batch of any
  // size), the concatenated one in any part (a KV cache of any length, then the new token).
  Dims first_dims = dims_of(first);
  for (const Tensor& t : tensors) {
    Dims dims = dims_of(t);
    bool fits = dims.size() == first_dims.size();
    for (size_t i = 0; fits && i < dims.size(); ++i) fits = static_cast<int64_t>(i) == a || dims[i] == first_dims[i];
    if (!fits)
      throw UserError(str_cat("concat: shapes ", dims_string(first_dims), " and ", dims_string(dims),
                              " differ outside axis ", axis));
    total = total + dim_of(t, a);
    type = promote_types(DType(type), DType(t.dtype())).scalar();
  }
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors)
    if (!dim_of(t, a).is(0)) parts.push_back(t.cast(type));
  if (parts.empty()) return tensors[0].cast(type);
  if (parts.size() == 1) return parts[0];
  // Fill from the last input backwards: the last part is the default, each earlier one overrides
  // its own range.
  Dim offset = total;
  Tensor result;
  for (size_t i = parts.size(); i-- > 0;) {
    Dim size = dim_of(parts[i], a);
    offset = offset - size;
    Dims pads(2 * static_cast<size_t>(a) + 2, 0);
    pads[2 * static_cast<size_t>(a)] = offset;
    pads[2 * static_cast<size_t>(a) + 1] = total - offset - size;  // (simplifies to the later parts' sizes)
    Tensor padded = pad_zero_dims(parts[i], pads);
    result = result.defined() ? padded_mask(dims_of(parts[i]), pads).where(padded, result) : padded;
  }
  return result;
}

Tensor Tensor::stack(const std::vector<Tensor>& tensors, int64_t axis) {
  if (tensors.empty()) throw UserError("stack: no tensors");
  for (const Tensor& t : tensors) {
    if (!t.defined()) throw UserError("stack: an input is an empty (default-constructed) Tensor");
    if (t.shape() != tensors[0].shape())
      throw UserError(str_cat("stack: shapes ", shape_string(tensors[0].shape()), " and ", shape_string(t.shape()),
                              " differ"));
  }
  int64_t a = normalize_axis(axis, tensors[0].ndim() + 1, "stack");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(a));
  return concat(expanded, a);
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int64_t axis) const {
  int64_t a = normalize_axis(axis, ndim(), "split");
  // The split axis must be known; the others may be symbolic (a count of detections split into
  // their four coordinates).
  Dim length = dim_of(*this, a);
  if (!length.is_known())
    throw UserError(str_cat("unsupported: split of axis ", a, " of symbolic size ", length, " (shape ",
                            dims_string(dims_of(*this)), ")"));
  int64_t n = length.value(), total = 0;
  for (int64_t size : sizes) {
    if (size < 0) throw UserError(str_cat("split: negative size ", size));
    total += size;
  }
  if (total != n)
    throw UserError(str_cat("split: sizes add up to ", total, " but axis ", axis, " of shape ", dims_string(dims_of(*this)),
                            " has ", n, " elements"));
  std::vector<Tensor> parts;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    parts.push_back(shrink_axis(*this, a, offset, offset + size));
    offset += size;
  }
  return parts;
}

// torch.gather: out[i…, j, k…] = this[i…, indices[i…, j, k…], k…]. Where indices are smaller than
// this on the other axes, this is cropped to them (torch reads only that corner).
Tensor Tensor::gather(int64_t axis, const Tensor& indices) const {
  int64_t a = normalize_axis(axis, ndim(), "gather");
  if (indices.ndim() != ndim())
    throw UserError(str_cat("gather: indices of shape ", shape_string(indices.shape()), " must have as many axes as ",
                            shape_string(shape())));
  int64_t n = shape()[static_cast<size_t>(a)];
  Ranges crop;
  for (int64_t i = 0; i < ndim(); ++i) {
    int64_t want = indices.shape()[static_cast<size_t>(i)], have = shape()[static_cast<size_t>(i)];
    if (i != a && want > have)
      throw UserError(str_cat("gather: indices of shape ", shape_string(indices.shape()), " exceed ", shape_string(shape()),
                              " on axis ", i));
    crop.emplace_back(0, i == a ? have : want);
  }
  if (indices.numel() == 0) return Tensor::zeros(indices.shape(), dtype());
  if (n == 0) throw UserError(str_cat("gather: axis ", axis, " of shape ", shape_string(shape()), " is empty"));
  // Data: (…, 1, n, …) — the index axis a, then the data axis a+1. Indices: (…, m, 1, …).
  Tensor prepared = shrink(crop).unsqueeze(a);
  Tensor index = wrap_indices(indices, n, "gather").unsqueeze(a + 1);
  return one_hot_select(prepared, index, a + 1, n);
}

// numpy.take along an axis: the shape becomes this.shape[:axis] + indices.shape + this.shape[axis+1:].
Tensor Tensor::take(const Tensor& indices, int64_t axis) const {
  int64_t a = normalize_axis(axis, ndim(), "take");
  // Dims: the indices (a batch of token ids) and the data axis may have symbolic sizes.
  Dims dims = dims_of(*this), index_dims = dims_of(indices);
  Dim n = dims[static_cast<size_t>(a)];
  Dims out_shape(dims.begin(), dims.begin() + a);
  out_shape.insert(out_shape.end(), index_dims.begin(), index_dims.end());
  out_shape.insert(out_shape.end(), dims.begin() + a + 1, dims.end());
  if (dims_numel(out_shape).is(0)) return expand_to(Tensor::scalar(0.0, dtype()), out_shape);
  if (n.is(0)) throw UserError(str_cat("take: axis ", axis, " of shape ", dims_string(dims), " is empty"));
  // Data: (pre…, 1 per index axis, n, post…); indices: (1 per pre axis, index axes…, 1, 1 per post axis).
  auto index_axes = static_cast<int64_t>(index_dims.size());
  Dims data_shape(dims.begin(), dims.begin() + a);
  data_shape.insert(data_shape.end(), static_cast<size_t>(index_axes), 1);
  data_shape.insert(data_shape.end(), dims.begin() + a, dims.end());
  Dims index_shape(static_cast<size_t>(a), 1);
  index_shape.insert(index_shape.end(), index_dims.begin(), index_dims.end());
  index_shape.insert(index_shape.end(), dims.size() - static_cast<size_t>(a), 1);
  Tensor index = reshape_to(wrap_indices(indices, n, "take"), index_shape);
  return one_hot_select(reshape_to(*this, data_shape), index, a + index_axes, n);
}

// Prefix sums. Short axes (up to 64): one masked reduction, out[i] = Σ_j x[j]·[j ≤ i], one kernel
// with O(n²) work along the axis. Longer axes: a log-step scan (Hillis-Steele): after pass p every
// element holds the sum of the 2^p elements ending at it, x_{p+1}[i] = x_p[i] + x_p[i - 2^p]; ⌈log2 n⌉
// passes of one add per element, each materialised (O(n log n) work; a pass fused into the next
// would read its input at two shifts and double the work per level). The additions happen in a
// different order than a running sum, so floats differ from one by rounding (the error grows with
// log n instead of n); integers are exact.
Tensor Tensor::cumsum(int64_t axis) const {
  if (ndim() == 0) return reshape({1}).cumsum(0).reshape({});
  int64_t a = normalize_axis(axis, ndim(), "cumsum");
  int64_t n = shape()[static_cast<size_t>(a)];
  // Accumulate like sum (half floats in f32, bool counted in i64), rounding once at the end.
  ScalarType out_type = dtype() == ScalarType::Bool ? ScalarType::Int64 : dtype();
  ScalarType acc_type = (dtype() == ScalarType::Float16 || dtype() == ScalarType::BFloat16) ? ScalarType::Float32
                                                                                          : out_type;
  Tensor x = cast(acc_type);
  if (n <= 1) return x.cast(out_type);
  constexpr int64_t kDirectLimit = 64;
  if (n <= kDirectLimit) return masked_prefix_sum(x, a, true).cast(out_type);
  Tensor scan = x;
  for (int64_t shift = 1; shift < n; shift *= 2)
    scan = contiguous(scan + pad_axis_zero(shrink_axis(scan, a, 0, n - shift), a, shift, 0));
  return scan.cast(out_type);
}

}  // namespace kiln
