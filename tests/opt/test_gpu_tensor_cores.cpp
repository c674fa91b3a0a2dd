// Tensor cores (src/opt/gpu_tensor_cores.h): which kernels qualify, and that each lane loads, and
// each store writes, the elements the fragment layout (src/opt/mma_layout.h) gives it. The results
// are checked on PoCL by the backend-parity test (opencl+tensor-cores, the OpenCL renderer's
// emulation of the warp's operation) and the CUDA instructions compile in tests/cuda.
#include <doctest/doctest.h>

#include <set>
#include <unordered_map>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "ir/substitute.h"
#include "opt/expand.h"
#include "opt/gpu_grid.h"
#include "opt/gpu_tensor_cores.h"
#include "opt/gpu_tiles.h"
#include "opt/mma_layout.h"
#include "opt/opt.h"
#include "passes/symbolic.h"
#include "support/debug.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

int count_ops(const UOpPtr& ast, Ops op) {
  int count = 0;
  for (const UOp* node : toposort(ast)) count += node->op() == op;
  return count;
}

// out[m][n] = Σk cast(a[m][k]) · cast(b[k][n]), a and b of `operand` type.
UOpPtr matmul(int64_t rows, int64_t depth, int64_t columns, DType operand = dtypes::f16) {
  UOpPtr m = range(rows, 0), n = range(columns, 1), k = range(depth, 1000);
  UOpPtr a = load(index(global(operand, rows * depth, 1), m * idx(depth) + k));
  UOpPtr b = load(index(global(operand, depth * columns, 2), k * idx(columns) + n));
  UOpPtr sum = reduce(Ops::ADD, cast(a, dtypes::f32) * cast(b, dtypes::f32), {k});
  return kernel("r_matmul", {store(index(global(dtypes::f32, rows * columns, 0), m * idx(columns) + n), sum)});
}

// `node` with the kernel's ranges of these axis ids at these values, simplified to a constant.
int64_t at(const UOpPtr& ast, const UOpPtr& node, const std::unordered_map<int64_t, int64_t>& values) {
  std::unordered_map<const UOp*, UOpPtr> map;
  for (const UOp* r : kernel_ranges(ast))
    if (values.contains(r->arg_int())) map.emplace(r, idx(values.at(r->arg_int())));
  UOpPtr value = simplify(substitute(node, map));
  REQUIRE(value->is_const());
  return static_cast<int64_t>(value->const_int());
}

const UOp* only(const UOpPtr& ast, Ops op) {
  const UOp* found = nullptr;
  for (const UOp* node : toposort(ast))
    if (node->op() == op) {
      REQUIRE(found == nullptr);
      found = node;
    }
  REQUIRE(found != nullptr);
  return found;
}

}  // namespace

