// Elementwise math built only from the primitives of tensor.cpp: absolute value and sign, exp/log
// and friends, the trigonometric and activation functions, rounding, division variants, pow,
// comparisons and logical ops. Nothing here adds a new kind of graph node, so every backend that
// runs the primitives runs these.
//
// Precision policy: bool and integer inputs of float-only functions compute in f32 (numpy would
// use f64; f32 is what an inference engine wants); f16 and bf16 compute in f32 and round once at
// the end, so they are as good as their format allows; f32 and f64 compute in their own type. The
// error bounds measured by tests/tensor/test_elementwise.cpp are stated next to each function.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "support/error.h"
#include "support/exact_sums.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using S = ScalarType;

// The type float-only math computes in, and the type it returns.
S compute_type(S type) { return type == S::Float64 ? S::Float64 : S::Float32; }
S float_result_type(S type) { return DType(type).is_float() ? type : S::Float32; }

// A constant of `like`'s (float) dtype. f32 constants are rounded here so that the graph holds
// exactly the value that the double-float tricks below reason about.
Tensor constant(const Tensor& like, double value) {
  if (like.dtype() == S::Float32) value = static_cast<double>(static_cast<float>(value));
  return Tensor::scalar(value, like.dtype());
}

// Runs `body` on x in its compute type and returns the result in x's float result type.
template <class Body>
Tensor float_math(const Tensor& x, Body body) {
  S type = x.dtype();
  return body(x.cast(compute_type(type))).cast(float_result_type(type));
}

bool single(const Tensor& x) { return x.dtype() == S::Float32; }

// ---- double-float building blocks (exact under round-to-nearest and no FMA contraction, which
// the code generator promises; see src/passes/transcendental.h) ----

using Pair = ExactPair<Tensor>;  // two_sum and fast_two_sum: support/exact_sums.h

// Veltkamp's split factor of a's type (2^12 + 1 for f32, 2^27 + 1 for f64).
Tensor split_factor(const Tensor& a) { return constant(a, single(a) ? 4097.0 : 134217729.0); }
Pair two_product(const Tensor& a, const Tensor& b) { return kiln::two_product(a, b, split_factor(a)); }

// The nearest integer (ties away from zero; callers only need "an integer within 1/2 + ulp").
Tensor nearest_integer(const Tensor& t) {
  return (t + t.lt(constant(t, 0.0)).where(constant(t, -0.5), constant(t, 0.5))).trunc();
}

// Bool masks combine with | and & in this file (logical_or / logical_and).
Tensor operator|(const Tensor& a, const Tensor& b) { return a.logical_or(b); }
Tensor operator&(const Tensor& a, const Tensor& b) { return a.logical_and(b); }

Tensor select(const Tensor& condition, const Tensor& if_true, const Tensor& if_false) {
  return condition.where(if_true, if_false);
}

Tensor is_nan(const Tensor& x) { return x.ne(x); }
// The sign bit, also for -0 and NaN.
Tensor sign_bit(const Tensor& x) {
  S bits = x.dtype() == S::Float64 ? S::Int64 : x.dtype() == S::Float32 ? S::Int32 : S::Int16;
  return x.bitcast(bits).lt(Tensor::scalar(0, bits));
}

// -|x| for f32 or f64 x: the sign bit set, one bitwise op (a compare and a select took two); NaN
// stays NaN. The argument the sigmoid and softplus give their exp.
Tensor negative_magnitude(const Tensor& x) {
  S bits = x.dtype() == S::Float64 ? S::UInt64 : S::UInt32;
  double sign = bits == S::UInt64 ? std::ldexp(1.0, 63) : std::ldexp(1.0, 31);
  return x.bitcast(bits).bitwise_or(Tensor::scalar(sign, bits)).bitcast(x.dtype());
}

// ---- exp -------------------------------------------------------------------------------------
// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k*ln2 with ln 2 = HI + LO (Cody–Waite): HI
// has few enough bits that k*HI is exact and x - k*HI is exact (Sterbenz), so r carries only the
// rounding of k*LO. 2^k is applied as two power-of-two factors so that neither overflows or goes
// subnormal before the result does (the first product is exact, the second rounds once).
//  - f32 (and f16/bf16, computed in f32): exp(r) on |r| <= ln2/2 as a degree-6 minimax polynomial
//    (2^-28.3 relative; below) and 2^k1, 2^k2 assembled from exponent bits: about 25 operations.
//    The earlier form, exp2(r*log2 e) * exp2(k1) * exp2(k2) with three full exp2 kernels, took
//    ~130, and made YOLOX's SiLU epilogues compute-bound. Those kernels still are: each op less is
//    a few per cent of them.
//  - f64: exp2(r*log2 e) (|r*log2 e| <= 1/2 loses only ~0.35 ulp) times exp2 of the two halves of k.
// Measured: f32 <= 3 ulp, f64 <= 3 ulp (see the tolerance table in the tests).
// ExpArgument::NonPositive: the caller knows x <= 0 or NaN (the sigmoid's exp(-|x|)). In f32 the
// upper clamp then goes, and 2^k is one factor 2^(k+32), normal for every k >= -158, times 2^-32
// (folded into the polynomial's coefficients), which rounds once as the two halves did (k = -159
// gives the bits of 0, where the result rounds to 0 anyway): 6 of the kernel's ~25 operations.
enum class ExpArgument { Any, NonPositive };

