// Parity tests of the elementwise Tensor ops (the primitives of tensor.cpp and the composites of
// tensor_math.cpp) and of the creation composites (tensor_create.cpp) against plain C++
// references: every dtype an op supports, numpy broadcasting, zero-sized and size-1 dims,
// non-contiguous inputs and one large size.
//
// References compute the exact (or long double) value and round it once to the result dtype, so
// "N ulp" below is the distance from the correctly rounded result. Set KILN_TEST_VERBOSE=1 to
// print the worst error each op reaches per dtype.
//
// Tolerance table (ulp of the result dtype; f16/bf16 compute in f32 and round once: 1 ulp):
//   exact (0):  neg abs sign square relu floor ceil round trunc isnan isinf logical_not bitwise_not
//               cast add sub mul div idiv floordiv mod fmod maximum minimum bitwise/shift ops
//               comparisons logical ops where clip sqrt reciprocal; integer pow
//   exp2 2   log2 2   sin 2   exp 3   log 3   cos 3   tan 5   tanh 4   erf 4   sigmoid 4
//   softplus 5   rsqrt 2   gelu 8 ulp, or 80 eps relative + 1e-14 (f32) / 1e-30 (f64) absolute
//   (the rounding of x/√2 is amplified by erfc's slope, ~x^2 ulp, for very negative x)
//   pow: f32 1 (computed in f64), f64 32 (exp2(y*log2|x|) with |y*log2|x|| <= 32 in the test)
//   pow by a constant 0, ±1/2, 1, 2, 3, -1 (multiplications, a square root): exact; 3 and -1/2 1 ulp
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numbers>

#include "ir/uop.h"
#include "tensor/tensor_data.h"
#include "tensor_test_helpers.h"

namespace kiln::test {
namespace {
TEST_SUITE("tensor") {

bool verbose() { return std::getenv("KILN_TEST_VERBOSE") != nullptr; }

// The result type of a float-only function: integers and bool give f32.
S float_out(S t) { return is_float_type(t) ? t : S::Float32; }

// Ops on exact values in the arithmetic of type t: f64 in double (long double would round twice),
// the others in long double (exact for sums and products of f32/f16/bf16 values; for quotients
// the double rounding is innocuous at 2p + 2 <= 64 bits).
long double arith(S t, long double a, long double b, char op) {
  if (t == S::Float64) {
    double x = static_cast<double>(a), y = static_cast<double>(b);
    switch (op) {
      case '+': return x + y;
      case '-': return x - y;
      case '*': return x * y;
      default: return x / y;
    }
  }
  switch (op) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default: return a / b;
  }
}


const std::vector<long double> kFloatSpecials = {0.0L, -0.0L, 1.0L, -1.0L, 0.5L, -0.5L, kInf, -kInf, kNaN, 2.0L, -3.0L};

// ---- unary float functions ----

struct FloatFunction {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<long double(long double)> reference;
  long double low, high;               // uniform inputs (f32 / f16 / bf16 and integers)
  long double low64, high64;           // uniform inputs for f64
  std::vector<long double> specials;   // added to kFloatSpecials
  long double ulps;                    // f32 and f64 bound (f16/bf16: 1)
  long double atol32 = 0, atol64 = 0;  // extra absolute slack where stated in the table
  bool positive_log_inputs = false;    // add log-uniform positive magnitudes (log, sqrt, ...)
};

long double gelu_reference(long double x) { return 0.5L * x * std::erfc(-x / std::sqrt(2.0L)); }
long double sigmoid_reference(long double x) { return 1.0L / (1.0L + std::exp(-x)); }
long double softplus_reference(long double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

std::vector<FloatFunction> float_functions() {
  const long double pi = std::numbers::pi_v<long double>;
  std::vector<long double> near_half_pi;
  for (int k = -6; k <= 6; ++k) near_half_pi.push_back(k * pi / 2);
  for (int k : {101, 1001, 10001, 63661}) near_half_pi.push_back(k * pi / 2);
  return {
      {"exp2", [](const Tensor& x) { return x.exp2(); }, [](long double x) { return std::exp2(x); }, -150, 129,
       -1076, 1025, {-149, 127.99L, 1e-9L}, 2},
      {"log2", [](const Tensor& x) { return x.log2(); }, [](long double x) { return std::log2(x); }, 0, 1000, 0, 1e6,
       {1e-40L, 1.0000001L, 0.9999999L}, 2, 0, 0, true},
      {"sin", [](const Tensor& x) { return x.sin(); }, [](long double x) { return std::sin(x); }, -10, 10, -10, 10,
       near_half_pi, 2},
      {"sqrt", [](const Tensor& x) { return x.sqrt(); }, [](long double x) { return std::sqrt(x); }, 0, 1000, 0, 1e6,
       {4, 1e-40L}, 0, 0, 0, true},
      {"reciprocal", [](const Tensor& x) { return x.reciprocal(); }, [](long double x) { return 1.0L / x; }, -100,
       100, -1e6, 1e6, {3, 1e-40L, 1e38L}, 0},
      {"exp", [](const Tensor& x) { return x.exp(); }, [](long double x) { return std::exp(x); }, -105, 89, -746,
       710, {88.72L, -87.3L, -103.2L, 1e-7L, 709.78L, -745.1L, 11.09L, -17.3L}, 3},
      {"log", [](const Tensor& x) { return x.log(); }, [](long double x) { return std::log(x); }, 0, 1000, 0, 1e6,
       {1.0000001L, 0.9999999L, 1e-40L}, 3, 0, 0, true},
      {"cos", [](const Tensor& x) { return x.cos(); }, [](long double x) { return std::cos(x); }, -10, 10, -10, 10,
       near_half_pi, 3},
      {"tan", [](const Tensor& x) { return x.tan(); }, [](long double x) { return std::tan(x); }, -10, 10, -10, 10,
       near_half_pi, 5},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, [](long double x) { return std::tanh(x); }, -12, 12, -25, 25,
       {0.35L, 0.3499L, 0.2L, 0.1999L, 1e-4L, -1e-6L, 9.1L, 19.1L}, 4},
      {"erf", [](const Tensor& x) { return x.erf(); }, [](long double x) { return std::erf(x); }, -5, 5, -7, 7,
       {0.4999L, 0.5L, -0.5L, 1e-5L, 3.9L, -5.9L}, 4},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); }, sigmoid_reference, -90, 90, -700, 700,
       {-17.5L, 16.6L, -87.0L, 1e-8L, -100.0L, -103.2L, -104.5L}, 4},  // (results deep in the subnormals)
      {"gelu", [](const Tensor& x) { return x.gelu(); }, gelu_reference, -12, 12, -30, 30, {-0.7L, 3.0L, -5.0L}, 8,
       1e-14L, 1e-30L},
      {"softplus", [](const Tensor& x) { return x.softplus(); }, softplus_reference, -90, 90, -700, 700,
       {-20.0L, 20.0L, 1e-8L, -1e-8L, 80.0L}, 5},
      {"rsqrt", [](const Tensor& x) { return x.rsqrt(); }, [](long double x) { return 1.0L / std::sqrt(x); }, 0, 1000,
       0, 1e6, {4, 1e-30L}, 2, 0, 0, true},
  };
}

