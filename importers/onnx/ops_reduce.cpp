// ONNX reductions (Reduce*, ArgMax/ArgMin, CumSum) and the softmax family (Softmax, LogSoftmax,
// Hardmax), which reduce along an axis and broadcast back.
#include <algorithm>

#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// What a Reduce* op does around Tensor's reduction: an elementwise step before (|x|, x²), the
// reduction itself, and one after (√, log).
enum class Reduction { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

Tensor reduce(const Tensor& x, Reduction kind, const std::vector<int64_t>& axes, bool keep) {
  switch (kind) {
    case Reduction::Sum: return x.sum(axes, keep);
    case Reduction::Mean: return x.mean(axes, keep);
    case Reduction::Max: return x.max(axes, keep);
    case Reduction::Min: return x.min(axes, keep);
    case Reduction::Prod: return x.prod(axes, keep);
    case Reduction::L1: return x.abs().sum(axes, keep);
    case Reduction::L2: return x.square().sum(axes, keep).sqrt();
    case Reduction::LogSum: return x.sum(axes, keep).log();
    case Reduction::LogSumExp: return x.logsumexp(axes, keep);
    case Reduction::SumSquare: return x.square().sum(axes, keep);
  }
  return x;
}

// `axes_input_since`: the opset at which the axes attribute became the optional second input (13
// for ReduceSum, 18 for the others); noop_with_empty_axes arrived together with that input.
OpBuilder reduction(Reduction kind, int64_t axes_input_since) {
  return [kind, axes_input_since](const OnnxNode& node) -> Outputs {
    const Tensor& x = node.input(0);
    std::vector<int64_t> axes = ints_attr_or_input(node, "axes", 1, axes_input_since).value_or(std::vector<int64_t>{});
    bool keep = node.attr_int("keepdims", 1) != 0;
    if (axes.empty()) {
      if (node.opset() >= axes_input_since && node.attr_int("noop_with_empty_axes", 0) != 0) return {x};
      if (x.ndim() == 0) return {reduce(x.reshape({1}), kind, {0}, false)};
      return {reduce(x, kind, {}, keep)};
    }
    axes = normalize_axes(node, axes, x.ndim());
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    return {reduce(x, kind, axes, keep)};
  };
}

OpBuilder arg_reduction(bool is_max) {
  return [is_max](const OnnxNode& node) -> Outputs {
    const Tensor& x = node.input(0);
    int64_t axis = normalize_axis(node, node.attr_int("axis", 0), x.ndim());
    bool keep = node.attr_int("keepdims", 1) != 0;
    // select_last_index (opset 12): the last extremum is the first one of the flipped axis.
    if (node.attr_int("select_last_index", 0) != 0) {
      Tensor flipped = x.flip({axis});
      Tensor index = is_max ? flipped.argmax(axis, keep) : flipped.argmin(axis, keep);
      return {Tensor::scalar(static_cast<double>(x.dim(axis) - 1), ScalarType::Int64) - index};
    }
    return {is_max ? x.argmax(axis, keep) : x.argmin(axis, keep)};
  };
}

Outputs cumsum(const OnnxNode& node) {
  Tensor x = node.input(0);
  int64_t axis = normalize_axis(node, node.input_ints(1).at(0), x.ndim());
  bool exclusive = node.attr_int("exclusive", 0) != 0, reverse = node.attr_int("reverse", 0) != 0;
  if (reverse) x = x.flip({axis});
  if (exclusive) {
    // Shift by one along the axis (a zero first, the last element dropped): exact for every
    // dtype, unlike subtracting x from the inclusive sum.
    std::vector<int64_t> pads(static_cast<size_t>(2 * (axis + 1)), 0);
    pads[static_cast<size_t>(2 * axis)] = 1;
    x = x.pad(pads).slice(axis, 0, x.dim(axis));
  }
  Tensor result = x.cumsum(axis);
  if (reverse) result = result.flip({axis});
  return {result};
}

// Softmax, LogSoftmax, Hardmax. Before opset 13 the input is coerced to 2-D at `axis` (default 1)
// and normalised over the whole second half; from 13 on it is normalised along `axis` (default -1).
OpBuilder softmax_family(Tensor (*along)(const Tensor&, int64_t)) {
  return [along](const OnnxNode& node) -> Outputs {
    const Tensor& x = node.input(0);
    if (node.opset() >= 13) {
      int64_t axis = normalize_axis(node, node.attr_int("axis", -1), std::max<int64_t>(x.ndim(), 1));
      if (x.ndim() == 0) return {along(x.reshape({1}), 0).reshape({})};
      return {along(x, axis)};
    }
    int64_t rank = x.ndim();
    int64_t axis = normalize_axis(node, node.attr_int("axis", 1), std::max<int64_t>(rank, 1));
    const Shape& shape = x.shape();
    int64_t rows = shape_product(shape, 0, static_cast<size_t>(axis));
    int64_t columns = shape_product(shape, static_cast<size_t>(axis), shape.size());
    return {along(x.reshape({rows, columns}), 1).reshape(shape)};
  };
}

Tensor softmax_along(const Tensor& x, int64_t axis) { return x.softmax(axis); }
Tensor log_softmax_along(const Tensor& x, int64_t axis) { return x.log_softmax(axis); }

// One-hot of the first maximum along the axis, in x's dtype.
Tensor hardmax_along(const Tensor& x, int64_t axis) {
  int64_t n = x.dim(axis);
  Shape positions_shape(static_cast<size_t>(x.ndim()), 1);
  positions_shape[static_cast<size_t>(axis)] = n;
  Tensor positions = Tensor::arange(n).reshape(positions_shape);
  return x.argmax(axis, true).eq(positions).cast(x.dtype());
}

}  // namespace

void register_reduce_ops(OpRegistry& registry) {
  registry.add("ReduceSum", reduction(Reduction::Sum, 13));
  registry.add("ReduceMean", reduction(Reduction::Mean, 18));
  registry.add("ReduceMax", reduction(Reduction::Max, 18));
  registry.add("ReduceMin", reduction(Reduction::Min, 18));
  registry.add("ReduceProd", reduction(Reduction::Prod, 18));
  registry.add("ReduceL1", reduction(Reduction::L1, 18));
  registry.add("ReduceL2", reduction(Reduction::L2, 18));
  registry.add("ReduceLogSum", reduction(Reduction::LogSum, 18));
  registry.add("ReduceLogSumExp", reduction(Reduction::LogSumExp, 18));
  registry.add("ReduceSumSquare", reduction(Reduction::SumSquare, 18));
  registry.add("ArgMax", arg_reduction(true));
  registry.add("ArgMin", arg_reduction(false));
  registry.add("CumSum", cumsum, 11);
  registry.add("Softmax", softmax_family(softmax_along));
  registry.add("LogSoftmax", softmax_family(log_softmax_along));
  registry.add("Hardmax", softmax_family(hardmax_along));
}

}  // namespace kiln::onnx_import