Tensor exp_kernel_with(const Tensor& x, ExpArgument argument) {
  bool f32 = single(x), non_positive = argument == ExpArgument::NonPositive;
  constexpr long double ln2 = 0.693147180559945309417232121458176568L;
  // HI = ln 2 truncated to 16 (f32) or 32 (f64) significant bits; |k| < 2^8 resp. 2^11.
  double hi = f32 ? std::ldexp(std::floor(std::ldexp(static_cast<double>(ln2), 16)), -16)
                  : std::ldexp(std::floor(std::ldexp(static_cast<double>(ln2), 32)), -32);
  double lo = static_cast<double>(ln2 - static_cast<long double>(hi));
  // Beyond these the result is 0 or inf anyway; clamping keeps k*HI exact. NaN passes through.
  double high = f32 ? 89.0 : 710.0, low = f32 ? -110.0 : -760.0;
  Tensor clamped = select(x.lt(constant(x, low)), constant(x, low), x);
  if (!(f32 && non_positive)) clamped = select(constant(x, high).lt(clamped), constant(x, high), clamped);
  if (!f32) {
    Tensor k = nearest_integer(clamped * constant(x, std::numbers::log2e));
    Tensor r = (clamped - k * constant(x, hi)) - k * constant(x, lo);
    Tensor k_half = (k * constant(x, 0.5)).trunc();
    return (r * constant(x, std::numbers::log2e)).exp2() * k_half.exp2() * (k - k_half).exp2();
  }
  // f32, in fused multiply-adds (MULACC rounds once; the sequence is as exact as the unfused one
  // and half as long — YOLOX's SiLU kernels and BERT's softmax spend most of their time here).
  // k = round(x·log2 e): adding 1.5·2^23 leaves the nearest integer (ties to even) in the low bits
  // of the sum's significand, so k's integer bits are the sum's bits minus the shifter's.
  Tensor shifter = constant(x, 12582912.0);
  Tensor shifted = clamped.mul_add(constant(x, std::numbers::log2e), shifter);
  Tensor k = shifted - shifter;
  Tensor r = k.mul_add(constant(x, -lo), k.mul_add(constant(x, -hi), clamped));
  // exp(r) = 1 + r + r²·q(r), q of degree 4: our own minimax fit of the relative error over
  // |r| <= ln2/2 (float64 Lawson iterations), 2^-28.3, against 2^-27.1 for the degree-7 Taylor
  // polynomial used before, in one fused multiply-add less. Horner from the highest term; the
  // leading 1 + r is exact in the last two steps, so the error stays relative.
  // With `scale`, every coefficient is multiplied by it (a power of two), which scales p exactly.
  auto polynomial = [&](double scale) {
    constexpr double coefficients[] = {0.0013814613994338689, 0.008368710100545946, 0.04166838737178402,
                                       0.1666652068756167,    0.49999993451592945,  1.0,
                                       1.0};
    Tensor p = constant(x, coefficients[0] * scale);
    for (size_t i = 1; i < std::size(coefficients); ++i) p = p.mul_add(r, constant(x, coefficients[i] * scale));
    return p;
  };
  // k ∈ [-159, 129]: each half is within the normal exponent range. NaN gives garbage bits in k
  // and NaN in p, so a NaN result.
  Tensor k_bits = shifted.bitcast(S::Int32) - Tensor::scalar(0x4B400000, S::Int32);  // 1.5·2^23's bits
  auto power_of_two = [&](const Tensor& e, int bias) {
    return (e + Tensor::scalar(bias, S::Int32)).shift_left(Tensor::scalar(23, S::Int32)).bitcast(S::Float32);
  };
  // (p·2^-32)·2^(k+32): the 2^-32 is folded into the coefficients, so the product that rounds
  // (into the subnormals, for the smallest results) is the only one, as it was after the exact
  // p·2^(k+32) when 2^-32 was a multiply of its own.
  if (non_positive) return polynomial(std::ldexp(1.0, -32)) * power_of_two(k_bits, 127 + 32);
  Tensor p = polynomial(1.0);
  Tensor k1 = k_bits.shift_right(Tensor::scalar(1, S::Int32)), k2 = k_bits - k1;
  return p * power_of_two(k1, 127) * power_of_two(k2, 127);
}

Tensor exp_kernel(const Tensor& x) { return exp_kernel_with(x, ExpArgument::Any); }

// ---- log ------------------------------------------------------------------------------------
// log2(x) * ln 2: log2 is accurate to 2 ulp relative everywhere (also near 1), the product adds
// half an ulp. Measured: <= 3 ulp.
Tensor log_kernel(const Tensor& x) { return x.log2() * constant(x, std::numbers::ln2); }

// log(1 + u) with Kahan's correction: w = 1 + u rounds, but log(w) * u / (w - 1) cancels the
// rounding to first order (w - 1 is exact). Accurate for tiny u where log(1 + u) is not.
Tensor log1p_kernel(const Tensor& u) {
  Tensor w = u + constant(u, 1.0);
  Tensor w_minus_one = w - constant(u, 1.0);
  Tensor safe = select(w_minus_one.eq(constant(u, 0.0)), constant(u, 1.0), w_minus_one);
  return select(w_minus_one.eq(constant(u, 0.0)), u, log_kernel(w) * u / safe);
}

// ---- cos ------------------------------------------------------------------------------------
// cos(x) = sin(x + π/2) directly would carry the rounding of x + π/2 (up to ulp(x)/2 absolute),
// which is a huge relative error near the zeros of cos. Instead x is reduced exactly, as the SIN
// primitive does internally: x = q*π/2 + r with π/2 = P1 + P2 + P3 and r = hi + lo in double
// precision; then cos(x) is ±cos(r) or ±sin(r) by q mod 4, where
//   sin(r) = sin(hi) + lo*(1 - hi^2/2)                    (|hi| <= π/4, lo below ulp(hi))
//   cos(r) = sin(π/2 - r), and π/2 - r = w_hi + w_lo ∈ [π/4, 3π/4] has no cancellation:
//            sin(w_hi) + w_lo*cos(w_hi), with cos(w_hi) = sin(r) ≈ hi.
// The SIN primitive evaluates both small arguments accurately (<= 2 ulp). Measured: <= 3 ulp for
// |x| <= 1e5. Beyond 2^100 (f32) / 2^900 (f64) the splitting would overflow, so there
// cos(x) = sin(x + π/2) is used: at that magnitude the spacing of floats exceeds the period.
struct ReducedAngle {
  Pair r;
  Tensor quadrant;  // q mod 4 in [0, 4)
};

