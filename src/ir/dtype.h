// Data types of kiln's IR: scalars, short vectors of a scalar, and pointers with an address space.
// A DType is a small value (compare with ==); every property is derived from the scalar table in
// dtype.cpp, the single definition of each type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/scalar_type.hpp"
#include "support/int128.h"

namespace kiln {

// ScalarType (bool, i8 … f64, and the compiler-only Void and Index) is defined in the public header.
inline constexpr int scalar_type_count = static_cast<int>(ScalarType::Index) + 1;

enum class AddrSpace : uint8_t { None, Global, Local, Register };

class DType {
 public:
  constexpr DType() = default;
  constexpr explicit DType(ScalarType scalar, uint16_t count = 1) : scalar_(scalar), count_(count) {}

  constexpr ScalarType scalar() const { return scalar_; }
  // Vector width (1 for scalars). For a pointer: the width of the pointee.
  constexpr int count() const { return count_; }
  constexpr bool is_pointer() const { return addrspace_ != AddrSpace::None; }
  constexpr AddrSpace addrspace() const { return addrspace_; }
  // Number of pointee elements a pointer addresses; -1 when unknown.
  constexpr int64_t pointer_size() const { return pointer_size_; }

  // The scalar type of a vector or the pointee of a pointer.
  constexpr DType base() const { return DType(scalar_); }
  constexpr DType vec(int width) const {
    DType result = *this;
    result.count_ = static_cast<uint16_t>(width);
    return result;
  }
  constexpr DType ptr(AddrSpace space = AddrSpace::Global, int64_t size = -1) const {
    DType result = *this;
    result.addrspace_ = space;
    result.pointer_size_ = size;
    return result;
  }
  // The value type a pointer points to (a scalar or vector).
  constexpr DType pointee() const { return DType(scalar_, count_); }

  bool is_bool() const;
  bool is_int() const;       // signed, unsigned or index (not bool)
  bool is_signed() const;    // signed integers and index
  bool is_unsigned() const;
  bool is_float() const;
  // f16 or bf16, scalar or vector: computed in f32 and rounded back after every op.
  bool is_narrow_float() const {
    return !is_pointer() && (scalar_ == ScalarType::Float16 || scalar_ == ScalarType::BFloat16);
  }
  bool is_index() const { return scalar_ == ScalarType::Index && !is_pointer(); }
  // Bytes of one scalar element (index reports 8, its widest lowering).
  int scalar_bytes() const;
  // Bytes of the whole value: scalar_bytes * count, or 8 for pointers.
  int64_t bytes() const;
  // Bits of precision: the mantissa (with the implicit bit) for floats, value bits for integers
  // (excluding the sign bit), 1 for bool.
  int precision_bits() const;

  // Short name: "f32", "i64", "f32x4", "f32*", "f16*local[64]".
  std::string name() const;

  friend constexpr bool operator==(const DType&, const DType&) = default;

 private:
  ScalarType scalar_ = ScalarType::Void;
  AddrSpace addrspace_ = AddrSpace::None;
  uint16_t count_ = 1;
  int64_t pointer_size_ = -1;
};

namespace dtypes {
inline constexpr DType void_{ScalarType::Void};
inline constexpr DType bool_{ScalarType::Bool};
inline constexpr DType i8{ScalarType::Int8};
inline constexpr DType i16{ScalarType::Int16};
inline constexpr DType i32{ScalarType::Int32};
inline constexpr DType i64{ScalarType::Int64};
inline constexpr DType u8{ScalarType::UInt8};
inline constexpr DType u16{ScalarType::UInt16};
inline constexpr DType u32{ScalarType::UInt32};
inline constexpr DType u64{ScalarType::UInt64};
inline constexpr DType f16{ScalarType::Float16};
inline constexpr DType bf16{ScalarType::BFloat16};
inline constexpr DType f32{ScalarType::Float32};
inline constexpr DType f64{ScalarType::Float64};
inline constexpr DType index{ScalarType::Index};

// Every scalar type that can hold tensor data (all but void and index), in promotion order.
inline constexpr DType all_data_scalars[] = {bool_, u8, i8, u16, i16, bf16, f16, u32,
                                             i32,   f32, u64, i64, f64};

// The scalar whose name() is `name`, if any ("f32", "bool", "index", …).
std::optional<DType> from_name(const std::string& name);
}  // namespace dtypes

// True when every value of `from` converts to `to` without loss, by numpy's rules ("safe" casting;
// like numpy, 64-bit integers count as safely castable to f64).
bool can_cast_safely(DType from, DType to);

// The result type of a binary operation on `a` and `b` under numpy's promotion rules (bool < ints <
// floats; i8+u8 → i16; i32+f32 → f64; u64+i64 → f64). bf16 joins the lattice between the 8-bit
// integers and f32 (bf16+f16 → f32). Both must be scalars.
DType promote_types(DType a, DType b);

// The representable range of an integer or bool scalar type. Index has no range; it reports the
// int64 range, the widest lowering kiln supports.
int128 min_value(DType dtype);
int128 max_value(DType dtype);
// Largest finite value of a float type, and its negation as the smallest.
double max_finite(DType dtype);

}  // namespace kiln
