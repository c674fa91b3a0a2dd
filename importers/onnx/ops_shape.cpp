// ONNX shape and indexing operators: reshaping and reordering views, slicing and padding,
// shape queries and constant generators, and the gathers. Operands that describe shapes (Reshape's
// shape, Slice's starts, Pad's pads…) are realized with input_ints(), which folds shape subgraphs.
#include <algorithm>
#include <limits>
#include <numeric>

#include "op_helpers.h"
#include "support/error.h"
#include "support/int128.h"
#include "support/limits.h"
#include "op_registry.h"
#include "shape_values.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

Outputs reshape(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Opset 5 moved the target shape from an attribute to an input, which may be a shape value
  // computed from a symbolic shape (its entries size expressions).
  Dims target = node.opset() < 5 ? to_dims(node.attr_ints("shape")) : node.input_dims(1);
  // allowzero (opset 14): 0 is a real zero-size dimension; otherwise it copies the input's.
  bool allow_zero = node.opset() >= 14 && node.attr_int("allowzero", 0) != 0;
  // Dims: a 0 copies the input's dimension, which may be symbolic (a [batch, sequence] input).
  if (!allow_zero) {
    for (size_t i = 0; i < target.size(); ++i) {
      if (!target[i].is(0)) continue;
      if (static_cast<int64_t>(i) >= x.ndim()) node.fail("shape entry 0 at position " + std::to_string(i) + " has no input dimension to copy");
      target[i] = dim_of(x, static_cast<int64_t>(i));
    }
  }
  if (has_symbolic_shape(x) || !all_known(target)) return {reshape_to(x, target)};
  return {x.reshape(known_sizes(target))};
}

Outputs flatten(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t rank = x.ndim();
  int64_t axis = node.attr_int("axis", 1);
  if (axis < 0) axis += rank;  // negative axes since opset 11
  if (axis < 0 || axis > rank) node.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (has_symbolic_shape(x)) {  // a batch of any size: the two products as Dims
    Dims dims = dims_of(x);
    auto middle = dims.begin() + axis;
    return {reshape_to(x, {std::accumulate(dims.begin(), middle, Dim(1), std::multiplies<>()),
                           std::accumulate(middle, dims.end(), Dim(1), std::multiplies<>())})};
  }
  const Shape& shape = x.shape();
  return {x.reshape({shape_product(shape, 0, static_cast<size_t>(axis)),
                     shape_product(shape, static_cast<size_t>(axis), shape.size())})};
}

Outputs squeeze(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  // Opset 13 moved axes from an attribute to an optional input; absent = every size-1 axis.
  std::vector<int64_t> axes = ints_attr_or_input(node, "axes", 1, 13).value_or(std::vector<int64_t>{});
  if (axes.empty()) return {x.squeeze({})};
  axes = normalize_axes(node, axes, x.ndim());
  for (int64_t axis : axes)
    if (x.dim(axis) != 1) node.fail("cannot squeeze axis " + std::to_string(axis) + " of size " + std::to_string(x.dim(axis)));
  return {x.squeeze(axes)};
}

Outputs unsqueeze(const OnnxNode& node) {
  Tensor x = node.input(0);
  // Opset 13 moved axes from an attribute to an input. The axes index the output's dimensions.
  std::optional<std::vector<int64_t>> given = ints_attr_or_input(node, "axes", 1, 13);
  if (!given) node.fail("missing axes");
  int64_t out_rank = x.ndim() + static_cast<int64_t>(given->size());
  std::vector<int64_t> axes = normalize_axes(node, *given, out_rank);
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) node.fail("repeated axis");
  for (int64_t axis : axes) x = x.unsqueeze(axis);
  return {x};
}

Outputs transpose(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> order;
  if (node.has_attribute("perm")) {
    order = normalize_axes(node, node.attr_ints("perm"), x.ndim());
  } else {
    for (int64_t i = x.ndim() - 1; i >= 0; --i) order.push_back(i);
  }
  return {x.permute(order)};
}

