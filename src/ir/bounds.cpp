// Interval arithmetic for every integer-valued op. See bounds.h for the contract.
#include "ir/bounds.h"

#include <algorithm>
#include <initializer_list>

#include "support/error.h"

namespace kiln {
namespace {

bool has_integer_range(DType dtype) { return !dtype.is_pointer() && (dtype.is_int() || dtype.is_bool()); }

Interval of(const UOpPtr& node) { return {node->vmin(), node->vmax()}; }

Interval hull(std::initializer_list<int128> values) {
  return {std::min(values), std::max(values)};
}

int128 magnitude(const Interval& range) { return std::max(range.max < 0 ? -range.max : range.max,
                                                           range.min < 0 ? -range.min : range.min); }

// Truncating division of two int128 values (C semantics); `b` is non-zero.
int128 divide_truncating(int128 a, int128 b) { return a / b; }

Interval divide(const Interval& a, const Interval& b) {
  if (b.min <= 0 && b.max >= 0) {
    // The divisor may be zero (undefined) or change sign; |a / b| <= |a| for any non-zero b.
    int128 m = magnitude(a);
    return {-m, m};
  }
  // With the divisor's sign fixed, truncating division is monotone in each argument, so the
  // extremes lie at the corners.
  return hull({divide_truncating(a.min, b.min), divide_truncating(a.min, b.max),
               divide_truncating(a.max, b.min), divide_truncating(a.max, b.max)});
}

Interval modulo(const Interval& a, const Interval& b) {
  // C's remainder has the sign of the dividend and a magnitude below |b| (and never above |a|).
  if (b.min <= 0 && b.max >= 0) return {std::min<int128>(a.min, 0), std::max<int128>(a.max, 0)};
  int128 limit = magnitude(b) - 1;
  if (a.min >= 0) return {0, std::min(a.max, limit)};
  if (a.max <= 0) return {std::max(a.min, -limit), 0};
  return {std::max(a.min, -limit), std::min(a.max, limit)};
}

// Smallest 2^k - 1 that is >= value (value >= 0).
int128 all_ones_covering(int128 value) {
  int128 mask = 0;
  while (mask < value) mask = mask * 2 + 1;
  return mask;
}

Interval bitwise(Ops op, const Interval& a, const Interval& b, DType dtype) {
  if (dtype.is_bool()) {
    // Logical ops on {0, 1}.
    if (op == Ops::AND) return {a.min & b.min, a.max & b.max};
    if (op == Ops::OR) return {a.min | b.min, a.max | b.max};
    if (a.min == a.max && b.min == b.max) return {a.min ^ b.min, a.min ^ b.min};
    return {0, 1};
  }
  if (a.min < 0 || b.min < 0) return full_range(dtype);
  if (op == Ops::AND) return {0, std::min(a.max, b.max)};
  return {0, all_ones_covering(std::max(a.max, b.max))};
}

Interval compare(Ops op, const Interval& a, const Interval& b) {
  switch (op) {
    case Ops::CMPLT:
      if (a.max < b.min) return {1, 1};
      if (a.min >= b.max) return {0, 0};
      return {0, 1};
    case Ops::CMPNE:
    case Ops::CMPEQ: {
      bool disjoint = a.max < b.min || b.max < a.min;
      bool same_constant = a.min == a.max && b.min == b.max && a.min == b.min;
      int128 not_equal = disjoint ? 1 : same_constant ? 0 : -1;
      if (not_equal < 0) return {0, 1};
      int128 value = op == Ops::CMPNE ? not_equal : 1 - not_equal;
      return {value, value};
    }
    default: throw_internal_error(str_cat("not a comparison: ", op_name(op)));
  }
}

Interval shift(Ops op, const Interval& a, const Interval& b, DType dtype) {
  if (a.min < 0 || b.min < 0 || b.max >= 63) return full_range(dtype);
  int lo = static_cast<int>(b.min), hi = static_cast<int>(b.max);
  if (op == Ops::SHL) return {a.min << lo, a.max << hi};
  return {a.min >> hi, a.max >> lo};
}

Interval cast(const UOpPtr& source, DType dtype) {
  if (!has_integer_range(source->dtype())) return full_range(dtype);
  if (dtype.is_bool()) {
    // Casting to bool tests for non-zero.
    if (source->vmin() > 0 || source->vmax() < 0) return {1, 1};
    if (source->vmin() == 0 && source->vmax() == 0) return {0, 0};
    return {0, 1};
  }
  return of(source);  // the caller widens to the full range if it does not fit
}

Interval raw_bounds(Ops op, DType dtype, const std::vector<UOpPtr>& srcs, const Arg& arg) {
  auto src = [&](size_t i) { return of(srcs[i]); };
  switch (op) {
    // A malformed argument (an integer CONST holding a double, say) gets the type's range rather
    // than an exception here: nodes are built before the verifier can report them properly.
    case Ops::CONST:
      if (const bool* flag = std::get_if<bool>(&arg)) return hull({*flag ? 1 : 0});
      if (const int64_t* value = std::get_if<int64_t>(&arg)) {
        if (dtype.is_unsigned() && dtype.scalar_bytes() == 8) {
          int128 unsigned_value = static_cast<int128>(static_cast<uint64_t>(*value));
          return {unsigned_value, unsigned_value};
        }
        return hull({*value});
      }
      return full_range(dtype);
    case Ops::VCONST: {
      const auto* lanes = std::get_if<std::vector<int64_t>>(&arg);
      if (lanes == nullptr || lanes->empty()) return full_range(dtype);
      auto [lo, hi] = std::minmax_element(lanes->begin(), lanes->end());
      return {*lo, *hi};
    }
    case Ops::DEFINE_VAR: {
      const auto* spec = std::get_if<VariableSpec>(&arg);
      if (spec == nullptr) return full_range(dtype);
      return {spec->min, spec->max};
    }
    case Ops::BIND: return src(0);
    case Ops::RANGE:
    case Ops::SPECIAL: return {0, std::max<int128>(src(0).max - 1, 0)};
    case Ops::ADD: return {src(0).min + src(1).min, src(0).max + src(1).max};
    case Ops::SUB: return {src(0).min - src(1).max, src(0).max - src(1).min};
    case Ops::NEG: return {-src(0).max, -src(0).min};
    case Ops::MUL: {
      Interval a = src(0), b = src(1);
      // Products of two values beyond 2^63 could overflow int128: give up (the full range).
      if (magnitude(a) > int128{1} << 63 || magnitude(b) > int128{1} << 63) return full_range(dtype);
      return hull({a.min * b.min, a.min * b.max, a.max * b.min, a.max * b.max});
    }
    case Ops::IDIV: return divide(src(0), src(1));
    case Ops::MOD: return modulo(src(0), src(1));
    case Ops::MAX: return {std::max(src(0).min, src(1).min), std::max(src(0).max, src(1).max)};
    case Ops::CMPLT:
    case Ops::CMPNE:
    case Ops::CMPEQ:
      if (!has_integer_range(srcs[0]->dtype())) return {0, 1};
      return compare(op, src(0), src(1));
    case Ops::AND:
    case Ops::OR:
    case Ops::XOR: return bitwise(op, src(0), src(1), dtype);
    case Ops::SHL:
    case Ops::SHR: return shift(op, src(0), src(1), dtype);
    case Ops::NOT:
      if (dtype.is_bool()) return {1 - src(0).max, 1 - src(0).min};
      if (dtype.is_unsigned()) return full_range(dtype);
      return {-src(0).max - 1, -src(0).min - 1};
    case Ops::WHERE:
      if (srcs[0]->vmin() == 1) return src(1);
      if (srcs[0]->vmax() == 0) return src(2);
      return {std::min(src(1).min, src(2).min), std::max(src(1).max, src(2).max)};
    case Ops::CAST: return cast(srcs[0], dtype);
    case Ops::VECTORIZE: {
      if (srcs.empty()) return full_range(dtype);
      Interval result = src(0);
      for (const UOpPtr& lane : srcs) result = {std::min(result.min, lane->vmin()),
                                                std::max(result.max, lane->vmax())};
      return result;
    }
    case Ops::GEP:
    case Ops::NOOP:
      return srcs.empty() ? full_range(dtype) : src(0);
    default: return full_range(dtype);
  }
}

}  // namespace

Interval full_range(DType dtype) {
  if (!has_integer_range(dtype)) return {int128_min, int128_max};
  if (dtype.is_index()) return {min_value(dtypes::i64), max_value(dtypes::i64)};
  return {min_value(dtype.base()), max_value(dtype.base())};
}

Interval compute_bounds(Ops op, DType dtype, const std::vector<UOpPtr>& srcs, const Arg& arg) {
  if (!has_integer_range(dtype)) return full_range(dtype);
  // Sources of an integer op that are themselves not integers (a float comparison, a cast from
  // float) have no range; the op falls back to its type's range.
  // Comparisons and casts handle non-integer sources themselves.
  bool handles_any_source = op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ || op == Ops::CAST;
  for (const UOpPtr& source : srcs)
    if (!handles_any_source && !has_integer_range(source->dtype())) return full_range(dtype);
  Interval range = raw_bounds(op, dtype, srcs, arg);
  Interval limits = full_range(dtype);
  // A result outside the type's range means the operation may wrap: then anything is possible.
  if (range.min < limits.min || range.max > limits.max || range.min > range.max) return limits;
  return range;
}

}  // namespace kiln
