// Reductions on the CPU: row sums, max (with NaN and all-negative inputs), products, bool reductions,
// a nested reduction, matmul, and the parallel axis split into chunks. Inputs are small integers
// stored as floats so that sums are exact in any order: results are compared exactly.
#include <cstring>
#include <limits>

#include "codegen_test_helpers.h"

using namespace kiln;
using namespace kiln::testing;

TEST_SUITE("codegen") {

TEST_CASE("2-D sum over the last axis, for f32, i32 and f16") {
  const int64_t rows = 7, columns = 131;
  for (DType dtype : {dtypes::f32, dtypes::i32, dtypes::f16}) {
    CAPTURE(dtype.name());
    UOpPtr x = global(dtype, rows * columns, 1), out = global(dtype, rows, 0);
    UOpPtr i = range(rows, 0), j = range(columns, 1);
    UOpPtr sum = reduce(Ops::ADD, load(index(x, i * columns + j)), {j});
    KernelFunction run = compile_and_load(kernel("sum_" + dtype.name(), {store(index(out, i), sum)}));
    TestBuffer x_data(dtype, rows * columns), out_data(dtype, rows);
    for (int64_t k = 0; k < rows * columns; ++k) {
      int64_t value = (k * 7) % 11 - 5;
      if (dtype.is_float()) x_data.set_real(k, static_cast<double>(value));
      else x_data.set_int(k, value * 1000);
    }
    void* buffers[] = {out_data.data(), x_data.data()};
    run(buffers, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t expected = 0;
      for (int64_t c = 0; c < columns; ++c) expected += (r * columns + c) * 7 % 11 - 5;
      if (dtype.is_float()) CHECK(out_data.get(r).real == static_cast<double>(expected));  // |sum| < 2048: exact in f16
      else CHECK(out_data.get(r).integer == expected * 1000);
    }
  }
}

TEST_CASE("a reduction to a single value: no parallel axis, begin/end are ignored") {
  const int64_t n = 1000;
  UOpPtr x = global(dtypes::f32, n, 1), out = global(dtypes::f32, 1, 0);
  UOpPtr k = range(n, 1);
  KernelFunction run = compile_and_load(kernel("total", {store(index(out, idx(0)), reduce(Ops::ADD, load(index(x, k)), {k}))}));
  std::vector<float> data(n);
  TestBuffer x_data(dtypes::f32, n);
  double expected = 0;
  for (int64_t e = 0; e < n; ++e) {
    x_data.as<float>()[e] = static_cast<float>(e % 13);
    expected += static_cast<double>(e % 13);
  }
  float result = -1;
  void* buffers[] = {&result, x_data.data()};
  run(buffers, 0, 1);
  CHECK(result == expected);
  result = -1;
  run(buffers, 5, 2);  // a kernel without axis 0 does not look at begin/end
  CHECK(result == expected);
}

TEST_CASE("max reduction: -inf / MIN identity, NaN propagates, unsigned and bool") {
  const int64_t rows = 4, columns = 9;
  SUBCASE("f32") {
    UOpPtr x = global(dtypes::f32, rows * columns, 1), out = global(dtypes::f32, rows, 0);
    UOpPtr i = range(rows, 0), j = range(columns, 1);
    KernelFunction run = compile_and_load(
        kernel("max_f32", {store(index(out, i), reduce(Ops::MAX, load(index(x, i * columns + j)), {j}))}));
    TestBuffer data(dtypes::f32, rows * columns), result(dtypes::f32, rows);
    for (int64_t k = 0; k < rows * columns; ++k) data.as<float>()[k] = -1000.0f - static_cast<float>((k * 5) % 9);
    data.as<float>()[1 * columns + 4] = NAN;                     // row 1 has a NaN
    data.as<float>()[2 * columns + 8] = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < columns; ++c) data.as<float>()[3 * columns + c] = -std::numeric_limits<float>::infinity();
    void* buffers[] = {result.data(), data.data()};
    run(buffers, 0, rows);
    CHECK(result.as<float>()[0] == -1000.0f);
    CHECK(std::isnan(result.as<float>()[1]));
    CHECK(result.as<float>()[2] == -1000.0f);
    CHECK(result.as<float>()[3] == -std::numeric_limits<float>::infinity());
  }
  SUBCASE("i32, all negative; u8; bool") {
    UOpPtr xi = global(dtypes::i32, rows * columns, 3), xu = global(dtypes::u8, rows * columns, 4),
           xb = global(dtypes::bool_, rows * columns, 5);
    UOpPtr oi = global(dtypes::i32, rows, 0), ou = global(dtypes::u8, rows, 1), ob = global(dtypes::bool_, rows, 2);
    UOpPtr i = range(rows, 0), j = range(columns, 1);
    UOpPtr at = i * columns + j;
    KernelFunction run = compile_and_load(kernel(
        "max_ints", {store(index(oi, i), reduce(Ops::MAX, load(index(xi, at)), {j})),
                     store(index(ou, i), reduce(Ops::MAX, load(index(xu, at)), {j})),
                     store(index(ob, i), reduce(Ops::MAX, load(index(xb, at)), {j}))}));
    TestBuffer di(dtypes::i32, rows * columns), du(dtypes::u8, rows * columns), db(dtypes::bool_, rows * columns);
    TestBuffer ri(dtypes::i32, rows), ru(dtypes::u8, rows), rb(dtypes::bool_, rows);
    for (int64_t k = 0; k < rows * columns; ++k) {
      di.as<int32_t>()[k] = INT32_MIN + static_cast<int32_t>((k * 5) % 9);
      du.as<uint8_t>()[k] = static_cast<uint8_t>(250 - (k % 7) * 40);
      db.as<uint8_t>()[k] = (k / columns == 2 && k % columns == 5) ? 1 : 0;  // only row 2 has a true
    }
    void* buffers[] = {ri.data(), ru.data(), rb.data(), di.data(), du.data(), db.data()};
    run(buffers, 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      int32_t expected_i = INT32_MIN;
      uint8_t expected_u = 0;
      for (int64_t c = 0; c < columns; ++c) {
        expected_i = std::max(expected_i, di.as<int32_t>()[r * columns + c]);
        expected_u = std::max(expected_u, du.as<uint8_t>()[r * columns + c]);
      }
      CHECK(ri.as<int32_t>()[r] == expected_i);
      CHECK(ru.as<uint8_t>()[r] == expected_u);
      CHECK(rb.as<uint8_t>()[r] == (r == 2 ? 1 : 0));
    }
  }
}

