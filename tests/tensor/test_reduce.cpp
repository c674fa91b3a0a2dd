// Parity tests of the reductions: the primitives sum/prod/max/min/mean of tensor.cpp and the
// composites logsumexp/argmax/argmin of tensor_reduce.cpp, against plain C++ loops, over every
// dtype, several axis sets with and without keepdim, non-contiguous inputs, empty and size-1
// axes, and 1M-element inputs.
//
// Tolerance table:
//   max, min, argmax, argmin, and sum/prod of integers and bool: exact (integers wrap like the
//     dtype; bool sums count in i64).
//   sum/mean of floats: |got - exact| <= n * eps * Σ|x| (+ half an ulp of the result), any
//     summation order; eps of the accumulation type (f32 for f16/bf16, which round once).
//   prod of floats: relative n * eps (inputs kept near 1 so nothing overflows).
//   logsumexp: 4 ulp + n * eps absolute (the sum's rounding, seen through log).
#include <cmath>
#include <numeric>

#include "tensor_test_helpers.h"

namespace kiln::test {
namespace {
TEST_SUITE("tensor") {


long double epsilon(S t) { return std::ldexp(1.0L, 1 - float_format(t).precision); }

// The accumulation type of sum/prod (kiln's rule: f16/bf16 in f32, bool in i64).
S accumulation(S t) { return t == S::Float16 || t == S::BFloat16 ? S::Float32 : t == S::Bool ? S::Int64 : t; }

// A host reduction over `axes` (sorted, non-negative): visit(output flat index, input value).
struct HostReduction {
  Shape kept;     // reduced axes as size 1
  Shape dropped;  // reduced axes removed
};
HostReduction reduction_shapes(const Shape& shape, const std::vector<int64_t>& axes) {
  HostReduction r{shape, {}};
  for (int64_t a : axes) r.kept[static_cast<size_t>(a)] = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(i)) == axes.end()) r.dropped.push_back(shape[i]);
  return r;
}
std::vector<std::vector<long double>> group(const HostTensor& x, const std::vector<int64_t>& axes) {
  HostReduction r = reduction_shapes(x.shape, axes);
  std::vector<std::vector<long double>> groups(static_cast<size_t>(numel_of(r.kept)));
  for_each_index(x.shape, [&](int64_t flat, const std::vector<int64_t>& multi) {
    int64_t out = 0;
    for (size_t i = 0; i < x.shape.size(); ++i) out = out * r.kept[i] + (r.kept[i] == 1 ? 0 : multi[i]);
    groups[static_cast<size_t>(out)].push_back(x.values[static_cast<size_t>(flat)]);
  });
  return groups;
}

enum class Kind { Sum, Prod, Max, Min, Mean };
const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Sum: return "sum";
    case Kind::Prod: return "prod";
    case Kind::Max: return "max";
    case Kind::Min: return "min";
    default: return "mean";
  }
}

Tensor apply(Kind k, const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  switch (k) {
    case Kind::Sum: return x.sum(axes, keepdim);
    case Kind::Prod: return x.prod(axes, keepdim);
    case Kind::Max: return x.max(axes, keepdim);
    case Kind::Min: return x.min(axes, keepdim);
    default: return x.mean(axes, keepdim);
  }
}

S result_type(Kind k, S t) {
  if (k == Kind::Mean) return is_float_type(t) ? t : S::Float32;
  if ((k == Kind::Sum || k == Kind::Prod) && t == S::Bool) return S::Int64;
  return t;
}

