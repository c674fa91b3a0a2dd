// The GPU launch grid (src/opt/gpu_grid.h): output axes merged into one axis 0, the fastest axis
// chosen by the memory sectors a warp touches, a warp per output for long reductions on a target
// with warp shuffles, a work-group per output sharing a reduction through local memory, and
// register tiles (src/opt/gpu_tiles.h). The kernels' results are checked on devices by the backend-parity test
// (tests/opencl); here, the structure of the rewritten ASTs and the rendered shuffles.
#include <doctest/doctest.h>

#include <set>
#include <unordered_map>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "ir/substitute.h"
#include "opt/gpu_grid.h"
#include "opt/gpu_tiles.h"
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
  UOpPtr merged = merge_output_axes_into_grid(ast).ast;
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
  UOpPtr merged = merge_output_axes_into_grid(ast).ast;
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
  UOpPtr split = merge_output_axes_into_grid(ast, 32).ast;
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
  CHECK(merge_output_axes_into_grid(ast, 0).ast == ast);
  CHECK_THROWS_WITH_AS(opencl_render_kernel(split, kDevice), doctest::Contains("has no warp shuffle"), InternalError);
  // Short reductions and ones not of whole warps keep a thread per output.
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(6, 32), 32).ast, Ops::SHUFFLE_XOR) == 0);
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(6, 100), 32).ast, Ops::SHUFFLE_XOR) == 0);
  // Many outputs fill the GPU by themselves.
  CHECK(count_ops(merge_output_axes_into_grid(row_sums(1 << 15, 64), 32).ast, Ops::SHUFFLE_XOR) == 0);
}

TEST_CASE("symbolic output axes merge into a grid of their product; few outputs still share a reduction") {
  // b[i][c] = a[c][i] over a run-time n rows: n × 5 outputs, stored with c contiguous.
  UOpPtr n = variable("n", 0, 64);
  UOpPtr c = range(5, 0), i = range(n, 1);
  UOpPtr ast = kernel("E_v_5", {store(index(global(dtypes::f32, 320, 0), i * idx(5) + c),
                                      load(index(global(dtypes::f32, 320, 1), c * n + i)))});
  UOpPtr merged = merge_output_axes_into_grid(ast).ast;
  std::vector<const UOp*> ranges = ranges_of(merged);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0]->src(0)->vmax() == 64 * 5);  // n · 5, an expression
  CHECK_FALSE(ranges[0]->src(0)->is_const());
  // At n = 3 every thread stores its own element, in memory order.
  const UOp* grid = ranges[0];
  for (int64_t g = 0; g < 15; ++g) {
    UOpPtr at = simplify(substitute(merged->src(0)->src(0)->src(1), {{grid, idx(g)}, {n.get(), idx(3)}}));
    REQUIRE(at->is_const());
    CHECK(at->const_int() == g);
  }
  // Rows of 768 steps, at most 4 × 64 of them: a warp per row, grid n · 4 · 32, the size a parameter.
  UOpPtr row = range(n, 0), part = range(4, 1), k = range(768, 1000);
  UOpPtr sum = reduce(Ops::ADD, load(index(global(dtypes::f32, 64 * 4 * 768, 1), (row * idx(4) + part) * idx(768) + k)), {k});
  UOpPtr rows = kernel("r_v_4", {store(index(global(dtypes::f32, 256, 0), row * idx(4) + part), sum)});
  UOpPtr warped = merge_output_axes_into_grid(rows, 32).ast;
  CHECK(count_ops(warped, Ops::SHUFFLE_XOR) == 5);
  CHECK(ranges_of(warped).front()->src(0)->vmax() == 64 * 4 * 32);
  std::string source = cuda_render_kernel(warped, kDevice).source;
  CHECK(source.find(", long var0)") != std::string::npos);
  CHECK(source.find("__shfl_xor_sync(") != std::string::npos);
  // Split reductions need a known count of outputs: none for a symbolic kernel.
  UOpPtr many = range(n, 0), wide = range(512, 1), steps = range(1024, 1000);
  UOpPtr long_sum = reduce(Ops::ADD, load(index(global(dtypes::f32, 64 * 512 * 1024, 1), (many * idx(512) + wide) * idx(1024) + steps)), {steps});
  UOpPtr big = kernel("r_v_512", {store(index(global(dtypes::f32, 64 * 512, 0), many * idx(512) + wide), long_sum)});
  CHECK(merge_output_axes_into_grid(big, 32, 256, -1, true).group_size == 0);
}