TEST_CASE("product reduction and bool ADD/MUL reductions (any / all)") {
  const int64_t rows = 3, columns = 5;
  UOpPtr x = global(dtypes::i64, rows * columns, 3), b = global(dtypes::bool_, rows * columns, 4);
  UOpPtr product = global(dtypes::i64, rows, 0), any = global(dtypes::bool_, rows, 1), all = global(dtypes::bool_, rows, 2);
  UOpPtr i = range(rows, 0), j = range(columns, 1);
  UOpPtr at = i * columns + j;
  KernelFunction run = compile_and_load(kernel(
      "products", {store(index(product, i), reduce(Ops::MUL, load(index(x, at)), {j})),
                   store(index(any, i), reduce(Ops::ADD, load(index(b, at)), {j})),
                   store(index(all, i), reduce(Ops::MUL, load(index(b, at)), {j}))}));
  TestBuffer xd(dtypes::i64, rows * columns), bd(dtypes::bool_, rows * columns);
  TestBuffer pd(dtypes::i64, rows), anyd(dtypes::bool_, rows), alld(dtypes::bool_, rows);
  const uint8_t bools[rows][columns] = {{0, 0, 0, 0, 0}, {0, 1, 0, 1, 0}, {1, 1, 1, 1, 1}};
  for (int64_t k = 0; k < rows * columns; ++k) {
    xd.as<int64_t>()[k] = k % columns + 1 + k / columns;
    bd.as<uint8_t>()[k] = bools[k / columns][k % columns];
  }
  void* buffers[] = {pd.data(), anyd.data(), alld.data(), xd.data(), bd.data()};
  run(buffers, 0, rows);
  CHECK(pd.as<int64_t>()[0] == 1 * 2 * 3 * 4 * 5);
  CHECK(pd.as<int64_t>()[1] == 2 * 3 * 4 * 5 * 6);
  CHECK(pd.as<int64_t>()[2] == 3 * 4 * 5 * 6 * 7);
  CHECK(anyd.as<uint8_t>()[0] == 0);
  CHECK(anyd.as<uint8_t>()[1] == 1);
  CHECK(anyd.as<uint8_t>()[2] == 1);
  CHECK(alld.as<uint8_t>()[0] == 0);
  CHECK(alld.as<uint8_t>()[1] == 0);
  CHECK(alld.as<uint8_t>()[2] == 1);
}