HostTensor float_function_inputs(const FloatFunction& f, S t) {
  std::vector<long double> specials = kFloatSpecials;
  specials.insert(specials.end(), f.specials.begin(), f.specials.end());
  bool wide = t == S::Float64;
  std::vector<long double> values = sample_values(t, 400, wide ? f.low64 : f.low, wide ? f.high64 : f.high,
                                                  0x1234 + static_cast<uint64_t>(t), specials);
  if (is_float_type(t)) {
    auto extra = f.positive_log_inputs ? log_uniform_values(t, 200, wide ? -1060 : -140, wide ? 1020 : 126, false, 7)
                                       : log_uniform_values(t, 200, -30, 4, true, 7);
    values.insert(values.end(), extra.begin(), extra.end());
  }
  if (std::string(f.name) == "cos" || std::string(f.name) == "tan" || std::string(f.name) == "sin") {
    auto large = sample_values(t, 200, -1e5, 1e5, 99);
    values.insert(values.end(), large.begin(), large.end());
  }
  return host(t, {static_cast<int64_t>(values.size())}, values);
}

TEST_CASE("elementwise: float functions match long double references, every dtype") {
  for (const FloatFunction& f : float_functions()) {
    for (S t : kAllTypes) {
      HostTensor x = float_function_inputs(f, t);
      S out = float_out(t);
      HostTensor expected = map_unary(x, out, f.reference);
      Tolerance tolerance;
      tolerance.ulps = out == S::Float16 || out == S::BFloat16 ? std::max<long double>(f.ulps > 0 ? 1 : 0, 0) : f.ulps;
      tolerance.atol = out == S::Float64 ? f.atol64 : out == S::Float32 ? f.atol32 : 0;
      // gelu: the rounding of x/√2 is amplified by erfc's slope, ~x^2 ulp relative (|x| <= 8).
      if (std::string(f.name) == "gelu" && (out == S::Float32 || out == S::Float64))
        tolerance.rtol = 80 * std::ldexp(1.0L, 1 - float_format(out).precision);
      HostTensor got = from_tensor(f.op(to_tensor(x)));
      Comparison result = compare(got, expected, tolerance, &x);
      if (verbose()) std::printf("%-10s %-5s worst %.2Lf ulp\n", f.name, type_name(t).c_str(), result.worst_ulps);
      INFO(std::string(f.name), " on ", type_name(t), ": ", result.message);
      CHECK(result.ok);
    }
  }
}

// ---- exact unary ops ----

struct ExactUnary {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<long double(long double, S)> reference;  // exact value; converted to the result type
  std::function<S(S)> result_type;
  std::function<bool(S)> supports;
};

bool always(S) { return true; }
S same(S t) { return t; }
S to_bool(S) { return S::Bool; }

// -v, modulo 2^bits for integers (MIN wraps to MIN, like numpy).
long double negate(long double v, S t) { return is_float_type(t) ? -v : t == S::Bool ? !v : wrap_integer(t, -v); }

std::vector<ExactUnary> exact_unaries() {
  return {
      {"neg", [](const Tensor& x) { return x.neg(); }, negate, same, always},
      {"abs", [](const Tensor& x) { return x.abs(); },
       [](long double v, S t) { return v < 0 || std::signbit(v) ? negate(v, t) : v; }, same, always},
      {"sign", [](const Tensor& x) { return x.sign(); },
       [](long double v, S t) -> long double {
         if (t == S::Bool) return v;
         if (v > 0) return 1;
         if (v < 0) return -1;
         return v;  // ±0 and NaN
       },
       same, always},
      {"square", [](const Tensor& x) { return x.square(); },
       [](long double v, S t) -> long double {
         if (t == S::Bool) return v;
         if (!is_float_type(t)) return static_cast<long double>(to_bits64(v) * to_bits64(v));
         return arith(t, v, v, '*');
       },
       same, always},
      {"relu", [](const Tensor& x) { return x.relu(); }, [](long double v, S) { return v < 0 ? 0.0L : v; }, same,
       always},
      {"floor", [](const Tensor& x) { return x.floor(); }, [](long double v, S) { return std::floor(v); }, same, always},
      {"ceil", [](const Tensor& x) { return x.ceil(); }, [](long double v, S) { return std::ceil(v); }, same, always},
      {"round", [](const Tensor& x) { return x.round(); }, [](long double v, S) { return std::nearbyint(v); }, same,
       always},
      {"trunc", [](const Tensor& x) { return x.trunc(); }, [](long double v, S) { return std::trunc(v); }, same, always},
      {"isnan", [](const Tensor& x) { return x.isnan(); }, [](long double v, S) -> long double { return std::isnan(v); },
       to_bool, always},
      {"isinf", [](const Tensor& x) { return x.isinf(); }, [](long double v, S) -> long double { return std::isinf(v); },
       to_bool, always},
      {"logical_not", [](const Tensor& x) { return x.logical_not(); },
       [](long double v, S) -> long double { return v == 0; }, to_bool, always},
      {"bitwise_not", [](const Tensor& x) { return x.bitwise_not(); },
       [](long double v, S t) -> long double { return t == S::Bool ? !v : -v - 1; }, same,
       [](S t) { return !is_float_type(t); }},
  };
}

HostTensor exact_inputs(S t, uint64_t seed) {
  std::vector<long double> specials = {0, -0.0L, 1, -1, 0.5L, -0.5L, 1.5L, -1.5L, 2.5L, -2.5L, 0.49999997L, -0.49999997L,
                                       3.5L, 1e20L, -1e20L, 8388609.5L, kInf, -kInf, kNaN, 127, -128, 255, 32767, -32768,
                                       65535, 2147483647, -2147483648.0L, 4294967295.0L};
  if (is_int_type(t)) {
    specials.push_back(int_min(t));
    specials.push_back(int_max(t));
  }
  std::vector<long double> values = sample_values(t, 150, -1000, 1000, seed, specials);
  if (is_float_type(t)) {  // many exact halves and quarters, where rounding decides
    for (int i = -40; i <= 40; ++i) values.push_back(convert_to(t, i * 0.25L));
  } else {
    auto wide = sample_values(t, 100, int_min(t), int_max(t), seed + 1);
    values.insert(values.end(), wide.begin(), wide.end());
  }
  return host(t, {static_cast<int64_t>(values.size())}, values);
}

