// Shape values: the Dims behind small int64 tensors computed from symbolic shapes (shape_values.h).
#include "shape_values.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "op_helpers.h"
#include "support/error.h"
#include "tensor/tensor_data.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

// Constant operands read as values have at most this many elements (shape vectors, indices).
constexpr int64_t kMaxConstantOperand = 64;

struct Entry {
  UOpPtr node;  // keeps the key alive, so a freed node's address never names another tensor's values
  Dims values;
};

class ShapeValueTable {
 public:
  void record(const Tensor& t, Dims values) {
    const UOpPtr& node = t.data().node;
    std::lock_guard lock(mutex_);
    entries_[node.get()] = Entry{node, std::move(values)};
  }
  std::optional<Dims> find(const Tensor& t) const {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(t.data().node.get());
    if (found == entries_.end()) return std::nullopt;
    return found->second.values;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const UOp*, Entry> entries_;
};

ShapeValueTable& table() {
  static ShapeValueTable instance;
  return instance;
}

bool is_integer_type(ScalarType type) {
  return type == ScalarType::Bool || type == ScalarType::Int64 || type == ScalarType::Int32 || type == ScalarType::Int16 ||
         type == ScalarType::Int8 || type == ScalarType::UInt8 || type == ScalarType::UInt16 ||
         type == ScalarType::UInt32 || type == ScalarType::UInt64;
}

// Input i as Dims: a shape value's, or a small constant integer tensor's values; nullopt otherwise.
std::optional<Dims> operand(const OnnxNode& node, size_t i) {
  if (!node.has_input(i) || !node.input_value(i).is_tensor()) return std::nullopt;
  const Tensor& t = node.input(i);
  if (std::optional<Dims> values = shape_value_of(t)) return values;
  if (!is_integer_type(t.dtype()) || has_symbolic_shape(t) || t.ndim() > 1 || t.numel() > kMaxConstantOperand ||
      reads_graph_input(t))
    return std::nullopt;
  return to_dims(t.to_vector<int64_t>());
}

// a op b with size-1 broadcasting, or nullopt when the lengths do not broadcast.
template <typename Op>
std::optional<Dims> elementwise(const Dims& a, const Dims& b, Op op) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) return std::nullopt;
  Dims result;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    result.push_back(op(a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]));
  return result;
}

// Python slicing of `values` with constant starts, ends and steps along axis 0.
std::optional<Dims> slice_values(const OnnxNode& node, const Dims& values) {
  for (size_t i = 1; i < node.input_count(); ++i)
    if (node.has_input(i) && shape_value_of(node.input(i))) return std::nullopt;  // symbolic bounds
  if (!node.has_input(1) || !node.has_input(2)) return std::nullopt;
  std::vector<int64_t> starts = node.input_ints(1), ends = node.input_ints(2);
  std::vector<int64_t> axes = node.has_input(3) ? node.input_ints(3) : std::vector<int64_t>{0};
  std::vector<int64_t> steps = node.has_input(4) ? node.input_ints(4) : std::vector<int64_t>{1};
  if (starts.size() != 1 || ends.size() != 1 || axes.size() != 1 || steps.size() != 1) return std::nullopt;
  if ((axes[0] != 0 && axes[0] != -1) || steps[0] == 0) return std::nullopt;
  auto n = static_cast<int64_t>(values.size());
  int64_t step = steps[0];
  // ONNX's clamping: with a positive step both into [0, n]; with a negative one the start into
  // [0, n - 1] and the end into [-1, n - 1].
  auto clamp = [&](int64_t index, bool is_end) {
    if (index < 0) index += n;
    if (step > 0) return std::clamp<int64_t>(index, 0, n);
    return std::clamp<int64_t>(index, is_end ? -1 : 0, n - 1);
  };
  int64_t begin = clamp(starts[0], false), end = clamp(ends[0], true);
  Dims result;
  for (int64_t i = begin; step > 0 ? i < end : i > end; i += step) result.push_back(values[static_cast<size_t>(i)]);
  return result;
}