TEST_CASE("nested reduction: out[i] = sum_j max_k x[i, j, k], and a row max hoisted out of the inner loop") {
  const int64_t a = 3, b = 4, c = 5;
  UOpPtr x = global(dtypes::f32, a * b * c, 2), sums = global(dtypes::f32, a, 0), centred = global(dtypes::f32, a * b * c, 1);
  UOpPtr i = range(a, 0), j = range(b, 1), k = range(c, 2), k2 = range(c, 3), m = range(b * c, 4);
  UOpPtr inner = reduce(Ops::MAX, load(index(x, i * (b * c) + j * c + k)), {k});
  UOpPtr outer = reduce(Ops::ADD, inner, {j});
  KernelFunction nested = compile_and_load(kernel("nested_sum_max", {store(index(sums, i), outer)}));
  // centred[i, j, k] = x[i, j, k] - max over the whole row i (a REDUCE over axis 4, used in axes 1, 3).
  UOpPtr row_max = reduce(Ops::MAX, load(index(x, i * (b * c) + m)), {m});
  UOpPtr element = i * (b * c) + j * c + k2;
  KernelFunction centre = compile_and_load(
      kernel("centre_rows", {store(index(centred, element), load(index(x, element)) - row_max)}));
  TestBuffer xd(dtypes::f32, a * b * c), sd(dtypes::f32, a), cd(dtypes::f32, a * b * c);
  for (int64_t e = 0; e < a * b * c; ++e) xd.as<float>()[e] = static_cast<float>((e * 17) % 23) - 11.0f;
  void* buffers[] = {sd.data(), cd.data(), xd.data()};
  nested(buffers, 0, a);
  centre(buffers, 0, a);
  for (int64_t r = 0; r < a; ++r) {
    float expected = 0, row = -INFINITY;
    for (int64_t q = 0; q < b; ++q) {
      float best = -INFINITY;
      for (int64_t s = 0; s < c; ++s) best = std::max(best, xd.as<float>()[r * b * c + q * c + s]);
      expected += best;
      row = std::max(row, best);
    }
    CHECK(sd.as<float>()[r] == expected);
    for (int64_t e = r * b * c; e < (r + 1) * b * c; ++e) CHECK(cd.as<float>()[e] == xd.as<float>()[e] - row);
  }
}

TEST_CASE("two REDUCEs over one RANGE: sum and max of each row") {
  const int64_t rows = 3, columns = 6;
  UOpPtr x = global(dtypes::i32, rows * columns, 1), out = global(dtypes::i32, rows, 0);
  UOpPtr i = range(rows, 0), k = range(columns, 1);
  UOpPtr value = load(index(x, i * columns + k));
  KernelFunction run = compile_and_load(
      kernel("sum_plus_max", {store(index(out, i), reduce(Ops::ADD, value, {k}) + reduce(Ops::MAX, value, {k}))}));
  TestBuffer xd(dtypes::i32, rows * columns), od(dtypes::i32, rows);
  for (int64_t e = 0; e < rows * columns; ++e) xd.as<int32_t>()[e] = static_cast<int32_t>((e * 5) % 7) - 3;
  void* buffers[] = {od.data(), xd.data()};
  run(buffers, 0, rows);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t sum = 0, best = INT32_MIN;
    for (int64_t c = 0; c < columns; ++c) {
      sum += xd.as<int32_t>()[r * columns + c];
      best = std::max(best, xd.as<int32_t>()[r * columns + c]);
    }
    CHECK(od.as<int32_t>()[r] == sum + best);
  }
}

TEST_CASE("matmul (3 ranges and a REDUCE), and the parallel axis split into chunks") {
  const int64_t m = 19, k_size = 37, n = 23;
  UOpPtr a = global(dtypes::f32, m * k_size, 1), b = global(dtypes::f32, k_size * n, 2), c = global(dtypes::f32, m * n, 0);
  UOpPtr i = range(m, 0), j = range(n, 1), k = range(k_size, 2);
  UOpPtr product = load(index(a, i * k_size + k)) * load(index(b, k * n + j));
  KernelFunction matmul = compile_and_load(kernel("matmul", {store(index(c, i * n + j), reduce(Ops::ADD, product, {k}))}));
  TestBuffer ad(dtypes::f32, m * k_size), bd(dtypes::f32, k_size * n), whole(dtypes::f32, m * n), chunks(dtypes::f32, m * n);
  for (int64_t e = 0; e < m * k_size; ++e) ad.as<float>()[e] = static_cast<float>((e * 3) % 7) - 3.0f;
  for (int64_t e = 0; e < k_size * n; ++e) bd.as<float>()[e] = static_cast<float>((e * 5) % 9) - 4.0f;

  void* one_call[] = {whole.data(), ad.data(), bd.data()};
  matmul(one_call, 0, m);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      float expected = 0;
      for (int64_t s = 0; s < k_size; ++s) expected += ad.as<float>()[r * k_size + s] * bd.as<float>()[s * n + col];
      CHECK(whole.as<float>()[r * n + col] == expected);
    }
  }

  // Chunks as a thread pool would make them, plus chunks that are empty or reach past the axis:
  // each row must be written exactly once, and nothing outside [0, m).
  void* split[] = {chunks.data(), ad.data(), bd.data()};
  const int64_t bounds[][2] = {{0, 3}, {3, 3}, {3, 10}, {10, 11}, {11, m}, {m, m + 5}, {7, 2}};
  for (const auto& chunk : bounds) matmul(split, chunk[0], chunk[1]);
  CHECK(std::memcmp(whole.data(), chunks.data(), sizeof(float) * m * n) == 0);

  // A chunk writes its rows and nothing else.
  TestBuffer partial(dtypes::f32, m * n);
  void* one_chunk[] = {partial.data(), ad.data(), bd.data()};
  matmul(one_chunk, 4, 6);
  for (int64_t r = 0; r < m; ++r) {
    bool inside = r >= 4 && r < 6;
    bool same = std::memcmp(partial.as<float>() + r * n, whole.as<float>() + r * n, sizeof(float) * n) == 0;
    CHECK(same == inside);
  }
}

}  // TEST_SUITE
