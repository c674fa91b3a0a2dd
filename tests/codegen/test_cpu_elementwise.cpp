// Elementwise CPU kernels, compiled with LLVM and run in process, against plain C++ references:
// every dtype, the integer edge cases (division by zero, MIN/-1, shifts), float NaN rules, narrow
// float rounding, masked loads and stores, and the plumbing (symbols, names, threads, debug output).
#include <cstring>
#include <limits>
#include <thread>

#include "codegen/llvm/llvm_target.h"
#include "codegen_test_helpers.h"
#include "support/debug.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// The value of `value` once stored in `dtype` (integers wrap, floats round): plain memory encoding.
ScalarValue as_stored(DType dtype, const ScalarValue& value) {
  TestBuffer cell(dtype, 1);
  cell.set(0, ScalarValue{dtype, value.integer, value.real});
  return cell.get(0);
}

// One element of a + b in `dtype`, computed in C++.
ScalarValue reference_add(DType dtype, const ScalarValue& a, const ScalarValue& b) {
  if (dtype.is_bool()) return ScalarValue{dtype, (a.integer | b.integer), 0.0};
  if (dtype.is_int()) return as_stored(dtype, ScalarValue{dtype, a.integer + b.integer, 0.0});
  switch (dtype.scalar()) {
    case ScalarType::Float32: return ScalarValue{dtype, 0, static_cast<float>(a.real) + static_cast<float>(b.real)};
    case ScalarType::Float64: return ScalarValue{dtype, 0, a.real + b.real};
    // The exact sum of two narrow floats fits a double; it is then rounded once.
    case ScalarType::Float16: return ScalarValue{dtype, 0, round_to_f16(a.real + b.real)};
    default: return ScalarValue{dtype, 0, round_to_bf16(a.real + b.real)};
  }
}

}  // namespace

