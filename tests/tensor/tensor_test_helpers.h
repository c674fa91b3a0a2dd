// Helpers for the Tensor parity tests: host-side tensors that hold every value of every kiln
// dtype exactly, conversion to and from kiln Tensors (f16/bf16 by their bit layout), plain
// reference loops (elementwise with numpy broadcasting, movement ops), deterministic inputs, and
// one compare function with a stated tolerance that reports the worst element when it fails.
//
// Values are stored as long double: on x86-64 that is the 80-bit format with a 64-bit
// significand, which holds every i64, u64 and f64 value exactly.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln::test {

static_assert(std::numeric_limits<long double>::digits >= 64, "the helpers need an 80-bit long double");

using S = ScalarType;

inline const std::vector<S> kAllTypes = {S::Bool,   S::Int8,   S::Int16,   S::Int32,    S::Int64,   S::UInt8,  S::UInt16,
                                         S::UInt32, S::UInt64, S::Float16, S::BFloat16, S::Float32, S::Float64};
inline const std::vector<S> kIntTypes = {S::Int8, S::Int16, S::Int32, S::Int64, S::UInt8, S::UInt16, S::UInt32, S::UInt64};
inline const std::vector<S> kFloatTypes = {S::Float16, S::BFloat16, S::Float32, S::Float64};

inline bool is_float_type(S t) { return t == S::Float16 || t == S::BFloat16 || t == S::Float32 || t == S::Float64; }
inline bool is_signed_type(S t) { return t == S::Int8 || t == S::Int16 || t == S::Int32 || t == S::Int64; }
inline bool is_unsigned_type(S t) { return t == S::UInt8 || t == S::UInt16 || t == S::UInt32 || t == S::UInt64; }
inline bool is_int_type(S t) { return is_signed_type(t) || is_unsigned_type(t); }
inline int type_bits(S t) { return 8 * scalar_type_size(t); }
inline std::string type_name(S t) { return scalar_type_name(t); }

// ---- float formats ----

struct FloatFormat {
  int precision;     // significand bits, the implicit one included
  int min_exponent;  // exponent of the smallest normal number (2^min_exponent)
  int max_exponent;  // exponent of the largest finite number's leading bit
};

inline FloatFormat float_format(S t) {
  switch (t) {
    case S::Float16: return {11, -14, 15};
    case S::BFloat16: return {8, -126, 127};
    case S::Float32: return {24, -126, 127};
    default: return {53, -1022, 1023};
  }
}

inline long double max_finite(S t) {
  FloatFormat f = float_format(t);
  return std::ldexp(2.0L - std::ldexp(1.0L, 1 - f.precision), f.max_exponent);
}

// v rounded to the nearest value of float type t (ties to even), with overflow to ±inf and
// gradual underflow: one rounding straight from the exact value, never through another format.
inline long double round_to_float(S t, long double v) {
  if (v == 0 || !std::isfinite(v)) return v;
  FloatFormat f = float_format(t);
  int exponent = std::max(std::ilogb(v), f.min_exponent);
  long double quantum = std::ldexp(1.0L, exponent - (f.precision - 1));
  long double rounded = std::nearbyint(v / quantum) * quantum;
  if (std::fabs(rounded) > max_finite(t)) return std::copysign(std::numeric_limits<long double>::infinity(), v);
  if (rounded == 0) return std::copysign(0.0L, v);
  return rounded;
}

inline long double int_min(S t) { return is_signed_type(t) ? -std::ldexp(1.0L, type_bits(t) - 1) : 0.0L; }
inline long double int_max(S t) {
  return is_signed_type(t) ? std::ldexp(1.0L, type_bits(t) - 1) - 1 : std::ldexp(1.0L, type_bits(t)) - 1;
}

// The 64-bit two's complement pattern of an integer value (reduced modulo 2^64): modular arithmetic
// on these patterns is exactly the wrap-around arithmetic of every integer dtype.
inline uint64_t to_bits64(long double v) {
  REQUIRE(std::isfinite(v));
  long double two64 = std::ldexp(1.0L, 64);
  v = std::fmod(v, two64);  // exact, and O(1) even for values far outside the range
  if (v < 0) v += two64;
  return static_cast<uint64_t>(v);
}