TEST_CASE("elementwise: exact unary ops, every dtype") {
  for (const ExactUnary& op : exact_unaries()) {
    for (S t : kAllTypes) {
      if (!op.supports(t)) continue;
      HostTensor x = exact_inputs(t, 0x55 + static_cast<uint64_t>(t));
      S out = op.result_type(t);
      HostTensor expected = map_unary(x, out, [&](long double v) { return op.reference(v, t); });
      INFO(std::string(op.name), " on ", type_name(t));
      CHECK_TENSOR(op.op(to_tensor(x)), expected, Tolerance{}, &x);
    }
  }
}

TEST_CASE("elementwise: signed zeros and NaN of abs, neg, floor, ceil, round, relu") {
  for (S t : kFloatTypes) {
    HostTensor x = host(t, {4}, {-0.0L, 0.0L, -0.25L, 0.25L});
    Tolerance exact;
    exact.signed_zero = true;
    INFO(type_name(t));
    CHECK_TENSOR(to_tensor(x).abs(), host(t, {4}, {0.0L, 0.0L, 0.25L, 0.25L}), exact);
    CHECK_TENSOR(to_tensor(x).neg(), host(t, {4}, {0.0L, -0.0L, 0.25L, -0.25L}), exact);
    CHECK_TENSOR(to_tensor(x).ceil(), host(t, {4}, {-0.0L, 0.0L, -0.0L, 1.0L}), exact);
    CHECK_TENSOR(to_tensor(x).floor(), host(t, {4}, {-0.0L, 0.0L, -1.0L, 0.0L}), exact);
    CHECK_TENSOR(to_tensor(x).round(), host(t, {4}, {-0.0L, 0.0L, -0.0L, 0.0L}), exact);
  }
  // relu keeps NaN (it is not max(x, 0) on a backend whose MAX drops NaN).
  CHECK(std::isnan(Tensor::full({1}, NAN).relu().item()));
  CHECK(Tensor::full({1}, -3, S::Int32).relu().item() == 0);
}

// A constant exponent of 0, ±1/2, 1, 2, 3 or -1 takes multiplications or a square root
// (tensor_math.cpp, pow_by_small_constant); the values must be pow's, special ones included.
TEST_CASE("elementwise: pow by a small constant exponent is strength-reduced and keeps pow's values") {
  const std::vector<long double> xs = {-INFINITY, -3.5L, -1.0L, -0.0L, 0.0L, 1e-30L, 0.3L, 1.0L, 2.0L, 7.25L,
                                       1e15L, INFINITY, NAN};
  Tolerance exact;
  exact.signed_zero = true;
  Tolerance one_rounding_more = exact;  // computed in the wider type, then rounded: double rounding
  one_rounding_more.ulps = 1;
  for (S t : kFloatTypes)
    for (long double y : {0.0L, 1.0L, 2.0L, 3.0L, -1.0L, 0.5L, -0.5L}) {
      INFO(type_name(t), " ^ ", static_cast<double>(y));
      HostTensor x = host(t, {static_cast<int64_t>(xs.size())}, xs);
      std::vector<long double> expected;
      for (long double v : x.values) expected.push_back(std::pow(v, y));
      Tensor power = to_tensor(x).pow(Tensor::scalar(static_cast<double>(y), t));
      // Strength-reduced: neither exp2 nor log2 in the graph.
      for (const UOp* node : toposort(power.data().node)) CHECK(node->op() != Ops::EXP2);
      bool rounds_twice = y == 3.0L || y == -0.5L;
      CHECK_TENSOR(power, host(t, x.shape, expected), rounds_twice ? one_rounding_more : exact, &x);
    }
  // An exponent it does not reduce, and a tensor exponent, take the general form.
  Tensor general = Tensor::full({2}, 2.0).pow(Tensor::scalar(4.0));
  bool has_exp2 = false;
  for (const UOp* node : toposort(general.data().node)) has_exp2 = has_exp2 || node->op() == Ops::EXP2;
  CHECK(has_exp2);
  CHECK(general.to_vector<float>() == std::vector<float>{16.0f, 16.0f});
  // Broadcasting: a [2, 1] constant exponent against a [3] base gives [2, 3].
  Tensor wide = Tensor::full({3}, 3.0).pow(Tensor::full({2, 1}, 2.0));
  CHECK(wide.shape() == Shape{2, 3});
  CHECK(wide.to_vector<float>() == std::vector<float>(6, 9.0f));
}

// ---- casts ----

TEST_CASE("elementwise: cast between every pair of dtypes") {
  // Values every source can hold; a target gets those whose conversion C++ and LLVM define
  // (float → integer only in range, no negative float → unsigned).
  std::vector<long double> base = {0, 1, 2, 7, 100, 127, -1, -5, -128, 255, 1000, 65504, 70000, -32768, 2.5L, -3.75L,
                                   0.1L, 1e-3L, 3e38L, -1e10L, 4294967296.0L, 9.007199254740993e15L,
                                   9223372036854775807.0L, 18446744073709551615.0L, kInf, -kInf, kNaN};
  for (S from : kAllTypes) {
    for (S to : kAllTypes) {
      std::vector<long double> values;
      for (long double v : base) {
        if (!is_float_type(from) && (!std::isfinite(v) || std::floor(v) != v || v < int_min(from) || v > int_max(from))) continue;
        if (from == S::Bool && v != 0 && v != 1) continue;
        long double source = convert_to(from, v);
        if (is_int_type(to) && is_float_type(from)) {
          if (!std::isfinite(source) || std::trunc(source) < int_min(to) || std::trunc(source) > int_max(to)) continue;
        }
        values.push_back(source);
      }
      HostTensor x{from, {static_cast<int64_t>(values.size())}, values};
      HostTensor expected = map_unary(x, to, [&](long double v) {
        if (is_int_type(to) && is_float_type(from)) return std::trunc(v);
        return v;
      });
      INFO("cast ", type_name(from), " -> ", type_name(to));
      CHECK_TENSOR(to_tensor(x).cast(to), expected, Tolerance{}, &x);
    }
  }
}

TEST_CASE("elementwise: float to u8 and u16 saturates in vector kernels (NaN to 0, ends clamped)") {
  // 1,024 elements: the kernel runs in vectors, whose conversion the CPU renderer builds from a
  // clamp and a convert through i32 (llvm_alu.cpp, float_to_integer).
  const std::vector<float> pattern = {NAN, -INFINITY, -1.0f, -0.75f, -0.0f, 0.4f, 1.5f, 254.6f, 255.5f, 256.0f,
                                      1e10f, 65534.9f, 65535.5f, 70000.0f, INFINITY, 17.0f};
  std::vector<float> values(1024);
  for (size_t i = 0; i < values.size(); ++i) values[i] = pattern[i % pattern.size()];
  for (S type : {S::UInt8, S::UInt16}) {
    INFO(type_name(type));
    double high = type == S::UInt8 ? 255.0 : 65535.0;
    Tensor converted = Tensor::from_vector(values, {1024}).cast(type).cast(S::Float64);
    std::vector<double> got = converted.to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i) {
      double v = values[i];
      double expected = std::isnan(v) ? 0.0 : std::trunc(std::min(std::max(v, 0.0), high));
      REQUIRE(got[i] == expected);
    }
  }
}