ReducedAngle reduce_half_pi(const Tensor& x) {
  bool f32 = single(x);
  // π/2 as three terms, each the rounding of what the previous ones leave. For f32 a long double
  // π/2 (64 bits) is precise enough; f64 needs ~150 bits, so its terms are written out.
  constexpr long double half_pi = 1.570796326794896619231321691639751442L;
  double p1 = f32 ? static_cast<double>(static_cast<float>(half_pi)) : 1.5707963267948966;
  long double rest = half_pi - static_cast<long double>(p1);
  double p2 = f32 ? static_cast<double>(static_cast<float>(rest)) : 6.123233995736766e-17;
  double p3 = f32 ? static_cast<double>(rest - static_cast<long double>(p2)) : -1.4973849048591698e-33;
  Tensor q = nearest_integer(x * constant(x, 2.0 / std::numbers::pi));
  Pair first = two_product(q, constant(x, p1));
  Pair second = two_product(q, constant(x, p2));
  Tensor leading = x - first.hi;  // exact: x and q*P1 are within a factor of two (or q = 0)
  Pair a = two_sum(leading, first.lo.neg());
  Pair b = two_sum(a.hi, second.hi.neg());
  Tensor tail = ((a.lo + b.lo) - second.lo) - q * constant(x, p3);
  // q mod 4, exact in float: q/4 is a power-of-two scaling.
  Tensor quadrant = q - constant(x, 4.0) * (q * constant(x, 0.25)).trunc();
  quadrant = select(quadrant.lt(constant(x, 0.0)), quadrant + constant(x, 4.0), quadrant);
  return {fast_two_sum(b.hi, tail), quadrant};
}

Tensor cos_kernel(const Tensor& x) {
  bool f32 = single(x);
  double limit = f32 ? std::ldexp(1.0, 100) : std::ldexp(1.0, 900);
  Tensor magnitude = select(x.lt(constant(x, 0.0)), x.neg(), x);
  Tensor huge = constant(x, limit).lt(magnitude);
  Tensor finite_x = select(huge | is_nan(x), constant(x, 0.0), x);
  ReducedAngle angle = reduce_half_pi(finite_x);
  const Pair& r = angle.r;
  Tensor one = constant(x, 1.0), half = constant(x, 0.5);
  Tensor sin_r = r.hi.sin() + r.lo * (one - half * r.hi * r.hi);
  constexpr long double half_pi = 1.570796326794896619231321691639751442L;
  double p1 = f32 ? static_cast<double>(static_cast<float>(half_pi)) : 1.5707963267948966;
  double p2 = f32 ? static_cast<double>(half_pi - static_cast<long double>(p1)) : 6.123233995736766e-17;
  Pair u = two_sum(constant(x, p1), r.hi.neg());
  Pair w = fast_two_sum(u.hi, (u.lo + constant(x, p2)) - r.lo);
  Tensor cos_r = w.hi.sin() + w.lo * r.hi;
  // q mod 4 = 0: cos r, 1: -sin r, 2: -cos r, 3: sin r.
  Tensor odd = angle.quadrant.eq(constant(x, 1.0)) | angle.quadrant.eq(constant(x, 3.0));
  Tensor value = select(odd, sin_r, cos_r);
  Tensor negate = angle.quadrant.eq(constant(x, 1.0)) | angle.quadrant.eq(constant(x, 2.0));
  value = select(negate, value.neg(), value);
  Tensor fallback = (x + constant(x, std::numbers::pi / 2)).sin();
  // NaN and ±inf: sin gives NaN for both.
  return select(huge | is_nan(x), fallback, value);
}

// ---- tanh -----------------------------------------------------------------------------------
// Coefficients of tanh's Taylor series, from tanh' = 1 - tanh^2: m*a_m = [m == 1] - Σ a_i*a_j
// over odd i + j = m - 1. Exact rationals evaluated in long double; plenty for f64.
std::vector<double> tanh_series(int terms) {
  std::vector<long double> a(static_cast<size_t>(2 * terms + 1), 0.0L);
  a[1] = 1.0L;
  for (int m = 3; m <= 2 * terms - 1; m += 2) {
    long double convolution = 0.0L;
    for (int i = 1; i <= m - 2; i += 2) convolution += a[static_cast<size_t>(i)] * a[static_cast<size_t>(m - 1 - i)];
    a[static_cast<size_t>(m)] = -convolution / m;
  }
  std::vector<double> odd;
  for (int m = 1; m <= 2 * terms - 1; m += 2) odd.push_back(static_cast<double>(a[static_cast<size_t>(m)]));
  return odd;
}

// tanh(|x|) = (1 - e)/(1 + e) with e = exp(-2|x|) <= 1: never overflows, and → 1 for large |x|.
// For small |x|, 1 - e cancels, so |x| < 0.35 (f32) / 0.2 (f64) uses the Taylor series (7 resp. 10
// terms; the first omitted term is below 2^-31 resp. 2^-57 relative). At the switch 1 - e is about
// 1/2 and 1/3 of its parts, so exp's error is amplified at most ~3x. Measured: <= 4 ulp.
Tensor tanh_kernel(const Tensor& x) {
  bool f32 = single(x);
  double threshold = f32 ? 0.35 : 0.2;
  std::vector<double> series = tanh_series(f32 ? 7 : 10);
  Tensor magnitude = select(x.lt(constant(x, 0.0)), x.neg(), x);
  Tensor small_x = select(magnitude.lt(constant(x, threshold)), x, constant(x, 0.0));
  Tensor z = small_x * small_x;
  Tensor poly = constant(x, series.back());
  for (size_t i = series.size() - 1; i-- > 0;) poly = poly.mul_add(z, constant(x, series[i]));
  Tensor small_value = small_x * poly;
  Tensor e = exp_kernel_with(magnitude * constant(x, -2.0), ExpArgument::NonPositive);  // exp(-2|x|)
  Tensor large = (constant(x, 1.0) - e) / (constant(x, 1.0) + e);
  large = select(x.lt(constant(x, 0.0)), large.neg(), large);
  return select(magnitude.lt(constant(x, threshold)), small_value, large);
}