// An integer value (or modular pattern) wrapped into the range of integer type t.
inline long double wrap_integer(S t, long double v) {
  uint64_t bits = to_bits64(v);
  int width = type_bits(t);
  if (width < 64) bits &= (uint64_t{1} << width) - 1;
  if (is_signed_type(t) && width < 64 && (bits >> (width - 1)) != 0) return static_cast<long double>(bits) - std::ldexp(1.0L, width);
  if (is_signed_type(t) && width == 64) return static_cast<long double>(static_cast<int64_t>(bits));
  return static_cast<long double>(bits);
}

// An exact value converted to dtype t the way kiln (and numpy) converts: floats round, integers
// wrap (v must be integral), bool is v != 0.
inline long double convert_to(S t, long double v) {
  if (t == S::Bool) return v != 0 ? 1 : 0;
  if (is_float_type(t)) return round_to_float(t, v);
  return wrap_integer(t, v);
}

// ---- f16 / bf16 bit layouts ----

inline uint16_t f16_bits(long double v) {  // v must be an f16 value (rounded already)
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return 0x7E00;
  v = std::fabs(v);
  if (std::isinf(v)) return sign | 0x7C00;
  if (v == 0) return sign;
  int exponent = std::ilogb(v);
  if (exponent < -14) return sign | static_cast<uint16_t>(std::ldexp(v, 24));  // subnormal: v / 2^-24
  auto mantissa = static_cast<uint16_t>(std::ldexp(v, 10 - exponent) - 1024);
  return sign | static_cast<uint16_t>((exponent + 15) << 10) | mantissa;
}

inline long double f16_value(uint16_t bits) {
  long double sign = (bits & 0x8000) ? -1.0L : 1.0L;
  int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  if (exponent == 0x1F) return mantissa ? std::numeric_limits<long double>::quiet_NaN() : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(static_cast<long double>(mantissa), -24);
  return sign * std::ldexp(static_cast<long double>(mantissa + 1024), exponent - 25);
}

inline uint16_t bf16_bits(long double v) {  // v must be a bf16 value: the top half of its f32
  float f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  return static_cast<uint16_t>(bits >> 16);
}

inline long double bf16_value(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

// ---- host tensors ----

struct HostTensor {
  S type = S::Float32;
  Shape shape;
  std::vector<long double> values;  // row-major
  int64_t numel() const { return static_cast<int64_t>(values.size()); }
};

inline int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

inline std::string shape_text(const Shape& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

inline HostTensor host(S type, Shape shape, std::vector<long double> values) {
  REQUIRE(numel_of(shape) == static_cast<int64_t>(values.size()));
  for (long double& v : values) v = convert_to(type, v);
  return {type, std::move(shape), std::move(values)};
}

template <class T>
void store(std::vector<unsigned char>& bytes, size_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}
template <class T>
T load(const std::vector<unsigned char>& bytes, size_t i) {
  T value;
  std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
  return value;
}

inline std::vector<unsigned char> encode(const HostTensor& h) {
  std::vector<unsigned char> bytes(h.values.size() * static_cast<size_t>(scalar_type_size(h.type)));
  for (size_t i = 0; i < h.values.size(); ++i) {
    long double v = h.values[i];
    switch (h.type) {
      case S::Bool: store<uint8_t>(bytes, i, v != 0); break;
      case S::Int8: store(bytes, i, static_cast<int8_t>(v)); break;
      case S::Int16: store(bytes, i, static_cast<int16_t>(v)); break;
      case S::Int32: store(bytes, i, static_cast<int32_t>(v)); break;
      case S::Int64: store(bytes, i, static_cast<int64_t>(v)); break;
      case S::UInt8: store(bytes, i, static_cast<uint8_t>(v)); break;
      case S::UInt16: store(bytes, i, static_cast<uint16_t>(v)); break;
      case S::UInt32: store(bytes, i, static_cast<uint32_t>(v)); break;
      case S::UInt64: store(bytes, i, static_cast<uint64_t>(v)); break;
      case S::Float16: store(bytes, i, f16_bits(v)); break;
      case S::BFloat16: store(bytes, i, bf16_bits(v)); break;
      case S::Float32: store(bytes, i, static_cast<float>(v)); break;
      case S::Float64: store(bytes, i, static_cast<double>(v)); break;
      default: FAIL("encode: unsupported type");
    }
  }
  return bytes;
}

inline Tensor to_tensor(const HostTensor& h) {
  std::vector<unsigned char> bytes = encode(h);
  return Tensor::from_data(bytes.data(), h.shape, h.type);
}

// Realizes t and reads its values back by their bit layout (no cast kernel involved).
inline HostTensor from_tensor(const Tensor& t) {
  HostTensor h{t.dtype(), t.shape(), {}};
  size_t n = static_cast<size_t>(t.numel());
  std::vector<unsigned char> bytes(n * static_cast<size_t>(scalar_type_size(t.dtype())));
  t.copy_to(bytes.data(), bytes.size());
  h.values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    switch (h.type) {
      case S::Bool: h.values[i] = load<uint8_t>(bytes, i) != 0; break;
      case S::Int8: h.values[i] = load<int8_t>(bytes, i); break;
      case S::Int16: h.values[i] = load<int16_t>(bytes, i); break;
      case S::Int32: h.values[i] = load<int32_t>(bytes, i); break;
      case S::Int64: h.values[i] = static_cast<long double>(load<int64_t>(bytes, i)); break;
      case S::UInt8: h.values[i] = load<uint8_t>(bytes, i); break;
      case S::UInt16: h.values[i] = load<uint16_t>(bytes, i); break;
      case S::UInt32: h.values[i] = load<uint32_t>(bytes, i); break;
      case S::UInt64: h.values[i] = static_cast<long double>(load<uint64_t>(bytes, i)); break;
      case S::Float16: h.values[i] = f16_value(load<uint16_t>(bytes, i)); break;
      case S::BFloat16: h.values[i] = bf16_value(load<uint16_t>(bytes, i)); break;
      case S::Float32: h.values[i] = load<float>(bytes, i); break;
      case S::Float64: h.values[i] = load<double>(bytes, i); break;
      default: FAIL("from_tensor: unsupported type");
    }
  }
  return h;
}

// ---- deterministic inputs ----

// A small counter-based generator (SplitMix64), so inputs do not depend on the library's random
// functions under test or on the platform's <random> distributions.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  long double uniform(long double low, long double high) {  // [low, high)
    return low + (high - low) * static_cast<long double>(next() >> 11) * std::ldexp(1.0L, -53);
  }
  // An integer uniform in [low, high] (both integral and within 2^64 of each other).
  long double integer(long double low, long double high) {
    long double span = high - low + 1;
    if (span >= std::ldexp(1.0L, 64)) return low + static_cast<long double>(next());
    return low + static_cast<long double>(next() % static_cast<uint64_t>(span));
  }

 private:
  uint64_t state_;
};

