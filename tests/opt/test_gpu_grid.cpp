// The GPU launch grid (src/opt/gpu_grid.h): output axes merged into one axis 0, the fastest axis
// chosen by the memory sectors a warp touches, and a warp per output for long reductions on a target
// with warp shuffles. The kernels' results are checked on devices by the backend-parity test
// (tests/opencl); here, the structure of the rewritten ASTs and the rendered shuffles.
#include <doctest/doctest.h>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "ir/substitute.h"
#include "opt/gpu_grid.h"
#include "opt/opt.h"
#include "passes/symbolic.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

const CDeviceFeatures kDevice{"test device", true, true};

std::vector<const UOp*> ranges_of(const UOpPtr& ast) { return kernel_ranges(ast); }

int count_ops(const UOpPtr& ast, Ops op) {
  int count = 0;
  for (const UOp* node : toposort(ast)) count += node->op() == op;
  return count;
}

// The element the kernel's (first) store writes for grid index `g`.
int64_t stored_element(const UOpPtr& ast, int64_t g) {
  const UOp* grid = ranges_of(ast).front();
  REQUIRE(grid->arg_int() == 0);
  UOpPtr at = simplify(substitute(ast->src(0)->src(0)->src(1), {{grid, idx(g)}}));
  REQUIRE(at->is_const());
  return static_cast<int64_t>(at->const_int());
}

}  // namespace

TEST_SUITE("gpu-grid") {

TEST_CASE("output axes become one axis 0 in the stored order") {
  // b[p][c] = a[c][p]: 3 × 5 outputs, stored with c contiguous.
  UOpPtr c = range(5, 0), p = range(3, 1);
  UOpPtr ast = kernel("E_5_3", {store(index(global(dtypes::f32, 15, 0), p * idx(5) + c),
                                      load(index(global(dtypes::f32, 15, 1), c * idx(3) + p)))});
  UOpPtr merged = merge_output_axes_into_grid(ast);
  std::vector<const UOp*> ranges = ranges_of(merged);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0]->arg_int() == 0);
  CHECK(ranges[0]->src(0)->const_int() == 15);
  // Every thread stores its own element, in memory order.
  for (int64_t g = 0; g < 15; ++g) CHECK(stored_element(merged, g) == g);
}

TEST_CASE("the fastest axis is the one whose loads coalesce, not only the store's") {
  // BERT's key projection: out[d][s] (s contiguous) = Σk x[s][k] · w[k][d]. With s fastest a warp
  // reads x 32 rows apart on every step; with d fastest it reads one row of w and one value of x.
  UOpPtr d = range(64, 0), s = range(128, 1), k = range(768, 1000);
  UOpPtr x = global(dtypes::f32, 128 * 768, 1), w = global(dtypes::f32, 768 * 64, 2);
  UOpPtr sum = reduce(Ops::ADD, load(index(x, s * idx(768) + k)) * load(index(w, k * idx(64) + d)), {k});
  UOpPtr ast = kernel("r_64_128", {store(index(global(dtypes::f32, 64 * 128, 0), d * idx(128) + s), sum)});
  UOpPtr merged = merge_output_axes_into_grid(ast);
  CHECK(ranges_of(merged).front()->src(0)->const_int() == 64 * 128);
  CHECK(stored_element(merged, 1) == 128);  // the next thread is the next d
  CHECK(stored_element(merged, 64) == 1);
}

TEST_CASE("a long reduction with few outputs takes a warp per output where the target has shuffles") {
  auto row_sums = [](int64_t rows, int64_t length) {
    UOpPtr i = range(rows, 0), k = range(length, 1000);
    UOpPtr sum = reduce(Ops::ADD, load(index(global(dtypes::f32, rows * length, 1), i * idx(length) + k)), {k});
    return kernel("r_rows", {store(index(global(dtypes::f32, rows, 0), i), sum)});
  };
  UOpPtr ast = row_sums(6, 768);
  UOpPtr split = merge_output_axes_into_grid(ast, 32);
  std::vector<const UOp*> ranges = ranges_of(split);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0]->src(0)->const_int() == 6 * 32);  // a warp per row
  CHECK(ranges[1]->src(0)->const_int() == 768 / 32);  // each lane takes every 32nd step
  CHECK(count_ops(split, Ops::SHUFFLE_XOR) == 5);     // the butterfly over 32 lanes
  // Every lane of row r's warp stores row r.
  for (int64_t lane : {0, 17, 31}) CHECK(stored_element(split, 3 * 32 + lane) == 3);
  std::string source = cuda_render_kernel(split, kDevice).source;
  CHECK(source.find("__shfl_xor_sync(0xffffffffu, ") != std::string::npos);
  CHECK(source.find(", 16);") != std::string::npos);
  // OpenCL C 1.2 has no shuffles: its target never asks for them, and the renderer refuses one.
  CHECK(merge_output_axes_into_grid(ast, 0) == ast);
  CHECK_THROWS_WITH_AS(opencl_render_kernel(split, kDevice), doctest::Contains("has no warp shuffle"), InternalError);
  // Short reductions and ones not of whole warps keep a thread per output.
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(6, 32), 32), Ops::SHUFFLE_XOR) == 0);
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(6, 100), 32), Ops::SHUFFLE_XOR) == 0);
  // Many outputs fill the GPU by themselves.
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(1 << 15, 64), 32), Ops::SHUFFLE_XOR) == 0);
}

}  // TEST_SUITE
