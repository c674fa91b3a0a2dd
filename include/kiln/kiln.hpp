// kiln's C++ Tensor API: build a computation lazily, then realize() it.
//
// A Tensor is a cheap handle on a node of a lazy graph. Every operation returns a new Tensor at
// once and computes nothing; realize() (or reading the data) compiles the graph into fused kernels
// with the same pipeline that builds plans, runs them on the CPU, and turns the handle into a view
// of the result. Copies of a Tensor share nothing mutable: realizing one copy does not change the
// others (they would recompute, or hit the kernel cache).
//
// Conventions (numpy's unless stated):
// - Broadcasting and dtype promotion as in numpy (`promote_types`); a plain C++ number adopts the
//   tensor's dtype when it fits its kind (an integer with an integer tensor, any number with a
//   float tensor), otherwise the result is f32.
// - Axes may be negative (counted from the end). Reductions take a list of axes; an empty list
//   means every axis.
// - Errors in use (shapes that do not broadcast, an axis out of range, a wrong element count) throw
//   kiln::Error with a message that names the operation and the shapes.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/error.hpp"
#include "kiln/scalar_type.hpp"

namespace kiln {

using Shape = std::vector<int64_t>;

// Short name of a type ("f32", "i64", "bool") and its size in bytes.
std::string scalar_type_name(ScalarType type);
int scalar_type_size(ScalarType type);

// The ScalarType of a C++ element type (bool, int8_t … uint64_t, float, double).
template <class T> constexpr ScalarType scalar_type_of();

enum class PadMode { Constant, Reflect, Edge };
enum class InterpolationMode { Nearest, Linear };

struct ConvOptions {
  std::vector<int64_t> stride;    // per spatial axis; empty = all 1
  std::vector<int64_t> padding;   // begin pads for every spatial axis, then end pads; empty = 0
  std::vector<int64_t> dilation;  // per spatial axis; empty = all 1
  int64_t groups = 1;
  std::vector<int64_t> output_padding;  // transposed convolution only: extra size at the end
  // A layout hint, not a semantic option: the filter count of the one conv that reads this conv's
  // output (directly or through elementwise ops), when that reader is a 2-D 1x1 conv with stride 1,
  // no padding and one group; 0 when unknown. A depthwise conv may then compute channels-last,
  // the layout such a reader wants (docs/optimisation.md). The ONNX importer sets it.
  int64_t pointwise_reader_filters = 0;
};

struct PoolOptions {
  std::vector<int64_t> kernel;    // per spatial axis (required)
  std::vector<int64_t> stride;    // empty = the kernel size
  std::vector<int64_t> padding;   // begin pads, then end pads; empty = 0
  std::vector<int64_t> dilation;  // empty = all 1
  bool ceil_mode = false;
  bool count_include_pad = false;  // average pooling: divide by the full window, padding included
};

namespace detail {
struct TensorData;
}

class Tensor {
 public:
  Tensor();  // an empty handle; every operation on it throws

  // ---- creation (all lazy; from_data copies the host data when called) ----
  static Tensor from_data(const void* data, Shape shape, ScalarType type);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    return from_data(values.data(), std::move(shape), scalar_type_of<T>());
  }
  static Tensor scalar(double value, ScalarType type = ScalarType::Float32);
  static Tensor full(Shape shape, double value, ScalarType type = ScalarType::Float32);
  static Tensor zeros(Shape shape, ScalarType type = ScalarType::Float32);
  static Tensor ones(Shape shape, ScalarType type = ScalarType::Float32);
  // [start, stop) in steps of step (numpy's arange: ceil((stop-start)/step) elements).
  static Tensor arange(double start, double stop, double step = 1.0, ScalarType type = ScalarType::Float32);
  static Tensor arange(int64_t stop, ScalarType type = ScalarType::Int64);
  // Ones on the diagonal `k` (0 = main, > 0 above) of an n×m matrix (m < 0 means m = n).
  static Tensor eye(int64_t n, int64_t m = -1, int64_t k = 0, ScalarType type = ScalarType::Float32);
  // Seeded, reproducible random numbers: the same seed and shape give the same values everywhere.
  static Tensor uniform(Shape shape, uint64_t seed, double low = 0.0, double high = 1.0,
                        ScalarType type = ScalarType::Float32);
  static Tensor normal(Shape shape, uint64_t seed, double mean = 0.0, double stddev = 1.0,
                       ScalarType type = ScalarType::Float32);

  // ---- properties ----
  bool defined() const { return data_ != nullptr; }
  const Shape& shape() const;
  int64_t ndim() const;
  int64_t dim(int64_t axis) const;  // axis may be negative
  int64_t numel() const;
  ScalarType dtype() const;