// Values of type t in [low, high] (clamped to t's range; integers are integral), `count` of them,
// with the listed specials placed first (those that t can represent).
inline std::vector<long double> sample_values(S t, int64_t count, long double low, long double high, uint64_t seed,
                                              const std::vector<long double>& specials = {}) {
  Random random(seed);
  std::vector<long double> values;
  for (long double s : specials) {
    if (static_cast<int64_t>(values.size()) >= count) break;
    if (!is_float_type(t) && (!std::isfinite(s) || std::floor(s) != s || s < int_min(t) || s > int_max(t))) continue;
    if (t == S::Bool && s != 0 && s != 1) continue;
    values.push_back(convert_to(t, s));
  }
  if (t == S::Bool) {
    low = 0;
    high = 1;
  } else if (!is_float_type(t)) {
    low = std::max(std::ceil(low), int_min(t));
    high = std::min(std::floor(high), int_max(t));
  }
  while (static_cast<int64_t>(values.size()) < count) {
    long double v = is_float_type(t) ? random.uniform(low, high) : random.integer(low, high);
    values.push_back(convert_to(t, v));
  }
  return values;
}

// Log-uniform magnitudes in [2^low_exponent, 2^high_exponent), random signs when `signed_values`.
inline std::vector<long double> log_uniform_values(S t, int64_t count, int low_exponent, int high_exponent,
                                                   bool signed_values, uint64_t seed) {
  Random random(seed);
  std::vector<long double> values;
  for (int64_t i = 0; i < count; ++i) {
    long double v = std::exp2(random.uniform(low_exponent, high_exponent));
    if (signed_values && (random.next() & 1)) v = -v;
    values.push_back(convert_to(t, v));
  }
  return values;
}

inline const long double kInf = std::numeric_limits<long double>::infinity();
inline const long double kNaN = std::numeric_limits<long double>::quiet_NaN();

// ---- reference loops ----

inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    REQUIRE((da == db || da == 1 || db == 1));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// The flat index into a tensor of `shape` of the element that broadcasting to `out` puts at
// output position `multi` (leading axes of out missing from shape are ignored).
inline int64_t broadcast_source_index(const Shape& shape, const Shape& out, const std::vector<int64_t>& multi) {
  int64_t index = 0;
  size_t offset = out.size() - shape.size();
  for (size_t i = 0; i < shape.size(); ++i) index = index * shape[i] + (shape[i] == 1 ? 0 : multi[i + offset]);
  return index;
}

// Calls visit(flat, multi_index) for every element of `shape` in row-major order.
inline void for_each_index(const Shape& shape, const std::function<void(int64_t, const std::vector<int64_t>&)>& visit) {
  int64_t n = numel_of(shape);
  std::vector<int64_t> multi(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    visit(flat, multi);
    for (size_t axis = shape.size(); axis-- > 0;) {
      if (++multi[axis] < shape[axis]) break;
      multi[axis] = 0;
    }
  }
}

// out[i] = convert_to(out_type, f(x[i])): the reference returns the exact (or best) value and
// the conversion rounds/wraps it once.
inline HostTensor map_unary(const HostTensor& x, S out_type, const std::function<long double(long double)>& f) {
  HostTensor out{out_type, x.shape, std::vector<long double>(x.values.size())};
  for (size_t i = 0; i < x.values.size(); ++i) out.values[i] = convert_to(out_type, f(x.values[i]));
  return out;
}

// The same for two operands with numpy broadcasting.
inline HostTensor map_binary(const HostTensor& a, const HostTensor& b, S out_type,
                             const std::function<long double(long double, long double)>& f) {
  Shape shape = broadcast_shape(a.shape, b.shape);
  HostTensor out{out_type, shape, std::vector<long double>(static_cast<size_t>(numel_of(shape)))};
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    long double x = a.values[static_cast<size_t>(broadcast_source_index(a.shape, shape, multi))];
    long double y = b.values[static_cast<size_t>(broadcast_source_index(b.shape, shape, multi))];
    out.values[static_cast<size_t>(flat)] = convert_to(out_type, f(x, y));
  });
  return out;
}

// Host versions of the movement ops, for building the expected values of non-contiguous inputs.
inline HostTensor host_permute(const HostTensor& x, const std::vector<int64_t>& order) {
  Shape shape;
  for (int64_t axis : order) shape.push_back(x.shape[static_cast<size_t>(axis)]);
  HostTensor out{x.type, shape, std::vector<long double>(x.values.size())};
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    std::vector<int64_t> source(x.shape.size());
    for (size_t i = 0; i < order.size(); ++i) source[static_cast<size_t>(order[i])] = multi[i];
    int64_t index = 0;
    for (size_t i = 0; i < x.shape.size(); ++i) index = index * x.shape[i] + source[i];
    out.values[static_cast<size_t>(flat)] = x.values[static_cast<size_t>(index)];
  });
  return out;
}

inline HostTensor host_shrink(const HostTensor& x, const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  Shape shape = x.shape;
  for (size_t i = 0; i < ranges.size(); ++i) shape[i] = ranges[i].second - ranges[i].first;
  HostTensor out{x.type, shape, std::vector<long double>(static_cast<size_t>(numel_of(shape)))};
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    int64_t index = 0;
    for (size_t i = 0; i < x.shape.size(); ++i)
      index = index * x.shape[i] + multi[i] + (i < ranges.size() ? ranges[i].first : 0);
    out.values[static_cast<size_t>(flat)] = x.values[static_cast<size_t>(index)];
  });
  return out;
}

inline HostTensor host_expand(const HostTensor& x, const Shape& shape) {
  HostTensor out{x.type, shape, std::vector<long double>(static_cast<size_t>(numel_of(shape)))};
  for_each_index(shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    out.values[static_cast<size_t>(flat)] = x.values[static_cast<size_t>(broadcast_source_index(x.shape, shape, multi))];
  });
  return out;
}

inline HostTensor host_flip(const HostTensor& x, const std::vector<int64_t>& axes) {
  HostTensor out{x.type, x.shape, std::vector<long double>(x.values.size())};
  for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    int64_t index = 0;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      bool flipped = std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) != axes.end();
      index = index * x.shape[i] + (flipped ? x.shape[i] - 1 - multi[i] : multi[i]);
    }
    out.values[static_cast<size_t>(flat)] = x.values[static_cast<size_t>(index)];
  });
  return out;
}

// ---- comparison ----

