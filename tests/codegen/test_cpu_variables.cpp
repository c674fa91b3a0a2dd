// Kernels with symbolic variables (DEFINE_VAR; docs/kernel-ast.md, "Variables"): the first stage of
// symbolic shapes (docs/symbolic-shapes.md). The variables' values arrive in one extra argument
// after the buffers, an int64 array in the order of the variables' names, and a loop may end at one.
// Each kernel runs at several values of its variables against a plain C++ reference.
#include <string>

#include "codegen_test_helpers.h"

using namespace kiln;
using namespace kiln::testing;

TEST_SUITE("codegen") {

TEST_CASE("a loop that ends at a variable writes exactly that many elements") {
  const int64_t capacity = 64;
  UOpPtr n = variable("n", 1, capacity);
  UOpPtr x = global(dtypes::f32, capacity, 1), out = global(dtypes::f32, capacity, 0);
  UOpPtr i = range(n, 1);  // not axis 0: the loop itself must stop at n
  KernelFunction run =
      compile_and_load(kernel("scale_n", {store(index(out, i), load(index(x, i)) * const_float(dtypes::f32, 2.0))}));
  for (int64_t value : {int64_t{1}, int64_t{7}, int64_t{33}, capacity}) {
    CAPTURE(value);
    TestBuffer input(dtypes::f32, capacity), output(dtypes::f32, capacity);  // 64-byte aligned, as kernels assume
    for (int64_t k = 0; k < capacity; ++k) {
      input.as<float>()[k] = static_cast<float>(k + 1);
      output.as<float>()[k] = -1.0f;
    }
    int64_t variables[] = {value};
    void* buffers[] = {output.data(), input.data(), variables};
    run(buffers, 0, 1);
    for (int64_t k = 0; k < capacity; ++k)
      CHECK(output.as<float>()[k] == (k < value ? 2.0f * static_cast<float>(k + 1) : -1.0f));
  }
}

TEST_CASE("variables in index math and in a reduction's extent, two variables in name order") {
  // out[r] = sum over c < cols of x[r * cols + c] + offset, for r in [begin, end) of rows; both the
  // row stride and the reduction's length are the variable `cols`, the offset is `bias`.
  const int64_t max_rows = 8, max_cols = 16;
  UOpPtr cols = variable("cols", 1, max_cols), bias = variable("bias", 0, 100);
  UOpPtr x = global(dtypes::i64, max_rows * max_cols, 1), out = global(dtypes::i64, max_rows, 0);
  UOpPtr r = range(max_rows, 0), c = range(cols, 1);
  UOpPtr sum = reduce(Ops::ADD, load(index(x, r * cols + c)), {c});
  UOpPtr value = sum + cast(bias, dtypes::i64);
  KernelFunction run = compile_and_load(kernel("row_sums_cols", {store(index(out, r), value)}));
  for (int64_t columns : {int64_t{1}, int64_t{5}, max_cols}) {
    CAPTURE(columns);
    TestBuffer input(dtypes::i64, max_rows * max_cols), output(dtypes::i64, max_rows);
    for (int64_t k = 0; k < max_rows * max_cols; ++k) input.as<int64_t>()[k] = k * 3 % 17;
    for (int64_t row = 0; row < max_rows; ++row) output.as<int64_t>()[row] = -1;
    int64_t variables[] = {7, columns};  // "bias" before "cols"
    void* buffers[] = {output.data(), input.data(), variables};
    run(buffers, 2, 6);  // rows 2..5 only: axis 0 is the parallel axis
    for (int64_t row = 0; row < max_rows; ++row) {
      int64_t expected = 7;
      for (int64_t k = 0; k < columns; ++k) expected += input.as<int64_t>()[row * columns + k];
      CHECK(output.as<int64_t>()[row] == (row >= 2 && row < 6 ? expected : -1));
    }
  }
}

}  // TEST_SUITE