Outputs expand(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  Dims target = node.input_dims(1);
  // ONNX Expand broadcasts both ways: a target 1 keeps the input's dimension.
  if (all_known(target) && !has_symbolic_shape(x)) return {x.expand(broadcast_shapes(node, x.shape(), known_sizes(target)))};
  Dims dims = dims_of(x);
  size_t rank = std::max(dims.size(), target.size());
  Dims result(rank, Dim(1));
  for (size_t i = 0; i < rank; ++i) {
    Dim a = i + dims.size() >= rank ? dims[i + dims.size() - rank] : Dim(1);
    Dim b = i + target.size() >= rank ? target[i + target.size() - rank] : Dim(1);
    if (a.is(1)) result[i] = b;
    else if (b.is(1) || a == b) result[i] = a;
    else node.fail(str_cat("cannot expand shape ", dims_string(dims), " to ", dims_string(target)));
  }
  return {broadcast_to(x, result)};
}

Outputs tile(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> repeats = node.input_ints(1);
  if (static_cast<int64_t>(repeats.size()) != x.ndim()) node.fail("repeats must have one entry per input axis");
  // (1, d0, 1, d1, …) → expand (r0, d0, r1, d1, …) → merge pairs: each axis repeated as a block.
  Shape interleaved, expanded, result;
  for (size_t i = 0; i < repeats.size(); ++i) {
    interleaved.insert(interleaved.end(), {1, x.shape()[i]});
    expanded.insert(expanded.end(), {repeats[i], x.shape()[i]});
    result.push_back(repeats[i] * x.shape()[i]);
  }
  return {x.reshape(interleaved).expand(expanded).reshape(result)};
}

Outputs concat(const OnnxNode& node) {
  std::vector<Tensor> parts;
  for (size_t i = 0; i < node.input_count(); ++i)
    if (node.has_input(i)) parts.push_back(node.input(i));
  if (parts.empty()) node.fail("no inputs");
  int64_t axis = normalize_axis(node, node.attr_int("axis"), parts[0].ndim());
  return {Tensor::concat(parts, axis)};
}

Outputs split(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", 0), x.ndim());
  Dim split_length = dims_of(x)[static_cast<size_t>(axis)];
  if (!split_length.is_known())
    node.fail(str_cat("unsupported: split of axis ", axis, " of symbolic size ", split_length));
  int64_t length = split_length.value();
  // Opset 13 moved `split` from an attribute to an optional input; opset 18 added num_outputs.
  std::vector<int64_t> sizes = ints_attr_or_input(node, "split", 1, 13).value_or(std::vector<int64_t>{});
  if (sizes.empty()) {
    // No sizes: num_outputs (opset 18) or, before, the node's output count gives the number of
    // chunks, each ceil(length / count) long with a smaller last one (opset 18's rule; before
    // 18 the length had to divide evenly, which the same rule covers).
    int64_t count = node.opset() >= 18 && node.has_attribute("num_outputs") ? node.attr_int("num_outputs")
                                                                             : static_cast<int64_t>(node.output_count());
    if (count <= 0) node.fail("Split needs at least one output");
    int64_t chunk = (length + count - 1) / count;
    for (int64_t start = 0; start < length; start += chunk) sizes.push_back(std::min(chunk, length - start));
    while (static_cast<int64_t>(sizes.size()) < count) sizes.push_back(0);
  }
  return x.split(sizes, axis);
}

// Slice (opset 10 on) whose ends hold symbolic sizes: known starts, steps of 1, and each end within
// the axis for every value of the variables (ONNX's clamping would otherwise depend on the run).
Tensor slice_to_sizes(const OnnxNode& node, const Tensor& x, const Dims& ends) {
  std::vector<int64_t> starts = node.input_ints(1), axes, steps;
  if (node.has_input(3)) axes = node.input_ints(3);
  if (node.has_input(4)) steps = node.input_ints(4);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    node.fail("starts, ends, axes and steps differ in length");
  Tensor result = x;
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = normalize_axis(node, axes[i], x.ndim());
    if (ends[i].is_known()) {
      result = result.slice(axis, starts[i], ends[i].value(), steps[i]);
      continue;
    }
    if (steps[i] != 1 || starts[i] < 0)
      node.fail(str_cat("unsupported: a symbolic end (", ends[i], ") with start ", starts[i], " and step ", steps[i],
                        " (a known start >= 0 and step 1 only)"));
    DimRanges ranges;
    for (const Dim& size : dims_of(result)) ranges.emplace_back(0, size);
    ranges[static_cast<size_t>(axis)] = {starts[i], ends[i]};
    result = shrink_to(result, ranges);
  }
  return result;
}