// ---- erf / erfc -----------------------------------------------------------------------------
// erf in f32: erf_f32 below (three polynomials). erf in f64 and erfc in both:
// |x| < 1/2: erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)), 8 (f32) or 14 (f64) terms (the first
// omitted term is below 2^-31 resp. 2^-57 relative).
// x >= 1/2: erfc(x) = t * exp(-x^2 + P(t)), t = 1/(1 + x/2) ∈ (0, 0.8]. P is our own Chebyshev fit
// of log(erfc(x)/t) + x^2 (mpmath, 50 digits): degree 10 with max error 9.3e-9 (f32), degree 24
// with 9.8e-18 (f64); the relative error of erfc is P's absolute error plus the rounding of -x^2
// (|x|^2 ulp, which matters only where erf has long since rounded to ±1).
// Measured: erf f32 <= 1.5e-7 relative (about 2 ulp), f64 <= 4 ulp; erfc relative 1e-6 f32.
// The polynomials here and in tanh are evaluated in fused multiply-adds (Tensor::mul_add): each
// Horner step rounds once instead of twice, in half the ops (BERT's GELU is an erfc per element).
constexpr double erfc_fit_f32[] = {  // highest degree first
    0.23508871192121488285, -0.83374994055488664125, 1.006498135547437319,    -0.35808222927558163943,
    -0.0062879440237935459003, -0.14894460291247463665, -0.087469498611349969199, 0.083662696503634311771,
    0.37497709739768985191, 1.0000005233004659392,  -1.265512125257380678};
constexpr double erfc_fit_f64[] = {
    1.0312373635946519433,   -9.7147417857043116052,  41.927488638705482138,    -109.01910665970712463,
    188.40336919486249842,   -224.09186156338443933,  181.79933043329297727,    -93.235186098057748114,
    21.00167835387603298,    7.759969538514805735,    -9.6007997051584044235,   5.5629506408380728726,
    -2.1837894030009640629,  0.32449164580421275559,  -0.13571701269371437582,  0.13870848240217037374,
    0.13090143151370933094,  0.029750581625834208322, -0.091808189522115705267, -0.14374948396715433574,
    -0.085937515669030157967, 0.083333333623829352484, 0.37499999999715664042,  1.0000000000000110133,
    -1.2655121234846454035};

// erf for |x| < 1/2 (other inputs give garbage that the callers do not select).
Tensor erf_small(const Tensor& x) {
  int terms = single(x) ? 8 : 14;
  Tensor z = x * x;
  // Coefficients 2/√π * (-1)^n / (n! (2n+1)).
  std::vector<double> coefficients;
  long double factorial = 1.0L;
  for (int n = 0; n < terms; ++n) {
    if (n > 0) factorial *= n;
    long double c = 2.0L / std::sqrt(std::numbers::pi_v<long double>) / (factorial * (2 * n + 1));
    coefficients.push_back(static_cast<double>(n % 2 ? -c : c));
  }
  Tensor poly = constant(x, coefficients.back());
  for (size_t i = coefficients.size() - 1; i-- > 0;) poly = poly.mul_add(z, constant(x, coefficients[i]));
  return x * poly;
}

// erfc for x >= 1/2 (smaller inputs are clamped to 1/2; callers select).
Tensor erfc_large(const Tensor& x) {
  Tensor clamped = select(x.lt(constant(x, 0.5)), constant(x, 0.5), x);
  Tensor t = constant(x, 1.0) / (constant(x, 1.0) + constant(x, 0.5) * clamped);
  const double* fit = single(x) ? erfc_fit_f32 : erfc_fit_f64;
  size_t count = single(x) ? std::size(erfc_fit_f32) : std::size(erfc_fit_f64);
  Tensor poly = constant(x, fit[0]);
  for (size_t i = 1; i < count; ++i) poly = poly.mul_add(t, constant(x, fit[i]));
  return t * exp_kernel(poly - clamped * clamped);
}

// f32 erf from three polynomials, our own Chebyshev least-squares fits of erf (double precision,
// 40,000 Chebyshev nodes per range), converted to monomials of a variable scaled to [-1, 1]:
// x·A(x²) for |x| < 1 (degree 7 in x²), B(t) over [1, 2.2) and C(t) over [2.2, 3.92) (degree 10
// each), ±1 beyond (where erf rounds to ±1 in f32). Fit errors 1e-15, 2e-9 and 5e-9; evaluated in
// f32 with fused multiply-adds the result is within 2.4 ulp of erf (1 ulp above 1), measured over
// 400,001 points of [0, 4.5]. Every lane evaluates all three (a vector takes both sides of a select)
// in 31 fused multiply-adds and no division or exponential: the erfc-based form below took a
// division, an exponential and two polynomials, and BERT-base's GELUs (an Erf per element of its
// 128 × 3072 FFN activations) were 7.4 of its 47 ms under --precision bf16; now 4.1.
constexpr double erf_fit_small[] = {  // highest degree first, in x²
    -9.408707790050708e-06, 0.00011168922779232604, -0.0008469496886920609, 0.005219915244172844,
    -0.026864972696428836,  0.11283772844174654,    -0.3761263757063257,    1.1283791668198542};
constexpr double erf_fit_middle[] = {  // in t = (|x| - 1)·2/1.2 - 1
    -1.3916962665658106e-06, 1.3553600902534597e-05, -1.5754783656494533e-05, -0.00016747509462288547,
    0.0007227657583460589,   -0.0003410725798754309, -0.006391097353864519,  0.025875745685514002,
    -0.05024393194134457,    0.05233742929728783,    0.9763483832640124};
constexpr double erf_fit_tail[] = {  // in t = (|x| - 2.2)·2/1.72 - 1
    3.2838496597251123e-06, 9.412049466364204e-07,   -3.874650491233855e-05, 0.00011866368622095446,
    -0.00023694216771136842, 0.0003643789959132179,  -0.00042487883659234456, 0.0003641918416682795,
    -0.0002190727056263988,  8.323420243062251e-05,  0.999984918245142};