// Checks one reduction of x over `axes` against the host loop, with the stated tolerance.
void check_reduction(Kind k, const Tensor& tensor, const HostTensor& x, std::vector<int64_t> axes, bool keepdim) {
  std::vector<int64_t> normalized = axes;
  if (normalized.empty()) {
    normalized.resize(x.shape.size());
    std::iota(normalized.begin(), normalized.end(), 0);
  }
  for (int64_t& a : normalized) a = a < 0 ? a + static_cast<int64_t>(x.shape.size()) : a;
  std::sort(normalized.begin(), normalized.end());
  HostReduction shapes = reduction_shapes(x.shape, normalized);
  S out = result_type(k, x.type);
  HostTensor expected{out, keepdim ? shapes.kept : shapes.dropped, {}};
  std::vector<long double> slack;  // allowed absolute error per element
  for (const auto& values : group(x, normalized)) {
    long double exact = 0, magnitude = 0, n = static_cast<long double>(values.size());
    uint64_t modular = k == Kind::Prod ? 1 : 0;
    switch (k) {
      case Kind::Sum:
      case Kind::Mean:
        for (long double v : values) {
          exact += v;
          magnitude += std::fabs(v);
          if (is_int_type(x.type) || x.type == S::Bool) modular += to_bits64(v);
        }
        if (k == Kind::Mean) {
          long double count = n;
          exact = values.empty() ? kNaN : exact / count;
          magnitude = values.empty() ? 0 : magnitude / count;
        }
        break;
      case Kind::Prod:
        exact = 1;
        for (long double v : values) {
          exact *= v;
          if (is_int_type(x.type) || x.type == S::Bool) modular *= to_bits64(v);
        }
        magnitude = std::fabs(exact);
        break;
      case Kind::Max:
      case Kind::Min: {
        exact = values[0];
        for (long double v : values) {
          if (std::isnan(v) || std::isnan(exact)) exact = kNaN;
          else exact = k == Kind::Max ? std::max(exact, v) : std::min(exact, v);
        }
        break;
      }
    }
    if (is_int_type(out) && k != Kind::Max && k != Kind::Min) exact = static_cast<long double>(modular);
    expected.values.push_back(convert_to(out, exact));
    long double eps = is_float_type(out) ? epsilon(accumulation(out)) : 0;
    slack.push_back((n + 1) * eps * magnitude);
  }
  HostTensor got = from_tensor(apply(k, tensor, axes, keepdim));
  REQUIRE(got.shape == expected.shape);
  REQUIRE(got.type == expected.type);
  // Per-element absolute slack plus one ulp of the result's rounding.
  for (size_t i = 0; i < got.values.size(); ++i) {
    long double g = got.values[i], e = expected.values[i];
    bool ok = (std::isnan(g) && std::isnan(e)) || g == e ||
              (is_float_type(out) && std::isfinite(e) && (std::fabs(g - e) <= slack[i] || ulp_distance(out, g, e) <= 1));
    if (!ok) {
      INFO(kind_name(k), " of ", type_name(x.type), shape_text(x.shape), " over ", axes.size(), " axes, keepdim ",
           keepdim, ": element ", i, " got ", value_text(g), " expected ", value_text(e), " slack ", value_text(slack[i]));
      CHECK(ok);
      return;
    }
  }
  CHECK(true);
}

const std::vector<std::vector<int64_t>> kAxisSets = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}, {2, 0, 1}};

TEST_CASE("reduce: sum, prod, max, min, mean over axis sets, every dtype, keepdim") {
  for (S t : kAllTypes) {
    Shape shape = {3, 4, 5};
    for (Kind k : {Kind::Sum, Kind::Prod, Kind::Max, Kind::Min, Kind::Mean}) {
      // prod: values near 1 for floats (no overflow), small integers that wrap for narrow types.
      std::vector<long double> values =
          k == Kind::Prod && is_float_type(t) ? sample_values(t, 60, 0.5, 1.5, 5) : sample_values(t, 60, -100, 100, 6, {is_int_type(t) ? int_max(t) : 77, is_int_type(t) ? int_min(t) : -77});
      HostTensor x = host(t, shape, values);
      Tensor tensor = to_tensor(x);
      for (const auto& axes : kAxisSets)
        for (bool keepdim : {false, true}) check_reduction(k, tensor, x, axes, keepdim);
    }
  }
}

TEST_CASE("reduce: NaN and infinities in max/min/sum") {
  for (S t : kFloatTypes) {
    HostTensor x = host(t, {2, 4}, {1, kNaN, 3, -kInf, kInf, 2, -5, 0});
    Tensor tensor = to_tensor(x);
    for (Kind k : {Kind::Max, Kind::Min, Kind::Sum})
      for (const std::vector<int64_t>& axes : std::vector<std::vector<int64_t>>{{0}, {1}, {}}) check_reduction(k, tensor, x, axes, false);
  }
}