Outputs slice(const OnnxNode& node) {
  Tensor x = node.input(0);
  // Opset 10 moved starts/ends/axes to inputs and added steps.
  std::vector<int64_t> starts, ends, axes, steps;
  if (node.opset() < 10) {
    starts = node.attr_ints("starts");
    ends = node.attr_ints("ends");
    axes = node.attr_ints("axes", std::vector<int64_t>{});
  } else {
    // Ends computed from a symbolic shape (a table of positions cut to the sequence's length):
    // each such axis is a view from a known start to that size, at step 1.
    Dims symbolic_ends = node.input_dims(2);
    if (!all_known(symbolic_ends)) return {slice_to_sizes(node, x, symbolic_ends)};
    starts = node.input_ints(1);
    ends = node.input_ints(2);
    if (node.has_input(3)) axes = node.input_ints(3);
    if (node.has_input(4)) steps = node.input_ints(4);
  }
  if (ends.size() != starts.size()) node.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) node.fail("starts, ends, axes and steps differ in length");
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t axis = normalize_axis(node, axes[i], x.ndim());
    if (steps[i] == 0) node.fail("step must not be zero");
    // Tensor::slice clamps like Python's slice, which is ONNX's rule for out-of-range bounds
    // (INT64_MAX / INT64_MIN included).
    x = x.slice(axis, starts[i], ends[i], steps[i]);
  }
  return {x};
}

// Wrap padding (opset 19) per axis: the last `before` elements go in front, the first `after` behind.
Tensor wrap_pad(const OnnxNode& node, Tensor x, const std::vector<int64_t>& pads) {
  size_t rank = pads.size() / 2;
  for (size_t axis = 0; axis < rank; ++axis) {
    int64_t before = pads[2 * axis], after = pads[2 * axis + 1];
    auto a = static_cast<int64_t>(axis);
    int64_t n = x.dim(a);
    if (before < 0 || after < 0) {
      x = x.slice(a, std::max<int64_t>(0, -before), n - std::max<int64_t>(0, -after));
      before = std::max<int64_t>(0, before);
      after = std::max<int64_t>(0, after);
      n = x.dim(a);
    }
    if (before == 0 && after == 0) continue;
    if (before > n || after > n) node.fail("unsupported: wrap padding larger than the axis");
    std::vector<Tensor> parts;
    if (before > 0) parts.push_back(x.slice(a, n - before, n));
    parts.push_back(x);
    if (after > 0) parts.push_back(x.slice(a, 0, after));
    x = Tensor::concat(parts, a);
  }
  return x;
}

Outputs pad(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t rank = x.ndim();
  std::string mode = node.attr_string("mode", "constant");
  std::vector<int64_t> onnx_pads;
  double value = 0.0;
  std::vector<int64_t> axes;
  if (node.opset() < 11) {
    // Opset 1 named the attribute "paddings"; 2 renamed it "pads". Opset 11 made both inputs.
    onnx_pads = node.has_attribute("pads") ? node.attr_ints("pads") : node.attr_ints("paddings");
    value = node.attr_float("value", 0.0);
  } else {
    onnx_pads = node.input_ints(1);
    if (node.has_input(2) && node.input(2).numel() > 0) value = node.input_doubles(2).at(0);
    if (node.has_input(3)) axes = normalize_axes(node, node.input_ints(3), rank);  // opset 18
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (onnx_pads.size() != 2 * axes.size()) node.fail("pads must hold a begin and an end per padded axis");
  // ONNX lists all begins then all ends; Tensor::pad wants (before, after) per axis.
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto axis = static_cast<size_t>(axes[i]);
    pads[2 * axis] = onnx_pads[i];
    pads[2 * axis + 1] = onnx_pads[i + axes.size()];
  }
  if (mode == "constant") return {x.pad(pads, PadMode::Constant, value)};
  if (mode == "reflect") return {x.pad(pads, PadMode::Reflect)};
  if (mode == "edge") return {x.pad(pads, PadMode::Edge)};
  if (mode == "wrap") return {wrap_pad(node, x, pads)};
  node.fail("unsupported: Pad mode '" + mode + "'");
}