TEST_CASE("few outputs with long reductions take a work-group per output where the target has local memory") {
  auto row_sums = [](int64_t rows, int64_t length) {
    UOpPtr i = range(rows, 0), k = range(length, 1000);
    UOpPtr sum = reduce(Ops::ADD, load(index(global(dtypes::f32, rows * length, 1), i * idx(length) + k)), {k});
    return kernel("r_rows", {store(index(global(dtypes::f32, rows, 0), i), sum)});
  };
  // OpenCL (no shuffles, groups of up to 64): 768 steps take 16 lanes (16 · 16 <= 768 < 32 · 32) of
  // 48 steps each, whose partials meet in 16 floats of local memory behind one barrier.
  GridKernel grouped = merge_output_axes_into_grid(row_sums(6, 768), 0, 64);
  CHECK(grouped.group_size == 16);
  std::vector<const UOp*> ranges = ranges_of(grouped.ast);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0]->src(0)->const_int() == 6 * 16);  // a group per row
  CHECK(ranges[1]->src(0)->const_int() == 768 / 16);
  CHECK(ranges[2]->src(0)->const_int() == 16);  // every lane reads the 16 partials
  CHECK(count_ops(grouped.ast, Ops::DEFINE_LOCAL) == 1);
  CHECK(count_ops(grouped.ast, Ops::BARRIER) == 1);
  CHECK(count_ops(grouped.ast, Ops::SHUFFLE_XOR) == 0);
  for (int64_t lane : {0, 9, 15}) CHECK(stored_element(grouped.ast, 4 * 16 + lane) == 4);
  std::string source = opencl_render_kernel(grouped.ast, kDevice).source;
  CHECK(source.find("  __local float local0[16];\n") != std::string::npos);  // at the kernel's outermost scope
  CHECK(source.find("barrier(CLK_LOCAL_MEM_FENCE);") != std::string::npos);
  // 100 steps are not whole groups of 8: each lane runs 13, the last ones masked to the identity.
  GridKernel ragged = merge_output_axes_into_grid(row_sums(2, 100), 0, 64);
  CHECK(ragged.group_size == 8);
  CHECK(ranges_of(ragged.ast)[1]->src(0)->const_int() == 13);
  CHECK(count_ops(ragged.ast, Ops::WHERE) >= 1);
  // Short reductions and many outputs keep a thread per output.
  CHECK(merge_output_axes_into_grid(row_sums(6, 32), 0, 64).group_size == 0);
  CHECK(merge_output_axes_into_grid(row_sums(1 << 15, 768), 0, 64).group_size == 0);

  // CUDA (shuffles, groups of up to 256): a warp per output still serves 768 steps; 8192 steps of 4
  // rows take a group of 256, each warp's butterfly leaving one partial: 8 slots, written by lane 0
  // of each warp.
  GridKernel warps = merge_output_axes_into_grid(row_sums(6, 768), 32, 256);
  CHECK(warps.group_size == 0);
  CHECK(count_ops(warps.ast, Ops::SHUFFLE_XOR) == 5);
  // 1000 steps are not whole warps: a group of two warps (at least 8 steps per lane), masked.
  CHECK(merge_output_axes_into_grid(row_sums(6, 1000), 32, 256).group_size == 64);
  // 100 steps: one warp, masked; its butterfly gives every lane the sum, so no local memory and
  // no fixed block size.
  GridKernel one_warp = merge_output_axes_into_grid(row_sums(6, 100), 32, 256);
  CHECK(one_warp.group_size == 0);
  CHECK(count_ops(one_warp.ast, Ops::SHUFFLE_XOR) == 5);
  CHECK(count_ops(one_warp.ast, Ops::DEFINE_LOCAL) == 0);
  CHECK(ranges_of(one_warp.ast)[0]->src(0)->const_int() == 6 * 32);
  GridKernel block = merge_output_axes_into_grid(row_sums(4, 8192), 32, 256);
  CHECK(block.group_size == 256);
  CHECK(ranges_of(block.ast)[0]->src(0)->const_int() == 4 * 256);
  CHECK(count_ops(block.ast, Ops::SHUFFLE_XOR) == 5);
  std::string cuda = cuda_render_kernel(block.ast, kDevice).source;
  CHECK(cuda.find("  __shared__ float local0[8];\n") != std::string::npos);
  CHECK(cuda.find("__syncthreads();") != std::string::npos);
  CHECK(cuda.find("if (") != std::string::npos);
}