TEST_CASE("elementwise: bitcast keeps the bits") {
  HostTensor x = host(S::Float32, {4}, {1.0L, -2.0L, 0.0L, kInf});
  HostTensor expected = host(S::UInt32, {4}, {0x3F800000, 0xC0000000, 0, 0x7F800000});
  CHECK_TENSOR(to_tensor(x).bitcast(S::UInt32), expected, Tolerance{});
  CHECK_TENSOR(to_tensor(expected).bitcast(S::Float32), x, Tolerance{});
  HostTensor h = host(S::Float16, {2}, {1.0L, -2.0L});
  CHECK_TENSOR(to_tensor(h).bitcast(S::Int16), host(S::Int16, {2}, {0x3C00, -16384}), Tolerance{});
  CHECK(error_of([] { (void)Tensor::zeros({2}).bitcast(S::Float64); }).find("bitcast: f32 and f64 differ in size") !=
        std::string::npos);
}

TEST_CASE("elementwise: mul_add rounds once, in compiled kernels as in constant folding") {
  // (1 + 2^-12)(1 - 2^-12) - 1 = -2^-24 exactly: fused, that is the answer; multiplied and rounded
  // first, the product is 1 in f32 and the sum 0. The same for f64 at 2^-27.
  for (auto [type, e] : {std::pair{S::Float32, 0x1p-12}, std::pair{S::Float64, 0x1p-27}}) {
    std::vector<double> a(37, 1.0 + e), b(37, 1.0 - e), c(37, -1.0);
    a[5] = 3.0, b[5] = -0.5, c[5] = 0.25;  // an ordinary lane: -1.25
    Tensor ta = Tensor::from_vector(a, {37}).cast(type), tb = Tensor::from_vector(b, {37}).cast(type);
    Tensor tc = Tensor::from_vector(c, {37}).cast(type);
    std::vector<double> got = ta.mul_add(tb, tc).to_vector<double>();  // a compiled (vector) kernel
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == (i == 5 ? -1.25 : -e * e));
    // Constant operands fold in the IR evaluator, with the same single rounding.
    double folded = Tensor::scalar(1.0 + e, type).mul_add(Tensor::scalar(1.0 - e, type), Tensor::scalar(-1.0, type))
                        .to_vector<double>()[0];
    CHECK(folded == -e * e);
  }
  // Integers: multiply, then add, wrapping.
  Tensor i = Tensor::from_vector(std::vector<int32_t>{7, -3}, {2});
  CHECK(i.mul_add(Tensor::scalar(5, S::Int32), Tensor::scalar(1, S::Int32)).to_vector<int64_t>() ==
        std::vector<int64_t>{36, -14});
  // Broadcast and promoted like the other binary ops.
  Tensor row = Tensor::from_vector(std::vector<float>{1, 2, 3}, {1, 3});
  CHECK(row.mul_add(Tensor::from_vector(std::vector<double>{2, 4}, {2, 1}), Tensor::scalar(1.0, S::Float32))
            .to_vector<double>() == std::vector<double>{3, 5, 7, 5, 9, 13});
}

// ---- binary ops ----

struct BinaryOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> op;
  // Reference on exact values of the promoted type t; the result is converted to result_type(t).
  std::function<long double(long double, long double, S)> reference;
  std::function<S(S)> result_type;
  std::function<bool(S)> supports;
  std::function<bool(long double, long double, S)> defined = nullptr;  // pairs the op may be given
  Tolerance tolerance = {};  // for float results (f64 entry; see float_tolerance)
  Tolerance tolerance_f32 = {};
};

// numpy's float divmod (npy_divmod), in the compute type of t (f32 for f16/bf16/f32).
struct DivMod {
  long double quotient, modulus;
};
DivMod numpy_divmod(long double a, long double b, S t) {
  S c = t == S::Float64 ? S::Float64 : S::Float32;
  auto r = [c](long double v) { return round_to_float(c, v); };
  long double mod = std::fmod(a, b);
  if (b == 0) return {r(a / b), mod};
  long double div = r(r(a - mod) / b);
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod = r(mod + b);
      div -= 1;
    }
  } else {
    mod = std::copysign(0.0L, b);
  }
  long double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5L) floordiv += 1;
  } else {
    floordiv = std::copysign(0.0L, r(a / b));
  }
  return {floordiv, mod};
}

// Integer quotient and remainder with numpy's results for a zero divisor (0, 0) and C's truncation.
struct IntDivMod {
  long double quotient, remainder;
};
IntDivMod truncated(long double a, long double b) {
  if (b == 0) return {0, 0};
  long double q = std::trunc(a / b);  // exact: |a|, |b| < 2^64 fit the 64-bit significand... see below
  // a / b in long double can round for 64-bit operands; correct q by one where needed.
  long double r = a - q * b;
  if (r != 0 && ((r < 0) != (a < 0))) {
    q -= (a < 0) != (b < 0) ? -1 : 1;
    r = a - q * b;
  }
  if (std::fabs(r) >= std::fabs(b)) {
    q += (a < 0) != (b < 0) ? -1 : 1;
    r = a - q * b;
  }
  return {q, r};
}

