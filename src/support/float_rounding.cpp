// Round-to-nearest-even onto a binary float format described by its precision and exponent range.
#include "support/float_rounding.h"

#include <cmath>

namespace kiln {
namespace {

// precision: significand bits including the implicit one; exponents as returned by ilogb for
// normal numbers; max_finite: the largest finite value of the format.
double round_to_format(double value, int precision, int min_exponent, double max_finite) {
  if (value == 0.0 || std::isnan(value) || std::isinf(value)) return value;
  int exponent = std::max(std::ilogb(value), min_exponent);  // below min_exponent: subnormal spacing
  double quantum = std::ldexp(1.0, exponent - (precision - 1));
  // Division and multiplication by a power of two are exact in double; nearbyint rounds to even.
  double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > max_finite) return std::copysign(INFINITY, value);
  return rounded;
}

}  // namespace

double round_to_f16(double value) { return round_to_format(value, 11, -14, 65504.0); }
double round_to_bf16(double value) { return round_to_format(value, 8, -126, 3.3895313892515355e38); }
double round_to_f32(double value) { return static_cast<double>(static_cast<float>(value)); }

}  // namespace kiln
