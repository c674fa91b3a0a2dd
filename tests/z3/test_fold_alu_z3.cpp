// Cross-check of the Z3 semantics that rules are proven under (z3_semantics.h) against fold_alu, the
// constant folder (src/ir/evaluate.h), on edge-case and random values of every integer op, cast and
// exact float op. It stands in for a proof of the opaque constant-folding rule.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "support/error.h"
#include "z3/z3_semantics.h"

namespace kiln::z3check {
namespace {

constexpr int random_cases = 150;

ScalarValue integer_value(DType dtype, int128 value) { return {dtype, wrap_integer(value, dtype), 0.0}; }

std::vector<int128> integer_samples(DType dtype, std::mt19937_64& random) {
  DType range_type = dtype.is_index() ? dtypes::i64 : dtype;
  int128 low = min_value(range_type), high = max_value(range_type);
  std::vector<int128> samples = {0, 1, 2, 3, 7, -1, -2, -3, -7, low, high, low + 1, high - 1};
  std::uniform_int_distribution<uint64_t> bits;
  for (int i = 0; i < random_cases; ++i) {
    uint64_t raw = bits(random);
    // Mostly small magnitudes, where division and shifts are interesting, and some full-width ones.
    samples.push_back((i % 3 == 0) ? static_cast<int128>(static_cast<int64_t>(raw))
                                   : static_cast<int128>(raw % 41) - 20);
  }
  // Every sample as a value of the type (unsigned and bool samples wrap).
  for (int128& sample : samples) sample = wrap_integer(sample, range_type);
  return samples;
}

// Ground Z3 terms evaluate by simplification; `condition` must come out as true or false.
bool evaluates_true(const z3::expr& condition) { return condition.simplify().is_true(); }

z3::expr all_of(z3::context& context, const std::vector<z3::expr>& conditions) {
  z3::expr result = context.bool_val(true);
  for (const z3::expr& condition : conditions) result = result && condition;
  return result;
}

// Checks one op on one tuple of source values; returns a description of a disagreement, or "".
std::string compare(Z3Semantics& semantics, Ops op, DType result, const std::vector<ScalarValue>& sources) {
  std::optional<ScalarValue> folded = fold_alu(op, result, sources);
  std::vector<DType> source_dtypes;
  std::vector<z3::expr> terms;
  for (const ScalarValue& source : sources) {
    source_dtypes.push_back(source.dtype);
    terms.push_back(semantics.constant(*make_constant(source)));
  }
  std::vector<z3::expr> definedness;
  z3::expr value = semantics.apply(op, result, source_dtypes, terms, definedness);
  bool defined = evaluates_true(all_of(semantics.context(), definedness));
  std::string inputs;
  for (const z3::expr& term : terms) inputs += (inputs.empty() ? "" : ", ") + term.simplify().to_string();
  std::string where = str_cat(op_name(op), "(", inputs, ") -> ", result.name());
  if (!folded) return defined ? where + ": fold_alu says undefined, Z3 defined" : "";
  if (!defined) return where + ": Z3 says undefined, fold_alu folds it";
  // Index results are compared as exact integers: a CONST (make_constant) holds only an int64.
  z3::expr expected = folded->dtype.is_index() ? semantics.context().int_val(to_string(folded->integer).c_str())
                                               : semantics.constant(*make_constant(*folded));
  if (!evaluates_true(value == expected))
    return str_cat(where, ": Z3 gives ", value.simplify().to_string(), ", fold_alu ", expected.to_string());
  return "";
}

// Results must be identical, and a case fold_alu leaves undefined (division by zero, shift out of
// range) must be undefined in Z3 too.
TEST_CASE("integer ops: Z3 semantics agree with fold_alu") {
  std::mt19937_64 random(20261122);
  const std::vector<Ops> binary = {Ops::ADD, Ops::SUB, Ops::MUL, Ops::IDIV, Ops::MOD, Ops::MAX, Ops::CMPLT,
                                   Ops::CMPNE, Ops::CMPEQ, Ops::AND, Ops::OR, Ops::XOR, Ops::SHL, Ops::SHR};
  const std::vector<Ops> unary = {Ops::NEG, Ops::NOT, Ops::TRUNC};
  for (DType dtype : {dtypes::index, dtypes::bool_, dtypes::i8, dtypes::u8, dtypes::i16, dtypes::u16, dtypes::i32,
                      dtypes::u32, dtypes::i64, dtypes::u64}) {
    z3::context context;
    Z3Semantics semantics(context);
    std::vector<int128> samples = integer_samples(dtype, random);
    for (Ops op : binary) {
      bool bitwise = op == Ops::AND || op == Ops::OR || op == Ops::XOR || op == Ops::SHL || op == Ops::SHR;
      if (dtype.is_index() && bitwise) continue;  // not translatable: index has no bit pattern
      if (dtype.is_bool() && (op == Ops::SHL || op == Ops::SHR)) continue;
      bool comparison = op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ;
      DType result = comparison ? dtypes::bool_ : dtype;
      std::vector<std::string> disagreements;
      size_t checked = 0;
      for (size_t i = 0; i < samples.size(); ++i) {
        for (size_t j = 0; j < samples.size(); j += 7) {
          int128 b = samples[(i + j) % samples.size()];
          // Shift amounts around the valid range [0, width), including both ends and beyond.
          if (op == Ops::SHL || op == Ops::SHR) b = static_cast<int128>((i + j) % (dtype.scalar_bytes() * 8 + 3)) - 1;
          if ((op == Ops::SHL || op == Ops::SHR) && dtype.is_unsigned() && b < 0) b = 0;
          std::string problem =
              compare(semantics, op, result, {integer_value(dtype, samples[i]), integer_value(dtype, b)});
          if (!problem.empty() && disagreements.size() < 5) disagreements.push_back(problem);
          ++checked;
        }
      }
      INFO(op_name(op), " on ", dtype.name(), " (", checked, " cases): ",
           disagreements.empty() ? "" : disagreements[0]);
      CHECK(disagreements.empty());
    }
    for (Ops op : unary) {
      std::vector<std::string> disagreements;
      for (int128 a : samples) {
        std::string problem = compare(semantics, op, dtype, {integer_value(dtype, a)});
        if (!problem.empty() && disagreements.size() < 5) disagreements.push_back(problem);
      }
      INFO(op_name(op), " on ", dtype.name(), ": ", disagreements.empty() ? "" : disagreements[0]);
      CHECK(disagreements.empty());
    }
    SUBCASE("casts") {
      for (DType target : {dtypes::index, dtypes::bool_, dtypes::i8, dtypes::u8, dtypes::i16, dtypes::u32, dtypes::i64,
                           dtypes::u64}) {
        std::vector<std::string> disagreements;
        for (int128 a : samples) {
          std::string problem = compare(semantics, Ops::CAST, target, {integer_value(dtype, a)});
          if (!problem.empty() && disagreements.size() < 5) disagreements.push_back(problem);
        }
        INFO("CAST ", dtype.name(), " -> ", target.name(), ": ", disagreements.empty() ? "" : disagreements[0]);
        CHECK(disagreements.empty());
      }
    }
  }
}

std::vector<double> float_samples(DType dtype, std::mt19937_64& random) {
  std::vector<double> raw = {0.0,  -0.0,  1.0,   -1.0, 0.5, 1.5, 3.0, -2.5, 0.1, 1e-3, 65504.0, 1e30,
                             1e-40, 1e-8, -7e-6, INFINITY, -INFINITY, NAN, 1.0 + 1e-7, 2049.0, 16777217.0};
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < random_cases; ++i) raw.push_back(std::ldexp(mantissa(random), exponent(random)));
  std::vector<double> samples;
  // Round every sample to the dtype the way the folder does, so that each is a value of the type.
  for (double value : raw)
    samples.push_back(fold_alu(Ops::CAST, dtype, std::vector<ScalarValue>{{dtypes::f64, 0, value}})->real);
  return samples;
}

TEST_CASE("float ops: Z3 IEEE semantics agree with fold_alu") {
  std::mt19937_64 random(7);
  const std::vector<Ops> binary = {Ops::ADD, Ops::SUB, Ops::MUL, Ops::FDIV, Ops::CMPLT, Ops::CMPNE, Ops::CMPEQ};
  const std::vector<Ops> unary = {Ops::NEG, Ops::SQRT, Ops::RECIPROCAL, Ops::TRUNC, Ops::ROUND_EVEN};
  for (DType dtype : {dtypes::f16, dtypes::bf16, dtypes::f32, dtypes::f64}) {
    z3::context context;
    Z3Semantics semantics(context);
    std::vector<double> samples = float_samples(dtype, random);
    auto value = [&](double number) { return ScalarValue{dtype, 0, number}; };
    for (Ops op : binary) {
      bool comparison = op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ;
      std::vector<std::string> disagreements;
      for (size_t i = 0; i < samples.size(); ++i)
        for (size_t j = 0; j < samples.size(); j += 5) {
          std::string problem = compare(semantics, op, comparison ? dtypes::bool_ : dtype,
                                        {value(samples[i]), value(samples[(i + j) % samples.size()])});
          if (!problem.empty() && disagreements.size() < 5) disagreements.push_back(problem);
        }
      INFO(op_name(op), " on ", dtype.name(), ": ", disagreements.empty() ? "" : disagreements[0]);
      CHECK(disagreements.empty());
    }
    for (Ops op : unary) {
      std::vector<std::string> disagreements;
      for (double sample : samples) {
        std::string problem = compare(semantics, op, dtype, {value(sample)});
        if (!problem.empty() && disagreements.size() < 5) disagreements.push_back(problem);
      }
      INFO(op_name(op), " on ", dtype.name(), ": ", disagreements.empty() ? "" : disagreements[0]);
      CHECK(disagreements.empty());
    }
  }
}

TEST_CASE("float max is left to the backend on NaN and signed zeros, and exact elsewhere") {
  z3::context context;
  Z3Semantics semantics(context);
  auto constant = [&](double number) { return semantics.constant(*const_float(dtypes::f32, number)); };
  std::vector<z3::expr> definedness;
  auto maximum = [&](double a, double b) {
    return semantics.apply(Ops::MAX, dtypes::f32, {dtypes::f32, dtypes::f32}, {constant(a), constant(b)}, definedness);
  };
  CHECK(evaluates_true(maximum(1.0, 2.0) == constant(2.0)));
  CHECK(evaluates_true(maximum(-3.0, -4.0) == constant(-3.0)));
  CHECK(evaluates_true(maximum(NAN, NAN) == constant(NAN)));
  // Not decided by the semantics: the solver may choose either operand (or anything).
  for (auto [a, b] : {std::pair<double, double>{NAN, 1.0}, std::pair<double, double>{0.0, -0.0}}) {
    z3::solver solver(context);
    solver.add(maximum(a, b) != constant(a));
    CHECK(solver.check() == z3::sat);
  }
}

}  // namespace
}  // namespace kiln::z3check