long double integer_power(long double base, long double exponent, S t) {
  if (exponent < 0) {
    if (base == 1) return 1;
    if (base == -1) return std::fmod(exponent, 2) != 0 ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, power = to_bits64(base);
  for (uint64_t e = static_cast<uint64_t>(exponent); e != 0; e >>= 1) {
    if (e & 1) result *= power;
    power *= power;
  }
  return wrap_integer(t, static_cast<long double>(result));
}

bool nonzero_divisor(long double a, long double b, S t) {
  return b != 0 && !(is_signed_type(t) && b == -1 && a == int_min(t));
}

std::vector<BinaryOp> binary_ops() {
  auto numeric = [](S t) { return t != S::Bool; };
  auto integer_or_bool = [](S t) { return !is_float_type(t); };
  auto floats_and_ints = [](S t) { return t != S::Bool; };
  auto modular = [](long double a, long double b, S t, char op) -> long double {
    if (is_float_type(t)) return arith(t, a, b, op);
    if (t == S::Bool) return op == '+' ? (a || b) : (a && b);
    uint64_t x = to_bits64(a), y = to_bits64(b);
    return static_cast<long double>(op == '+' ? x + y : op == '-' ? x - y : x * y);
  };
  // KNOWN GAP (tensor_math.cpp fmod_float): float floordiv/mod/fmod are exact only while
  // |a/b| < 2^p of the compute type; larger quotients are excluded here and listed in the report.
  auto small_quotient = [](long double a, long double b, S t) {
    if (!is_float_type(t) || !std::isfinite(a) || !std::isfinite(b) || b == 0) return true;
    return std::fabs(a / b) < std::ldexp(1.0L, t == S::Float64 ? 53 : 24);
  };
  Tolerance pow_f64;
  pow_f64.ulps = 32;
  Tolerance pow_f32;
  pow_f32.ulps = 1;
  return {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; },
       [=](long double a, long double b, S t) { return modular(a, b, t, '+'); }, same, always},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; },
       [=](long double a, long double b, S t) { return modular(a, b, t, '-'); }, same, numeric},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; },
       [=](long double a, long double b, S t) { return modular(a, b, t, '*'); }, same, always},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; },
       [](long double a, long double b, S t) {
         S c = float_out(t);  // integers divide as f32, after rounding to f32
         return arith(c, convert_to(c, a), convert_to(c, b), '/');
       },
       float_out, always},
      {"idiv", [](const Tensor& a, const Tensor& b) { return a.idiv(b); },
       [](long double a, long double b, S t) {
         if (is_float_type(t)) return std::trunc(round_to_float(t, arith(t, a, b, '/')));
         return truncated(a, b).quotient;
       },
       same, floats_and_ints,
       // The IDIV primitive is undefined for an integer zero divisor and MIN / -1 (ops.def); not tested.
       [](long double a, long double b, S t) { return is_float_type(t) || nonzero_divisor(a, b, t); }},
      {"floordiv", [](const Tensor& a, const Tensor& b) { return a.floordiv(b); },
       [](long double a, long double b, S t) -> long double {
         if (is_float_type(t)) return numpy_divmod(a, b, t).quotient;
         if (b == 0) return 0;
         IntDivMod qr = truncated(a, b);
         return qr.remainder != 0 && ((qr.remainder < 0) != (b < 0)) ? qr.quotient - 1 : qr.quotient;
       },
       same, floats_and_ints, small_quotient},
      {"mod", [](const Tensor& a, const Tensor& b) { return a.mod(b); },
       [](long double a, long double b, S t) -> long double {
         if (is_float_type(t)) return numpy_divmod(a, b, t).modulus;
         IntDivMod qr = truncated(a, b);
         return qr.remainder != 0 && ((qr.remainder < 0) != (b < 0)) ? qr.remainder + b : qr.remainder;
       },
       same, floats_and_ints, small_quotient},
      {"fmod", [](const Tensor& a, const Tensor& b) { return a.fmod(b); },
       [](long double a, long double b, S t) -> long double {
         if (is_float_type(t)) return std::fmod(a, b);
         return truncated(a, b).remainder;
       },
       same, floats_and_ints, small_quotient},
      {"pow", [](const Tensor& a, const Tensor& b) { return a.pow(b); },
       [](long double a, long double b, S t) -> long double {
         if (t == S::Bool) return a || !b;
         if (!is_float_type(t)) return integer_power(a, b, t);
         return std::pow(a, b);
       },
       same, always,
       // f64: |y*log2|x|| <= 32 (see the tolerance table); integers: exponents below 70.
       [](long double a, long double b, S t) {
         if (t == S::Float64 && a != 0 && std::isfinite(a) && std::isfinite(b))
           return std::fabs(b * std::log2(std::fabs(a))) <= 32;
         return true;
       },
       pow_f64, pow_f32},
      {"maximum", [](const Tensor& a, const Tensor& b) { return a.maximum(b); },
       [](long double a, long double b, S) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }, same,
       always},
      {"minimum", [](const Tensor& a, const Tensor& b) { return a.minimum(b); },
       [](long double a, long double b, S) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }, same,
       always},
      {"bitwise_and", [](const Tensor& a, const Tensor& b) { return a.bitwise_and(b); },
       [](long double a, long double b, S) { return static_cast<long double>(to_bits64(a) & to_bits64(b)); }, same,
       integer_or_bool},
      {"bitwise_or", [](const Tensor& a, const Tensor& b) { return a.bitwise_or(b); },
       [](long double a, long double b, S) { return static_cast<long double>(to_bits64(a) | to_bits64(b)); }, same,
       integer_or_bool},
      {"bitwise_xor", [](const Tensor& a, const Tensor& b) { return a.bitwise_xor(b); },
       [](long double a, long double b, S) { return static_cast<long double>(to_bits64(a) ^ to_bits64(b)); }, same,
       integer_or_bool},
      {"shift_left", [](const Tensor& a, const Tensor& b) { return a.shift_left(b); },
       // Amounts outside [0, bits) are excluded below; the reference must still not overflow on them.
       [](long double a, long double b, S) {
         return b < 0 || b >= 64 ? 0.0L : static_cast<long double>(to_bits64(a) << static_cast<int>(b));
       },
       same, [](S t) { return is_int_type(t); },
       [](long double, long double b, S t) { return b >= 0 && b < type_bits(t); }},
      {"shift_right", [](const Tensor& a, const Tensor& b) { return a.shift_right(b); },
       [](long double a, long double b, S) { return b < 0 || b >= 64 ? 0.0L : std::floor(std::ldexp(a, -static_cast<int>(b))); }, same,
       [](S t) { return is_int_type(t); }, [](long double, long double b, S t) { return b >= 0 && b < type_bits(t); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a.lt(b); },
       [](long double a, long double b, S) -> long double { return a < b; }, to_bool, always},
      {"le", [](const Tensor& a, const Tensor& b) { return a.le(b); },
       [](long double a, long double b, S) -> long double { return a <= b; }, to_bool, always},
      {"gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); },
       [](long double a, long double b, S) -> long double { return a > b; }, to_bool, always},
      {"ge", [](const Tensor& a, const Tensor& b) { return a.ge(b); },
       [](long double a, long double b, S) -> long double { return a >= b; }, to_bool, always},
      {"eq", [](const Tensor& a, const Tensor& b) { return a.eq(b); },
       [](long double a, long double b, S) -> long double { return a == b; }, to_bool, always},
      {"ne", [](const Tensor& a, const Tensor& b) { return a.ne(b); },
       [](long double a, long double b, S) -> long double { return a != b; }, to_bool, always},
      {"logical_and", [](const Tensor& a, const Tensor& b) { return a.logical_and(b); },
       [](long double a, long double b, S) -> long double { return a != 0 && b != 0; }, to_bool, always},
      {"logical_or", [](const Tensor& a, const Tensor& b) { return a.logical_or(b); },
       [](long double a, long double b, S) -> long double { return a != 0 || b != 0; }, to_bool, always},
      {"logical_xor", [](const Tensor& a, const Tensor& b) { return a.logical_xor(b); },
       [](long double a, long double b, S) -> long double { return (a != 0) != (b != 0); }, to_bool, always},
  };
}

