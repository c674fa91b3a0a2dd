// CAST and BITCAST between every pair of data dtypes, against a plain C++ reference of the rules in
// docs/kernel-ast.md: round to nearest even, float → int truncates and saturates (NaN → 0), anything
// → bool is != 0. Plus exhaustive f16/bf16 round trips and the double-rounding traps.
#include <cstring>
#include <limits>

#include "codegen_test_helpers.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

double round_to(DType dtype, double value) {
  switch (dtype.scalar()) {
    case ScalarType::Float16: return round_to_f16(value);
    case ScalarType::BFloat16: return round_to_bf16(value);
    case ScalarType::Float32: return round_to_f32(value);
    default: return value;
  }
}

// The reference conversion. Integer sources used here have at most 53 significant bits or are the
// type limits, so converting them to double first is exact or rounds the same way as directly.
ScalarValue reference_cast(const ScalarValue& value, DType to) {
  DType from = value.dtype;
  if (to.is_bool()) {
    bool truth = from.is_float() ? value.real != 0.0 : value.integer != 0;  // NaN != 0
    return ScalarValue{to, truth ? 1 : 0, 0.0};
  }
  if (to.is_float()) {
    double source = from.is_float() ? value.real : static_cast<double>(value.integer);
    return ScalarValue{to, 0, round_to(to, source)};
  }
  if (from.is_float()) {
    if (std::isnan(value.real)) return ScalarValue{to, 0, 0.0};
    long double truncated = std::trunc(static_cast<long double>(value.real));
    if (truncated <= static_cast<long double>(min_value(to))) return ScalarValue{to, min_value(to), 0.0};
    if (truncated >= static_cast<long double>(max_value(to))) return ScalarValue{to, max_value(to), 0.0};
    return ScalarValue{to, static_cast<int128>(truncated), 0.0};
  }
  // Integer → integer: the low bytes, sign-extended for signed targets.
  TestBuffer cell(to, 1);
  cell.set_int(0, value.integer);
  return cell.get(0);
}

const double float_inputs[] = {0.0,     -0.0,   1.0,     -1.0,   2.5,    -2.5,   0.3,     127.9,   -128.7,    255.5,
                               300.25,  -300.25, 32767.6, -40000.5, 65504.0, 70000.0, -70000.0, 3e9,  -3e9,      1e19,
                               -1e19,   1e30,   3.3e38,  1e300,  5.96e-8, 1e-40,  NAN,     INFINITY, -INFINITY, 65519.0};
const int128 integer_inputs[] = {0,       1,         -1,         7,          -100,       127,       -128,
                                 200,     255,       256,        -129,       1000,       32767,     -32768,
                                 65535,   65536,     70000,      2147483647, -2147483648LL, 4294967295LL,
                                 (int128{1} << 40) + 1, -((int128{1} << 40) + 1), (int128{1} << 53) - 1,
                                 16777217, 16777219, INT64_MAX,  INT64_MIN,  (int128{1} << 64) - 1};

}  // namespace

TEST_SUITE("codegen") {

TEST_CASE("CAST between every pair of dtypes, with saturation, NaN and rounding") {
  const auto& targets = dtypes::all_data_scalars;
  const int64_t target_count = std::size(targets);
  for (DType from : dtypes::all_data_scalars) {
    CAPTURE(from.name());
    // Source values as the source type holds them.
    const int64_t n = from.is_float() ? std::ssize(float_inputs) : std::ssize(integer_inputs);
    TestBuffer input(from, n);
    for (int64_t k = 0; k < n; ++k) {
      if (from.is_float()) input.set_real(k, float_inputs[k]);
      else input.set_int(k, integer_inputs[k]);
    }
    // One kernel per source type: one STORE per target type.
    UOpPtr in = global(from, n, target_count);
    UOpPtr i = range(n, 0);
    UOpPtr value = load(index(in, i));
    std::vector<UOpPtr> stores;
    for (int64_t t = 0; t < target_count; ++t) stores.push_back(store(index(global(targets[t], n, t), i), cast(value, targets[t])));
    KernelFunction run = compile_and_load(kernel("cast_from_" + from.name(), stores));
    std::vector<std::unique_ptr<TestBuffer>> outputs;
    std::vector<void*> buffers;
    for (DType to : targets) {
      outputs.push_back(std::make_unique<TestBuffer>(to, n));
      buffers.push_back(outputs.back()->data());
    }
    buffers.push_back(input.data());
    run(buffers.data(), 0, n);
    for (int64_t t = 0; t < target_count; ++t) {
      for (int64_t k = 0; k < n; ++k) {
        ScalarValue source = input.get(k);
        ScalarValue expected = reference_cast(source, targets[t]);
        ScalarValue got = outputs[static_cast<size_t>(t)]->get(k);
        INFO(from.name(), " ", describe(source), " → ", targets[t].name(), ": got ", describe(got), ", expected ",
             describe(expected));
        CHECK(same_value(got, expected));
      }
    }
  }
}

TEST_CASE("narrow-float casts round once, not twice") {
  // Each input lies just above a midpoint of the narrow type; rounding it to f32 (or double) first
  // would land exactly on the midpoint and then round down to even.
  SUBCASE("f64 → bf16 and f64 → f16") {
    const double values[] = {1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)};
    UOpPtr in = global(dtypes::f64, 2, 2), to_bf16 = global(dtypes::bf16, 2, 0), to_f16 = global(dtypes::f16, 2, 1);
    UOpPtr i = range(2, 0);
    UOpPtr value = load(index(in, i));
    KernelFunction run = compile_and_load(kernel("round_once_f64", {store(index(to_bf16, i), cast(value, dtypes::bf16)),
                                                                    store(index(to_f16, i), cast(value, dtypes::f16))}));
    TestBuffer input(dtypes::f64, 2), bf(dtypes::bf16, 2), half(dtypes::f16, 2);
    std::memcpy(input.data(), values, sizeof(values));
    void* buffers[] = {bf.data(), half.data(), input.data()};
    run(buffers, 0, 2);
    CHECK(bf.get(0).real == 1.0 + std::ldexp(1.0, -7));
    CHECK(half.get(1).real == 1.0 + std::ldexp(1.0, -10));
  }
  SUBCASE("i64 → bf16 and u64 → bf16") {
    // 2^62 + 2^54 + 1: the bf16 neighbours are 2^62 and 2^62 + 2^55, with 2^62 + 2^54 between them.
    int64_t value = (int64_t{1} << 62) + (int64_t{1} << 54) + 1;
    UOpPtr in = global(dtypes::i64, 2, 2), out_signed = global(dtypes::bf16, 2, 0), out_unsigned = global(dtypes::bf16, 2, 1);
    UOpPtr i = range(2, 0);
    UOpPtr loaded = load(index(in, i));
    KernelFunction run = compile_and_load(kernel(
        "round_once_i64", {store(index(out_signed, i), cast(loaded, dtypes::bf16)),
                           store(index(out_unsigned, i), cast(UOp::make(Ops::BITCAST, dtypes::u64, {loaded}), dtypes::bf16))}));
    int64_t inputs[2] = {value, -value};
    TestBuffer input(dtypes::i64, 2), s(dtypes::bf16, 2), u(dtypes::bf16, 2);
    std::memcpy(input.data(), inputs, sizeof(inputs));
    void* buffers[] = {s.data(), u.data(), input.data()};
    run(buffers, 0, 2);
    double expected = std::ldexp(1.0, 62) + std::ldexp(1.0, 55);
    CHECK(s.get(0).real == expected);
    CHECK(s.get(1).real == -expected);
    CHECK(u.get(0).real == expected);
    // -value as u64 is 2^64 - value ≈ 2^63 + 2^62 - 2^54: nearest bf16 (ulp 2^56) is 2^63 + 2^62.
    CHECK(u.get(1).real == std::ldexp(1.0, 63) + std::ldexp(1.0, 62));
  }
}