TEST_CASE("split reductions: outputs too many for a group each, too few to fill a GPU, share a group") {
  auto row_sums = [](int64_t rows, int64_t length) {
    UOpPtr i = range(rows, 0), k = range(length, 1000);
    UOpPtr sum = reduce(Ops::ADD, load(index(global(dtypes::f32, rows * length, 1), k * idx(rows) + i)), {k});
    return kernel("r_rows", {store(index(global(dtypes::f32, rows, 0), i), sum)});
  };
  // OpenCL (groups of 64, no warps): 32768 outputs of 1024 steps take 4 slices (131072 threads), a
  // group serving 16 outputs: thread w of group b computes output 16b + w % 16, slice w / 16.
  GridKernel split = merge_output_axes_into_grid(row_sums(32768, 1024), 0, 64, -1, true);
  CHECK(split.group_size == 64);
  std::vector<const UOp*> ranges = ranges_of(split.ast);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0]->src(0)->const_int() == 32768 * 4);
  CHECK(ranges[1]->src(0)->const_int() == 1024 / 4);  // each slice's steps
  CHECK(ranges[2]->src(0)->const_int() == 4);         // each thread sums its output's 4 partials
  CHECK(count_ops(split.ast, Ops::DEFINE_LOCAL) == 1);
  CHECK(count_ops(split.ast, Ops::BARRIER) == 1);
  for (int64_t g : {0, 15, 16, 63, 64, 64 * 5 + 37})
    CHECK(stored_element(split.ast, g) == g / 64 * 16 + g % 16);
  std::string source = opencl_render_kernel(split.ast, kDevice).source;
  CHECK(source.find("  __local float local0[64];\n") != std::string::npos);
  // CUDA (groups of 256, warps of 32): 25088 outputs (ResNet-50's 1x1 2048->512 at 7×7) of 2048
  // steps take 8 slices, 32 outputs (one warp's lanes) per group, and no shuffles: a warp's lanes
  // are different outputs.
  GridKernel cuda = merge_output_axes_into_grid(row_sums(25088, 2048), 32, 256, -1, true);
  CHECK(cuda.group_size == 256);
  CHECK(ranges_of(cuda.ast)[0]->src(0)->const_int() == 25088 * 8);
  CHECK(count_ops(cuda.ast, Ops::SHUFFLE_XOR) == 0);
  CHECK(stored_element(cuda.ast, 256 * 3 + 32 * 5 + 7) == 3 * 32 + 7);
  // Not split: the switch off, a short reduction, enough outputs to fill the device, or outputs
  // that are not whole groups.
  CHECK(merge_output_axes_into_grid(row_sums(32768, 1024), 0, 64, -1, false).group_size == 0);
  CHECK(merge_output_axes_into_grid(row_sums(32768, 256), 0, 64, -1, true).group_size == 0);
  CHECK(merge_output_axes_into_grid(row_sums(1 << 17, 1024), 0, 64, -1, true).group_size == 0);
  CHECK(merge_output_axes_into_grid(row_sums(32768 + 8, 1024), 0, 64, -1, true).group_size == 0);
}