// Operand values for a binary op on type t: specials, small values (where division and powers
// are interesting) and values over the whole range of integer types.
std::vector<long double> binary_values(const BinaryOp& op, S t, uint64_t seed) {
  std::string name = op.name;
  if (name == "shift_left" || name == "shift_right") return sample_values(t, 24, -100, 100, seed, {0, 1, -1, int_min(t), int_max(t)});
  std::vector<long double> specials = {0, 1, -1, 2, -2, 3, -7, 7, 0.5L, -0.5L, 2.5L, -0.1L, 1e-3L};
  if (is_float_type(t)) specials.insert(specials.end(), {kInf, -kInf, kNaN, -0.0L, 1e30L, -1e-30L});
  if (is_int_type(t)) specials.insert(specials.end(), {int_min(t), int_max(t)});
  std::vector<long double> values = sample_values(t, 20, -12, 12, seed, specials);
  auto wide = is_float_type(t) ? sample_values(t, 8, -1e4, 1e4, seed + 1) : sample_values(t, 8, int_min(t), int_max(t), seed + 1);
  values.insert(values.end(), wide.begin(), wide.end());
  return values;
}

TEST_CASE("elementwise: binary ops on every pair of operand values (broadcast [n,1] x [1,n]), every dtype") {
  for (const BinaryOp& op : binary_ops()) {
    for (S t : kAllTypes) {
      if (!op.supports(t)) continue;
      std::string operation = std::string(op.name) + " on " + type_name(t);
      CAPTURE(operation);
      std::vector<long double> a_values = binary_values(op, t, 0x77 + static_cast<uint64_t>(t));
      std::vector<long double> b_values = binary_values(op, t, 0x99 + static_cast<uint64_t>(t));
      auto n = static_cast<int64_t>(a_values.size()), m = static_cast<int64_t>(b_values.size());
      HostTensor a{t, {n, 1}, a_values}, b{t, {1, m}, b_values};
      S out = op.result_type(t);
      HostTensor expected = map_binary(a, b, out, [&](long double x, long double y) { return op.reference(x, y, t); });
      HostTensor got = from_tensor(op.op(to_tensor(a), to_tensor(b)));
      // Pairs the op is not defined for are excluded from the comparison (NaN on both sides).
      if (op.defined) {
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < m; ++j)
            if (!op.defined(a_values[static_cast<size_t>(i)], b_values[static_cast<size_t>(j)], t))
              expected.values[static_cast<size_t>(i * m + j)] = got.values[static_cast<size_t>(i * m + j)];
      }
      Tolerance tolerance = out == S::Float64 ? op.tolerance : out == S::Float32 ? op.tolerance_f32 : Tolerance{};
      if ((out == S::Float16 || out == S::BFloat16) && std::string(op.name) == "pow") tolerance.ulps = 1;
      Comparison result = compare(got, expected, tolerance);
      if (verbose() && is_float_type(out))
        std::printf("%-12s %-5s worst %.2Lf ulp\n", op.name, type_name(t).c_str(), result.worst_ulps);
      std::string where;
      if (!result.ok) {  // name the operands of the reported element
        size_t index = std::stoul(result.message.substr(8));
        where = " a=" + value_text(a_values[index / static_cast<size_t>(m)]) +
                " b=" + value_text(b_values[index % static_cast<size_t>(m)]);
      }
      INFO(std::string(op.name), " on ", type_name(t), ": ", result.message, where);
      CHECK(result.ok);
    }
  }
}

TEST_CASE("elementwise: bool operands of the arithmetic ops") {
  HostTensor a = host(S::Bool, {4}, {0, 0, 1, 1}), b = host(S::Bool, {4}, {0, 1, 0, 1});
  CHECK_TENSOR(to_tensor(a) + to_tensor(b), host(S::Bool, {4}, {0, 1, 1, 1}), Tolerance{});
  CHECK_TENSOR(to_tensor(a) * to_tensor(b), host(S::Bool, {4}, {0, 0, 0, 1}), Tolerance{});
  CHECK(error_of([&] { (void)(to_tensor(a) - to_tensor(b)); }).find("sub: bool tensors cannot be subtracted") !=
        std::string::npos);
  CHECK(error_of([&] { (void)to_tensor(a).floordiv(to_tensor(b)); }).find("floordiv: bool tensors cannot be divided") !=
        std::string::npos);
  CHECK(error_of([&] { (void)to_tensor(a).mod(to_tensor(b)); }).find("mod: bool") != std::string::npos);
}

TEST_CASE("elementwise: dtype promotion of mixed operands") {
  struct Case {
    S a, b, result;
  };
  for (Case c : {Case{S::Int8, S::UInt8, S::Int16}, Case{S::Int32, S::Float32, S::Float64},
                 Case{S::UInt64, S::Int64, S::Float64}, Case{S::Float16, S::BFloat16, S::Float32},
                 Case{S::Bool, S::Int8, S::Int8}, Case{S::UInt8, S::Float16, S::Float16}}) {
    HostTensor a = host(c.a, {3}, {1, 0, 1}), b = host(c.b, {3}, {1, 1, 0});
    INFO(type_name(c.a), " + ", type_name(c.b));
    CHECK_TENSOR(to_tensor(a) + to_tensor(b), host(c.result, {3}, {2, 1, 1}), Tolerance{});
    CHECK(to_tensor(a).minimum(to_tensor(b)).dtype() == c.result);
    CHECK(to_tensor(a).floordiv(to_tensor(b).add(Tensor::scalar(1, c.b))).dtype() == c.result);
    CHECK(to_tensor(a).le(to_tensor(b)).dtype() == S::Bool);
  }
  // A C++ number adopts the tensor's dtype when it fits its kind.
  CHECK((Tensor::ones({2}, S::Int8) * 3.0).dtype() == S::Int8);
  CHECK((Tensor::ones({2}, S::Int8) * 0.5).dtype() == S::Float32);
}

TEST_CASE("elementwise: where and clip, every dtype, broadcasting condition") {
  for (S t : kAllTypes) {
    HostTensor condition = host(S::Bool, {3, 1}, {1, 0, 1});
    std::vector<long double> xv = sample_values(t, 4, -50, 50, 3, {kNaN, -0.0L}), yv = sample_values(t, 4, -50, 50, 4);
    HostTensor x = host(t, {1, 4}, xv), y = host(t, {4}, yv);
    HostTensor expected{t, {3, 4}, {}};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) expected.values.push_back(condition.values[static_cast<size_t>(i)] != 0 ? xv[static_cast<size_t>(j)] : yv[static_cast<size_t>(j)]);
    INFO("where on ", type_name(t));
    CHECK_TENSOR(to_tensor(condition).where(to_tensor(x), to_tensor(y)), expected, Tolerance{});
    // clip: min(max(x, low), high), NaN kept.
    if (t == S::Bool) continue;
    HostTensor values = host(t, {6}, {-40, -3, 0, 5, 40, is_float_type(t) ? kNaN : 7});
    HostTensor clipped = map_unary(values, t, [](long double v) { return std::isnan(v) ? v : std::min(std::max(v, -3.0L), 7.0L); });
    if (is_unsigned_type(t)) clipped = map_unary(values, t, [](long double v) { return std::min(v, 7.0L); });
    CHECK_TENSOR(to_tensor(values).clip(-3, 7), clipped, Tolerance{});
  }
  // low > high: high wins (numpy).
  CHECK(Tensor::full({1}, 5.0).clip(4, 2).item() == 2);
}