TEST_CASE("reduce: non-contiguous inputs, size-1 and empty axes") {
  for (S t : {S::Float32, S::Int16, S::Float16, S::UInt32}) {
    HostTensor base = host(t, {6, 5}, sample_values(t, 30, -50, 50, 8));
    HostTensor permuted = host_permute(base, {1, 0});
    HostTensor shrunk = host_shrink(base, {{1, 5}, {2, 5}});
    HostTensor expanded = host_expand(host(t, {1, 5}, sample_values(t, 5, -9, 9, 9)), {4, 5});
    HostTensor flipped = host_flip(base, {0, 1});
    for (Kind k : {Kind::Sum, Kind::Max, Kind::Min, Kind::Mean}) {
      check_reduction(k, to_tensor(base).permute({1, 0}), permuted, {1}, false);
      check_reduction(k, to_tensor(base).shrink({{1, 5}, {2, 5}}), shrunk, {0}, true);
      check_reduction(k, to_tensor(host(t, {1, 5}, std::vector<long double>(expanded.values.begin(), expanded.values.begin() + 5))).expand({4, 5}),
                      expanded, {0}, false);
      check_reduction(k, to_tensor(base).flip({0, 1}), flipped, {}, false);
    }
  }
  // Size-1 axes reduce to themselves; empty axes give the identity (mean: NaN, like numpy 0/0).
  HostTensor single = host(S::Float32, {1, 3}, {1, 2, 3});
  CHECK_TENSOR(to_tensor(single).sum({0}), host(S::Float32, {3}, {1, 2, 3}), Tolerance{});
  CHECK_TENSOR(Tensor::zeros({0, 3}).sum({0}), host(S::Float32, {3}, {0, 0, 0}), Tolerance{});
  CHECK_TENSOR(Tensor::zeros({0, 3}, S::Int32).prod({0}), host(S::Int32, {3}, {1, 1, 1}), Tolerance{});
  CHECK_TENSOR(Tensor::zeros({2, 0}).mean({1}), host(S::Float32, {2}, {kNaN, kNaN}), Tolerance{});
  CHECK_TENSOR(Tensor::zeros({2, 0}).sum({1}, true), host(S::Float32, {2, 1}, {0, 0}), Tolerance{});
  CHECK(Tensor::zeros({0, 4}).sum({1}).shape() == Shape{0});
  CHECK(error_of([] { (void)Tensor::zeros({2, 3}).sum({0, -2}); }).find("sum: axis -2 is listed twice") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::zeros({2, 3}).mean({3}); }).find("mean: axis 3 is out of range") != std::string::npos);
}

TEST_CASE("reduce: 1M-element sum, max and argmax") {
  const int64_t n = 1 << 20;
  HostTensor x = host(S::Float32, {n}, sample_values(S::Float32, n, -1, 1, 31));
  check_reduction(Kind::Sum, to_tensor(x), x, {}, false);
  check_reduction(Kind::Max, to_tensor(x), x, {}, false);
  HostTensor grid = host(S::Int32, {1024, 1024}, sample_values(S::Int32, n, -1e6, 1e6, 32));
  check_reduction(Kind::Sum, to_tensor(grid), grid, {0}, false);
  auto position = std::max_element(x.values.begin(), x.values.end()) - x.values.begin();
  CHECK(to_tensor(x).argmax(0).item() == static_cast<double>(position));
}

// ---- logsumexp ----

long double logsumexp_reference(const std::vector<long double>& values) {
  if (values.empty()) return -kInf;
  long double m = -kInf;
  for (long double v : values) m = std::isnan(v) || std::isnan(m) ? kNaN : std::max(m, v);
  if (std::isnan(m)) return kNaN;
  if (std::isinf(m)) m = 0;
  long double sum = 0;
  for (long double v : values) sum += std::exp(v - m);
  return std::log(sum) + m;
}