TEST_CASE("a shorter reduction beside a long one gets one step per lane, without a loop") {
  // Row i: Σk a[i][k] over 4096 steps (a group of 64) plus max_j b[i][j] over 64 steps (one each).
  UOpPtr i = range(2, 0), k = range(4096, 1000), j = range(64, 1001);
  UOpPtr a = global(dtypes::f32, 2 * 4096, 1), b = global(dtypes::f32, 2 * 64, 2);
  UOpPtr sum = reduce(Ops::ADD, load(index(a, i * idx(4096) + k)), {k});
  UOpPtr max = reduce(Ops::MAX, load(index(b, i * idx(64) + j)), {j});
  GridKernel grouped = merge_output_axes_into_grid(kernel("r_two", {store(index(global(dtypes::f32, 2, 0), i), sum + max)}), 0, 64);
  CHECK(grouped.group_size == 64);
  CHECK(count_ops(grouped.ast, Ops::BARRIER) == 2);
  // The group's ranges: the sum's 64 steps per lane, and one read loop of 64 partials per reduction.
  std::vector<int64_t> extents;
  for (const UOp* range : ranges_of(grouped.ast)) extents.push_back(static_cast<int64_t>(range->src(0)->const_int()));
  CHECK(extents == std::vector<int64_t>{2 * 64, 64, 64, 64});
  CHECK_NOTHROW(opencl_render_kernel(grouped.ast, kDevice));
}

TEST_CASE("a reduction over several ranges is walked as one range of their product") {
  // out[c] = Σy Σx image[c][y][x], 16 × 16 pixels: 256 steps, groups of 16, each lane 16 steps;
  // step s is pixel (s / 16, s % 16), so lane l of channel 1 first reads element 256 + l.
  UOpPtr c = range(2, 0), y = range(16, 1000), x = range(16, 1001);
  UOpPtr image = global(dtypes::f32, 2 * 256, 1);
  UOpPtr sum = reduce(Ops::ADD, load(index(image, c * idx(256) + y * idx(16) + x)), {y, x});
  GridKernel grouped = merge_output_axes_into_grid(kernel("r_pool", {store(index(global(dtypes::f32, 2, 0), c), sum)}), 0, 64);
  CHECK(grouped.group_size == 16);
  std::vector<int64_t> extents;
  for (const UOp* range : ranges_of(grouped.ast)) extents.push_back(static_cast<int64_t>(range->src(0)->const_int()));
  CHECK(extents == std::vector<int64_t>{2 * 16, 16, 16});
  const UOp* load_index = nullptr;
  for (const UOp* node : toposort(grouped.ast))
    if (node->op() == Ops::LOAD && node->src(0)->src(0)->op() == Ops::DEFINE_GLOBAL) load_index = node->src(0)->src(1).get();
  REQUIRE(load_index != nullptr);
  std::vector<const UOp*> ranges = ranges_of(grouped.ast);
  auto element = [&](int64_t g, int64_t step) {
    UOpPtr at = simplify(substitute(load_index->self(), {{ranges[0], idx(g)}, {ranges[1], idx(step)}}));
    REQUIRE(at->is_const());
    return static_cast<int64_t>(at->const_int());
  };
  CHECK(element(16 + 5, 0) == 256 + 5);
  CHECK(element(16 + 5, 3) == 256 + 3 * 16 + 5);
}

TEST_CASE("a reduction inside another reduction's loop is not split across a group") {
  // out[i] = Σj max_k x[i][j][k]: the inner maximum runs once per step j, so its lanes would meet at
  // the barrier at different steps; only the outer sum is shared.
  UOpPtr i = range(2, 0), j = range(256, 1000), k = range(256, 1001);
  UOpPtr x = global(dtypes::f32, 2 * 256 * 256, 1);
  UOpPtr inner = reduce(Ops::MAX, load(index(x, i * idx(65536) + j * idx(256) + k)), {k});
  UOpPtr ast = kernel("r_nested", {store(index(global(dtypes::f32, 2, 0), i), reduce(Ops::ADD, inner, {j}))});
  GridKernel grouped = merge_output_axes_into_grid(ast, 0, 64);
  CHECK(grouped.group_size == 16);
  CHECK(count_ops(grouped.ast, Ops::BARRIER) == 1);
}

