// Shared helpers of the ONNX op families (see op_helpers.h).
#include "op_helpers.h"

#include <algorithm>
#include <limits>

#include "support/error.h"
#include "support/limits.h"

namespace kiln::onnx_import {

bool is_floating(ScalarType type) {
  return type == ScalarType::Float16 || type == ScalarType::BFloat16 || type == ScalarType::Float32 ||
         type == ScalarType::Float64;
}

bool is_integral(ScalarType type) {
  switch (type) {
    case ScalarType::Int8: case ScalarType::Int16: case ScalarType::Int32: case ScalarType::Int64:
    case ScalarType::UInt8: case ScalarType::UInt16: case ScalarType::UInt32: case ScalarType::UInt64:
      return true;
    default:
      return false;
  }
}

int64_t normalize_axis(const OnnxNode& node, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    node.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const OnnxNode& node, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> result;
  result.reserve(axes.size());
  for (int64_t axis : axes) result.push_back(normalize_axis(node, axis, rank));
  return result;
}

std::optional<std::vector<int64_t>> ints_attr_or_input(const OnnxNode& node, const std::string& attribute,
                                                       size_t index, int64_t input_since) {
  if (node.opset() < input_since) {
    if (!node.has_attribute(attribute)) return std::nullopt;
    return node.attr_ints(attribute);
  }
  if (!node.has_input(index)) return std::nullopt;
  return node.input_ints(index);
}

int64_t shape_product(const Shape& shape, size_t begin, size_t end) {
  int64_t product = 1;
  for (size_t i = begin; i < end && i < shape.size(); ++i) product *= shape[i];
  return product;
}

Shape broadcast_shapes(const OnnxNode& node, const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape result(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      node.fail("shapes do not broadcast (dimension " + std::to_string(da) + " vs " + std::to_string(db) + ")");
    result[i] = da == 1 ? db : da;
  }
  return result;
}

std::vector<Tensor> declared_outputs(const OnnxNode& node, std::vector<Tensor> outputs) {
  if (outputs.size() > node.output_count()) outputs.resize(node.output_count());
  return outputs;
}

Tensor int64_vector(const std::vector<int64_t>& values) {
  return Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
}

std::vector<int64_t> axis_to_last(int64_t rank, int64_t axis) {
  std::vector<int64_t> order;
  for (int64_t i = 0; i < rank; ++i)
    if (i != axis) order.push_back(i);
  order.push_back(axis);
  return order;
}

std::vector<int64_t> inverse_permutation(const std::vector<int64_t>& order) {
  std::vector<int64_t> inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i) inverse[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  return inverse;
}

bool element_count_fits(const Shape& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim) return false;
    count *= dim;
  }
  return true;
}

std::string tensor_limit_problem(const Shape& shape, ScalarType dtype) {
  if (static_cast<int64_t>(shape.size()) > limits::kMaxTensorRank)
    return str_cat("has rank ", shape.size(), ", more than kiln's limit of ", limits::kMaxTensorRank, " (docs/limits.md)");
  uint64_t count = 1;  // fits: the caller checked element_count_fits
  for (int64_t dim : shape) count *= static_cast<uint64_t>(dim);
  // A count above the byte limit is over it whatever the dtype; below it, bytes cannot overflow.
  if (count > limits::kMaxTensorBytes)
    return str_cat("has ", count, " elements, more than kiln's limit of ", limits::kMaxTensorBytes,
                   " bytes per tensor (1 TiB; docs/limits.md)");
  uint64_t bytes = count * static_cast<uint64_t>(scalar_type_size(dtype));
  if (bytes > limits::kMaxTensorBytes)
    return str_cat("needs ", bytes, " bytes, more than kiln's limit of ", limits::kMaxTensorBytes,
                   " bytes per tensor (1 TiB; docs/limits.md)");
  return {};
}

}  // namespace kiln::onnx_import