  // ---- running ----
  // Computes this tensor (once): compiles and runs the kernels it needs. Returns *this.
  Tensor& realize();
  // Computes several tensors with one schedule, so work they share is done once.
  static void realize_all(std::vector<Tensor*> tensors);
  // Copies the values (realizing first) in row-major order into `destination`, which must hold
  // numel() * scalar_type_size(dtype()) bytes.
  void copy_to(void* destination, size_t bytes) const;
  template <class T>
  std::vector<T> to_vector() const {
    if (scalar_type_of<T>() != dtype()) return cast(scalar_type_of<T>()).template to_vector<T>();
    std::vector<T> values(static_cast<size_t>(numel()));
    copy_to(values.data(), values.size() * sizeof(T));
    return values;
  }
  // The value of a one-element tensor.
  double item() const;

  // ---- elementwise: unary ----
  Tensor neg() const;
  Tensor abs() const;
  Tensor sign() const;
  Tensor reciprocal() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor square() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  Tensor tanh() const;
  Tensor erf() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor gelu() const;  // exact (erf) form
  Tensor softplus() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;  // half to even, like numpy
  Tensor trunc() const;
  Tensor isnan() const;
  Tensor isinf() const;
  Tensor logical_not() const;
  Tensor bitwise_not() const;
  Tensor cast(ScalarType type) const;
  Tensor bitcast(ScalarType type) const;  // same element size

  // ---- elementwise: binary (broadcasting, promoting) ----
  Tensor add(const Tensor& other) const;
  Tensor sub(const Tensor& other) const;
  Tensor mul(const Tensor& other) const;
  Tensor div(const Tensor& other) const;    // true division (integers give f32)
  Tensor idiv(const Tensor& other) const;   // integer division truncated toward zero (C, ONNX Div)
  Tensor floordiv(const Tensor& other) const;  // rounded toward -inf (numpy //)
  Tensor mod(const Tensor& other) const;    // sign of the divisor (numpy %, ONNX Mod fmod=0)
  Tensor fmod(const Tensor& other) const;   // sign of the dividend (C fmod, ONNX Mod fmod=1)
  Tensor pow(const Tensor& exponent) const;
  Tensor maximum(const Tensor& other) const;
  Tensor minimum(const Tensor& other) const;
  Tensor bitwise_and(const Tensor& other) const;
  Tensor bitwise_or(const Tensor& other) const;
  Tensor bitwise_xor(const Tensor& other) const;
  Tensor shift_left(const Tensor& other) const;
  Tensor shift_right(const Tensor& other) const;
  Tensor logical_and(const Tensor& other) const;
  Tensor logical_or(const Tensor& other) const;
  Tensor logical_xor(const Tensor& other) const;
  Tensor lt(const Tensor& other) const;
  Tensor le(const Tensor& other) const;
  Tensor gt(const Tensor& other) const;
  Tensor ge(const Tensor& other) const;
  Tensor eq(const Tensor& other) const;
  Tensor ne(const Tensor& other) const;
  // condition ? if_true : if_false, with the three broadcast together (this is the condition).
  Tensor where(const Tensor& if_true, const Tensor& if_false) const;
  // this * factor + addend, the three broadcast and promoted together; floats round once (a fused
  // multiply-add, like std::fma), integers wrap as mul then add would.
  Tensor mul_add(const Tensor& factor, const Tensor& addend) const;
  Tensor clip(double low, double high) const;

