// EXP2, LOG2 and SIN as range reduction plus polynomial, in basic ALU ops; see transcendental.h and
// docs/transcendentals.md (algorithms, ranges, measured errors). The coefficients are Chebyshev fits
// (near minimax) of the functions named next to each table, rounded to the compute type.
#include "passes/transcendental.h"

#include <cmath>
#include <span>

#include "ir/build.h"
#include "ir/verifier.h"
#include "rewrite/graph_rewrite.h"
#include "support/error.h"
#include "support/exact_sums.h"
#include "support/float_rounding.h"

namespace kiln {
namespace {

// What the bit manipulation needs to know about the compute type (f32 or f64).
struct Format {
  DType real;
  DType bits;         // the signed integer of the same width
  int mantissa_bits;  // stored fraction bits
  int exponent_bias;
};

// The kernels below take scalars or vectors (an UPCAST kernel's lanes): the types follow x's.
Format format_of(DType real) {
  int lanes = real.count();
  if (real.base() == dtypes::f32) return {real, dtypes::i32.vec(lanes), 23, 127};
  KILN_ASSERT(real.base() == dtypes::f64, "transcendental compute type ", real.name());
  return {real, dtypes::i64.vec(lanes), 52, 1023};
}

bool is_f32(const UOpPtr& x) { return x->dtype().base() == dtypes::f32; }

// A scalar constant, broadcast to `dtype`'s lanes when it is a vector.
UOpPtr splat(DType dtype, const UOpPtr& scalar) {
  if (dtype.count() == 1) return scalar;
  return UOp::make(Ops::VECTORIZE, dtype, std::vector<UOpPtr>(static_cast<size_t>(dtype.count()), scalar));
}
UOpPtr int_num(DType dtype, int64_t value) { return splat(dtype, const_int(dtype.base(), value)); }

// A constant of x's dtype. The tables hold decimals that round to the intended value of the compute
// type; rounding here makes the CONST hold exactly that representable value.
UOpPtr num(const UOpPtr& like, double value) {
  DType dtype = like->dtype();
  return splat(dtype, const_float(dtype.base(), is_f32(like) ? round_to_f32(value) : value));
}
UOpPtr num(const UOpPtr& like, double f32_value, double f64_value) {
  return num(like, is_f32(like) ? f32_value : f64_value);
}

// Horner's rule, coefficients from the constant term up.
UOpPtr polynomial(const UOpPtr& x, std::span<const double> coefficients) {
  UOpPtr acc = num(x, coefficients.back());
  for (size_t i = coefficients.size() - 1; i-- > 0;) acc = acc * x + num(x, coefficients[i]);
  return acc;
}

// The coefficient table of x's compute type.
template <size_t N, size_t M>
std::span<const double> table_for(const UOpPtr& x, const double (&f32_table)[N], const double (&f64_table)[M]) {
  return is_f32(x) ? std::span<const double>(f32_table) : std::span<const double>(f64_table);
}

UOpPtr is_nan(const UOpPtr& x) { return ne(x, x); }
UOpPtr bitcast(const UOpPtr& x, DType dtype) { return UOp::make(Ops::BITCAST, dtype, {x}); }

// An unevaluated sum hi + lo with |lo| <= ulp(hi)/2: twice the working precision.
using Pair = ExactPair<UOpPtr>;  // two_sum and fast_two_sum: support/exact_sums.h

// Veltkamp's split factor of a's type (2^12 + 1 for f32, 2^27 + 1 for f64).
UOpPtr split_factor(const UOpPtr& a) { return num(a, 4097.0, 134217729.0); }
Pair two_product(const UOpPtr& a, const UOpPtr& b) { return kiln::two_product(a, b, split_factor(a)); }

// 2^k for an integer k (of the bits type) in the normal exponent range, assembled from its bits.
UOpPtr power_of_two(const UOpPtr& k, const Format& format) {
  UOpPtr biased = k + int_num(format.bits, format.exponent_bias);
  return bitcast(biased << int_num(format.bits, format.mantissa_bits), format.real);
}

// t == integer + fraction with `integer` integral and |fraction| <= 1/2 (ties keep the truncated
// value). Both are exact: t - trunc(t) needs no more bits than t, and fraction ∓ 1 is a Sterbenz
// subtraction. This avoids the add-a-magic-constant rounding trick, which reassociation breaks.
struct Rounded {
  UOpPtr integer, fraction;
};
Rounded round_to_integer(const UOpPtr& t) {
  UOpPtr integer = alu(Ops::TRUNC, t);
  UOpPtr fraction = t - integer;
  UOpPtr one = num(t, 1.0);
  UOpPtr up = lt(num(t, 0.5), fraction), down = lt(fraction, num(t, -0.5));
  return {where(up, integer + one, where(down, integer - one, integer)),
          where(up, fraction - one, where(down, fraction + one, fraction))};
}

// ---- exp2 -----------------------------------------------------------------------------------
// (2^s - 1)/s on [-1/2, 1/2]; 2^s = 1 + s*P(s). Relative error of the whole, exact arithmetic:
// f32 2^-26.7 (degree 5), f64 2^-55.5 (degree 10).
constexpr double exp2_f32[] = {0.693147182, 0.240226507, 0.0555035695, 0.00961808302, 0.00133908633,
                               0.000154531634};
constexpr double exp2_f64[] = {0.69314718055994529,    0.24022650695910097,    0.055504108664821597,
                               0.0096181291076068882,  0.0013333558146416936,  0.0001540353044173605,
                               1.5252733829836119e-05, 1.3215442587921689e-06, 1.0178062445845774e-07,
                               7.0725859492692234e-09, 4.4549605981865186e-10};

UOpPtr exp2_kernel(const UOpPtr& x) {
  Format format = format_of(x->dtype());
  bool single = is_f32(x);
  // Past these bounds 2^x overflows (or rounds to zero) whatever the fraction. Clamping maps ±inf
  // there too and keeps the integer part small enough for the exponent arithmetic below; NaN is
  // set aside first because the float-to-integer CAST is not defined for it.
  UOpPtr low = num(x, single ? -160.0 : -1100.0), high = num(x, single ? 130.0 : 1030.0);
  UOpPtr nan = is_nan(x);
  UOpPtr clamped = where(nan, num(x, 0.0), x);
  clamped = where(lt(clamped, low), low, clamped);
  clamped = where(lt(high, clamped), high, clamped);
  UOpPtr s, mantissa, k;
  if (single) {
    // f32 in fused steps (MULACC rounds once, like the unfused Horner step it replaces, only
    // better): softmax's exponentials are most of the work of its kernels. Adding 1.5·2^23 rounds
    // |x| <= 160 to the nearest integer (ties to even) in the low bits of the sum's significand:
    // k's bits are the sum's bits minus the shifter's, and s = x - k is exact. Only accumulator
    // updates are reassociated (llvm_renderer), so the sum and the difference stay as written.
    UOpPtr shifter = num(x, 12582912.0);
    UOpPtr shifted = clamped + shifter;
    s = clamped - (shifted - shifter);
    std::span<const double> c = table_for(x, exp2_f32, exp2_f64);
    UOpPtr acc = num(x, c.back());
    for (size_t i = c.size() - 1; i-- > 0;) acc = alu(Ops::MULACC, acc, s, num(x, c[i]));
    mantissa = alu(Ops::MULACC, s, acc, num(x, 1.0));
    k = bitcast(shifted, format.bits) - int_num(format.bits, 0x4B400000);  // 1.5·2^23's bits
  } else {
    Rounded parts = round_to_integer(clamped);
    s = parts.fraction;
    // The leading 1 is exact, so the polynomial's error stays relative to the result.
    mantissa = num(x, 1.0) + s * polynomial(s, table_for(x, exp2_f32, exp2_f64));
    k = cast(parts.integer, format.bits);
  }
  // 2^q as two factors that are normal numbers even where 2^q is subnormal or overflows. The first
  // product is exact (mantissa ∈ [0.7, 1.5), 2^k1 normal and not near overflow), so the result is
  // rounded once, which also makes subnormal results correctly rounded from the mantissa.
  UOpPtr k1 = k >> int_num(format.bits, 1);
  UOpPtr k2 = k - k1;
  UOpPtr result = (mantissa * power_of_two(k1, format)) * power_of_two(k2, format);
  return where(nan, x, result);
}

// ---- log2 -----------------------------------------------------------------------------------
// log2((1+s)/(1-s)) = s*(C + z*R(z)), z = s^2, |s| <= (sqrt2-1)/(sqrt2+1) ≈ 0.1716; R tabled.
// Relative error of the whole, exact arithmetic: f32 2^-28.3 (degree 2), f64 2^-60.7 (degree 7).
constexpr double log2_f32[] = {0.961796939, 0.576915503, 0.426778376};
constexpr double log2_f64[] = {0.96179669392597555, 0.57707801635559819, 0.41219858310200541,
                               0.32059890044565775, 0.26230786136702877, 0.22197666267309385,
                               0.19142403929387783, 0.18884077599034971};
// C = 2/ln 2 as hi + lo, so that the leading term carries no representation error of C.
constexpr double two_over_ln2_f32[] = {2.885390043258667, 3.8519260670000222e-08};
constexpr double two_over_ln2_f64[] = {2.8853900817779268, 4.0710547481862066e-17};

UOpPtr log2_kernel(const UOpPtr& x) {
  Format format = format_of(x->dtype());
  bool single = is_f32(x);
  DType bits_type = format.bits;
  // Subnormals are scaled into the normal range (exactly: a power of two) and the exponent
  // corrected below, so they need no separate significand extraction.
  UOpPtr subnormal = lt(x, num(x, single ? 0x1p-126 : 0x1p-1022));
  UOpPtr scaled = where(subnormal, x * num(x, 0x1p64), x);
  // x = 2^k * m with m ∈ [sqrt(1/2), sqrt(2)): adding (bits(1.0) - bits(sqrt(1/2))) carries into
  // the exponent field exactly when the significand is >= sqrt(2); adding bits(sqrt(1/2)) back to
  // the fraction field then rebuilds m with exponent 0 or -1.
  int64_t one_bits = single ? 0x3f800000 : 0x3ff0000000000000;
  int64_t sqrt_half_bits = single ? 0x3f3504f3 : 0x3fe6a09e667f3bcd;
  int64_t fraction_mask = (int64_t{1} << format.mantissa_bits) - 1;
  UOpPtr shifted = bitcast(scaled, bits_type) + int_num(bits_type, one_bits - sqrt_half_bits);
  UOpPtr k = (shifted >> int_num(bits_type, format.mantissa_bits)) - int_num(bits_type, format.exponent_bias);
  UOpPtr m = bitcast((shifted & int_num(bits_type, fraction_mask)) + int_num(bits_type, sqrt_half_bits),
                     format.real);
  UOpPtr exponent = cast(k, format.real) - where(subnormal, num(x, 64.0), num(x, 0.0));
  // log(m) = 2 atanh(s) with s = (m-1)/(m+1) = f/(2+f), f = m - 1 exact (Sterbenz). Each plain
  // rounding on the way (2 + f, the division, s*C, the final k + y) would cost up to half an ULP,
  // together over two; instead s and s*C are carried as hi + lo pairs, so that only the last
  // addition rounds at the result's precision.
  UOpPtr f = m - num(x, 1.0);
  Pair denominator = fast_two_sum(num(x, 2.0), f);  // 2 + f exactly
  UOpPtr s = f / denominator.hi;
  // The division's residual f - s*(2+f), exact to first order: s*hi is taken exactly and f - p
  // cancels exactly (p is within a rounding of f).
  Pair product = two_product(s, denominator.hi);
  UOpPtr residual = ((f - product.hi) - product.lo) - s * denominator.lo;
  UOpPtr s_lo = residual / denominator.hi;
  UOpPtr z = s * s;
  const double* c = single ? two_over_ln2_f32 : two_over_ln2_f64;
  Pair leading = two_product(s, num(x, c[0]));  // s*C_hi exactly
  UOpPtr tail = (s * (num(x, c[1]) + z * polynomial(z, table_for(x, log2_f32, log2_f64))) + s_lo * num(x, c[0])) +
                leading.lo;
  // k + y with k an integer: taken exactly, then the small terms, then one rounding.
  Pair sum = two_sum(exponent, leading.hi);
  UOpPtr result = sum.hi + (sum.lo + tail);
  UOpPtr infinity = num(x, INFINITY);
  result = where(eq(x, num(x, 0.0)), num(x, -INFINITY), result);  // log2(±0) = -inf
  result = where(lt(x, num(x, 0.0)), num(x, NAN), result);  // log2(x < 0) = NaN
  result = where(eq(x, infinity), infinity, result);
  return where(is_nan(x), x, result);
}

// ---- sin ------------------------------------------------------------------------------------
// (sin r - r)/r^3 and (cos r - 1 + r^2/2)/r^4 as polynomials in z = r^2, fitted on |r| <= 1 rather
// than π/4: the quotient q below may be one off the nearest integer when x*(2/π) rounds close to a
// half (|r| then reaches π/4 + ulp(x*2/π)*π/2), and a wider interval is cheaper than a second
// correction step. Relative error of the whole, exact arithmetic: sin f32 2^-27.4, f64 2^-56.4;
// cos f32 2^-28.7, f64 2^-57.8.
constexpr double sin_f32[] = {-0.166666672, 0.00833332725, -0.000198381749, 2.70606688e-06};
constexpr double sin_f64[] = {-0.16666666666666666,    0.0083333333333333003,  -0.00019841269841216566,
                              2.755731919201122e-06,   -2.5052099244914114e-08, 1.6057701922579786e-10,
                              -7.549371704181243e-13};
constexpr double cos_f32[] = {0.0416666679, -0.00138888834, 2.47990029e-05, -2.71429229e-07};
constexpr double cos_f64[] = {0.041666666666666664,    -0.001388888888888887,  2.4801587301557676e-05,
                              -2.7557319206204856e-07, 2.0876751905117269e-09, -1.1469999475427464e-11,
                              4.7251147064766145e-14};
// π/2 as three terms of the compute type: P1 + P2 + P3 leaves 2^-76 (f32) / 2^-163 (f64).
constexpr double pio2_f32[] = {1.5707963705062866, -4.3711388286737929e-08, -1.7151245100058819e-15};
constexpr double pio2_f64[] = {1.5707963267948966, 6.123233995736766e-17, -1.4973849048591698e-33};

// sin(hi + lo) for |hi| <= π/4, lo a correction below ulp(hi): sin(hi) + lo*cos(hi), where
// cos(hi) ≈ 1 - hi^2/2 is ample for a term that small.
UOpPtr sin_polynomial(const Pair& r) {
  UOpPtr z = r.hi * r.hi;
  UOpPtr odd = polynomial(z, table_for(z, sin_f32, sin_f64));
  UOpPtr correction = r.lo * (num(z, 1.0) - num(z, 0.5) * z);
  return r.hi + (r.hi * (z * odd) + correction);
}

// cos(hi + lo) = cos(hi) - lo*sin(hi) ≈ cos(hi) - lo*hi. cos(hi) = 1 - hi^2/2 + ...: the
// subtraction 1 - hi^2/2 is where the rounding error would be largest (the result is >= 0.7 but
// hi^2/2 reaches 0.31), so hi^2 is taken exactly and the rounding error of the subtraction is
// recovered and added back with the small terms.
UOpPtr cos_polynomial(const Pair& r) {
  Pair square = two_product(r.hi, r.hi);
  UOpPtr z = square.hi;
  UOpPtr half = num(z, 0.5) * z;  // exact
  UOpPtr w = num(z, 1.0) - half;
  UOpPtr w_error = (num(z, 1.0) - w) - half;  // both subtractions exact (Sterbenz)
  UOpPtr even = polynomial(z, table_for(z, cos_f32, cos_f64));
  UOpPtr small = ((w_error - num(z, 0.5) * square.lo) + (z * z) * even) - r.lo * r.hi;
  return w + small;
}

UOpPtr sin_kernel(const UOpPtr& x) {
  bool single = is_f32(x);
  const double* pio2 = single ? pio2_f32 : pio2_f64;
  UOpPtr infinity = num(x, INFINITY);
  UOpPtr magnitude = where(lt(x, num(x, 0.0)), -x, x);
  UOpPtr undefined = is_nan(x) | eq(magnitude, infinity);
  UOpPtr finite = where(undefined, num(x, 0.0), x);
  // Cody–Waite reduction r = x - q*π/2 with π/2 in three terms. q*P1 and q*P2 are taken exactly
  // (TwoProduct), x - q*P1 is exact (Sterbenz: x and q*P1 are within a factor of two), and the
  // remaining terms are summed with error-free additions, so r comes out as hi + lo with an
  // absolute error of about |q| * 2^-76 (f32) or |q| * 2^-163 (f64) plus a rounding of the tail.
  UOpPtr q = round_to_integer(finite * num(x, 0.63661977236758138)).integer;
  Pair first = two_product(q, num(x, pio2[0]));
  Pair second = two_product(q, num(x, pio2[1]));
  UOpPtr leading = finite - first.hi;
  Pair a = two_sum(leading, -first.lo);
  Pair b = two_sum(a.hi, -second.hi);
  UOpPtr tail = ((a.lo + b.lo) - second.lo) - q * num(x, pio2[2]);
  Pair r = fast_two_sum(b.hi, tail);
  // Quadrant q mod 4 in float (q may exceed every integer type for huge x): exact, since q/4 is a
  // power-of-two scaling and 4*trunc(q/4) is within q's exponent range.
  UOpPtr quadrant = q - num(x, 4.0) * alu(Ops::TRUNC, q * num(x, 0.25));
  quadrant = where(lt(quadrant, num(x, 0.0)), quadrant + num(x, 4.0), quadrant);
  UOpPtr value = where(eq(quadrant, num(x, 1.0)) | eq(quadrant, num(x, 3.0)), cos_polynomial(r), sin_polynomial(r));
  value = where(lt(quadrant, num(x, 1.5)), value, -value);
  value = where(undefined, num(x, NAN), value);
  // ±0 in, the same zero out (the reduction turns -0 into +0).
  return where(eq(x, num(x, 0.0)), x, value);
}

// f16 and bf16 are computed in f32 and rounded once at the end; f32 and f64 in their own type.
UOpPtr in_compute_type(const UOpPtr& x, UOpPtr (*kernel)(const UOpPtr&)) {
  DType dtype = x->dtype();
  if (dtype.is_narrow_float()) return cast(kernel(cast(x, dtypes::f32)), dtype);
  KILN_ASSERT(dtype.base() == dtypes::f32 || dtype.base() == dtypes::f64, "transcendental of type ", dtype.name());
  return kernel(x);
}

// f32 and f64 vectors in vector ops (the kernels build their constants with x's lanes); f16 and
// bf16 vectors, which the expander does not make, lane by lane.
UOpPtr lanewise(const UOpPtr& x, UOpPtr (*kernel)(const UOpPtr&)) {
  DType dtype = x->dtype();
  if (dtype.count() == 1 || dtype.base() == dtypes::f32 || dtype.base() == dtypes::f64) return in_compute_type(x, kernel);
  std::vector<UOpPtr> lanes;
  for (int lane = 0; lane < dtype.count(); ++lane) {
    UOpPtr element = UOp::make(Ops::GEP, dtype.base(), {x}, std::vector<int64_t>{lane});
    lanes.push_back(in_compute_type(element, kernel));
  }
  return UOp::make(Ops::VECTORIZE, dtype, std::move(lanes));
}

}  // namespace

UOpPtr approx_exp2(const UOpPtr& x) { return lanewise(x, exp2_kernel); }
UOpPtr approx_log2(const UOpPtr& x) { return lanewise(x, log2_kernel); }
UOpPtr approx_sin(const UOpPtr& x) { return lanewise(x, sin_kernel); }

const PatternMatcher& transcendental_rules() {
  static const UPat x = UPat::var("x").floats();
  static const PatternMatcher table("transcendental", {
      Rule(UPat(Ops::EXP2, {x}), [](auto& m) { return approx_exp2(m["x"]); }, "exp2(q + s) → 2^q * (1 + s*P(s))"),
      Rule(UPat(Ops::LOG2, {x}), [](auto& m) { return approx_log2(m["x"]); },
           "log2(2^k * m) → k + s*(C + s^2*R(s^2)), s = (m-1)/(m+1)"),
      Rule(UPat(Ops::SIN, {x}), [](auto& m) { return approx_sin(m["x"]); },
           "sin(q*π/2 + r) → ±sin(r) or ±cos(r) by q mod 4"),
  });
  return table;
}

UOpPtr decompose_transcendentals(const UOpPtr& root) {
  return graph_rewrite(root, transcendental_rules(), {.pass_name = "transcendental", .spec = &ir_spec()});
}

}  // namespace kiln
