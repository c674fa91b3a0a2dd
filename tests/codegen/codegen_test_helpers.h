// Helpers for the codegen tests: building kernel ASTs by hand, host buffers that hold any dtype, and
// compiling + loading a kernel in one call.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "codegen/cpu_codegen.h"
#include "ir/build.h"
#include "ir/evaluate.h"
#include "support/float_rounding.h"

namespace kiln::testing {

// --- kernel AST builders (docs/kernel-ast.md) ---

inline UOpPtr global(DType element, int64_t count, int64_t slot) {
  return UOp::make(Ops::DEFINE_GLOBAL, element.ptr(AddrSpace::Global, count), {}, slot);
}
inline UOpPtr index(const UOpPtr& buffer, const UOpPtr& offset) {
  return UOp::make(Ops::INDEX, buffer->dtype(), {buffer, offset});
}
inline UOpPtr index(const UOpPtr& buffer, const UOpPtr& offset, const UOpPtr& valid) {
  return UOp::make(Ops::INDEX, buffer->dtype(), {buffer, offset, valid});
}
inline UOpPtr load(const UOpPtr& index_node) {
  return UOp::make(Ops::LOAD, index_node->dtype().pointee(), {index_node});
}
inline UOpPtr load(const UOpPtr& index_node, const UOpPtr& alternative) {
  return UOp::make(Ops::LOAD, index_node->dtype().pointee(), {index_node, alternative});
}
inline UOpPtr store(const UOpPtr& index_node, const UOpPtr& value) {
  return UOp::make(Ops::STORE, dtypes::void_, {index_node, value});
}
inline UOpPtr reduce(Ops op, const UOpPtr& value, std::vector<UOpPtr> ranges) {
  std::vector<UOpPtr> sources{value};
  sources.insert(sources.end(), ranges.begin(), ranges.end());
  return UOp::make(Ops::REDUCE, value->dtype(), std::move(sources), op);
}
inline UOpPtr kernel(const std::string& name, std::vector<UOpPtr> stores) {
  return UOp::make(Ops::SINK, dtypes::void_, std::move(stores), name);
}
inline UOpPtr idx(int64_t value) { return const_int(dtypes::index, value); }

inline KernelFunction compile_and_load(const UOpPtr& ast) {
  CompiledKernel compiled = cpu_compile_kernel(ast);
  return cpu_load(compiled.object, compiled.name);
}

// --- f16 / bf16 bit patterns (plain C++, independent of the code under test) ---

inline double f16_to_double(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  double value = exponent == 0    ? std::ldexp(mantissa, -24)
                 : exponent == 31 ? (mantissa != 0 ? NAN : INFINITY)
                                  : std::ldexp(mantissa + 1024, exponent - 25);
  return (bits & 0x8000) != 0 ? -value : value;
}
// `value` rounded to f16 (nearest even) and encoded.
inline uint16_t f16_from_double(double value) {
  double rounded = round_to_f16(value);
  uint16_t sign = std::signbit(rounded) ? 0x8000 : 0;
  rounded = std::fabs(rounded);
  if (std::isnan(rounded)) return sign | 0x7E00;
  if (std::isinf(rounded)) return sign | 0x7C00;
  if (rounded < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(std::ldexp(rounded, 24));
  int exponent = std::ilogb(rounded);
  auto mantissa = static_cast<uint16_t>(std::ldexp(rounded, 10 - exponent) - 1024);
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | mantissa);
}
inline double bf16_to_double(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}
inline uint16_t bf16_from_double(double value) {
  double rounded = round_to_bf16(value);
  if (std::isnan(rounded)) return std::signbit(rounded) ? 0xFFC0 : 0x7FC0;
  auto narrow = static_cast<float>(rounded);  // exact: bf16 values are f32 values
  uint32_t wide;
  std::memcpy(&wide, &narrow, 4);
  return static_cast<uint16_t>(wide >> 16);
}

// --- host buffers ---

// `count` elements of `dtype`, 64-byte aligned as kernels may assume, filled with 0xA5 bytes so that
// an element the kernel failed to write is visible.
class TestBuffer {
 public:
  TestBuffer(DType dtype, int64_t count) : dtype_(dtype), count_(count) {
    size_t bytes = (static_cast<size_t>(count) * static_cast<size_t>(dtype.scalar_bytes()) + 63) / 64 * 64;
    data_.reset(static_cast<unsigned char*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes)));
    std::memset(data_.get(), 0xA5, bytes == 0 ? 64 : bytes);
  }
  DType dtype() const { return dtype_; }
  int64_t count() const { return count_; }
  void* data() { return data_.get(); }
  unsigned char* bytes() { return data_.get(); }
  template <class T>
  T* as() { return reinterpret_cast<T*>(data_.get()); }

  // Stores a value of the buffer's dtype: integers wrap into the type, floats round to nearest even.
  void set(int64_t i, const ScalarValue& value) {
    unsigned char* at = data_.get() + i * dtype_.scalar_bytes();
    switch (dtype_.scalar()) {
      case ScalarType::Float16: { uint16_t bits = f16_from_double(value.real); std::memcpy(at, &bits, 2); break; }
      case ScalarType::BFloat16: { uint16_t bits = bf16_from_double(value.real); std::memcpy(at, &bits, 2); break; }
      case ScalarType::Float32: { auto v = static_cast<float>(value.real); std::memcpy(at, &v, 4); break; }
      case ScalarType::Float64: std::memcpy(at, &value.real, 8); break;
      default: {
        auto bits = static_cast<uint64_t>(value.integer);  // little-endian: the low bytes are the value
        if (dtype_.is_bool()) bits = value.integer != 0 ? 1 : 0;
        std::memcpy(at, &bits, static_cast<size_t>(dtype_.scalar_bytes()));
      }
    }
  }
  void set_real(int64_t i, double value) { set(i, ScalarValue{dtype_, 0, value}); }
  void set_int(int64_t i, int128 value) { set(i, ScalarValue{dtype_, value, 0.0}); }

  ScalarValue get(int64_t i) const {
    const unsigned char* at = data_.get() + i * dtype_.scalar_bytes();
    ScalarValue value{dtype_, 0, 0.0};
    switch (dtype_.scalar()) {
      case ScalarType::Float16: { uint16_t bits; std::memcpy(&bits, at, 2); value.real = f16_to_double(bits); break; }
      case ScalarType::BFloat16: { uint16_t bits; std::memcpy(&bits, at, 2); value.real = bf16_to_double(bits); break; }
      case ScalarType::Float32: { float v; std::memcpy(&v, at, 4); value.real = v; break; }
      case ScalarType::Float64: std::memcpy(&value.real, at, 8); break;
      default: {
        uint64_t bits = 0;
        std::memcpy(&bits, at, static_cast<size_t>(dtype_.scalar_bytes()));
        int width = dtype_.scalar_bytes() * 8;
        if (dtype_.is_signed() && width < 64 && (bits >> (width - 1)) != 0) bits |= ~uint64_t{0} << width;
        value.integer = dtype_.is_signed() ? int128{static_cast<int64_t>(bits)} : int128{bits};
      }
    }
    return value;
  }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  DType dtype_;
  int64_t count_;
  std::unique_ptr<unsigned char, Free> data_;
};