TEST_CASE("register tiles: strided copies along the axes a matmul's loads share, only with threads to spare") {
  // c[m][n] = Σk a[m][k] · b[k][n], 512 × 1024 outputs: a's loads do not depend on n, b's not on m.
  auto matmul = [](int64_t rows, int64_t columns) {
    UOpPtr m = range(rows, 0), n = range(columns, 1), k = range(64, 1000);
    UOpPtr a = global(dtypes::f32, rows * 64, 1), b = global(dtypes::f32, 64 * columns, 2);
    UOpPtr sum = reduce(Ops::ADD, load(index(a, m * idx(64) + k)) * load(index(b, k * idx(columns) + n)), {k});
    return kernel("r_mm", {store(index(global(dtypes::f32, rows * columns, 0), m * idx(columns) + n), sum)});
  };
  UOpPtr tiled = gpu_register_tiles(matmul(512, 1024), 4, 32768);
  std::vector<int64_t> output_extents, copies;
  for (const UOp* range : ranges_of(tiled)) {
    if (range->arg_int() < 1000) output_extents.push_back(static_cast<int64_t>(range->src(0)->const_int()));
    if (range->arg_int() >= kFirstUnrollAxis) copies.push_back(static_cast<int64_t>(range->src(0)->const_int()));
  }
  CHECK(output_extents == std::vector<int64_t>{128, 256});  // 32,768 threads of 4 × 4 outputs
  CHECK(copies == std::vector<int64_t>{4, 4});
  // Copy j of a thread is j · (extent / 4) away, so neighbouring threads stay neighbours in memory.
  GridKernel merged = merge_output_axes_into_grid(tiled);
  const UOp* grid = ranges_of(merged.ast).front();
  std::unordered_map<const UOp*, UOpPtr> first_copy;
  for (const UOp* range : ranges_of(merged.ast))
    if (range->arg_int() >= kFirstUnrollAxis) first_copy.emplace(range, idx(0));
  auto element = [&](int64_t g, int64_t row_copy, int64_t column_copy) {
    std::unordered_map<const UOp*, UOpPtr> at{{grid, idx(g)}};
    for (const UOp* range : ranges_of(merged.ast))
      if (range->arg_int() >= kFirstUnrollAxis) at.emplace(range, idx(range->arg_int() == kFirstUnrollAxis ? column_copy : row_copy));
    UOpPtr address = simplify(substitute(merged.ast->src(0)->src(0)->src(1), at));
    REQUIRE(address->is_const());
    return static_cast<int64_t>(address->const_int());
  };
  CHECK(element(1, 0, 0) == element(0, 0, 0) + 1);  // the next thread, the next column
  std::set<int64_t> tile;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) tile.insert(element(0, i, j));
  CHECK(tile == std::set<int64_t>{0, 256, 512, 768, 128 * 1024, 128 * 1024 + 256, 128 * 1024 + 512, 128 * 1024 + 768,
                                  256 * 1024, 256 * 1024 + 256, 256 * 1024 + 512, 256 * 1024 + 768, 384 * 1024,
                                  384 * 1024 + 256, 384 * 1024 + 512, 384 * 1024 + 768});
  // Fewer outputs: a smaller tile keeps the threads (4 × 2 leaves 32,768 of 256 × 1024).
  copies.clear();
  UOpPtr narrower = gpu_register_tiles(matmul(256, 1024), 4, 32768);
  for (const UOp* range : ranges_of(narrower))
    if (range->arg_int() >= kFirstUnrollAxis) copies.push_back(static_cast<int64_t>(range->src(0)->const_int()));
  CHECK(copies.size() == 2);
  CHECK(copies[0] * copies[1] == 8);
  // Too few outputs for any tile, tiles switched off, and a kernel without a reduction: unchanged.
  UOpPtr small = matmul(64, 64);
  CHECK(gpu_register_tiles(small, 4, 32768) == small);
  CHECK(gpu_register_tiles(matmul(512, 1024), 0, 32768) == matmul(512, 1024));
  UOpPtr r = range(1 << 20, 0);
  UOpPtr copy = kernel("E_copy", {store(index(global(dtypes::f32, 1 << 20, 0), r), load(index(global(dtypes::f32, 1 << 20, 1), r)))});
  CHECK(gpu_register_tiles(copy, 4, 1) == copy);
  // The tiled kernel renders: one loop, 16 accumulators, 8 loads a step.
  std::string source = opencl_render_kernel(merged.ast, kDevice).source;
  CHECK(source.find("acc15[1]") != std::string::npos);
}

}  // TEST_SUITE