TEST_CASE("reduce: logsumexp is stable (large, -inf and +inf slices), every dtype") {
  for (S t : kAllTypes) {
    std::vector<long double> values = sample_values(t, 24, -30, 30, 40);
    if (is_float_type(t)) {
      // Row 1: huge values that overflow a naive exp; row 2: all -inf; row 3: a +inf.
      for (int j = 0; j < 6; ++j) values[6 + static_cast<size_t>(j)] = convert_to(t, t == S::Float16 ? 60000 - 100 * j : 1000 + j);
      for (int j = 0; j < 6; ++j) values[12 + static_cast<size_t>(j)] = -kInf;
      values[20] = kInf;
    }
    HostTensor x = host(t, {4, 6}, values);
    S out = is_float_type(t) ? t : S::Float32;
    for (bool keepdim : {false, true}) {
      std::vector<long double> expected;
      for (int i = 0; i < 4; ++i)
        expected.push_back(logsumexp_reference(std::vector<long double>(values.begin() + 6 * i, values.begin() + 6 * i + 6)));
      Tolerance tolerance;
      tolerance.ulps = 4;
      tolerance.atol = is_float_type(out) ? 8 * epsilon(accumulation(out)) : 0;
      tolerance.rtol = t == S::Float16 || t == S::BFloat16 ? epsilon(t) : 0;
      INFO("logsumexp ", type_name(t), " keepdim ", keepdim);
      CHECK_TENSOR(to_tensor(x).logsumexp({1}, keepdim), host(out, keepdim ? Shape{4, 1} : Shape{4}, expected), tolerance);
    }
    // Over every axis, and over an empty axis (-inf).
    Tolerance loose;
    loose.rtol = 32 * epsilon(accumulation(out));
    if (!is_float_type(t)) CHECK_TENSOR(to_tensor(x).logsumexp(), host(out, {}, {logsumexp_reference(values)}), loose);
  }
  CHECK(Tensor::zeros({2, 0}).logsumexp({1}).to_vector<float>() == std::vector<float>{-INFINITY, -INFINITY});
}

// ---- argmax / argmin ----

// numpy's rule: the first maximal element; NaN counts as the maximum (and the minimum) and the
// first NaN wins.
int64_t reference_arg(const std::vector<long double>& values, bool largest) {
  size_t best = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[best])) break;
    if (std::isnan(values[i]) || (largest ? values[i] > values[best] : values[i] < values[best])) best = i;
  }
  return static_cast<int64_t>(best);
}

TEST_CASE("reduce: argmax and argmin, every dtype, ties, NaN, every axis, keepdim") {
  for (S t : kAllTypes) {
    // Few distinct values, so ties are common.
    std::vector<long double> values = sample_values(t, 60, -3, 3, 50);
    if (is_float_type(t)) {
      values[7] = kNaN;  values[9] = kNaN;  // two NaNs in one slice of axis 2
      values[20] = kInf; values[33] = -kInf;
    }
    HostTensor x = host(t, {3, 4, 5}, values);
    for (int64_t axis : {0, 1, 2, -1}) {
      int64_t a = axis < 0 ? axis + 3 : axis;
      HostReduction shapes = reduction_shapes(x.shape, {a});
      for (bool largest : {true, false}) {
        std::vector<long double> expected;
        for (const auto& slice : group(x, {a})) expected.push_back(static_cast<long double>(reference_arg(slice, largest)));
        for (bool keepdim : {false, true}) {
          Tensor result = largest ? to_tensor(x).argmax(axis, keepdim) : to_tensor(x).argmin(axis, keepdim);
          INFO((largest ? "argmax " : "argmin "), type_name(t), " axis ", axis, " keepdim ", keepdim);
          CHECK_TENSOR(result, host(S::Int64, keepdim ? shapes.kept : shapes.dropped, expected), Tolerance{});
        }
      }
    }
  }
  // Extremes of integer types (argmin uses ~x, exact for every value).
  HostTensor extremes = host(S::Int64, {4}, {0, int_min(S::Int64), int_max(S::Int64), int_min(S::Int64)});
  CHECK(to_tensor(extremes).argmin(0).item() == 1);
  CHECK(to_tensor(extremes).argmax(0).item() == 2);
  HostTensor unsigned_extremes = host(S::UInt64, {3}, {5, int_max(S::UInt64), 0});
  CHECK(to_tensor(unsigned_extremes).argmin(0).item() == 2);
  CHECK(to_tensor(unsigned_extremes).argmax(0).item() == 1);
  // Non-contiguous input.
  HostTensor base = host(S::Float32, {4, 6}, sample_values(S::Float32, 24, -10, 10, 51));
  HostTensor transposed = host_permute(base, {1, 0});
  std::vector<long double> expected;
  for (const auto& slice : group(transposed, {1})) expected.push_back(static_cast<long double>(reference_arg(slice, true)));
  CHECK_TENSOR(to_tensor(base).permute({1, 0}).argmax(1), host(S::Int64, {6}, expected), Tolerance{});
  CHECK(error_of([] { (void)Tensor::zeros({3, 0}).argmax(1); }).find("argmax: axis 1 of shape (3, 0) is empty") != std::string::npos);
  CHECK(error_of([] { (void)Tensor::zeros({3}).argmin(1); }).find("argmin: axis 1 is out of range") != std::string::npos);
}

}  // TEST_SUITE("tensor")
}  // namespace
}  // namespace kiln::test