// Exact equality of two values of one dtype; NaN equals NaN, and zeros must agree in sign.
inline bool same_value(const ScalarValue& a, const ScalarValue& b) {
  if (!a.dtype.is_float()) return a.integer == b.integer;
  if (std::isnan(a.real) || std::isnan(b.real)) return std::isnan(a.real) && std::isnan(b.real);
  return a.real == b.real && std::signbit(a.real) == std::signbit(b.real);
}

// The ALU ops that have a meaning for `dtype` (ops.def), as the renderer tests exercise them.
inline std::vector<Ops> alu_ops_of(DType dtype) {
  if (dtype.is_bool()) return {Ops::ADD, Ops::SUB, Ops::MUL, Ops::MAX, Ops::CMPLT, Ops::CMPNE, Ops::CMPEQ, Ops::AND,
                               Ops::OR, Ops::XOR, Ops::NOT, Ops::WHERE};
  if (dtype.is_float()) return {Ops::ADD, Ops::SUB, Ops::MUL, Ops::FDIV, Ops::MAX, Ops::CMPLT, Ops::CMPNE, Ops::CMPEQ,
                                Ops::NEG, Ops::SQRT, Ops::RECIPROCAL, Ops::TRUNC, Ops::ROUND_EVEN, Ops::WHERE, Ops::MULACC};
  return {Ops::ADD, Ops::SUB, Ops::MUL, Ops::IDIV, Ops::MOD, Ops::MAX, Ops::CMPLT, Ops::CMPNE, Ops::CMPEQ,
          Ops::AND, Ops::OR, Ops::XOR, Ops::SHL, Ops::SHR, Ops::NEG, Ops::NOT, Ops::WHERE};
}

inline std::string describe(const ScalarValue& value) {
  if (value.dtype.is_float()) return std::to_string(value.real);
  return to_string(value.integer);
}

}  // namespace kiln::testing