template <size_t N>
Tensor horner(const double (&coefficients)[N], const Tensor& v) {
  Tensor poly = constant(v, coefficients[0]);
  for (size_t i = 1; i < N; ++i) poly = poly.mul_add(v, constant(v, coefficients[i]));
  return poly;
}

Tensor erf_f32(const Tensor& x) {
  Tensor magnitude = select(x.lt(constant(x, 0.0)), x.neg(), x);
  Tensor small = x * horner(erf_fit_small, x * x);
  Tensor middle = horner(erf_fit_middle, magnitude.mul_add(constant(x, 2.0 / 1.2), constant(x, -1.0 - 2.0 / 1.2)));
  Tensor tail = horner(erf_fit_tail, magnitude.mul_add(constant(x, 2.0 / 1.72), constant(x, -1.0 - 2.0 * 2.2 / 1.72)));
  Tensor large = select(magnitude.lt(constant(x, 2.2)), middle,
                        select(magnitude.lt(constant(x, 3.92)), tail, constant(x, 1.0)));
  large = select(x.lt(constant(x, 0.0)), large.neg(), large);
  Tensor value = select(magnitude.lt(constant(x, 1.0)), small, large);
  return select(is_nan(x), x, value);
}

Tensor erf_kernel(const Tensor& x) {
  if (single(x)) return erf_f32(x);
  Tensor magnitude = select(x.lt(constant(x, 0.0)), x.neg(), x);
  Tensor large = constant(x, 1.0) - erfc_large(magnitude);
  large = select(x.lt(constant(x, 0.0)), large.neg(), large);
  Tensor small_x = select(magnitude.lt(constant(x, 0.5)), x, constant(x, 0.0));
  Tensor value = select(magnitude.lt(constant(x, 0.5)), erf_small(small_x), large);
  return select(is_nan(x), x, value);
}

// erfc(x) = 1 - erf(x), accurate in relative terms also where it is tiny (x >> 1).
Tensor erfc_kernel(const Tensor& x) {
  Tensor magnitude = select(x.lt(constant(x, 0.0)), x.neg(), x);
  Tensor tail = erfc_large(magnitude);
  Tensor large = select(x.lt(constant(x, 0.0)), constant(x, 2.0) - tail, tail);
  Tensor small_x = select(magnitude.lt(constant(x, 0.5)), x, constant(x, 0.0));
  Tensor value = select(magnitude.lt(constant(x, 0.5)), constant(x, 1.0) - erf_small(small_x), large);
  return select(is_nan(x), x, value);
}

// ---- division variants ------------------------------------------------------------------------

// Both operands broadcast to one shape and cast to their promoted dtype. Done up front so that a
// shape mismatch is reported under the name of the op the user called, not of a primitive inside.
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b, std::string_view operation) {
  Dims shape = broadcast_shapes(dims_of(a), dims_of(b), operation);
  S type = promote_types(a.data().dtype, b.data().dtype).scalar();
  return {broadcast_to(a.cast(type), shape), broadcast_to(b.cast(type), shape)};
}

struct IntegerQuotient {
  Tensor quotient, remainder;  // truncated toward zero, like C
};

// C-style a / b and a % b for integers without the undefined cases of the IDIV primitive:
// division by zero gives 0 and 0 (numpy's result for // and %), and MIN / -1 wraps to MIN.
IntegerQuotient integer_divide(const Tensor& a, const Tensor& b) {
  S type = a.dtype();
  Tensor zero = Tensor::scalar(0, type), one = Tensor::scalar(1, type);
  Tensor by_zero = b.eq(zero);
  Tensor by_minus_one = DType(type).is_signed() ? b.eq(Tensor::scalar(-1, type)) : Tensor::full(b.shape(), 0, S::Bool);
  Tensor safe = select(by_zero | by_minus_one, one, b);
  Tensor quotient = select(by_minus_one, a.neg(), a.idiv(safe));
  quotient = select(by_zero, zero, quotient);
  Tensor remainder = select(by_zero, zero, a - quotient * b);
  return {quotient, remainder};
}

void require_not_bool(const Tensor& a, std::string_view operation) {
  if (a.dtype() == S::Bool) throw UserError(str_cat(operation, ": bool tensors cannot be divided"));
}

// C fmod for floats, exact while |a/b| < 2^24 (f32) / 2^53 (f64): q = trunc(a/b), then
// (KNOWN GAP: for larger quotients the result is wrong, not just approximate; numpy is exact there.
// An exact version needs an iterative reduction.)
// a - q*b is taken exactly (TwoProduct) and q corrected by one where a/b rounded across an
// integer. For larger quotients q itself is rounded and the result is approximate; beyond
// |b| > 2^100 (f32) / 2^900 (f64) the splitting would overflow and a - q*b is used as is.
Tensor fmod_float(const Tensor& a, const Tensor& b) {
  Tensor q = (a / b).trunc();
  Pair product = two_product(q, b);
  Tensor r = (a - product.hi) - product.lo;
  Tensor zero = constant(a, 0.0);
  Tensor sign_q = select((a.lt(zero)).ne(b.lt(zero)), constant(a, -1.0), constant(a, 1.0));
  Tensor step = sign_q * b;  // |step| = |b|, with the sign of a
  Tensor abs_r = select(r.lt(zero), r.neg(), r), abs_b = select(b.lt(zero), b.neg(), b);
  // q one too large in magnitude: r has the sign opposite to a's.
  Tensor too_far = r.ne(zero) & (r.lt(zero).ne(a.lt(zero)));
  r = select(too_far, r + step, r);
  // q one too small: |r| >= |b|.
  r = select(abs_b.lt(abs_r) | abs_b.eq(abs_r), r - step, r);
  double limit = single(a) ? std::ldexp(1.0, 100) : std::ldexp(1.0, 900);
  Tensor huge = constant(a, limit).lt(abs_b) | constant(a, limit).lt(select(q.lt(zero), q.neg(), q));
  r = select(huge, a - q * b, r);
  // fmod(a, ±inf) = a for finite a; fmod(±0, b) = ±0.
  Tensor infinite_b = abs_b.eq(constant(a, INFINITY));
  Tensor finite_a = select(a.lt(zero), a.neg(), a).lt(constant(a, INFINITY));
  r = select(infinite_b & finite_a, a, r);
  r = select(r.eq(zero), a * zero, r);  // the zero takes a's sign, like C
  return select(b.eq(zero), constant(a, NAN), r);
}