  // ---- reductions (empty axes = all; keepdim keeps reduced axes as size 1) ----
  Tensor sum(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor prod(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor max(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor min(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  Tensor logsumexp(std::vector<int64_t> axes = {}, bool keepdim = false) const;
  // Index (i64) of the first largest / smallest element along `axis`.
  Tensor argmax(int64_t axis, bool keepdim = false) const;
  Tensor argmin(int64_t axis, bool keepdim = false) const;

  // ---- movement (views: no data is copied until a kernel needs it) ----
  Tensor reshape(Shape shape) const;  // one entry may be -1
  Tensor permute(std::vector<int64_t> order) const;
  Tensor transpose(int64_t axis_a = -2, int64_t axis_b = -1) const;
  Tensor expand(Shape shape) const;  // numpy broadcast_to
  Tensor squeeze(std::vector<int64_t> axes = {}) const;  // empty = every size-1 axis
  Tensor unsqueeze(int64_t axis) const;
  Tensor flatten(int64_t start_axis = 0, int64_t end_axis = -1) const;
  // pads: (before, after) per axis, for the first axes (pads.size() / 2 of them).
  Tensor pad(std::vector<int64_t> pads, PadMode mode = PadMode::Constant, double value = 0.0) const;
  // Keeps [begin, end) of each axis (pairs per axis, like pad).
  Tensor shrink(std::vector<std::pair<int64_t, int64_t>> ranges) const;
  // Python-style slice of one axis: start/stop are clamped; step may be negative.
  Tensor slice(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  Tensor flip(std::vector<int64_t> axes) const;
  static Tensor concat(const std::vector<Tensor>& tensors, int64_t axis);
  static Tensor stack(const std::vector<Tensor>& tensors, int64_t axis);
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t axis) const;
  // out[..., i, ...] = this[..., indices[..., i, ...], ...] along `axis` (torch.gather; negative
  // indices count from the end).
  Tensor gather(int64_t axis, const Tensor& indices) const;
  // numpy.take along an axis: indices of any shape replace that axis.
  Tensor take(const Tensor& indices, int64_t axis) const;
  Tensor cumsum(int64_t axis) const;

  // ---- compound ----
  // Batched, broadcasting matrix product (numpy matmul, 1-D operands included).
  Tensor matmul(const Tensor& other) const;
  // N-d convolution: this is (N, C, D1…Dn), weight (F, C/groups, K1…Kn), bias (F) or empty.
  Tensor conv(const Tensor& weight, const Tensor& bias = Tensor(), const ConvOptions& options = {}) const;
  // Transposed convolution: weight (C, F/groups, K1…Kn).
  Tensor conv_transpose(const Tensor& weight, const Tensor& bias = Tensor(),
                        const ConvOptions& options = {}) const;
  Tensor max_pool(const PoolOptions& options) const;
  Tensor avg_pool(const PoolOptions& options) const;
  Tensor global_max_pool() const;  // over every axis after the first two, kept as size 1
  Tensor global_avg_pool() const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  // Normalises over the last `normalized_dims` axes; weight/bias broadcast over them (may be empty).
  Tensor layer_norm(const Tensor& weight, const Tensor& bias, int64_t normalized_dims = 1,
                    double epsilon = 1e-5) const;
  // (N, C, …) with C split into `groups`; weight/bias per channel (may be empty).
  Tensor group_norm(int64_t groups, const Tensor& weight, const Tensor& bias, double epsilon = 1e-5) const;
  // Inference batch norm over axis 1 with running statistics.
  Tensor batch_norm(const Tensor& scale, const Tensor& bias, const Tensor& mean, const Tensor& variance,
                    double epsilon = 1e-5) const;
  // Resizes the axes after the first two to `size` (align_corners = false, half-pixel centres;
  // nearest uses floor of the source coordinate, like PyTorch's "nearest").
  Tensor interpolate(const std::vector<int64_t>& size, InterpolationMode mode = InterpolationMode::Nearest) const;

  // Internal: the graph node behind this handle (for the compiler's own tests and tools).
  const detail::TensorData& data() const;
  const std::shared_ptr<const detail::TensorData>& data_pointer() const { return data_; }
  explicit Tensor(std::shared_ptr<const detail::TensorData> data) : data_(std::move(data)) {}

 private:
  std::shared_ptr<const detail::TensorData> data_;
};

// Operators: elementwise, broadcasting. A C++ number becomes a constant (see the conventions).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
// A constant with `like`'s dtype when `value` fits its kind, else f32 (see the conventions).
Tensor scalar_like(const Tensor& like, double value);

template <class T> constexpr ScalarType scalar_type_of() {
  if constexpr (std::is_same_v<T, bool>) return ScalarType::Bool;
  else if constexpr (std::is_same_v<T, int8_t>) return ScalarType::Int8;
  else if constexpr (std::is_same_v<T, int16_t>) return ScalarType::Int16;
  else if constexpr (std::is_same_v<T, int32_t>) return ScalarType::Int32;
  else if constexpr (std::is_same_v<T, int64_t>) return ScalarType::Int64;
  else if constexpr (std::is_same_v<T, uint8_t>) return ScalarType::UInt8;
  else if constexpr (std::is_same_v<T, uint16_t>) return ScalarType::UInt16;
  else if constexpr (std::is_same_v<T, uint32_t>) return ScalarType::UInt32;
  else if constexpr (std::is_same_v<T, uint64_t>) return ScalarType::UInt64;
  else if constexpr (std::is_same_v<T, float>) return ScalarType::Float32;
  else if constexpr (std::is_same_v<T, double>) return ScalarType::Float64;
  else static_assert(sizeof(T) == 0, "no kiln ScalarType for this C++ type");
}

}  // namespace kiln