TEST_SUITE("gpu-tensor-cores") {

TEST_CASE("an f16 matmul: 16x8 tiles, a lane axis of 32, K in steps of 16, each lane's elements") {
  TensorCoreKernel cores = gpu_tensor_cores(matmul(64, 48, 32), false);
  REQUIRE(cores.lane_axis >= 0);
  const UOpPtr& ast = cores.ast;
  CHECK(count_ops(ast, Ops::WMMA) == 1);
  CHECK(ast->src_count() == 4);  // one store per accumulator element
  std::unordered_map<int64_t, int64_t> extents;
  for (const UOp* r : kernel_ranges(ast)) extents[r->arg_int()] = static_cast<int64_t>(r->src(0)->const_int());
  CHECK(extents.at(0) == 64 / 16);   // row tiles keep the rows' axis id
  CHECK(extents.at(1) == 32 / 8);    // column tiles
  CHECK(extents.at(cores.lane_axis) == 32);
  CHECK(extents.at(1000) == 48 / 16);

  // Lane 13 of tile (2, 1) at step 2: its A elements are a[32 + row][32 + column] by the layout.
  const UOp* wmma = only(ast, Ops::WMMA);
  std::unordered_map<int64_t, int64_t> where{{0, 2}, {1, 1}, {cores.lane_axis, 13}, {1000, 2}};
  for (int i = 0; i < mma::kAElements; ++i) {
    CAPTURE(i);
    const UOpPtr& element = wmma->src(0)->src(static_cast<size_t>(i));  // LOAD(INDEX(a, …))
    REQUIRE(element->op() == Ops::LOAD);
    int64_t expected = (2 * 16 + mma::a_row<int64_t>(13, i)) * 48 + 2 * 16 + mma::a_column<int64_t>(13, i);
    CHECK(at(ast, element->src(0)->src(1), where) == expected);
  }
  for (int i = 0; i < mma::kBElements; ++i) {
    CAPTURE(i);
    const UOpPtr& element = wmma->src(1)->src(static_cast<size_t>(i));
    int64_t expected = (2 * 16 + mma::b_row<int64_t>(13, i)) * 32 + 1 * 8 + mma::b_column<int64_t>(13, i);
    CHECK(at(ast, element->src(0)->src(1), where) == expected);
  }
  // Store i writes accumulator element i at its row and column.
  for (int i = 0; i < mma::kCElements; ++i) {
    CAPTURE(i);
    const UOpPtr& written = ast->src(static_cast<size_t>(i));
    REQUIRE(written->src(1)->op() == Ops::GEP);
    CHECK(written->src(1)->arg_list() == std::vector<int64_t>{i});
    int64_t expected = (2 * 16 + mma::c_row<int64_t>(13, i)) * 32 + 1 * 8 + mma::c_column<int64_t>(13, i);
    CHECK(at(ast, written->src(0)->src(1), where) == expected);
    CHECK(written->src(0)->src_count() == 2);  // whole tiles: no mask
  }
}

TEST_CASE("ragged extents: clamped loads, zeroed padding steps, masked stores") {
  TensorCoreKernel cores = gpu_tensor_cores(matmul(20, 40, 24), false);  // rows 20 → 2 tiles, K 40 → 3 steps
  REQUIRE(cores.lane_axis >= 0);
  const UOpPtr& ast = cores.ast;
  for (const UOpPtr& written : ast->srcs()) CHECK(written->src(0)->src_count() == 3);  // a valid mask
  // Lane 31 of row tile 1 stores rows 16 + 7 = 23 and 16 + 15 = 31, both past the 20 rows: masked.
  const UOpPtr& last = ast->src(0);
  std::unordered_map<int64_t, int64_t> where{{0, 1}, {1, 0}, {cores.lane_axis, 31}};
  CHECK(at(ast, last->src(0)->src(2), where) == 0);
  where[cores.lane_axis] = 8;  // row 16 + 2 = 18: stored
  CHECK(at(ast, last->src(0)->src(2), where) == 1);
  // Step 2 covers k 32..47 of 40: lane 0's A elements 4..7 (columns 8, 9) are past the end → 0.
  const UOp* wmma = only(ast, Ops::WMMA);
  CHECK(wmma->src(0)->src(4)->op() == Ops::WHERE);
}

TEST_CASE("kernels that do not qualify stay as they are") {
  UOpPtr f32 = matmul(64, 48, 32, dtypes::f32);
  CHECK(gpu_tensor_cores(f32, false).lane_axis == -1);
  CHECK(gpu_tensor_cores(f32, false).ast == f32);
  CHECK(gpu_tensor_cores(matmul(64, 8, 32), false).lane_axis == -1);   // K below 16
  CHECK(gpu_tensor_cores(matmul(2, 64, 64), false).lane_axis == -1);   // 2 rows: most of each tile padding
  // A depthwise product: both factors read the channel, so no axis is one factor's own.
  UOpPtr c = range(32, 0), p = range(64, 1), k = range(16, 1000);
  UOpPtr x = load(index(global(dtypes::f16, 32 * 64 * 16, 1), (c * idx(64) + p) * idx(16) + k));
  UOpPtr w = load(index(global(dtypes::f16, 32 * 16, 2), c * idx(16) + k));
  UOpPtr sum = reduce(Ops::ADD, cast(x, dtypes::f32) * cast(w, dtypes::f32), {k});
  UOpPtr depthwise = kernel("r_dw", {store(index(global(dtypes::f32, 32 * 64, 0), c * idx(64) + p), sum)});
  CHECK(gpu_tensor_cores(depthwise, false).lane_axis == -1);
}

TEST_CASE("bf16 operands: where the target takes them, the same tiles as f16, a bf16 WMMA") {
  UOpPtr bf16 = matmul(64, 48, 32, dtypes::bf16);
  CHECK(gpu_tensor_cores(bf16, false).lane_axis == -1);  // sm_75: f16 tensor cores only
  TensorCoreKernel cores = gpu_tensor_cores(bf16, true);
  REQUIRE(cores.lane_axis >= 0);
  const UOp* wmma = only(cores.ast, Ops::WMMA);
  CHECK(wmma->arg_string() == mma::kNameBF16);
  CHECK(wmma->src(0)->dtype() == dtypes::bf16.vec(mma::kAElements));
  CHECK(wmma->src(1)->dtype() == dtypes::bf16.vec(mma::kBElements));
  TensorCoreKernel f16 = gpu_tensor_cores(matmul(64, 48, 32), true);
  CHECK(only(f16.ast, Ops::WMMA)->arg_string() == mma::kNameF16);
  // Ragged K pads the steps with a bf16 zero.
  TensorCoreKernel ragged_kernel = gpu_tensor_cores(matmul(64, 40, 32, dtypes::bf16), true);
  const UOp* ragged = only(ragged_kernel.ast, Ops::WMMA);
  REQUIRE(ragged->src(0)->src(4)->op() == Ops::WHERE);
  CHECK(ragged->src(0)->src(4)->dtype() == dtypes::bf16);
  // One f16 factor and one bf16 factor: no instruction takes both.
  UOpPtr m = range(64, 0), n = range(32, 1), k = range(48, 1000);
  UOpPtr a = load(index(global(dtypes::f16, 64 * 48, 1), m * idx(48) + k));
  UOpPtr b = load(index(global(dtypes::bf16, 48 * 32, 2), k * idx(32) + n));
  UOpPtr sum = reduce(Ops::ADD, cast(a, dtypes::f32) * cast(b, dtypes::f32), {k});
  UOpPtr mixed = kernel("r_mixed", {store(index(global(dtypes::f32, 64 * 32, 0), m * idx(32) + n), sum)});
  CHECK(gpu_tensor_cores(mixed, true).lane_axis == -1);
}

TEST_CASE("CUDA takes bf16 tensor cores from sm_80 on") {
  CHECK(cuda_target_caps(75).tensor_cores == (env_integer("KILN_GPU_TENSOR_CORES", 1) != 0));
  CHECK_FALSE(cuda_target_caps(75).bf16_tensor_cores);
  CHECK(cuda_target_caps(90).bf16_tensor_cores == cuda_target_caps(90).tensor_cores);
}

TEST_CASE("register tiles on tensor-core kernels: a warp's several tiles share their A and B fragments") {
  // 64 × 32 outputs: 4 row tiles × 4 column tiles; a 4 × 4 register tile gives one warp all 16.
  TensorCoreKernel cores = gpu_tensor_cores(matmul(64, 48, 32), false);
  UOpPtr tiled = gpu_register_tiles(cores.ast, 4, 1);
  int unrolls = 0;
  for (const UOp* r : kernel_ranges(tiled)) unrolls += axis_kind(r->arg_int()) == AxisKind::Unroll;
  CHECK(unrolls == 2);  // the row tiles' and the column tiles' axes; never the lane's
  UOpPtr expanded = expand_unrolls(tiled);
  CHECK(count_ops(expanded, Ops::WMMA) == 16);
  CHECK(expanded->src_count() == 16 * mma::kCElements);
  // Each WMMA's A operand is one of 4 (a row tile's) and its B one of 4 (a column tile's).
  std::set<const UOp*> a_operands, b_operands;
  for (const UOp* node : toposort(expanded))
    if (node->op() == Ops::WMMA) {
      a_operands.insert(node->src(0).get());
      b_operands.insert(node->src(1).get());
    }
  CHECK(a_operands.size() == 4);
  CHECK(b_operands.size() == 4);
}

TEST_CASE("the grid keeps a tile's 32 lanes in one warp") {
  TensorCoreKernel cores = gpu_tensor_cores(matmul(64, 48, 32), false);
  GridKernel grid = merge_output_axes_into_grid(cores.ast, 32, 256, cores.lane_axis);
  CHECK(grid.group_size == 0);
  CHECK(count_ops(grid.ast, Ops::SHUFFLE_XOR) == 0);
  std::vector<const UOp*> ranges = kernel_ranges(grid.ast);
  REQUIRE(ranges.front()->arg_int() == 0);
  CHECK(ranges.front()->src(0)->const_int() == 4 * 4 * 32);
  // Threads 32w .. 32w + 31 store one tile: lane l's element 0 at its row and column.
  const UOpPtr& stored = grid.ast->src(0)->src(0)->src(1);
  int64_t tile_origin = at(grid.ast, stored, {{0, 5 * 32}}) - (mma::c_row<int64_t>(0, 0) * 32 + mma::c_column<int64_t>(0, 0));
  for (int64_t lane = 0; lane < 32; ++lane) {
    CAPTURE(lane);
    CHECK(at(grid.ast, stored, {{0, 5 * 32 + lane}}) ==
          tile_origin + mma::c_row<int64_t>(lane, 0) * 32 + mma::c_column<int64_t>(lane, 0));
  }
}

TEST_CASE("rendered: mma.sync on CUDA (two m16n8k8 on sm_75), a local-memory emulation on OpenCL") {
  TensorCoreKernel cores = gpu_tensor_cores(matmul(64, 48, 32), false);
  UOpPtr ast = merge_output_axes_into_grid(cores.ast, 32, 256, cores.lane_axis).ast;
  std::string sm90 = cuda_render_kernel(ast, cuda_device_features(90)).source;
  CHECK(sm90.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32") != std::string::npos);
  std::string sm75 = cuda_render_kernel(ast, cuda_device_features(75)).source;
  CHECK(sm75.find("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32") != std::string::npos);
  CHECK(sm75.find("m16n8k16") == std::string::npos);
  CHECK_THROWS_WITH_AS(cuda_render_kernel(ast, cuda_device_features(70)),
                       doctest::Contains("KILN_GPU_TENSOR_CORES=0"), UserError);
  std::string opencl = opencl_render_kernel(ast, CDeviceFeatures{"test device", true, true}).source;
  CHECK(opencl.find("__local float kiln_mma_a[256];") != std::string::npos);
  CHECK(opencl.find("barrier(CLK_LOCAL_MEM_FENCE);") != std::string::npos);
}

TEST_CASE("rendered bf16: m16n8k16.bf16 on sm_80 and newer, refused on sm_75, emulated on OpenCL") {
  TensorCoreKernel cores = gpu_tensor_cores(matmul(64, 48, 32, dtypes::bf16), true);
  UOpPtr ast = merge_output_axes_into_grid(cores.ast, 32, 256, cores.lane_axis).ast;
  std::string sm80 = cuda_render_kernel(ast, cuda_device_features(80)).source;
  CHECK(sm80.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
  CHECK_THROWS_WITH_AS(cuda_render_kernel(ast, cuda_device_features(75)), doctest::Contains("need sm_80"), UserError);
  std::string opencl = opencl_render_kernel(ast, CDeviceFeatures{"test device", true, true}).source;
  CHECK(opencl.find("kiln_mma_a[") != std::string::npos);
  CHECK(opencl.find("kiln_f16_to_f32") == std::string::npos);  // bf16 widens by a shift, not as f16
}

}  // TEST_SUITE