// ---- layouts: broadcasting, non-contiguous inputs, zero-sized and size-1 dims, large sizes ----

TEST_CASE("elementwise: non-contiguous inputs (permuted, shrunk, expanded, flipped)") {
  for (S t : {S::Float32, S::Int32, S::Float16, S::UInt8}) {
    HostTensor a_base = host(t, {4, 6}, sample_values(t, 24, -20, 20, 10));
    HostTensor b_base = host(t, {8, 5}, sample_values(t, 40, -20, 20, 11));
    HostTensor c_base = host(t, {1, 4}, sample_values(t, 4, 1, 9, 12));
    HostTensor a = host_permute(a_base, {1, 0});                  // (6, 4)
    HostTensor b = host_flip(host_shrink(b_base, {{1, 7}, {1, 5}}), {0});  // (6, 4)
    HostTensor c = host_expand(c_base, {6, 4});
    Tensor ta = to_tensor(a_base).permute({1, 0});
    Tensor tb = to_tensor(b_base).shrink({{1, 7}, {1, 5}}).flip({0});
    Tensor tc = to_tensor(c_base).expand({6, 4});
    INFO(type_name(t));
    CHECK_TENSOR(ta + tb, map_binary(a, b, t, [&](long double x, long double y) { return x + y; }), Tolerance{});
    CHECK_TENSOR(ta.maximum(tc), map_binary(a, c, t, [](long double x, long double y) { return std::max(x, y); }), Tolerance{});
    HostTensor selected{t, {6, 4}, {}};
    for (size_t i = 0; i < 24; ++i) selected.values.push_back(a.values[i] < b.values[i] ? b.values[i] : c.values[i]);
    CHECK_TENSOR(ta.lt(tb).where(tb, tc), selected, Tolerance{});
    CHECK_TENSOR(tb.cast(S::Float64), map_unary(b, S::Float64, [](long double v) { return v; }), Tolerance{});
    Tolerance one_ulp;
    one_ulp.ulps = is_float_type(t) && t != S::Float32 ? 1 : 3;
    CHECK_TENSOR(ta.exp(), map_unary(a, float_out(t), [](long double v) { return std::exp(v); }), one_ulp);
    HostTensor quotients{t, {6, 4}, {}};
    for (size_t i = 0; i < 24; ++i) quotients.values.push_back(std::floor(c.values[i] / (std::fabs(b.values[i]) + 1)));
    CHECK_TENSOR(tc.floordiv(tb.abs() + Tensor::scalar(1, t)), quotients, Tolerance{});
  }
}

TEST_CASE("elementwise: broadcasting ranks, size-1 and zero-sized dims") {
  HostTensor a = host(S::Float32, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = host(S::Float32, {4, 1}, {10, 20, 30, 40});
  CHECK_TENSOR(to_tensor(a) * to_tensor(b), map_binary(a, b, S::Float32, [](long double x, long double y) { return x * y; }), Tolerance{});
  CHECK_TENSOR(to_tensor(a).pow(to_tensor(b).mul(Tensor::scalar(0.1))),
               map_binary(a, b, S::Float32, [](long double x, long double y) { return std::pow(x, round_to_float(S::Float32, y * round_to_float(S::Float32, 0.1L))); }),
               Tolerance{1});
  // A scalar (rank 0) with a tensor, and size-1 dims on both sides.
  CHECK_TENSOR(to_tensor(a).fmod(Tensor::scalar(2.5)), map_unary(a, S::Float32, [](long double x) { return std::fmod(x, 2.5L); }), Tolerance{});
  HostTensor one = host(S::Int16, {1, 1}, {7});
  HostTensor row = host(S::Int16, {1, 5}, {1, 2, 3, 4, 5});
  CHECK_TENSOR(to_tensor(one).mod(to_tensor(row)), map_binary(one, row, S::Int16, [](long double x, long double y) { return std::fmod(x, y); }), Tolerance{});
  // Zero-sized: (3, 0, 2) with (1, 1, 2); (0,) unary; broadcasting (0, 1) with (1, 4).
  Tensor empty = Tensor::zeros({3, 0, 2});
  CHECK((empty + Tensor::ones({1, 1, 2})).shape() == Shape{3, 0, 2});
  CHECK(from_tensor(empty.exp().floordiv(Tensor::ones({1, 1, 2}))).values.empty());
  CHECK(from_tensor(Tensor::zeros({0, 1}, S::Int32).pow(Tensor::ones({1, 4}, S::Int32))).shape == Shape{0, 4});
  CHECK(from_tensor(Tensor::zeros({0}).tanh()).values.empty());
  CHECK(error_of([] { (void)Tensor::zeros({2, 3}).floordiv(Tensor::zeros({4})); }).find("floordiv: shapes (2, 3) and (4,) do not broadcast") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::zeros({2, 3}).minimum(Tensor::zeros({2})); }).find("minimum: shapes (2, 3) and (2,) do not broadcast") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::zeros({3}).ge(Tensor::zeros({2})); }).find("ge: shapes (3,) and (2,)") != std::string::npos);
  CHECK(error_of([] { (void)Tensor().exp(); }).find("empty") != std::string::npos);
}

TEST_CASE("elementwise: large sizes (1M elements)") {
  const int64_t n = 1 << 20;
  HostTensor x = host(S::Float32, {n}, sample_values(S::Float32, n, -80, 80, 21));
  Tolerance exp_tolerance;
  exp_tolerance.ulps = 3;
  CHECK_TENSOR(to_tensor(x).exp(), map_unary(x, S::Float32, [](long double v) { return std::exp(v); }), exp_tolerance);
  HostTensor rows = host(S::Int32, {1024, 1}, sample_values(S::Int32, 1024, -1e9, 1e9, 22));
  HostTensor columns = host(S::Int32, {1, 1024}, sample_values(S::Int32, 1024, -1e9, 1e9, 23));
  CHECK_TENSOR(to_tensor(rows).floordiv(to_tensor(columns)), map_binary(rows, columns, S::Int32, [](long double a, long double b) { return b == 0 ? 0 : std::floor(a / b); }), Tolerance{});
}

// ---- creation ----

