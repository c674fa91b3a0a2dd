// Creation composites: arange with a start and step, eye, and the seeded random tensors. All are
// lazy graphs over the integer arange primitive, so they fuse into the kernels that consume them.
//
// The random generator is SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
// generators", 2014) evaluated at a counter: element i of a stream seeded with s is
//   mix(s + (i + 1) * 0x9E3779B97F4A7C15),
//   mix(z) = z3 ^ (z3 >> 31), z3 = (z2 ^ (z2 >> 27)) * 0x94D049BB133111EB,
//                             z2 = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9   (all mod 2^64)
// which is exactly the (i+1)-th output of the sequential SplitMix64 seeded with s. Each value
// depends only on (seed, i), so results are reproducible on any backend and thread count; only
// u64 add, mul, xor and logical shifts are used.
#include <cmath>
#include <numbers>

#include "support/error.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using S = ScalarType;

// A u64 constant: Tensor::scalar takes a double, which cannot hold every 64-bit value, so the
// constant is assembled from its two exact 32-bit halves.
Tensor u64_constant(uint64_t value) {
  Tensor high = Tensor::scalar(static_cast<double>(value >> 32), S::UInt64);
  Tensor low = Tensor::scalar(static_cast<double>(value & 0xFFFFFFFFu), S::UInt64);
  return high.shift_left(Tensor::scalar(32, S::UInt64)).bitwise_or(low);
}

// Outputs first + 1 … first + count of SplitMix64 seeded with `seed`, stepping by `stride`
// outputs (1: consecutive; 2: every other one, for pairs).
Tensor splitmix64(uint64_t seed, int64_t count, int64_t first, int64_t stride) {
  Tensor counter = Tensor::arange(count, S::UInt64) * u64_constant(static_cast<uint64_t>(stride)) +
                   u64_constant(static_cast<uint64_t>(first) + 1);
  Tensor z = u64_constant(seed) + counter * u64_constant(0x9E3779B97F4A7C15ull);
  auto shift = [](const Tensor& x, int bits) { return x.shift_right(Tensor::scalar(bits, S::UInt64)); };
  z = z.bitwise_xor(shift(z, 30)) * u64_constant(0xBF58476D1CE4E5B9ull);
  z = z.bitwise_xor(shift(z, 27)) * u64_constant(0x94D049BB133111EBull);
  return z.bitwise_xor(shift(z, 31));
}

// Significant bits of a float type: uniform values use exactly that many random bits.
int precision_bits(S type) {
  switch (type) {
    case S::Float16: return 11;
    case S::BFloat16: return 8;
    case S::Float32: return 24;
    default: return 53;
  }
}

// Uniform [0, 1) in the compute type of `type` (f64 for f64, else f32), with the top
// precision_bits(type) bits of each 64-bit value: every value is a multiple of 2^-bits.
Tensor unit_uniform(const Tensor& bits, S type) {
  int precision = precision_bits(type);
  S compute = type == S::Float64 ? S::Float64 : S::Float32;
  Tensor top = bits.shift_right(Tensor::scalar(64 - precision, S::UInt64));
  return top.cast(compute) * Tensor::scalar(std::ldexp(1.0, -precision), compute);
}

void require_float(S type, std::string_view operation) {
  if (!DType(type).is_float())
    throw UserError(str_cat(operation, ": random values need a float dtype, got ", scalar_type_name(type)));
}

void require_shape(const Shape& shape, std::string_view operation) {
  for (int64_t size : shape)
    if (size < 0) throw UserError(str_cat(operation, ": negative dimension in shape ", shape_string(shape)));
}

}  // namespace

// numpy's arange: ceil((stop - start) / step) elements, start + i*step. Integer dtypes with an
// integral start and step compute in i64 (exact); everything else computes in f64 and rounds
// once to the dtype.
Tensor Tensor::arange(double start, double stop, double step, ScalarType type) {
  to_dtype(type);
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    throw UserError(str_cat("arange: start ", start, ", stop ", stop, " and step ", step, " must be finite"));
  if (step == 0) throw UserError("arange: step must not be zero");
  double length = std::ceil((stop - start) / step);
  if (length > 9.0e15) throw UserError(str_cat("arange: ", length, " elements are too many"));
  int64_t count = length > 0 ? static_cast<int64_t>(length) : 0;
  DType dtype(type);
  bool integral = std::floor(start) == start && std::floor(step) == step && std::fabs(start) < 9.2e18 &&
                  std::fabs(step) < 9.2e18;
  if (dtype.is_int() && integral)
    return (arange(count, S::Int64) * Tensor::scalar(step, S::Int64) + Tensor::scalar(start, S::Int64)).cast(type);
  return (arange(count, S::Float64) * Tensor::scalar(step, S::Float64) + Tensor::scalar(start, S::Float64)).cast(type);
}

// One where column - row == k.
Tensor Tensor::eye(int64_t n, int64_t m, int64_t k, ScalarType type) {
  to_dtype(type);
  if (n < 0) throw UserError(str_cat("eye: negative number of rows ", n));
  if (m < 0) m = n;
  Tensor rows = arange(n, S::Int64).reshape({n, 1});
  Tensor columns = arange(m, S::Int64).reshape({1, m});
  return (columns - rows).eq(Tensor::scalar(static_cast<double>(k), S::Int64)).cast(type);
}

// low + (high - low) * u with u uniform on [0, 1) in steps of 2^-p (p = the dtype's precision),
// computed in f32 (f64 for f64) and rounded to the dtype: values lie in [low, high], high itself
// only where the final rounding reaches it. Element i uses output i + 1 of SplitMix64(seed).
Tensor Tensor::uniform(Shape shape, uint64_t seed, double low, double high, ScalarType type) {
  to_dtype(type);
  require_float(type, "uniform");
  require_shape(shape, "uniform");
  int64_t count = shape_numel(shape);
  Tensor u = unit_uniform(splitmix64(seed, count, 0, 1), type);
  Tensor value = u * Tensor::scalar(high - low, u.dtype()) + Tensor::scalar(low, u.dtype());
  return value.cast(type).reshape(std::move(shape));
}

// Box–Muller: z = sqrt(-2 ln u1) * sin(2π u2), u1 ∈ (0, 1] and u2 ∈ [0, 1) from outputs 2i + 1 and
// 2i + 2 of SplitMix64(seed) (the sine half of each pair; the cosine half is not used). Computed
// in f32 (f64 for f64). The tails end where u1's resolution does: u1 >= 2^-24 in f32 gives
// |z| <= 5.8, u1 >= 2^-53 in f64 gives |z| <= 8.6.
Tensor Tensor::normal(Shape shape, uint64_t seed, double mean, double stddev, ScalarType type) {
  to_dtype(type);
  require_float(type, "normal");
  require_shape(shape, "normal");
  int64_t count = shape_numel(shape);
  S compute = type == S::Float64 ? S::Float64 : S::Float32;
  Tensor u1 = Tensor::scalar(1, compute) - unit_uniform(splitmix64(seed, count, 0, 2), compute);
  Tensor u2 = unit_uniform(splitmix64(seed, count, 1, 2), compute);
  Tensor radius = (u1.log() * Tensor::scalar(-2, compute)).sqrt();
  Tensor z = radius * (u2 * Tensor::scalar(2 * std::numbers::pi, compute)).sin();
  return (z * Tensor::scalar(stddev, compute) + Tensor::scalar(mean, compute)).cast(type).reshape(std::move(shape));
}

}  // namespace kiln
