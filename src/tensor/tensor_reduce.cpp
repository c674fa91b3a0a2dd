// Composite reductions built from the primitive ones (sum, max) and elementwise ops: logsumexp
// and argmax/argmin. They add no node kinds of their own.
#include <algorithm>

#include "support/error.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using S = ScalarType;

// The shape a reduction over `axes` (normalized) leaves when the axes are dropped.
Shape drop_axes(const Shape& shape, const std::vector<int64_t>& axes) {
  Shape kept;
  for (size_t i = 0; i < shape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) kept.push_back(shape[i]);
  return kept;
}

// Index of the first element along `axis` where `hit` (bool) is true; `hit` has a true element in
// every slice. The reversed index n - i is largest at the first hit, so one MAX finds it.
Tensor first_true(const Tensor& hit, int64_t axis, bool keepdim) {
  int64_t n = hit.shape()[static_cast<size_t>(axis)];
  Shape index_shape(hit.shape().size(), 1);
  index_shape[static_cast<size_t>(axis)] = n;
  Tensor reversed = Tensor::scalar(static_cast<double>(n), S::Int64) - Tensor::arange(n, S::Int64).reshape(index_shape);
  Tensor score = hit.where(reversed, Tensor::scalar(0, S::Int64));
  return Tensor::scalar(static_cast<double>(n), S::Int64) - score.max({axis}, keepdim);
}

// argmax of x along a normalized axis. NaN counts as larger than everything, like numpy: a slice
// holding NaN answers its first NaN. This does not depend on how the backend's MAX treats NaN.
Tensor argmax_along(const Tensor& x, int64_t axis, bool keepdim) {
  Tensor largest = x.max({axis}, true);
  Tensor hit = x.eq(largest);
  if (x.data().dtype.is_float()) {
    Tensor nan = x.isnan();
    hit = nan.max({axis}, true).where(nan, hit);
  }
  return first_true(hit, axis, keepdim);
}

int64_t checked_axis(const Tensor& t, int64_t axis, std::string_view operation) {
  int64_t normalized = normalize_axis(axis, t.ndim(), operation);
  if (t.shape()[static_cast<size_t>(normalized)] == 0)
    throw UserError(str_cat(operation, ": axis ", axis, " of shape ", shape_string(t.shape()),
                            " is empty, so there is no element to pick"));
  return normalized;
}

}  // namespace

// log Σ exp(x) = m + log Σ exp(x - m) with m the max of each slice, so no exp overflows. Where m
// is ±inf (a slice of -inf only, or holding +inf) no shift is applied: the plain formula gives the
// right -inf / +inf there, where x - m would give NaN. Integers compute in f32; f16/bf16 compute
// in f32 and round once. An empty reduction gives -inf (log 0).
Tensor Tensor::logsumexp(std::vector<int64_t> axes, bool keepdim) const {
  std::vector<int64_t> reduced = normalize_axes(axes, ndim(), "logsumexp");
  S type = data().dtype.is_float() ? dtype() : S::Float32;
  Tensor x = cast(type == S::Float64 ? S::Float64 : S::Float32);
  Tensor largest = x.max(reduced, true);
  Tensor shift = largest.isinf().where(Tensor::scalar(0, x.dtype()), largest);
  Tensor result = (x - shift).exp().sum(reduced, true).log() + shift;
  if (!keepdim) result = result.reshape(drop_axes(result.shape(), reduced));
  return result.cast(type);
}

Tensor Tensor::argmax(int64_t axis, bool keepdim) const {
  int64_t a = checked_axis(*this, axis, "argmax");
  Tensor x = data().dtype.is_bool() ? cast(S::UInt8) : *this;
  return argmax_along(x, a, keepdim);
}

// argmin(x) = argmax of an order-reversing map: -x for floats (NaN stays NaN, so the first NaN
// wins here too, like numpy), ~x for integers (exact for every value, unsigned included).
Tensor Tensor::argmin(int64_t axis, bool keepdim) const {
  int64_t a = checked_axis(*this, axis, "argmin");
  DType type = data().dtype;
  Tensor reversed = type.is_float() ? neg() : type.is_bool() ? logical_not().cast(S::UInt8) : bitwise_not();
  return argmax_along(reversed, a, keepdim);
}

}  // namespace kiln