// ---- pow --------------------------------------------------------------------------------------

// x^y for integers by square-and-multiply over every bit of |y|: wraps like numpy's integer power.
// numpy rejects negative exponents; here x^y for y < 0 is the truncated 1/x^|y|: 1 for x = 1,
// ±1 for x = -1 (by parity), 0 otherwise (x = 0 included: no division by zero).
Tensor integer_pow(const Tensor& base, const Tensor& exponent) {
  S type = base.dtype();
  DType dtype(type);
  S unsigned_type = dtype.scalar_bytes() == 1 ? S::UInt8 : dtype.scalar_bytes() == 2 ? S::UInt16
                  : dtype.scalar_bytes() == 4 ? S::UInt32 : S::UInt64;
  Tensor zero = Tensor::scalar(0, type), one = Tensor::scalar(1, type);
  Tensor negative = dtype.is_signed() ? exponent.lt(zero) : Tensor::full(exponent.shape(), 0, S::Bool);
  Tensor magnitude = select(negative, exponent.neg(), exponent).bitcast(unsigned_type);
  Tensor result = one.expand(base.shape()), power = base;
  Tensor unsigned_one = Tensor::scalar(1, unsigned_type);
  int bits = 8 * dtype.scalar_bytes();
  for (int bit = 0; bit < bits; ++bit) {
    Tensor set = magnitude.bitwise_and(unsigned_one).eq(unsigned_one);
    result = select(set, result * power, result);
    if (bit + 1 < bits) {
      power = power * power;
      magnitude = magnitude.shift_right(unsigned_one);
    }
  }
  if (!dtype.is_signed()) return result;
  Tensor odd = exponent.bitwise_and(one).ne(zero);
  Tensor minus_one = Tensor::scalar(-1, type);
  Tensor reciprocal = select(base.eq(one), one, select(base.eq(minus_one), select(odd, minus_one, one), zero));
  return select(negative, reciprocal, result);
}

// x^y for floats as exp2(y*log2|x|), with numpy's (C99's) special cases. The product y*log2|x|
// carries a rounding of |y*log2|x||*2^-p, so f32 computes in f64 (then rounds once: <= 1 ulp);
// f64 has no wider type: its relative error grows like |y*log2|x|| * 2^-53 (about 2^10 ulp at
// worst for results near the overflow threshold, a few ulp for |y log2 x| < 8).
Tensor float_pow(const Tensor& x, const Tensor& y) {
  Tensor zero = constant(x, 0.0), one = constant(x, 1.0);
  Tensor magnitude = select(x.lt(zero), x.neg(), x);
  Tensor value = (y * magnitude.log2()).exp2();
  Tensor integral = y.trunc().eq(y);
  // odd integers: y - 2*trunc(y/2) is ±1 (NaN for ±inf, which are even).
  Tensor parity = y - constant(x, 2.0) * (y * constant(x, 0.5)).trunc();
  Tensor odd = parity.eq(one) | parity.eq(one.neg());
  value = select(sign_bit(x) & odd & x.eq(x), value.neg(), value);
  value = select(x.lt(zero) & integral.logical_not() & magnitude.lt(constant(x, INFINITY)), constant(x, NAN), value);
  Tensor y_infinite = select(y.lt(zero), y.neg(), y).eq(constant(x, INFINITY));
  value = select(x.eq(one.neg()) & y_infinite, one, value);
  return select(y.eq(zero) | x.eq(one), one, value);
}

// The value of a tensor that is one constant seen through value-preserving views (Tensor::scalar,
// reshaped, expanded, permuted): an exponent known when the graph is built.
std::optional<double> constant_value(const Tensor& t) {
  const UOp* node = t.data().node.get();
  while (node->op() == Ops::RESHAPE || node->op() == Ops::EXPAND || node->op() == Ops::PERMUTE ||
         node->op() == Ops::SHRINK || node->op() == Ops::FLIP)
    node = node->src(0).get();
  if (!node->is_const()) return std::nullopt;
  if (node->dtype().is_float()) return node->arg_float();
  return static_cast<double>(node->const_int());
}

// x^y for a float x and a constant y in {0, ±1/2, 1, 2, 3, -1}: a few multiplications or a square
// root instead of exp2(y*log2|x|) (a held-out audio front end spent a quarter of its run on the
// general pow of Pow(x, 2)). Each form gives pow's values: x·x, 1/x and √x round once, so they are
// the correctly rounded power; x³ and 1/√x compute in `wide` (f64 for f32: an exact square, one more
// rounding, then the rounding to x's type, as float_pow's result has). √x is corrected at -0 (pow
// gives +0) and -inf (pow gives +inf, √ NaN), and 1/√x follows from it (+inf at ±0, +0 at ±inf,
// NaN below 0). x^0 is 1 for every x, NaN included. nullopt for any other exponent.
std::optional<Tensor> pow_by_small_constant(const Tensor& x, double y, S wide) {
  auto root = [](const Tensor& v) {
    Tensor zero = constant(v, 0.0), infinity = constant(v, INFINITY);
    return select(v.eq(zero), zero, select(v.eq(infinity.neg()), infinity, v.sqrt()));
  };
  if (y == 0) return constant(x, 1.0);
  if (y == 1) return x;
  if (y == 2) return x * x;
  if (y == -1) return x.reciprocal();
  if (y == 0.5) return root(x);
  Tensor v = x.cast(wide);
  if (y == 3) return (v * v * v).cast(x.dtype());
  if (y == -0.5) return root(v).reciprocal().cast(x.dtype());
  return std::nullopt;
}

}  // namespace