TEST_CASE("every f16 and bf16 bit pattern survives a round trip through f32 and f64") {
  const int64_t n = 65536;
  for (DType narrow : {dtypes::f16, dtypes::bf16}) {
    CAPTURE(narrow.name());
    UOpPtr in = global(narrow, n, 3), wide = global(dtypes::f32, n, 0), back = global(narrow, n, 1),
           via_f64 = global(narrow, n, 2);
    UOpPtr i = range(n, 0);
    UOpPtr value = load(index(in, i));
    KernelFunction run = compile_and_load(kernel(
        "round_trip_" + narrow.name(),
        {store(index(wide, i), cast(value, dtypes::f32)), store(index(back, i), cast(cast(value, dtypes::f32), narrow)),
         store(index(via_f64, i), cast(cast(value, dtypes::f64), narrow))}));
    TestBuffer input(narrow, n), w(dtypes::f32, n), b(narrow, n), d(narrow, n);
    for (int64_t k = 0; k < n; ++k) input.as<uint16_t>()[k] = static_cast<uint16_t>(k);
    void* buffers[] = {w.data(), b.data(), d.data(), input.data()};
    run(buffers, 0, n);
    int64_t failures = 0;
    for (int64_t k = 0; k < n; ++k) {
      auto bits = static_cast<uint16_t>(k);
      double exact = narrow == dtypes::f16 ? f16_to_double(bits) : bf16_to_double(bits);
      bool ok = same_value(ScalarValue{dtypes::f32, 0, w.as<float>()[k]}, ScalarValue{dtypes::f32, 0, exact});
      if (std::isnan(exact)) {
        ok = ok && std::isnan(b.get(k).real) && std::isnan(d.get(k).real);
      } else {
        ok = ok && b.as<uint16_t>()[k] == bits && d.as<uint16_t>()[k] == bits;
      }
      if (!ok && ++failures <= 5) FAIL_CHECK("bit pattern ", k, " does not round-trip");
    }
    CHECK(failures == 0);
  }
}

TEST_CASE("BITCAST reinterprets bytes") {
  const int64_t n = 3;
  UOpPtr in = global(dtypes::f32, n, 2), as_int = global(dtypes::i32, n, 0), as_half = global(dtypes::f16, n, 1);
  UOpPtr shorts = global(dtypes::u16, n, 3);
  UOpPtr i = range(n, 0);
  KernelFunction run = compile_and_load(kernel(
      "bitcasts", {store(index(as_int, i), UOp::make(Ops::BITCAST, dtypes::i32, {load(index(in, i))})),
                   store(index(as_half, i), UOp::make(Ops::BITCAST, dtypes::f16, {load(index(shorts, i))}))}));
  const float floats[n] = {1.0f, -2.5f, 0.0f};
  const uint16_t halves[n] = {0x3C00, 0xC100, 0x7C00};  // 1.0, -2.5, inf
  TestBuffer f(dtypes::f32, n), h(dtypes::u16, n), out_i(dtypes::i32, n), out_h(dtypes::f16, n);
  std::memcpy(f.data(), floats, sizeof(floats));
  std::memcpy(h.data(), halves, sizeof(halves));
  void* buffers[] = {out_i.data(), out_h.data(), f.data(), h.data()};
  run(buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) {
    int32_t bits;
    std::memcpy(&bits, &floats[k], 4);
    CHECK(out_i.as<int32_t>()[k] == bits);
    CHECK(out_h.as<uint16_t>()[k] == halves[k]);
  }
  CHECK(out_h.get(1).real == -2.5);
}

}  // TEST_SUITE