std::optional<Dims> output_values(const OnnxNode& node) {
  const std::string& op = node.op_type();
  if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape") return operand(node, 0);
  if (op == "Cast") {
    auto to = static_cast<int32_t>(node.attr_int("to"));
    if (to != 7 && to != 6) return std::nullopt;  // ONNX INT64, INT32: sizes stay exact
    return operand(node, 0);
  }
  if (op == "Gather") {
    std::optional<Dims> data = operand(node, 0), indices = operand(node, 1);
    if (!data || !indices || !all_known(*indices) || node.attr_int("axis", 0) != 0) return std::nullopt;
    auto n = static_cast<int64_t>(data->size());
    Dims result;
    for (const Dim& index : *indices) {
      int64_t i = index.value();
      if (i < -n || i >= n) node.fail(str_cat("index ", i, " is out of range for ", n, " shape values"));
      result.push_back((*data)[static_cast<size_t>(i < 0 ? i + n : i)]);
    }
    return result;
  }
  if (op == "Slice") {
    std::optional<Dims> data = operand(node, 0);
    return data ? slice_values(node, *data) : std::nullopt;
  }
  if (op == "Concat") {
    Dims result;
    for (size_t i = 0; i < node.input_count(); ++i) {
      if (!node.has_input(i)) continue;
      std::optional<Dims> part = operand(node, i);
      if (!part) return std::nullopt;
      result.insert(result.end(), part->begin(), part->end());
    }
    return result;
  }
  if (op == "Equal") {
    // Decided only where it is the same for every value of the variables: equal expressions, or a
    // constant outside a symbolic size's range (exporters compare a shape with -1 or 1).
    std::optional<Dims> a = operand(node, 0), b = operand(node, 1);
    if (!a || !b) return std::nullopt;
    bool undecided = false;
    std::optional<Dims> result = elementwise(*a, *b, [&](const Dim& x, const Dim& y) {
      if (x == y) return Dim(1);
      if (x.max() < y.min() || y.max() < x.min()) return Dim(0);
      undecided = true;
      return Dim(0);
    });
    if (undecided) return std::nullopt;
    return result;
  }
  if (op == "Where") {
    std::optional<Dims> condition = operand(node, 0), a = operand(node, 1), b = operand(node, 2);
    if (!condition || !a || !b || !all_known(*condition)) return std::nullopt;
    size_t n = std::max({condition->size(), a->size(), b->size()});
    for (const Dims* operand_values : {&*condition, &*a, &*b})
      if (operand_values->size() != 1 && operand_values->size() != n) return std::nullopt;
    auto at = [](const Dims& values, size_t i) { return values[values.size() == 1 ? 0 : i]; };
    Dims result;
    for (size_t i = 0; i < n; ++i) result.push_back(at(*condition, i).is(0) ? at(*b, i) : at(*a, i));
    return result;
  }
  if (op == "Max" || op == "Min") {
    // Variadic and broadcasting: torch's clamps of a size (min(300, n) detections a class).
    std::optional<Dims> result = operand(node, 0);
    for (size_t i = 1; result && i < node.input_count(); ++i) {
      std::optional<Dims> other = operand(node, i);
      if (!other) return std::nullopt;
      result = op == "Max" ? elementwise(*result, *other, [](const Dim& x, const Dim& y) { return max(x, y); })
                           : elementwise(*result, *other, [](const Dim& x, const Dim& y) { return min(x, y); });
    }
    return result;
  }
  if (op == "ReduceMin" || op == "ReduceMax") {
    // Over the one axis a shape value has (every axis, or axis 0 / -1 given).
    std::optional<Dims> data = operand(node, 0);
    if (!data || data->empty()) return std::nullopt;
    std::vector<int64_t> axes = node.has_input(1) ? node.input_ints(1) : node.attr_ints("axes", std::vector<int64_t>{});
    for (int64_t axis : axes)
      if (axis != 0 && axis != -1) return std::nullopt;
    Dim folded = data->front();
    for (const Dim& value : *data) folded = op == "ReduceMax" ? max(folded, value) : min(folded, value);
    return Dims{folded};
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    std::optional<Dims> a = operand(node, 0), b = operand(node, 1);
    if (!a || !b) return std::nullopt;
    if (op == "Add") return elementwise(*a, *b, [](const Dim& x, const Dim& y) { return x + y; });
    if (op == "Sub") return elementwise(*a, *b, [](const Dim& x, const Dim& y) { return x - y; });
    if (op == "Mul") return elementwise(*a, *b, [](const Dim& x, const Dim& y) { return x * y; });
    for (const Dim& divisor : *b)
      if (!divisor.is_known() || divisor.value() <= 0) return std::nullopt;  // sizes divide by positive constants
    return elementwise(*a, *b, [](const Dim& x, const Dim& y) { return x / y; });
  }
  return std::nullopt;
}

}  // namespace

Tensor shape_value_tensor(const Dims& values, bool scalar) {
  std::vector<Tensor> parts;
  for (const Dim& value : values)
    parts.push_back(value.is_known() ? int64_vector({value.value()}) : dim_tensor(value, ScalarType::Int64).reshape({1}));
  Tensor result = parts.empty() ? int64_vector({}) : parts.size() == 1 ? parts[0] : Tensor::concat(parts, 0);
  if (scalar) result = result.reshape({});
  if (!all_known(values)) table().record(result, values);
  return result;
}

std::optional<Dims> shape_value_of(const Tensor& t) {
  if (!t.defined()) return std::nullopt;
  return table().find(t);
}

void propagate_shape_values(const OnnxNode& node, const std::vector<OnnxValue>& results) {
  if (!node.domain().empty() || results.empty() || !results[0].is_tensor() || !results[0].defined()) return;
  bool reads_shape_value = false;
  for (size_t i = 0; i < node.input_count(); ++i)
    reads_shape_value = reads_shape_value || (node.has_input(i) && node.input_value(i).is_tensor() &&
                                              shape_value_of(node.input(i)).has_value());
  if (!reads_shape_value) return;
  std::optional<Dims> values = output_values(node);
  const Tensor& output = results[0].tensor();
  // Recorded even when every element is known (an Equal of a shape with -1): the tensor itself is
  // computed from the variables, so consumers must read these Dims rather than realize it.
  if (!values || has_symbolic_shape(output) || output.ndim() > 1 ||
      output.numel() != static_cast<int64_t>(values->size()))
    return;
  table().record(output, std::move(*values));
}

}  // namespace kiln::onnx_import