// A value's position on the number line of float type t: consecutive values differ by one.
inline long double ordinal(S t, long double v) {
  FloatFormat f = float_format(t);
  long double magnitude = std::fabs(v);
  if (std::isinf(v)) magnitude = std::ldexp(1.0L, f.max_exponent + 1);  // one past the largest finite
  long double binade = std::ldexp(1.0L, f.precision - 1);  // values per binade (and subnormals)
  long double position;
  if (magnitude < std::ldexp(1.0L, f.min_exponent)) {
    position = magnitude / std::ldexp(1.0L, f.min_exponent - (f.precision - 1));
  } else {
    int exponent = std::ilogb(magnitude);
    position = binade * (1 + exponent - f.min_exponent) +
               (magnitude - std::ldexp(1.0L, exponent)) / std::ldexp(1.0L, exponent - (f.precision - 1));
  }
  return std::signbit(v) ? -position : position;
}

// Distance in units in the last place of t between two values of t.
inline long double ulp_distance(S t, long double a, long double b) { return std::fabs(ordinal(t, a) - ordinal(t, b)); }

// Accepted difference: integers and bool must match exactly; floats may differ by `ulps` units in
// the last place of the dtype, or by atol + rtol*|expected|, whichever is larger. NaN matches
// NaN only; ±inf match themselves only; -0 matches +0 unless `signed_zero`.
struct Tolerance {
  long double ulps = 0;
  long double rtol = 0;
  long double atol = 0;
  bool signed_zero = false;
};

struct Comparison {
  bool ok = true;
  std::string message;  // the worst element, when not ok
  long double worst_ulps = 0;  // the largest ulp error seen among finite matches (for reports)
};

inline std::string value_text(long double v) {
  std::ostringstream out;
  out.precision(21);
  out << v;
  return out.str();
}

inline Comparison compare(const HostTensor& got, const HostTensor& expected, const Tolerance& tolerance,
                          const HostTensor* input = nullptr) {
  Comparison result;
  if (got.type != expected.type || got.shape != expected.shape) {
    result.ok = false;
    result.message = "dtype/shape " + type_name(got.type) + shape_text(got.shape) + " != expected " +
                     type_name(expected.type) + shape_text(expected.shape);
    return result;
  }
  long double worst_excess = 0;
  for (size_t i = 0; i < got.values.size(); ++i) {
    long double g = got.values[i], e = expected.values[i];
    bool match;
    long double excess = 0;  // how far beyond the tolerance
    if (std::isnan(e) || std::isnan(g)) {
      match = std::isnan(e) && std::isnan(g);
    } else if (std::isinf(e) || std::isinf(g) || !is_float_type(got.type)) {
      match = g == e;
    } else {
      long double ulps = ulp_distance(got.type, g, e);
      long double allowed = tolerance.atol + tolerance.rtol * std::fabs(e);
      match = ulps <= tolerance.ulps || std::fabs(g - e) <= allowed;
      if (tolerance.signed_zero && g == 0 && e == 0) match = std::signbit(g) == std::signbit(e);
      result.worst_ulps = std::max(result.worst_ulps, ulps);
      excess = ulps;
    }
    if (!match && (result.ok || excess > worst_excess || !std::isfinite(excess))) {
      result.ok = false;
      worst_excess = std::isfinite(excess) ? excess : worst_excess;
      std::ostringstream out;
      out << "element " << i << " of " << got.values.size() << " (" << type_name(got.type) << "): got "
          << value_text(g) << ", expected " << value_text(e);
      if (is_float_type(got.type) && std::isfinite(g) && std::isfinite(e))
        out << " (" << value_text(ulp_distance(got.type, g, e)) << " ulp)";
      if (input && i < input->values.size()) out << ", input " << value_text(input->values[i]);
      result.message = out.str();
    }
  }
  return result;
}

// The message of the kiln::Error that `action` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace kiln::test

// Compares a Tensor (realized here) with host values; prints the worst element on failure.
#define CHECK_TENSOR(tensor, expected, tolerance, ...)                                              \
  do {                                                                                              \
    ::kiln::test::Comparison kiln_cmp_ = ::kiln::test::compare(::kiln::test::from_tensor(tensor),   \
                                                               (expected), (tolerance), ##__VA_ARGS__); \
    INFO(kiln_cmp_.message);                                                                        \
    CHECK(kiln_cmp_.ok);                                                                            \
  } while (0)
