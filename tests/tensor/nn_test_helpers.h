// Helpers of the movement and neural-network parity tests: a plain N-d array of doubles that the
// reference loops compute on, conversions to and from Tensors (contiguous or as non-contiguous
// views holding the same values), an element-wise comparison with a stated tolerance, and the
// kernel count of a lazy tensor.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"
#include "schedule/schedule.h"
#include "tensor/tensor_internal.h"

namespace kiln::nn_test {

struct Array {
  Shape shape;
  std::vector<double> values;

  Array() = default;
  explicit Array(Shape s, double fill = 0.0) : shape(std::move(s)), values(static_cast<size_t>(count(shape)), fill) {}

  static int64_t count(const Shape& shape) {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  }
  int64_t numel() const { return count(shape); }
  size_t offset(const std::vector<int64_t>& index) const {
    int64_t flat = 0;
    for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + index[i];
    return static_cast<size_t>(flat);
  }
  double& at(const std::vector<int64_t>& index) { return values[offset(index)]; }
  double at(const std::vector<int64_t>& index) const { return values[offset(index)]; }
};

// Calls fn(index) for every index of `shape` in row-major order (never for an empty shape).
inline void for_each_index(const Shape& shape, const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (Array::count(shape) == 0) return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index);
    size_t axis = shape.size();
    while (axis > 0) {
      --axis;
      if (++index[axis] < shape[axis]) break;
      index[axis] = 0;
      if (axis == 0) return;
    }
    if (shape.empty()) return;
  }
}

// Deterministic pseudo-random values (a 64-bit LCG), so failures reproduce.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
  double uniform() {  // [0, 1)
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state_ >> 11) / 9007199254740992.0;
  }
  int64_t integer(int64_t low, int64_t high) {  // [low, high)
    return low + static_cast<int64_t>(uniform() * static_cast<double>(high - low));
  }

 private:
  uint64_t state_;
};

// Values in [low, high) rounded to multiples of 1/64: exact in every float type (f16 included, for
// |v| < 32), so the tensor sees the same inputs as the reference.
inline Array random_array(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0) {
  Array a(shape);
  Random random(seed);
  for (double& v : a.values) v = std::round((low + (high - low) * random.uniform()) * 64.0) / 64.0;
  return a;
}

// Small integers in [low, high), for exact tests of every dtype.
inline Array random_integers(const Shape& shape, uint64_t seed, int64_t low, int64_t high) {
  Array a(shape);
  Random random(seed);
  for (double& v : a.values) v = static_cast<double>(random.integer(low, high));
  return a;
}

inline Tensor to_tensor(const Array& a, ScalarType type = ScalarType::Float32) {
  if (type == ScalarType::Float32) {
    std::vector<float> values(a.values.begin(), a.values.end());
    return Tensor::from_vector(values, a.shape);
  }
  if (type == ScalarType::Int64) {
    std::vector<int64_t> values(a.values.begin(), a.values.end());
    return Tensor::from_vector(values, a.shape);
  }
  if (type == ScalarType::Int32) {
    std::vector<int32_t> values(a.values.begin(), a.values.end());
    return Tensor::from_vector(values, a.shape);
  }
  // Other types: an f64 buffer and a cast (exact for the small values the tests use).
  return Tensor::from_vector(a.values, a.shape).cast(type);
}

// The same values as to_tensor, but through a non-contiguous view: the data is stored with its
// axes reversed and permuted back.
inline Tensor to_permuted_view(const Array& a, ScalarType type = ScalarType::Float32) {
  Shape reversed(a.shape.rbegin(), a.shape.rend());
  Array stored(reversed);
  for_each_index(a.shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> r(index.rbegin(), index.rend());
    stored.at(r) = a.at(index);
  });
  std::vector<int64_t> order(a.shape.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
  return to_tensor(stored, type).permute(order);
}

// The same values again, as an interior slice of a larger buffer (one extra element on each side
// of every axis, filled with a value the tests never expect).
inline Tensor to_sliced_view(const Array& a, ScalarType type = ScalarType::Float32) {
  Shape bigger = a.shape;
  for (int64_t& s : bigger) s += 2;
  Array stored(bigger, 77.0);
  for_each_index(a.shape, [&](const std::vector<int64_t>& index) {
    std::vector<int64_t> shifted = index;
    for (int64_t& i : shifted) ++i;
    stored.at(shifted) = a.at(index);
  });
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (int64_t s : a.shape) ranges.emplace_back(1, s + 1);
  return to_tensor(stored, type).shrink(ranges);
}

inline Array to_array(const Tensor& t) {
  Array a;
  a.shape = t.shape();
  a.values = t.to_vector<double>();
  return a;
}

inline std::string index_string(const Shape& shape, size_t flat) {
  std::vector<int64_t> index(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    index[i] = static_cast<int64_t>(flat) % shape[i];
    flat /= static_cast<size_t>(shape[i]);
  }
  return shape_string(index);
}

// |actual - expected| <= atol + rtol·|expected| everywhere (NaNs must match NaNs, infinities must
// match exactly). Reports the number of mismatches and the first few.
inline void check_close(const Tensor& actual, const Array& expected, double atol, double rtol) {
  REQUIRE_MESSAGE(actual.shape() == expected.shape,
                  "shape ", shape_string(actual.shape()), " != expected ", shape_string(expected.shape));
  std::vector<double> got = actual.to_vector<double>();
  int mismatches = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = got[i], e = expected.values[i];
    bool ok = std::isnan(e) ? std::isnan(g) : std::isinf(e) ? g == e : std::fabs(g - e) <= atol + rtol * std::fabs(e);
    if (!ok && ++mismatches <= 5)
      first += "\n  at " + index_string(expected.shape, i) + ": got " + std::to_string(g) + ", expected " +
               std::to_string(e);
  }
  CHECK_MESSAGE(mismatches == 0, mismatches, " of ", got.size(), " elements differ (atol ", atol, ", rtol ", rtol,
                "):", first);
}

inline void check_exact(const Tensor& actual, const Array& expected) { check_close(actual, expected, 0.0, 0.0); }

// `fn` must throw a kiln::Error whose message contains `fragment`.
inline void check_error(const std::function<void()>& fn, const std::string& fragment) {
  try {
    fn();
    FAIL("expected an error containing '" << fragment << "'");
  } catch (const Error& error) {
    CHECK_MESSAGE(std::string(error.what()).find(fragment) != std::string::npos, "message: ", error.what());
  }
}

// How many kernels realizing `t` takes.
inline size_t kernel_count(const Tensor& t) { return create_schedule({t.data().node}).kernels.size(); }

// What a value becomes in `type` (the tests use small integers, so only bool changes them).
inline Array as_type(Array a, ScalarType type) {
  if (type == ScalarType::Bool)
    for (double& v : a.values) v = v != 0.0 ? 1.0 : 0.0;
  return a;
}

inline const std::vector<ScalarType>& all_types() {
  static const std::vector<ScalarType> types{
      ScalarType::Bool,    ScalarType::Int8,    ScalarType::Int16,  ScalarType::Int32,   ScalarType::Int64,
      ScalarType::UInt8,   ScalarType::UInt16,  ScalarType::UInt32, ScalarType::UInt64,  ScalarType::Float16,
      ScalarType::BFloat16, ScalarType::Float32, ScalarType::Float64};
  return types;
}

}  // namespace kiln::nn_test
