// CUDA C from the renderer through NVRTC: every ALU op of every data dtype (f16, bf16 and f64 too),
// CAST and BITCAST between every pair, reductions, vector lanes and masks compile to PTX and to a
// cubin (NVRTC's ptxas) for the newest and the oldest architecture this NVRTC knows. What the kernels
// compute is checked where they run: on a GPU (a later stage of issue 15); the same renderer's
// results on OpenCL are checked bit for bit against the IR evaluator (tests/opencl/test_opencl_alu.cpp).
#include <doctest/doctest.h>

#include <algorithm>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "opt/gpu_grid.h"
#include "opt/gpu_tensor_cores.h"
#include "opt/gpu_tiles.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<int> architectures() {
  const NvrtcInfo* info = nvrtc_info(nullptr);
  REQUIRE(info != nullptr);
  REQUIRE(!info->architectures.empty());
  int oldest = *std::min_element(info->architectures.begin(), info->architectures.end());
  int newest = *std::max_element(info->architectures.begin(), info->architectures.end());
  return oldest == newest ? std::vector<int>{newest} : std::vector<int>{oldest, newest};
}

// Renders `ast` and compiles it for each architecture; checks the products are what the driver loads.
void compile_everywhere(const UOpPtr& ast) {
  for (int architecture : architectures()) {
    CAPTURE(architecture);
    RenderedKernel rendered = cuda_render_kernel(ast, cuda_device_features(architecture));
    CudaBinary binary;
    INFO(rendered.source);
    REQUIRE_NOTHROW(binary = compile_cuda(rendered.source, rendered.name + ".cu", architecture));
    CHECK(binary.ptx.find(".entry " + rendered.name + "(") != std::string::npos);
    CHECK(binary.ptx.find(str_cat(".target sm_", architecture)) != std::string::npos);
    REQUIRE(binary.cubin.size() > 4);
    CHECK(binary.cubin.compare(0, 4, "\x7f" "ELF") == 0);
  }
}

// out = a (rows × 72) · b (72 × columns), both of `operand` type, summed in f32 and stored as
// `operand`: 72 is ragged (4.5 steps of 16).
UOpPtr narrow_matmul(int64_t rows, int64_t columns, DType operand, const std::string& name) {
  UOpPtr m = range(rows, 0), n = range(columns, 1), k = range(72, 1000);
  UOpPtr a = load(index(global(operand, rows * 72, 1), m * idx(72) + k));
  UOpPtr b = load(index(global(operand, 72 * columns, 2), k * idx(columns) + n));
  UOpPtr sum = reduce(Ops::ADD, cast(a, dtypes::f32) * cast(b, dtypes::f32), {k});
  return kernel(name, {store(index(global(operand, rows * columns, 0), m * idx(columns) + n), cast(sum, operand))});
}

}  // namespace