// ---- unary ------------------------------------------------------------------------------------

Tensor Tensor::abs() const {
  DType type = data().dtype;
  if (type.is_bool() || type.is_unsigned()) return *this;
  if (type.is_float()) {
    // Clearing the sign bit is exact for every value, -0 and NaN included.
    S bits = type.scalar_bytes() == 8 ? S::UInt64 : type.scalar_bytes() == 4 ? S::UInt32 : S::UInt16;
    Tensor one = Tensor::scalar(1, bits);
    return bitcast(bits).shift_left(one).shift_right(one).bitcast(type.scalar());
  }
  return select(lt(Tensor::scalar(0, type.scalar())), neg(), *this);  // MIN wraps to MIN, like numpy
}

Tensor Tensor::sign() const {
  DType type = data().dtype;
  S s = type.scalar();
  if (type.is_bool()) return *this;
  Tensor zero = Tensor::scalar(0, s);
  Tensor positive = zero.lt(*this);
  if (type.is_unsigned()) return positive.cast(s);
  if (type.is_float())  // ±1, and the input itself for ±0 and NaN
    return select(positive, Tensor::scalar(1, s), select(lt(zero), Tensor::scalar(-1, s), *this));
  return positive.cast(s) - lt(zero).cast(s);
}

// 1/sqrt(x): two correctly rounded steps in the compute type (<= 1.5 ulp f32/f64; f16/bf16 round once).
Tensor Tensor::rsqrt() const {
  return float_math(*this, [](const Tensor& x) { return x.sqrt().reciprocal(); });
}
Tensor Tensor::square() const { return mul(*this); }
Tensor Tensor::exp() const { return float_math(*this, exp_kernel); }
Tensor Tensor::log() const { return float_math(*this, log_kernel); }
Tensor Tensor::cos() const { return float_math(*this, cos_kernel); }
// sin/cos: both accurate, so tan is too (<= 5 ulp measured), also next to the poles.
Tensor Tensor::tan() const {
  return float_math(*this, [](const Tensor& x) { return x.sin() / cos_kernel(x); });
}
Tensor Tensor::tanh() const { return float_math(*this, tanh_kernel); }
Tensor Tensor::erf() const { return float_math(*this, erf_kernel); }

// 1/(1 + e^-x) for x >= 0 and e^x/(1 + e^x) for x < 0: the exponential never overflows, and tiny
// results for very negative x keep their relative precision.
Tensor Tensor::sigmoid() const {
  return float_math(*this, [](const Tensor& x) {
    Tensor e = exp_kernel_with(negative_magnitude(x), ExpArgument::NonPositive);  // exp(-|x|)
    // One division, of the selected numerator: (e or 1) / d rounds once, and it takes one op less
    // than 1/d and then e * (1/d) (which rounded twice). A vector division costs about as much as
    // four fused multiply-adds here.
    Tensor numerator = select(x.lt(constant(x, 0.0)), e, constant(x, 1.0));
    return numerator / (constant(x, 1.0) + e);
  });
}

// x < 0 ? 0 : x keeps NaN (and -0) as they are, unlike max(x, 0) on some backends.
Tensor Tensor::relu() const {
  DType type = data().dtype;
  if (type.is_bool() || type.is_unsigned()) return *this;
  Tensor zero = Tensor::scalar(0, type.scalar());
  return select(lt(zero), zero, *this);
}

// x * Φ(x) = x/2 * erfc(-x/√2): the erfc form keeps relative precision for very negative x, where
// 1 + erf(x/√2) would cancel to zero.
Tensor Tensor::gelu() const {
  return float_math(*this, [](const Tensor& x) {
    return constant(x, 0.5) * x * erfc_kernel(x * constant(x, -std::numbers::sqrt2 / 2));
  });
}

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow for large x, full relative precision for
// very negative x (where the result is e^x).
Tensor Tensor::softplus() const {
  return float_math(*this, [](const Tensor& x) {
    Tensor zero = constant(x, 0.0);
    return select(zero.lt(x), x, zero) + log1p_kernel(exp_kernel_with(negative_magnitude(x), ExpArgument::NonPositive));
  });
}

// floor/ceil/round from trunc and exact float arithmetic (t ± 1 is exact where it is selected);
// a float → int → float round trip would overflow for |x| >= 2^63.
Tensor Tensor::floor() const {
  if (!data().dtype.is_float()) return *this;
  Tensor t = trunc();
  return select(lt(t), t - constant(t, 1.0), t);
}
Tensor Tensor::ceil() const {
  if (!data().dtype.is_float()) return *this;
  Tensor t = trunc();
  return select(t.lt(*this), t + constant(t, 1.0), t);
}
Tensor Tensor::isnan() const {
  if (!data().dtype.is_float()) return Tensor::full(shape(), 0, S::Bool);
  return ne(*this);
}
Tensor Tensor::isinf() const {
  if (!data().dtype.is_float()) return Tensor::full(shape(), 0, S::Bool);
  Tensor infinity = Tensor::scalar(INFINITY, dtype());
  return eq(infinity) | eq(infinity.neg());
}

// ---- binary -----------------------------------------------------------------------------------