// CenterCropPad (opset 18): each listed axis is centre-cropped or zero-padded to the target size;
// the odd element goes to the end in both cases (crop start ⌊(in−out)/2⌋, pad begin ⌊(out−in)/2⌋).
Outputs center_crop_pad(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  std::vector<int64_t> target = node.input_ints(1);
  std::vector<int64_t> axes;
  if (node.has_attribute("axes")) {
    axes = normalize_axes(node, node.attr_ints("axes"), x.ndim());
  } else {
    for (int64_t i = 0; i < x.ndim(); ++i) axes.push_back(i);
  }
  if (target.size() != axes.size()) node.fail("shape must have one entry per axis");
  std::vector<int64_t> pads(static_cast<size_t>(2 * x.ndim()), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t difference = target[i] - x.dim(axes[i]);
    int64_t before = difference >= 0 ? difference / 2 : -((-difference) / 2);
    pads[static_cast<size_t>(2 * axes[i])] = before;
    pads[static_cast<size_t>(2 * axes[i] + 1)] = difference - before;
  }
  return {x.pad(pads)};
}

Outputs shape(const OnnxNode& node) {
  Dims dims = dims_of(node.input(0));
  auto rank = static_cast<int64_t>(dims.size());
  // start/end (opset 15) take a clamped sub-range of the dimensions.
  int64_t start = node.opset() >= 15 ? node.attr_int("start", 0) : 0;
  int64_t end = node.opset() >= 15 ? node.attr_int("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  // Of a symbolic shape: a shape value, whose entries later shape inputs read as expressions.
  Dims values(dims.begin() + start, dims.begin() + std::max(start, end));
  if (!all_known(values)) return {shape_value_tensor(values, false)};
  return {int64_vector(known_sizes(values))};
}

Outputs size(const OnnxNode& node) {
  Dim count = dims_numel(dims_of(node.input(0)));
  if (!count.is_known()) return {shape_value_tensor({count}, true)};
  return {Tensor::from_vector(std::vector<int64_t>{count.value()}, {})};
}

Outputs constant_of_shape(const OnnxNode& node) {
  Dims dims = node.input_dims(0);
  Tensor value = node.has_attribute("value") ? node.attr_tensor("value") : Tensor::zeros({1}, ScalarType::Float32);
  if (value.numel() != 1) node.fail("value must hold one element");
  if (!all_known(dims)) return {broadcast_to(value.reshape({}), dims)};
  if (!node.has_attribute("value")) return {Tensor::zeros(known_sizes(dims), ScalarType::Float32)};
  return {value.reshape({}).expand(known_sizes(dims))};
}

Outputs range(const OnnxNode& node) {
  ScalarType type = node.input(0).dtype();
  // A limit computed from a symbolic shape (position ids: Range(0, sequence, 1)): start and delta
  // must then be constants (input_ints refuses symbolic ones by name), delta positive; the count is
  // max(ceil((limit - start) / delta), 0).
  if (node.input_count() == 3 && node.has_input(1) && shape_value_of(node.input(1))) {
    Dim limit = node.input_dims(1).at(0);
    int64_t first = node.input_ints(0).at(0), step = node.input_ints(2).at(0);
    if (step <= 0) node.fail("unsupported: a symbolic limit with a delta that is not positive");
    Dim count = max(limit - first + (step - 1), Dim(0)) / step;
    Tensor values = arange_dim(count, ScalarType::Int64) * int64_vector({step}).reshape({}) + int64_vector({first}).reshape({});
    return {values.cast(type)};
  }
  double start = node.input_doubles(0).at(0), limit = node.input_doubles(1).at(0), delta = node.input_doubles(2).at(0);
  if (delta == 0) node.fail("delta must not be zero");
  // ONNX: max(ceil((limit − start) / delta), 0) elements, start + i·delta.
  if (is_integral(type)) {
    // Exact in int64 (a double loses integers past 2^53); the count in 128 bits, as last - first
    // may not fit in 64, and checked against the tensor limit before anything is built: the
    // values stay a lazy arange, never a host vector of the whole count.
    int64_t first = node.input_ints(0).at(0), last = node.input_ints(1).at(0), step = node.input_ints(2).at(0);
    int128 span = static_cast<int128>(last) - first;
    int128 count = std::max<int128>(0, (span + step + (step > 0 ? -1 : 1)) / step);
    if (count > static_cast<int128>(limits::kMaxTensorBytes))
      node.fail(str_cat("start ", first, ", limit ", last, " and delta ", step, " make more than ",
                        limits::kMaxTensorBytes, " elements, past kiln's limit of bytes per tensor (docs/limits.md)"));
    auto elements = static_cast<int64_t>(count);
    if (std::string problem = tensor_limit_problem({elements}, type); !problem.empty()) node.fail("output " + problem);
    // Exact int64 scalars (Tensor::scalar takes a double).
    Tensor values = Tensor::arange(elements, ScalarType::Int64) * int64_vector({step}).reshape({}) +
                    int64_vector({first}).reshape({});
    return {values.cast(type)};
  }
  return {Tensor::arange(start, limit, delta, type)};
}

Outputs eye_like(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() != 2) node.fail("input must be 2-D");
  ScalarType type = node.has_attribute("dtype") ? scalar_type_from_onnx(static_cast<int32_t>(node.attr_int("dtype"))) : x.dtype();
  return {Tensor::eye(x.dim(0), x.dim(1), node.attr_int("k", 0), type)};
}

