// 8-bit dot products on CPUs (src/opt/dot_products.h): which kernels get the dot-product tile, that
// lowering turns their unrolled steps into vpdpbusd WMMAs with one vector load of b per
// instruction and one broadcast of a, and, where the host has the instruction, that the kernel's
// results are the exact i32 sums.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "codegen/codegen_test_helpers.h"
#include "codegen/target.h"
#include "opt/dot_products.h"
#include "opt/opt.h"
#include "passes/pipeline.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

TargetCaps avx512_vnni() {
  TargetCaps caps;
  caps.name = "test-avx512-vnni";
  caps.vector_bytes = 64;
  caps.vector_registers = 32;
  caps.dot_product_bytes = 64;
  return caps;
}

// out[m][n] = Σk a[m][k] · b[k][n] in i32, a u8 (rows × depth, row-major) and b s8. `panels`: b in
// dot-product panels of `lanes` columns, (N/lanes, K/4, lanes, 4), its steps k = 4·k4 + t as two
// reduce loops (as the scheduler writes the panel view); otherwise b row-major and one loop.
UOpPtr matmul_8bit(int64_t rows, int64_t depth, int64_t columns, bool panels, int64_t lanes = 16) {
  UOpPtr m = range(rows, 0), n = range(columns, 1);
  UOpPtr a_buffer = global(dtypes::u8, rows * depth, 1), b_buffer = global(dtypes::i8, depth * columns, 2);
  UOpPtr a, b;
  std::vector<UOpPtr> steps;
  if (panels) {
    UOpPtr k4 = range(depth / 4, 1000), t = range(4, 1001);
    steps = {k4, t};
    a = load(index(a_buffer, m * idx(depth) + k4 * idx(4) + t));
    b = load(index(b_buffer, n / idx(lanes) * idx(depth * lanes) + k4 * idx(4 * lanes) + n % idx(lanes) * idx(4) + t));
  } else {
    UOpPtr k = range(depth, 1000);
    steps = {k};
    a = load(index(a_buffer, m * idx(depth) + k));
    b = load(index(b_buffer, k * idx(columns) + n));
  }
  UOpPtr sum = reduce(Ops::ADD, cast(a, dtypes::i32) * cast(b, dtypes::i32), steps);
  return kernel("r_matmul_8bit", {store(index(global(dtypes::i32, rows * columns, 0), m * idx(columns) + n), sum)});
}

int count_wmma(const UOpPtr& ast) {
  int count = 0;
  for (const UOp* node : toposort(ast)) count += node->op() == Ops::WMMA && node->arg_string() == kDotProduct;
  return count;
}

}  // namespace

TEST_CASE("dot products: the tile of an 8-bit matmul with b in panels") {
  std::optional<std::vector<Opt>> opts = dot_product_tile(matmul_8bit(9, 64, 64, true), avx512_vnni());
  REQUIRE(opts.has_value());
  // 16 lanes, two vector columns, 3 rows (9 rows: the largest tile of 8, 6, 4, 3, 2 dividing
  // them), the steps unrolled by 4.
  std::vector<Opt> expected{Opt{OptOp::Upcast, 1, 16}, Opt{OptOp::Unroll, 1, 2}, Opt{OptOp::Unroll, 0, 3},
                            Opt{OptOp::Unroll, 1001, 4}};
  CHECK(*opts == expected);
  // 16 registers (AVX-VNNI, 8 lanes): at most 4 rows.
  TargetCaps narrow = avx512_vnni();
  narrow.vector_bytes = 32;
  narrow.vector_registers = 16;
  narrow.dot_product_bytes = 32;
  std::optional<std::vector<Opt>> narrow_opts = dot_product_tile(matmul_8bit(12, 64, 64, true, 8), narrow);
  REQUIRE(narrow_opts.has_value());
  CHECK(narrow_opts->front() == Opt{OptOp::Upcast, 1, 8});
  CHECK((*narrow_opts)[2] == Opt{OptOp::Unroll, 0, 4});
}

TEST_CASE("dot products: kernels that do not qualify") {
  // No instruction on the target.
  TargetCaps none = avx512_vnni();
  none.dot_product_bytes = 0;
  CHECK_FALSE(dot_product_tile(matmul_8bit(9, 64, 64, true), none).has_value());
  // b row-major: its 4 steps of a lane are a row apart, no vector load.
  CHECK_FALSE(dot_product_tile(matmul_8bit(9, 64, 64, false), avx512_vnni()).has_value());
  // Both operands signed: vpdpbusd multiplies unsigned by signed bytes.
  UOpPtr m = range(4, 0), n = range(32, 1), k4 = range(16, 1000), t = range(4, 1001);
  UOpPtr a = load(index(global(dtypes::i8, 4 * 64, 1), m * idx(64) + k4 * idx(4) + t));
  UOpPtr b = load(index(global(dtypes::i8, 64 * 32, 2), n / idx(16) * idx(1024) + k4 * idx(64) + n % idx(16) * idx(4) + t));
  UOpPtr sum = reduce(Ops::ADD, cast(a, dtypes::i32) * cast(b, dtypes::i32), {k4, t});
  UOpPtr signed_kernel = kernel("r_signed", {store(index(global(dtypes::i32, 4 * 32, 0), m * idx(32) + n), sum)});
  CHECK_FALSE(dot_product_tile(signed_kernel, avx512_vnni()).has_value());
  // Columns that are not whole vectors, not even of the instruction's half width.
  CHECK_FALSE(dot_product_tile(matmul_8bit(9, 64, 20, true, 4), avx512_vnni()).has_value());
}