// numpy floor_divide. Integers: the truncated quotient, one less where the remainder's sign
// differs from the divisor's; x // 0 = 0. Floats: numpy's own formula from the exact fmod,
// (a - fmod(a, b)) / b adjusted and rounded, so results agree with numpy also where floor(a/b)
// would not (1 // 0.1 == 9); x // 0 = x / 0 (±inf or NaN).
Tensor Tensor::floordiv(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "floordiv");
  require_not_bool(a, "floordiv");
  if (!a.data().dtype.is_float()) {
    IntegerQuotient qr = integer_divide(a, b);
    if (a.data().dtype.is_unsigned()) return qr.quotient;
    Tensor zero = Tensor::scalar(0, a.dtype());
    Tensor adjust = qr.remainder.ne(zero) & qr.remainder.lt(zero).ne(b.lt(zero));
    return qr.quotient - adjust.cast(a.dtype());
  }
  S type = a.dtype();
  Tensor result = float_math(a, [&](const Tensor& x) {
    Tensor y = b.cast(x.dtype());
    Tensor zero = constant(x, 0.0);
    Tensor m = fmod_float(x, y);
    Tensor quotient = (x - m) / y;
    quotient = select(m.ne(zero) & y.lt(zero).ne(m.lt(zero)), quotient - constant(x, 1.0), quotient);
    Tensor floored = quotient.floor();
    floored = select(constant(x, 0.5).lt(quotient - floored), floored + constant(x, 1.0), floored);
    // A zero quotient takes the sign of the true quotient, like numpy.
    floored = select(quotient.eq(zero), zero * (x / y), floored);
    return select(y.eq(zero), x / y, floored);
  });
  return result.cast(type);
}

// numpy remainder: the result has the divisor's sign. Integers: x % 0 = 0. Floats: from the
// exact fmod, + b where the signs differ; a zero result is +0 or -0 with b's sign; x % 0 = NaN.
Tensor Tensor::mod(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "mod");
  require_not_bool(a, "mod");
  if (!a.data().dtype.is_float()) {
    IntegerQuotient qr = integer_divide(a, b);
    if (a.data().dtype.is_unsigned()) return qr.remainder;
    Tensor zero = Tensor::scalar(0, a.dtype());
    Tensor adjust = qr.remainder.ne(zero) & qr.remainder.lt(zero).ne(b.lt(zero));
    return select(adjust, qr.remainder + b, qr.remainder);
  }
  S type = a.dtype();
  return float_math(a, [&](const Tensor& x) {
           Tensor y = b.cast(x.dtype());
           Tensor zero = constant(x, 0.0);
           Tensor m = fmod_float(x, y);
           m = select(m.ne(zero) & y.lt(zero).ne(m.lt(zero)), m + y, m);
           Tensor signed_zero = select(sign_bit(y), zero.neg(), zero);
           return select(m.eq(zero), signed_zero, m);
         })
      .cast(type);
}

// C fmod / %: the result has the dividend's sign. Integers: x % 0 = 0 (numpy's fmod gives 0 too).
Tensor Tensor::fmod(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "fmod");
  require_not_bool(a, "fmod");
  if (!a.data().dtype.is_float()) return integer_divide(a, b).remainder;
  S type = a.dtype();
  return float_math(a, [&](const Tensor& x) { return fmod_float(x, b.cast(x.dtype())); }).cast(type);
}

// pow: integers (both operands after promotion) stay integers (see integer_pow); bool is x | !y;
// floats as in float_pow, f16/bf16 through f32 and f32 through f64.
Tensor Tensor::pow(const Tensor& exponent) const {
  auto [a, b] = promote(*this, exponent, "pow");
  DType type = a.data().dtype;
  if (type.is_bool()) return a.logical_or(b.logical_not());
  if (!type.is_float()) return integer_pow(a, b);
  S wide = type.scalar() == S::Float64 || type.scalar() == S::Float32 ? S::Float64 : S::Float32;
  if (std::optional<double> y = constant_value(b))
    if (std::optional<Tensor> power = pow_by_small_constant(a, *y, wide))
      return broadcast_to(*power, broadcast_shapes(dims_of(a), dims_of(b), "pow"));
  return float_pow(a.cast(wide), b.cast(wide)).cast(type.scalar());
}

// min(a, b) = ~max(~a, ~b) for integers (exact for every value, unsigned included) and
// -max(-a, -b) for floats, so NaN behaves exactly as in maximum.
Tensor Tensor::minimum(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "minimum");
  DType type = a.data().dtype;
  if (type.is_bool()) return a.logical_and(b);
  if (type.is_float()) return a.neg().maximum(b.neg()).neg();
  return a.bitwise_not().maximum(b.bitwise_not()).bitwise_not();
}

Tensor Tensor::logical_and(const Tensor& other) const {
  auto [a, b] = promote(cast(S::Bool), other.cast(S::Bool), "logical_and");
  return a.mul(b);  // AND on bool
}
Tensor Tensor::logical_or(const Tensor& other) const {
  auto [a, b] = promote(cast(S::Bool), other.cast(S::Bool), "logical_or");
  return a.add(b);  // OR on bool
}
Tensor Tensor::logical_xor(const Tensor& other) const {
  auto [a, b] = promote(cast(S::Bool), other.cast(S::Bool), "logical_xor");
  return a.ne(b);
}
// a <= b is a < b or a == b (not !(b < a), which would be true for NaN).
Tensor Tensor::le(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "le");
  return a.lt(b).logical_or(a.eq(b));
}
Tensor Tensor::gt(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "gt");
  return b.lt(a);
}
Tensor Tensor::ge(const Tensor& other) const {
  auto [a, b] = promote(*this, other, "ge");
  return b.le(a);
}

// numpy clip: min(max(x, low), high), so high wins when low > high; NaN stays NaN. For integer
// tensors, bounds beyond the dtype's range are clamped to it first (a bound of -3 on u8 would
// otherwise wrap to 253).
Tensor Tensor::clip(double low, double high) const {
  DType type = data().dtype;
  if (type.is_int()) {
    double smallest = static_cast<double>(static_cast<long double>(min_value(type)));
    long double exact_largest = static_cast<long double>(max_value(type));
    double largest = static_cast<double>(exact_largest);
    if (largest > exact_largest) largest = std::nextafter(largest, 0.0);  // 2^63-1, 2^64-1 round up
    low = std::clamp(low, smallest, largest);
    high = std::clamp(high, smallest, largest);
  }
  Tensor low_value = scalar_like(*this, low), high_value = scalar_like(*this, high);
  Tensor raised = select(lt(low_value), low_value, *this);
  return select(high_value.lt(raised), high_value, raised);
}

}  // namespace kiln