Outputs trilu(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() < 2) node.fail("input must have at least 2 dimensions");
  int64_t k = node.has_input(1) ? node.input_ints(1).at(0) : 0;
  bool upper = node.attr_int("upper", 1) != 0;
  int64_t rows = x.dim(-2), columns = x.dim(-1);
  // Keep element (i, j) when j − i ≥ k (upper) or j − i ≤ k (lower).
  Tensor offset = Tensor::arange(columns).reshape({1, columns}) - Tensor::arange(rows).reshape({rows, 1});
  Tensor bound = Tensor::scalar(static_cast<double>(k), ScalarType::Int64);
  Tensor keep = upper ? offset.ge(bound) : offset.le(bound);
  return {keep.where(x, Tensor::zeros({}, x.dtype()))};
}

Outputs gather(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", 0), x.ndim());
  return {x.take(node.input(1), axis)};  // negative indices wrap, as ONNX allows
}

Outputs gather_elements(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  int64_t axis = normalize_axis(node, node.attr_int("axis", 0), x.ndim());
  return {x.gather(axis, node.input(1))};
}

// GatherND: index tuples of length k address the first k data axes after batch_dims. Both are
// flattened to (B, …): the tuple becomes one linear index into the flattened (B·prod(d₀…d_{k−1}),
// rest…) data, then one take.
Outputs gather_nd(const OnnxNode& node) {
  // Dims: the data and the index tuples may have symbolic sizes (a mask over (batch, sequence)); the
  // tuples' length must be known.
  const Tensor& data = node.input(0);
  Tensor indices = node.input(1).cast(ScalarType::Int64);
  auto batch_dims = static_cast<size_t>(node.attr_int("batch_dims", 0));
  Dims data_shape = dims_of(data), index_shape = dims_of(indices);
  if (index_shape.empty()) node.fail("indices must have at least one dimension");
  auto k = static_cast<size_t>(index_shape.back().value("GatherND's index tuple length"));
  if (batch_dims + k > data_shape.size()) node.fail("index tuples are longer than the data's rank");
  auto product = [](const Dims& dims, size_t from, size_t to) {
    return std::accumulate(dims.begin() + static_cast<std::ptrdiff_t>(from), dims.begin() + static_cast<std::ptrdiff_t>(to),
                           Dim(1), std::multiplies<>());
  };
  Dim batch = product(data_shape, 0, batch_dims);
  Dim addressed = product(data_shape, batch_dims, batch_dims + k);
  Dim queries = product(index_shape, batch_dims, index_shape.size() - 1);
  Dims rest(data_shape.begin() + static_cast<std::ptrdiff_t>(batch_dims + k), data_shape.end());
  Tensor tuples = reshape_to(indices, {batch, queries, static_cast<int64_t>(k)});
  Tensor linear = broadcast_to(Tensor::scalar(0, ScalarType::Int64), Dims{batch, queries});
  for (size_t j = 0; j < k; ++j) {
    Tensor size_value = dim_tensor(data_shape[batch_dims + j], ScalarType::Int64);
    Tensor component = reshape_to(tuples.slice(2, static_cast<int64_t>(j), static_cast<int64_t>(j) + 1), {batch, queries});
    Tensor zero = Tensor::scalar(0, ScalarType::Int64);
    component = component.lt(zero).where(component + size_value, component);  // negative indices
    linear = linear * size_value + component;
  }
  Tensor batch_offset = reshape_to(arange_dim(batch, ScalarType::Int64) * dim_tensor(addressed, ScalarType::Int64), {batch, 1});
  Dims flat_data{batch * addressed};
  flat_data.insert(flat_data.end(), rest.begin(), rest.end());
  Tensor gathered = reshape_to(data, flat_data).take(linear + batch_offset, 0);
  Dims out_shape(index_shape.begin(), index_shape.end() - 1);
  out_shape.insert(out_shape.end(), rest.begin(), rest.end());
  return {reshape_to(gathered, out_shape)};
}

