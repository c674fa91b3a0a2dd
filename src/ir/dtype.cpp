// The scalar table and the promotion lattice: the one place where each dtype's facts are written.
#include "ir/dtype.h"

#include <array>
#include <limits>

#include "support/error.h"

namespace kiln {
namespace {

enum class Kind : uint8_t { Void, Bool, Signed, Unsigned, Float, Index };

struct ScalarInfo {
  const char* name;
  Kind kind;
  int bytes;
  int precision_bits;  // mantissa incl. implicit bit for floats; value bits for integers
};

// Indexed by ScalarType.
constexpr std::array<ScalarInfo, scalar_type_count> scalar_table = {{
    {"void", Kind::Void, 0, 0},
    {"bool", Kind::Bool, 1, 1},
    {"i8", Kind::Signed, 1, 7},
    {"i16", Kind::Signed, 2, 15},
    {"i32", Kind::Signed, 4, 31},
    {"i64", Kind::Signed, 8, 63},
    {"u8", Kind::Unsigned, 1, 8},
    {"u16", Kind::Unsigned, 2, 16},
    {"u32", Kind::Unsigned, 4, 32},
    {"u64", Kind::Unsigned, 8, 64},
    {"f16", Kind::Float, 2, 11},
    {"bf16", Kind::Float, 2, 8},
    {"f32", Kind::Float, 4, 24},
    {"f64", Kind::Float, 8, 53},
    {"index", Kind::Index, 8, 63},
}};

const ScalarInfo& info(DType dtype) { return scalar_table[static_cast<size_t>(dtype.scalar())]; }

}  // namespace

bool DType::is_bool() const { return !is_pointer() && info(*this).kind == Kind::Bool; }
bool DType::is_int() const {
  Kind kind = info(*this).kind;
  return !is_pointer() && (kind == Kind::Signed || kind == Kind::Unsigned || kind == Kind::Index);
}
bool DType::is_signed() const {
  Kind kind = info(*this).kind;
  return !is_pointer() && (kind == Kind::Signed || kind == Kind::Index);
}
bool DType::is_unsigned() const { return !is_pointer() && info(*this).kind == Kind::Unsigned; }
bool DType::is_float() const { return !is_pointer() && info(*this).kind == Kind::Float; }
int DType::scalar_bytes() const { return info(*this).bytes; }
int64_t DType::bytes() const { return is_pointer() ? 8 : int64_t{scalar_bytes()} * count_; }
int DType::precision_bits() const { return info(*this).precision_bits; }

std::string DType::name() const {
  std::string text = info(*this).name;
  if (count_ != 1) text += "x" + std::to_string(count_);
  if (!is_pointer()) return text;
  text += "*";
  if (addrspace_ == AddrSpace::Local) text += "local";
  if (addrspace_ == AddrSpace::Register) text += "reg";
  if (pointer_size_ >= 0) text += "[" + std::to_string(pointer_size_) + "]";
  return text;
}

std::optional<DType> dtypes::from_name(const std::string& name) {
  for (int i = 0; i < scalar_type_count; ++i)
    if (name == scalar_table[static_cast<size_t>(i)].name) return DType(static_cast<ScalarType>(i));
  return std::nullopt;
}

bool can_cast_safely(DType from, DType to) {
  KILN_ASSERT(from.count() == 1 && to.count() == 1 && !from.is_pointer() && !to.is_pointer(),
              "casting rules are defined on scalars, got ", from.name(), " and ", to.name());
  if (from == to || from.is_bool()) return true;
  Kind from_kind = info(from).kind, to_kind = info(to).kind;
  if (from_kind == Kind::Index || to_kind == Kind::Index || to_kind == Kind::Bool) return false;
  if (to_kind == Kind::Float) {
    if (from_kind == Kind::Float)  // f16 and bf16 do not hold each other
      return to.precision_bits() >= from.precision_bits() && to.scalar_bytes() > from.scalar_bytes();
    // An integer fits if its value bits fit the mantissa; numpy also allows 64-bit ints into f64.
    return from.precision_bits() <= to.precision_bits() || to == dtypes::f64;
  }
  if (from_kind == Kind::Float) return false;
  if (from_kind == to_kind) return to.scalar_bytes() >= from.scalar_bytes();
  // Unsigned into signed needs a strictly wider type; signed never fits unsigned.
  return from_kind == Kind::Unsigned && to.scalar_bytes() > from.scalar_bytes();
}

DType promote_types(DType a, DType b) {
  KILN_ASSERT(a.count() == 1 && b.count() == 1, "promotion is defined on scalars, got ", a.name(),
              " and ", b.name());
  if (a == b) return a;
  if (a.is_index() || b.is_index()) {
    // Index arithmetic mixes only with other integers; the abstract integer absorbs them.
    KILN_ASSERT((a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool()),
                "cannot promote ", a.name(), " with ", b.name());
    return dtypes::index;
  }
  // The least type, in promotion order, that both sides cast to safely.
  for (DType candidate : dtypes::all_data_scalars)
    if (can_cast_safely(a, candidate) && can_cast_safely(b, candidate)) return candidate;
  throw_internal_error(str_cat("no promotion for ", a.name(), " and ", b.name()));
}

int128 min_value(DType dtype) {
  KILN_ASSERT(dtype.is_int() || dtype.is_bool(), "min_value of ", dtype.name());
  if (dtype.is_bool() || dtype.is_unsigned()) return 0;
  return -(int128{1} << (dtype.scalar_bytes() * 8 - 1));
}

int128 max_value(DType dtype) {
  KILN_ASSERT(dtype.is_int() || dtype.is_bool(), "max_value of ", dtype.name());
  if (dtype.is_bool()) return 1;
  int bits = dtype.scalar_bytes() * 8 - (dtype.is_signed() ? 1 : 0);
  return (int128{1} << bits) - 1;
}

double max_finite(DType dtype) {
  switch (dtype.scalar()) {
    case ScalarType::Float16: return 65504.0;
    case ScalarType::BFloat16: return 3.3895313892515355e38;
    case ScalarType::Float32: return static_cast<double>(std::numeric_limits<float>::max());
    case ScalarType::Float64: return std::numeric_limits<double>::max();
    default: throw_internal_error(str_cat("max_finite of non-float ", dtype.name()));
  }
}

}  // namespace kiln