TEST_SUITE("codegen") {

TEST_CASE("elementwise add on every dtype") {
  const int64_t n = 37;  // not a multiple of any vector width: the vector loop and its remainder both run
  for (DType dtype : dtypes::all_data_scalars) {
    CAPTURE(dtype.name());
    UOpPtr a = global(dtype, n, 1), b = global(dtype, n, 2), out = global(dtype, n, 0);
    UOpPtr i = range(n, 0);
    KernelFunction add = compile_and_load(
        kernel("add_" + dtype.name(), {store(index(out, i), load(index(a, i)) + load(index(b, i)))}));
    TestBuffer a_data(dtype, n), b_data(dtype, n), out_data(dtype, n);
    for (int64_t k = 0; k < n; ++k) {
      if (dtype.is_float()) {
        a_data.set_real(k, static_cast<double>(k) * 0.37 - 5.3);
        b_data.set_real(k, 1000.25 / static_cast<double>(k + 1));
      } else {
        // Large enough to wrap every narrow type.
        a_data.set_int(k, k * 37 - 500 + (k % 3 == 0 ? int128{INT64_MAX} : 0));
        b_data.set_int(k, k * k * 1001 + k % 2);
      }
    }
    void* buffers[] = {out_data.data(), a_data.data(), b_data.data()};
    add(buffers, 0, n);
    for (int64_t k = 0; k < n; ++k) {
      ScalarValue expected = reference_add(dtype, a_data.get(k), b_data.get(k));
      INFO("element ", k, ": got ", describe(out_data.get(k)), ", expected ", describe(expected));
      CHECK(same_value(out_data.get(k), expected));
    }
  }
}

TEST_CASE("integer division and modulo: by zero gives 0, MIN / -1 gives MIN, truncation toward zero") {
  const int64_t pairs[][2] = {{7, 2}, {-7, 2}, {7, -2}, {-7, -2}, {5, 0}, {-5, 0}, {0, 0}, {INT64_MIN, -1},
                              {INT64_MIN, 1}, {INT64_MIN, 2}, {INT64_MAX, -1}, {13, 13}, {-1, -1}, {-128, -1}};
  const int64_t n = std::size(pairs);
  for (DType dtype : {dtypes::i8, dtypes::i16, dtypes::i32, dtypes::i64, dtypes::u8, dtypes::u32, dtypes::u64}) {
    CAPTURE(dtype.name());
    UOpPtr a = global(dtype, n, 2), b = global(dtype, n, 3), quotient = global(dtype, n, 0), rest = global(dtype, n, 1);
    UOpPtr i = range(n, 0);
    UOpPtr x = load(index(a, i)), y = load(index(b, i));
    KernelFunction divide = compile_and_load(
        kernel("divmod_" + dtype.name(), {store(index(quotient, i), x / y), store(index(rest, i), x % y)}));
    TestBuffer a_data(dtype, n), b_data(dtype, n), q_data(dtype, n), r_data(dtype, n);
    for (int64_t k = 0; k < n; ++k) {
      a_data.set_int(k, pairs[k][0]);  // wrapped into the type: INT64_MIN is the type's MIN for signed types
      b_data.set_int(k, pairs[k][1]);
    }
    // INT64_MIN wraps to 0 in narrow types; put each type's own MIN where the table says MIN.
    if (dtype.is_signed()) {
      for (int64_t k = 0; k < n; ++k)
        if (pairs[k][0] == INT64_MIN) a_data.set_int(k, min_value(dtype));
    }
    void* buffers[] = {q_data.data(), r_data.data(), a_data.data(), b_data.data()};
    divide(buffers, 0, n);
    for (int64_t k = 0; k < n; ++k) {
      int128 av = a_data.get(k).integer, bv = b_data.get(k).integer;
      int128 q = 0, r = 0;
      if (bv == 0) {
        q = r = 0;
      } else if (dtype.is_signed() && bv == -1) {
        q = as_stored(dtype, ScalarValue{dtype, -av, 0.0}).integer;  // wraps: MIN / -1 = MIN
        r = 0;
      } else {
        q = av / bv;  // C++ truncates toward zero
        r = av % bv;
      }
      INFO("element ", k, ": ", to_string(av), " / ", to_string(bv));
      CHECK(q_data.get(k).integer == q);
      CHECK(r_data.get(k).integer == r);
    }
  }
}

TEST_CASE("shift amounts are taken modulo the bit width; right shifts are arithmetic on signed types") {
  SUBCASE("i32 by i32") {
    const int32_t values[] = {1, -8, 0x40000000, -1, 12345};
    const int32_t amounts[] = {0, 1, 7, 31, 32, 33, -1, 100};
    const int64_t rows = std::size(values), columns = std::size(amounts), n = rows * columns;
    UOpPtr a = global(dtypes::i32, rows, 2), b = global(dtypes::i32, columns, 3);
    UOpPtr left = global(dtypes::i32, n, 0), right = global(dtypes::i32, n, 1);
    UOpPtr i = range(n, 0);
    // Every (value, amount) pair, through index division and modulo.
    UOpPtr x = load(index(a, i / columns)), y = load(index(b, i % columns));
    KernelFunction shift =
        compile_and_load(kernel("shift_i32", {store(index(left, i), x << y), store(index(right, i), x >> y)}));
    std::vector<int32_t> left_data(n), right_data(n);
    TestBuffer a_data(dtypes::i32, rows), b_data(dtypes::i32, columns), l_data(dtypes::i32, n), r_data(dtypes::i32, n);
    std::memcpy(a_data.data(), values, sizeof(values));
    std::memcpy(b_data.data(), amounts, sizeof(amounts));
    void* buffers[] = {l_data.data(), r_data.data(), a_data.data(), b_data.data()};
    shift(buffers, 0, n);
    for (int64_t k = 0; k < n; ++k) {
      int32_t value = values[k / columns];
      int amount = amounts[k % columns] & 31;
      INFO(value, " shifted by ", amounts[k % columns]);
      CHECK(l_data.as<int32_t>()[k] == static_cast<int32_t>(static_cast<uint32_t>(value) << amount));
      CHECK(r_data.as<int32_t>()[k] == (value >> amount));
    }
  }
  SUBCASE("u16 by u8 (logical) and i8 by i64 (arithmetic)") {
    const int64_t n = 6;
    const uint16_t words[n] = {0x8000, 0xFFFF, 1, 0x1234, 0x8001, 7};
    const uint8_t word_shifts[n] = {15, 16, 17, 4, 255, 0};
    const int8_t bytes[n] = {-128, -1, 64, -3, 5, -100};
    const int64_t byte_shifts[n] = {7, 8, 9, 1, -1, 2};
    UOpPtr w = global(dtypes::u16, n, 4), ws = global(dtypes::u8, n, 5), b = global(dtypes::i8, n, 6),
           bs = global(dtypes::i64, n, 7);
    UOpPtr w_out = global(dtypes::u16, n, 0), b_out = global(dtypes::i8, n, 1);
    UOpPtr i = range(n, 0);
    KernelFunction shift = compile_and_load(kernel(
        "shift_mixed", {store(index(w_out, i), load(index(w, i)) >> load(index(ws, i))),
                        store(index(b_out, i), load(index(b, i)) >> load(index(bs, i)))}));
    TestBuffer w_in(dtypes::u16, n), ws_in(dtypes::u8, n), b_in(dtypes::i8, n), bs_in(dtypes::i64, n),
        w_res(dtypes::u16, n), b_res(dtypes::i8, n);
    std::memcpy(w_in.data(), words, sizeof(words));
    std::memcpy(ws_in.data(), word_shifts, sizeof(word_shifts));
    std::memcpy(b_in.data(), bytes, sizeof(bytes));
    std::memcpy(bs_in.data(), byte_shifts, sizeof(byte_shifts));
    void* buffers[] = {w_res.data(), b_res.data(), nullptr, nullptr, w_in.data(), ws_in.data(), b_in.data(), bs_in.data()};
    shift(buffers, 0, n);
    for (int64_t k = 0; k < n; ++k) {
      CHECK(w_res.as<uint16_t>()[k] == static_cast<uint16_t>(words[k] >> (word_shifts[k] & 15)));
      CHECK(b_res.as<int8_t>()[k] == static_cast<int8_t>(bytes[k] >> (byte_shifts[k] & 7)));
    }
  }
}

TEST_CASE("float ops: ROUND_EVEN rounds halves to even and keeps signs, in every float type") {
  const double inputs[][2] = {{0.5, 0.0},   {1.5, 2.0},   {2.5, 2.0},     {-0.5, -0.0},     {-2.5, -2.0},
                              {-3.5, -4.0}, {0.49, 0.0},  {-0.4, -0.0},   {2.75, 3.0},      {-0.0, -0.0},
                              {1e9, 1e9},   {INFINITY, INFINITY}, {-INFINITY, -INFINITY}};
  const int64_t n = std::size(inputs);
  for (DType dtype : {dtypes::f32, dtypes::f64, dtypes::f16, dtypes::bf16}) {
    CAPTURE(dtype.name());
    UOpPtr in = global(dtype, n, 1), out = global(dtype, n, 0);
    UOpPtr i = range(n, 0);
    KernelFunction run = compile_and_load(
        kernel("round_even_" + dtype.name(), {store(index(out, i), alu(Ops::ROUND_EVEN, load(index(in, i))))}));
    TestBuffer in_data(dtype, n), out_data(dtype, n);
    for (int64_t k = 0; k < n; ++k) in_data.set_real(k, inputs[k][0]);
    void* buffers[] = {out_data.data(), in_data.data()};
    run(buffers, 0, n);
    for (int64_t k = 0; k < n; ++k) {
      // The input as stored (1e9 is not an f16), rounded: an integral value stays itself.
      double stored = in_data.get(k).real;
      double expected = std::fabs(stored) >= 1e6 ? stored : inputs[k][1];
      INFO("element ", k, ": ", stored);
      CHECK(same_value(out_data.get(k), as_stored(dtype, ScalarValue{dtype, 0, expected})));
    }
  }
}

TEST_CASE("float ops: MAX propagates NaN, comparisons with NaN, sqrt/trunc/reciprocal/neg/div") {
  const double inputs[][2] = {{1.5, 2.25}, {-3.75, 0.5}, {NAN, 1.0}, {1.0, NAN}, {-0.0, 0.0}, {0.0, -0.0},
                              {INFINITY, -INFINITY}, {2.0, 0.0}, {-7.5, -7.5}, {1e-3, 3.0}};
  const int64_t n = std::size(inputs);
  for (DType dtype : {dtypes::f32, dtypes::f64, dtypes::f16, dtypes::bf16}) {
    CAPTURE(dtype.name());
    UOpPtr a = global(dtype, n, 10), b = global(dtype, n, 11);
    std::vector<UOpPtr> outs;
    for (int64_t slot = 0; slot < 9; ++slot) outs.push_back(global(slot < 6 ? dtype : dtypes::bool_, n, slot));
    UOpPtr i = range(n, 0);
    UOpPtr x = load(index(a, i)), y = load(index(b, i));
    UOpPtr results[] = {maximum(x, y), alu(Ops::SQRT, x),  alu(Ops::TRUNC, x), alu(Ops::RECIPROCAL, x),
                        -x,            x / y,              lt(x, y),           ne(x, y),
                        eq(x, y)};
    std::vector<UOpPtr> stores;
    for (size_t s = 0; s < outs.size(); ++s) stores.push_back(store(index(outs[s], i), results[s]));
    KernelFunction run = compile_and_load(kernel("float_ops_" + dtype.name(), stores));
    TestBuffer a_data(dtype, n), b_data(dtype, n);
    std::vector<std::unique_ptr<TestBuffer>> out_data;
    std::vector<void*> buffers(12, nullptr);
    for (int64_t s = 0; s < 9; ++s) {
      out_data.push_back(std::make_unique<TestBuffer>(s < 6 ? dtype : dtypes::bool_, n));
      buffers[static_cast<size_t>(s)] = out_data.back()->data();
    }
    buffers[10] = a_data.data();
    buffers[11] = b_data.data();
    for (int64_t k = 0; k < n; ++k) {
      a_data.set_real(k, inputs[k][0]);
      b_data.set_real(k, inputs[k][1]);
    }
    run(buffers.data(), 0, n);
    auto round = [&](double value) { return as_stored(dtype, ScalarValue{dtype, 0, value}); };
    for (int64_t k = 0; k < n; ++k) {
      double xv = a_data.get(k).real, yv = b_data.get(k).real;
      // numpy.maximum: NaN if either is NaN; +0 over -0.
      double expected_max = std::isnan(xv) || std::isnan(yv) ? NAN
                            : (xv == 0 && yv == 0)           ? (std::signbit(xv) ? yv : xv)
                                                             : std::max(xv, yv);
      ScalarValue expected[] = {round(expected_max), round(std::sqrt(xv)), round(std::trunc(xv)), round(1.0 / xv),
                                round(-xv),          round(xv / yv)};
      INFO("element ", k, ": ", xv, ", ", yv);
      for (int s = 0; s < 6; ++s) {
        INFO("output ", s, ": got ", describe(out_data[static_cast<size_t>(s)]->get(k)), ", expected ",
             describe(expected[s]));
        CHECK(same_value(out_data[static_cast<size_t>(s)]->get(k), expected[s]));
      }
      CHECK(out_data[6]->get(k).integer == (xv < yv ? 1 : 0));
      CHECK(out_data[7]->get(k).integer == (xv != yv ? 1 : 0));
      CHECK(out_data[8]->get(k).integer == (xv == yv ? 1 : 0));
    }
  }
}

TEST_CASE("integer MAX and comparisons respect signedness") {
  const int64_t n = 4;
  UOpPtr a = global(dtypes::u32, n, 3), b = global(dtypes::u32, n, 4);
  UOpPtr max_u = global(dtypes::u32, n, 0), less_u = global(dtypes::bool_, n, 1), max_s = global(dtypes::i32, n, 2);
  UOpPtr i = range(n, 0);
  UOpPtr x = load(index(a, i)), y = load(index(b, i));
  // The same bits read as i32: MAX must then be the signed maximum.
  UOpPtr xs = UOp::make(Ops::BITCAST, dtypes::i32, {x}), ys = UOp::make(Ops::BITCAST, dtypes::i32, {y});
  KernelFunction signed_run = compile_and_load(kernel(
      "int_max", {store(index(max_u, i), maximum(x, y)), store(index(less_u, i), lt(x, y)),
                   store(index(max_s, i), maximum(xs, ys))}));
  const uint32_t xa[n] = {0xFFFFFFFFu, 1, 0x80000000u, 5}, ya[n] = {1, 0xFFFFFFFFu, 0x7FFFFFFFu, 5};
  TestBuffer a_data(dtypes::u32, n), b_data(dtypes::u32, n), mu(dtypes::u32, n), lu(dtypes::bool_, n), ms(dtypes::i32, n);
  std::memcpy(a_data.data(), xa, sizeof(xa));
  std::memcpy(b_data.data(), ya, sizeof(ya));
  void* buffers[] = {mu.data(), lu.data(), ms.data(), a_data.data(), b_data.data()};
  signed_run(buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) {
    CHECK(mu.as<uint32_t>()[k] == std::max(xa[k], ya[k]));
    CHECK(lu.as<uint8_t>()[k] == (xa[k] < ya[k] ? 1 : 0));
    CHECK(ms.as<int32_t>()[k] == std::max(static_cast<int32_t>(xa[k]), static_cast<int32_t>(ya[k])));
  }
}

TEST_CASE("f16 and bf16 arithmetic rounds after every op") {
  // (a + b) + c with b = c = one half-ulp of a: rounding after the first add gives a (ties to even),
  // so the result is a; adding in f32 and rounding once would give a + 2 ulp/2.
  struct Case { DType dtype; double a; double expected; };
  for (Case test : {Case{dtypes::f16, 2048.0, 2048.0}, Case{dtypes::bf16, 256.0, 256.0}}) {
    CAPTURE(test.dtype.name());
    UOpPtr a = global(test.dtype, 1, 1), out = global(test.dtype, 1, 0);
    UOpPtr one = const_float(test.dtype, 1.0);
    UOpPtr x = load(index(a, idx(0)));
    KernelFunction run = compile_and_load(kernel("round_each_" + test.dtype.name(), {store(index(out, idx(0)), (x + one) + one)}));
    TestBuffer a_data(test.dtype, 1), out_data(test.dtype, 1);
    a_data.set_real(0, test.a);
    void* buffers[] = {out_data.data(), a_data.data()};
    run(buffers, 0, 1);
    CHECK(out_data.get(0).real == test.expected);
  }
}

TEST_CASE("bool values: logic, comparisons into bool buffers, bytes stay 0 or 1") {
  const int64_t n = 16;
  UOpPtr a = global(dtypes::bool_, n, 3), b = global(dtypes::bool_, n, 4), f = global(dtypes::f32, n, 5);
  UOpPtr and_not = global(dtypes::bool_, n, 0), differ = global(dtypes::bool_, n, 1), as_float = global(dtypes::f32, n, 2);
  UOpPtr i = range(n, 0);
  UOpPtr x = load(index(a, i)), y = load(index(b, i));
  UOpPtr small = lt(load(index(f, i)), const_float(dtypes::f32, 0.5));
  KernelFunction run = compile_and_load(kernel(
      "bools", {store(index(and_not, i), x & logical_not(y)), store(index(differ, i), ne(x, y) | small),
                store(index(as_float, i), cast(x, dtypes::f32) + cast(y + y, dtypes::f32))}));
  TestBuffer a_data(dtypes::bool_, n), b_data(dtypes::bool_, n), f_data(dtypes::f32, n);
  TestBuffer r0(dtypes::bool_, n), r1(dtypes::bool_, n), r2(dtypes::f32, n);
  for (int64_t k = 0; k < n; ++k) {
    a_data.set_int(k, k & 1);
    b_data.set_int(k, (k >> 1) & 1);
    f_data.set_real(k, k < 4 ? 0.25 : 1.0);
  }
  void* buffers[] = {r0.data(), r1.data(), r2.data(), a_data.data(), b_data.data(), f_data.data()};
  run(buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) {
    bool xv = k & 1, yv = (k >> 1) & 1;
    CHECK(r0.as<uint8_t>()[k] == (xv && !yv ? 1 : 0));
    CHECK(r1.as<uint8_t>()[k] == ((xv != yv) || k < 4 ? 1 : 0));
    CHECK(r2.as<float>()[k] == static_cast<float>(xv) + static_cast<float>(yv));  // true + true is true (1)
  }
}

TEST_CASE("masked loads read the alternative outside the valid region (padding)") {
  // out[i] = x[i - 2] for 2 <= i < n + 2, else -1: a pad of 2 on each side.
  const int64_t n = 29, padded = n + 4;
  for (DType dtype : {dtypes::f32, dtypes::i16, dtypes::f16}) {
    CAPTURE(dtype.name());
    UOpPtr x = global(dtype, n, 1), out = global(dtype, padded, 0);
    UOpPtr i = range(padded, 0);
    UOpPtr valid = logical_not(lt(i, idx(2))) & lt(i, idx(n + 2));
    UOpPtr minus_one = dtype.is_float() ? const_float(dtype, -1.0) : const_int(dtype, -1);
    UOpPtr value = load(index(x, i - idx(2), valid), minus_one);
    KernelFunction pad = compile_and_load(kernel("pad_" + dtype.name(), {store(index(out, i), value)}));
    TestBuffer x_data(dtype, n), out_data(dtype, padded);
    for (int64_t k = 0; k < n; ++k) {
      if (dtype.is_float()) x_data.set_real(k, static_cast<double>(k) + 0.5);
      else x_data.set_int(k, k * 3);
    }
    void* buffers[] = {out_data.data(), x_data.data()};
    pad(buffers, 0, padded);
    for (int64_t k = 0; k < padded; ++k) {
      bool inside = k >= 2 && k < n + 2;
      ScalarValue got = out_data.get(k);
      if (dtype.is_float()) CHECK(got.real == (inside ? static_cast<double>(k - 2) + 0.5 : -1.0));
      else CHECK(got.integer == (inside ? (k - 2) * 3 : -1));
    }
  }
}

TEST_CASE("masked stores write only where the mask holds") {
  const int64_t n = 50;
  UOpPtr x = global(dtypes::f32, n, 1), out = global(dtypes::f32, n, 0);
  UOpPtr i = range(n, 0);
  UOpPtr every_third = eq(i % idx(3), idx(0));
  KernelFunction run = compile_and_load(kernel(
      "masked_store", {store(index(out, i, every_third), load(index(x, i)) * const_float(dtypes::f32, 2.0))}));
  TestBuffer x_data(dtypes::f32, n), out_data(dtypes::f32, n);
  for (int64_t k = 0; k < n; ++k) {
    x_data.set_real(k, static_cast<double>(k));
    out_data.set_real(k, -7.0);
  }
  void* buffers[] = {out_data.data(), x_data.data()};
  run(buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) CHECK(out_data.as<float>()[k] == (k % 3 == 0 ? 2.0f * static_cast<float>(k) : -7.0f));
}

TEST_CASE("a gather: an index loaded from memory and cast to index") {
  const int64_t n = 10;
  UOpPtr table = global(dtypes::f64, 5, 1), picks = global(dtypes::i32, n, 2), out = global(dtypes::f64, n, 0);
  UOpPtr i = range(n, 0);
  UOpPtr position = cast(load(index(picks, i)), dtypes::index);
  KernelFunction run = compile_and_load(kernel("gather", {store(index(out, i), load(index(table, position)))}));
  TestBuffer t(dtypes::f64, 5), p(dtypes::i32, n), o(dtypes::f64, n);
  for (int64_t k = 0; k < 5; ++k) t.set_real(k, 10.0 * static_cast<double>(k) + 0.5);
  for (int64_t k = 0; k < n; ++k) p.set_int(k, (k * 3) % 5);
  void* buffers[] = {o.data(), t.data(), p.data()};
  run(buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) CHECK(o.as<double>()[k] == 10.0 * static_cast<double>((k * 3) % 5) + 0.5);
}

TEST_CASE("transcendental ops are refused by the renderer, naming the pass that must run first") {
  UOpPtr x = global(dtypes::f32, 4, 1), out = global(dtypes::f32, 4, 0);
  UOpPtr i = range(4, 0);
  for (Ops op : {Ops::EXP2, Ops::LOG2, Ops::SIN}) {
    UOpPtr ast = kernel("transcendental", {store(index(out, i), alu(op, load(index(x, i))))});
    std::string message = "no error";
    try {
      cpu_compile(ast);
    } catch (const InternalError& error) {
      message = error.what();
    }
    CAPTURE(message);
    CHECK(message.find(std::string(op_name(op))) != std::string::npos);
    CHECK(message.find("transcendental pass") != std::string::npos);
  }
}

TEST_CASE("fill and copy loops compile to self-contained code (no memset/memcpy calls) and run") {
  // Without care LLVM turns these loops into memset/memcpy calls, which cpu_compile would reject.
  const int64_t n = 4099;
  UOpPtr x = global(dtypes::u8, n, 1), zeros = global(dtypes::i32, n, 0), copy = global(dtypes::u8, n, 0);
  UOpPtr i = range(n, 0);
  KernelFunction fill = compile_and_load(kernel("fill", {store(index(zeros, i), const_int(dtypes::i32, 0))}));
  KernelFunction copy_bytes = compile_and_load(kernel("copy", {store(index(copy, i), load(index(x, i)))}));
  TestBuffer x_data(dtypes::u8, n), z(dtypes::i32, n), c(dtypes::u8, n);
  for (int64_t k = 0; k < n; ++k) x_data.set_int(k, k * 7);
  void* fill_buffers[] = {z.data()};
  fill(fill_buffers, 0, n);
  void* copy_buffers[] = {c.data(), x_data.data()};
  copy_bytes(copy_buffers, 0, n);
  for (int64_t k = 0; k < n; ++k) {
    CHECK(z.as<int32_t>()[k] == 0);
    CHECK(c.as<uint8_t>()[k] == static_cast<uint8_t>(k * 7));
  }
}

TEST_CASE("two objects may define kernels of the same name; each load returns its own") {
  UOpPtr x = global(dtypes::i32, 1, 1), out = global(dtypes::i32, 1, 0);
  UOpPtr value = load(index(x, idx(0)));
  KernelFunction plus_one = compile_and_load(kernel("same_name", {store(index(out, idx(0)), value + 1)}));
  KernelFunction times_ten = compile_and_load(kernel("same_name", {store(index(out, idx(0)), value * 10)}));
  int32_t input = 7, result = 0;
  void* buffers[] = {&result, &input};
  plus_one(buffers, 0, 1);
  CHECK(result == 8);
  times_ten(buffers, 0, 1);
  CHECK(result == 70);
}

TEST_CASE("kernels compile and load from several threads at once") {
  std::vector<int64_t> results(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &results] {
      UOpPtr out = global(dtypes::i64, 1, 0);
      KernelFunction run = compile_and_load(kernel("threaded_" + std::to_string(t),
                                                   {store(index(out, idx(0)), const_int(dtypes::i64, 100 + t))}));
      int64_t value = 0;
      void* buffers[] = {&value};
      run(buffers, 0, 1);
      results[static_cast<size_t>(t)] = value;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) CHECK(results[static_cast<size_t>(t)] == 100 + t);
}

TEST_CASE("KILN_DEBUG 7 prints IR, linear ops and assembly without changing the result") {
  int previous = debug_level();
  set_debug_level(7);
  UOpPtr x = global(dtypes::f32, 8, 1), out = global(dtypes::f32, 1, 0);
  UOpPtr k = range(8, 1);
  UOpPtr total = reduce(Ops::ADD, load(index(x, k)), {k});
  KernelFunction run = compile_and_load(kernel("debug_sum", {store(index(out, idx(0)), total)}));
  set_debug_level(previous);
  float data[8] = {1, 2, 3, 4, 5, 6, 7, 8}, result = 0;
  void* buffers[] = {&result, data};
  run(buffers, 0, 1);
  CHECK(result == 36.0f);
}

TEST_CASE("the target id names the triple, the CPU and sorted features") {
  const CpuTarget& host = CpuTarget::host();
  std::string id = cpu_target_id();
  CHECK(id == host.triple() + ";" + host.cpu() + ";" + host.features());
  CHECK(!host.cpu().empty());
  std::vector<std::string> names;
  const std::string& features = host.features();
  for (size_t start = 0; start < features.size();) {
    size_t comma = features.find(',', start);
    if (comma == std::string::npos) comma = features.size();
    CHECK((features[start] == '+' || features[start] == '-'));
    names.push_back(features.substr(start + 1, comma - start - 1));
    start = comma + 1;
  }
  CHECK(names.size() > 10);
  CHECK(std::is_sorted(names.begin(), names.end()));
}

}  // TEST_SUITE