TEST_CASE("dot products: columns that are whole vectors of half the width take the 256-bit form") {
  // 24 columns (a conv's 24 filters) on an AVX-512 VNNI target: 8 lanes, b in panels of 8.
  UOpPtr ast = matmul_8bit(9, 64, 24, true, 8);
  std::optional<std::vector<Opt>> opts = dot_product_tile(ast, avx512_vnni());
  REQUIRE(opts.has_value());
  CHECK(opts->front() == Opt{OptOp::Upcast, 1, 8});
  UOpPtr lowered = use_dot_products(lower_kernel(apply_opts(ast, *opts)), 16);
  REQUIRE(count_wmma(lowered) > 0);
  for (const UOp* node : toposort(lowered))
    if (node->op() == Ops::WMMA) CHECK(node->dtype() == dtypes::i32.vec(8));
}

TEST_CASE("dot products: lowering makes one WMMA per accumulator and step group, b one vector load") {
  UOpPtr ast = matmul_8bit(9, 64, 64, true);
  std::vector<Opt> opts = *dot_product_tile(ast, avx512_vnni());
  UOpPtr lowered = use_dot_products(lower_kernel(apply_opts(ast, opts)), 16);
  CHECK(count_wmma(lowered) == 3 * 2);  // 3 rows × 2 vector columns
  for (const UOp* node : toposort(lowered)) {
    if (node->op() != Ops::WMMA) continue;
    const UOpPtr& a = node->src(0);
    const UOpPtr& b = node->src(1);
    CHECK(a->dtype() == dtypes::u8.vec(64));
    CHECK(b->dtype() == dtypes::i8.vec(64));
    CHECK(b->op() == Ops::LOAD);  // 64 consecutive bytes of the panel
    REQUIRE(a->op() == Ops::VECTORIZE);
    for (size_t lane = 4; lane < 64; ++lane) CHECK(a->src(lane) == a->src(lane % 4));  // one 4-byte group
  }
  // Lanes of another width than the tile's: nothing changes.
  UOpPtr plain = lower_kernel(apply_opts(ast, opts));
  CHECK(use_dot_products(plain, 8) == plain);
}

namespace {

// Runs the host's dot-product kernel of a rows × depth × columns matmul, b in panels of `lanes`
// columns, and checks its sums against exact ones.
void check_host_sums(int64_t lanes, int64_t columns) {
  TargetCaps caps = host_cpu_caps();
  const int64_t rows = 6, depth = 96;
  UOpPtr ast = matmul_8bit(rows, depth, columns, true, lanes);
  std::optional<std::vector<Opt>> opts = dot_product_tile(ast, caps);
  REQUIRE(opts.has_value());
  UOpPtr lowered = use_dot_products(lower_kernel(apply_opts(ast, *opts)), caps.dot_product_bytes / 4);
  REQUIRE(count_wmma(lowered) > 0);
  KernelFunction run = compile_and_load(lowered);

  // a covers 0 and 255, b -128 and 127: the products' extremes (4·255·-128 per lane and step group).
  std::vector<uint8_t> a(static_cast<size_t>(rows * depth));
  std::vector<int8_t> b(static_cast<size_t>(depth * columns)), panels(b.size());
  for (size_t e = 0; e < a.size(); ++e) a[e] = static_cast<uint8_t>(e % 3 == 0 ? 255 : (e * 37) % 256);
  for (size_t e = 0; e < b.size(); ++e) b[e] = static_cast<int8_t>(e % 5 == 0 ? -128 : static_cast<int>((e * 53) % 256) - 128);
  for (int64_t k = 0; k < depth; ++k)
    for (int64_t n = 0; n < columns; ++n)
      panels[static_cast<size_t>(n / lanes * depth * lanes + k / 4 * 4 * lanes + n % lanes * 4 + k % 4)] =
          b[static_cast<size_t>(k * columns + n)];
  // The kernel's loads and stores are aligned to the buffers' 64 bytes, as a plan's arena gives them.
  TestBuffer a_data(dtypes::u8, rows * depth), b_data(dtypes::i8, depth * columns), out(dtypes::i32, rows * columns);
  std::memcpy(a_data.data(), a.data(), a.size());
  std::memcpy(b_data.data(), panels.data(), panels.size());
  void* buffers[] = {out.data(), a_data.data(), b_data.data()};
  run(buffers, 0, rows);
  int mismatches = 0;
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t n = 0; n < columns; ++n) {
      int64_t expected = 0;
      for (int64_t k = 0; k < depth; ++k)
        expected += int64_t{a[static_cast<size_t>(m * depth + k)]} * int64_t{b[static_cast<size_t>(k * columns + n)]};
      mismatches += out.as<int32_t>()[m * columns + n] != expected;
    }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("dot products: the host's instruction gives the exact sums") {
  const int lanes = host_cpu_caps().dot_product_bytes / 4;
  if (lanes == 0) {
    MESSAGE("this CPU has no 8-bit dot-product instruction: nothing to run");
    return;
  }
  check_host_sums(lanes, 4 * lanes);
  if (lanes == 16) check_host_sums(8, 24);  // the 256-bit form on an AVX-512 VNNI host
}