TEST_SUITE("cuda-nvrtc") {

TEST_CASE("every ALU op of every data dtype compiles") {
  for (DType dtype : dtypes::all_data_scalars) {
    CAPTURE(dtype.name());
    const int64_t n = 64;
    UOpPtr i = range(n, 0);
    UOpPtr a = load(index(global(dtype, n, 0), i)), b = load(index(global(dtype, n, 1), i));
    UOpPtr c = load(index(global(dtype, n, 2), i));
    std::vector<UOpPtr> stores;
    std::vector<Ops> ops = alu_ops_of(dtype);
    for (size_t o = 0; o < ops.size(); ++o) {
      Ops op = ops[o];
      DType result = op == Ops::CMPLT || op == Ops::CMPNE || op == Ops::CMPEQ ? dtypes::bool_ : dtype;
      std::vector<UOpPtr> sources{a};
      if (op == Ops::WHERE) sources = {UOp::make(Ops::CMPLT, dtypes::bool_, {a, b}), b, c};
      else if (op == Ops::MULACC) sources = {a, b, c};
      else if (op_group(op) == OpGroup::Binary) sources.push_back(b);
      stores.push_back(store(index(global(result, n, static_cast<int64_t>(3 + o)), i), UOp::make(op, result, sources)));
    }
    compile_everywhere(kernel("alu_" + dtype.name(), stores));
  }
}

TEST_CASE("CAST and BITCAST between every pair of data dtypes compile") {
  for (DType from : dtypes::all_data_scalars) {
    CAPTURE(from.name());
    const int64_t n = 16;
    UOpPtr i = range(n, 0);
    UOpPtr x = load(index(global(from, n, 0), i));
    std::vector<UOpPtr> stores;
    int64_t slot = 1;
    for (DType to : dtypes::all_data_scalars) {
      stores.push_back(store(index(global(to, n, slot++), i), UOp::make(Ops::CAST, to, {x})));
      if (to.scalar_bytes() == from.scalar_bytes() && to != from)
        stores.push_back(store(index(global(to, n, slot++), i), UOp::make(Ops::BITCAST, to, {x})));
    }
    compile_everywhere(kernel("cast_" + from.name(), stores));
  }
}

TEST_CASE("reductions, masked loads and stores, and vector lanes compile") {
  UOpPtr i = range(4, 0), j = range(8, 1000);
  UOpPtr in = global(dtypes::f32, 32, 1);
  UOpPtr at = UOp::make(Ops::ADD, dtypes::index, {UOp::make(Ops::MUL, dtypes::index, {i, idx(8)}), j});
  compile_everywhere(kernel("r_sum_max", {store(index(global(dtypes::f32, 4, 0), i), reduce(Ops::ADD, load(index(in, at)), {j})),
                                          store(index(global(dtypes::f32, 4, 2), i), reduce(Ops::MAX, load(index(in, at)), {j}))}));
  UOpPtr k = range(16, 0);
  UOpPtr valid = UOp::make(Ops::CMPLT, dtypes::bool_, {k, idx(10)});
  UOpPtr value = load(index(global(dtypes::i32, 10, 1), k, valid), const_int(dtypes::i32, -1));
  compile_everywhere(kernel("masked", {store(index(global(dtypes::i32, 16, 0), k, valid), value)}));
  DType f32x4(ScalarType::Float32, 4);
  UOpPtr r = range(2, 0);
  UOpPtr vat = UOp::make(Ops::MUL, dtypes::index, {r, idx(4)});
  UOpPtr vector = UOp::make(Ops::LOAD, f32x4, {index(global(dtypes::f32, 8, 1), vat)});
  UOpPtr lane2 = UOp::make(Ops::GEP, dtypes::f32, {vector}, std::vector<int64_t>{2});
  UOpPtr splat = UOp::make(Ops::VECTORIZE, f32x4, {lane2, lane2, lane2, lane2});
  compile_everywhere(kernel("vec", {store(index(global(dtypes::f32, 8, 0), vat), vector * splat)}));
}

TEST_CASE("a tensor-core matmul compiles to mma.sync: m16n8k8 pairs on sm_75, m16n8k16 from sm_80") {
  // 60 ragged rows, 32 columns.
  TensorCoreKernel cores = gpu_tensor_cores(narrow_matmul(60, 32, dtypes::f16, "r_60_32_tc"), false);
  REQUIRE(cores.lane_axis >= 0);
  // One tile per warp, and one warp for all 4 × 4 tiles (register tiles: 16 mma per step).
  for (int tile : {1, 4}) {
    CAPTURE(tile);
    UOpPtr tiled = gpu_register_tiles(cores.ast, tile, 1);
    UOpPtr grid = merge_output_axes_into_grid(tiled, 32, 256, cores.lane_axis).ast;
    compile_everywhere(grid);
    for (int architecture : architectures()) {
      CAPTURE(architecture);
      RenderedKernel rendered = cuda_render_kernel(grid, cuda_device_features(architecture));
      size_t calls = 0;
      for (size_t at = rendered.source.find("  kiln_mma_"); at != std::string::npos; at = rendered.source.find("  kiln_mma_", at + 1)) ++calls;
      CHECK(calls == (tile == 1 ? 1u : 16u));
      std::string ptx = compile_cuda(rendered.source, rendered.name + ".cu", architecture).ptx;
      CHECK(ptx.find(architecture >= 80 ? "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
                                        : "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32") != std::string::npos);
    }
  }
}

TEST_CASE("a bf16 tensor-core matmul compiles to mma.sync m16n8k16.bf16 from sm_80") {
  TensorCoreKernel cores = gpu_tensor_cores(narrow_matmul(40, 24, dtypes::bf16, "r_40_24_tc_bf16"), true);
  REQUIRE(cores.lane_axis >= 0);
  UOpPtr grid = merge_output_axes_into_grid(cores.ast, 32, 256, cores.lane_axis).ast;
  int compiled = 0;
  for (int architecture : architectures()) {
    if (architecture < 80) continue;
    CAPTURE(architecture);
    RenderedKernel rendered = cuda_render_kernel(grid, cuda_device_features(architecture));
    INFO(rendered.source);
    std::string ptx = compile_cuda(rendered.source, rendered.name + ".cu", architecture).ptx;
    CHECK(ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") != std::string::npos);
    ++compiled;
  }
  CHECK(compiled > 0);  // NVRTC 13 knows sm_80 and newer
}

TEST_CASE("a compile error names the kernel and carries NVRTC's log; an unknown architecture is named") {
  CHECK_THROWS_WITH_AS(compile_cuda("extern \"C\" __global__ void broken() { undeclared_name = 1; }", "broken.cu", 90),
                       doctest::Contains("CUDA C of 'broken.cu' does not compile"), UserError);
  CHECK_THROWS_WITH_AS(compile_cuda("extern \"C\" __global__ void broken() { undeclared_name = 1; }", "broken.cu", 90),
                       doctest::Contains("undeclared_name"), UserError);
  CHECK_THROWS_WITH_AS(compile_cuda("extern \"C\" __global__ void empty() {}", "empty.cu", 11),
                       doctest::Contains("unsupported: CUDA architecture sm_11: NVRTC"), UserError);
}

}  // TEST_SUITE