Outputs depth_to_space(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() != 4) node.fail("input must be 4-D");
  int64_t b = node.attr_int("blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (c % (b * b) != 0) node.fail("channels are not a multiple of blocksize²");
  std::string mode = node.attr_string("mode", "DCR");  // mode arrived in opset 11; DCR is the old behaviour
  Tensor moved;
  if (mode == "DCR") {
    moved = x.reshape({n, b, b, c / (b * b), h, w}).permute({0, 3, 4, 1, 5, 2});
  } else if (mode == "CRD") {
    moved = x.reshape({n, c / (b * b), b, b, h, w}).permute({0, 1, 4, 2, 5, 3});
  } else {
    node.fail("unsupported: DepthToSpace mode '" + mode + "'");
  }
  return {moved.reshape({n, c / (b * b), h * b, w * b})};
}

Outputs space_to_depth(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (x.ndim() != 4) node.fail("input must be 4-D");
  int64_t b = node.attr_int("blocksize");
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (h % b != 0 || w % b != 0) node.fail("spatial size is not a multiple of blocksize");
  return {x.reshape({n, c, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, c * b * b, h / b, w / b})};
}

Outputs one_hot(const OnnxNode& node) {
  Tensor indices = node.input(0);
  if (!is_integral(indices.dtype())) indices = indices.trunc().cast(ScalarType::Int64);  // float indices allowed
  else indices = indices.cast(ScalarType::Int64);
  auto depth = static_cast<int64_t>(node.input_doubles(1).at(0));
  const Tensor& values = node.input(2);
  int64_t out_rank = indices.ndim() + 1;
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), out_rank);
  Tensor depth_value = Tensor::scalar(static_cast<double>(depth), ScalarType::Int64);
  Tensor wrapped = indices.lt(Tensor::scalar(0, ScalarType::Int64)).where(indices + depth_value, indices);
  Shape positions_shape(static_cast<size_t>(out_rank), 1);
  positions_shape[static_cast<size_t>(axis)] = depth;
  Tensor hot = wrapped.unsqueeze(axis).eq(Tensor::arange(depth).reshape(positions_shape));
  Tensor off = values.slice(0, 0, 1).reshape({}), on = values.slice(0, 1, 2).reshape({});
  return {hot.where(on, off)};
}

}  // namespace

void register_shape_ops(OpRegistry& registry) {
  registry.add("Reshape", reshape);
  registry.add("Flatten", flatten);
  registry.add("Squeeze", squeeze);
  registry.add("Unsqueeze", unsqueeze);
  registry.add("Transpose", transpose);
  registry.add("Expand", expand, 8);
  registry.add("Tile", tile, 6);
  registry.add("Concat", concat);
  registry.add("Split", split);
  registry.add("Slice", slice);
  registry.add("Pad", pad);
  registry.add("CenterCropPad", center_crop_pad, 18);
  registry.add("Shape", shape);
  registry.add("Size", size);
  registry.add("ConstantOfShape", constant_of_shape, 9);
  registry.add("Range", range, 11);
  registry.add("EyeLike", eye_like, 9);
  registry.add("Trilu", trilu, 14);
  registry.add("Gather", gather);
  registry.add("GatherElements", gather_elements, 11);
  registry.add("GatherND", gather_nd, 11);
  registry.add("DepthToSpace", depth_to_space);
  registry.add("SpaceToDepth", space_to_depth);
  registry.add("OneHot", one_hot, 9);
}

}  // namespace kiln::onnx_import