TEST_CASE("creation: arange with start and step (numpy's length rule) and eye") {
  struct Case {
    double start, stop, step;
    S type;
  };
  for (Case c : {Case{0, 5, 1, S::Float32}, Case{1, 2, 0.1, S::Float64}, Case{10, 0, -3, S::Int32}, Case{-2.5, 2.5, 0.5, S::Float16},
                 Case{5, 5, 1, S::Int64}, Case{5, 0, 1, S::Float32}, Case{0, 1, 0.3, S::Float32}, Case{3, 300, 7, S::UInt8},
                 Case{-1e12, 1e12, 1e11, S::Int64}, Case{0.5, 4, 1, S::Int32}}) {
    auto count = static_cast<int64_t>(std::max(0.0, std::ceil((c.stop - c.start) / c.step)));
    std::vector<long double> values;
    bool integral = std::floor(c.start) == c.start && std::floor(c.step) == c.step;
    for (int64_t i = 0; i < count; ++i) {
      long double v = is_int_type(c.type) && integral ? c.start + static_cast<long double>(i) * c.step
                                                     : static_cast<long double>(c.start + static_cast<double>(i) * c.step);
      values.push_back(is_int_type(c.type) ? std::trunc(v) : v);
    }
    INFO("arange(", c.start, ", ", c.stop, ", ", c.step, ", ", type_name(c.type), ")");
    CHECK_TENSOR(Tensor::arange(c.start, c.stop, c.step, c.type), host(c.type, {count}, values), Tolerance{});
  }
  CHECK(error_of([] { (void)Tensor::arange(0.0, 1.0, 0.0); }).find("arange: step must not be zero") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::arange(0.0, INFINITY, 1.0); }).find("must be finite") != std::string::npos);

  for (auto [n, m, k] : {std::tuple<int64_t, int64_t, int64_t>{3, -1, 0}, {3, 5, 1}, {4, 2, -1}, {2, 3, 7}, {0, 3, 0}}) {
    int64_t columns = m < 0 ? n : m;
    std::vector<long double> values;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < columns; ++j) values.push_back(j - i == k);
    INFO("eye(", n, ", ", m, ", ", k, ")");
    CHECK_TENSOR(Tensor::eye(n, m, k), host(S::Float32, {n, columns}, values), Tolerance{});
    CHECK_TENSOR(Tensor::eye(n, m, k, S::Int8), host(S::Int8, {n, columns}, values), Tolerance{});
  }
  CHECK(error_of([] { (void)Tensor::eye(-1); }).find("eye: negative number of rows -1") != std::string::npos);
}

// The generator of tensor_create.cpp: output i + 1 of SplitMix64 seeded with `seed`.
uint64_t splitmix_output(uint64_t seed, uint64_t i) { return mix64(seed + (i + 1) * 0x9E3779B97F4A7C15ull); }

TEST_CASE("creation: uniform is SplitMix64 at the element index, bit for bit") {
  const uint64_t seed = 0xDEADBEEFCAFEull;
  for (S t : kFloatTypes) {
    FloatFormat format = float_format(t);
    std::vector<long double> expected;
    for (uint64_t i = 0; i < 3000; ++i) {
      uint64_t top = splitmix_output(seed, i) >> (64 - format.precision);
      if (t == S::Float64) {
        double u = static_cast<double>(top) * std::ldexp(1.0, -format.precision);
        expected.push_back(u * (3.0 - -2.0) + -2.0);
      } else {
        float u = static_cast<float>(top) * std::ldexp(1.0f, -format.precision);
        expected.push_back(round_to_float(t, u * 5.0f + -2.0f));
      }
    }
    INFO(type_name(t));
    CHECK_TENSOR(Tensor::uniform({30, 100}, seed, -2, 3, t).reshape({3000}), host(t, {3000}, expected), Tolerance{});
  }
  // Reproducible, shape-independent in flat order, seed-dependent.
  HostTensor first = from_tensor(Tensor::uniform({1000}, 7));
  CHECK(first.values == from_tensor(Tensor::uniform({10, 100}, 7)).values);
  CHECK(first.values != from_tensor(Tensor::uniform({1000}, 8)).values);
  CHECK(error_of([] { (void)Tensor::uniform({2}, 1, 0, 1, S::Int32); }).find("uniform: random values need a float dtype, got i32") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::normal({-2}, 1); }).find("normal: negative dimension in shape (-2,)") != std::string::npos);
}

TEST_CASE("creation: uniform and normal moments over 1M samples; normal matches Box-Muller") {
  const int64_t n = 1 << 20;
  HostTensor u = from_tensor(Tensor::uniform({n}, 42, 0, 1));
  long double sum = 0;
  std::vector<int64_t> bins(16, 0);
  for (long double v : u.values) {
    REQUIRE((v >= 0 && v < 1));
    sum += v;
    ++bins[static_cast<size_t>(v * 16)];
  }
  // Mean 1/2 ± 5σ (σ = sqrt(1/12/n)); each of 16 bins n/16 ± 5σ (binomial).
  CHECK(std::fabs(sum / n - 0.5L) < 5 * std::sqrt(1.0L / 12 / n));
  for (int64_t count : bins) CHECK(std::fabs(static_cast<long double>(count) - n / 16.0L) < 5 * std::sqrt(n / 16.0L * 15 / 16));

  for (S t : {S::Float32, S::Float64}) {
    HostTensor z = from_tensor(Tensor::normal({n}, 1234, 1.5, 2.0, t));
    long double mean = 0, second = 0;
    for (long double v : z.values) mean += v;
    mean /= n;
    for (long double v : z.values) second += (v - mean) * (v - mean);
    long double variance = second / n;
    INFO(type_name(t), " mean ", mean, " variance ", variance);
    CHECK(std::fabs(mean - 1.5L) < 5 * 2.0L / std::sqrt(static_cast<long double>(n)));
    CHECK(std::fabs(variance / 4.0L - 1) < 5 * std::sqrt(2.0L / n));
    // Element by element against the documented construction, computed in double.
    std::vector<long double> expected;
    int precision = float_format(t).precision;
    for (uint64_t i = 0; i < 2000; ++i) {
      long double u1 = 1 - static_cast<long double>(splitmix_output(1234, 2 * i) >> (64 - precision)) * std::ldexp(1.0L, -precision);
      long double u2 = static_cast<long double>(splitmix_output(1234, 2 * i + 1) >> (64 - precision)) * std::ldexp(1.0L, -precision);
      expected.push_back(1.5L + 2.0L * std::sqrt(-2 * std::log(u1)) * std::sin(2 * std::numbers::pi_v<long double> * u2));
    }
    HostTensor head{t, {2000}, std::vector<long double>(z.values.begin(), z.values.begin() + 2000)};
    Tolerance tolerance;
    tolerance.atol = t == S::Float32 ? 3e-5L : 1e-12L;  // sin(2πu) carries the rounding of 2πu
    CHECK_TENSOR(to_tensor(head), map_unary(host(S::Float64, {2000}, expected), t, [](long double v) { return v; }), tolerance);
  }
}

}  // TEST_SUITE("tensor")
}  // namespace
}  // namespace kiln::test
