// next_tile_prefetch_offset (src/codegen/llvm/next_tile_prefetch.h): which vector loads the CPU
// renderer prefetches one outer-loop iteration ahead, and how far. Whether the prefetches pay is a
// benchmark question (bench/README.md); the kernels that carry them run in every model test.
#include "codegen/llvm/next_tile_prefetch.h"

#include "codegen_test_helpers.h"

namespace kiln {
namespace {

using testing::global;
using testing::idx;
using testing::index;

constexpr int64_t kL2 = 2 << 20;

UOpPtr vector_load(const UOpPtr& buffer, const UOpPtr& offset, int lanes = 16) {
  return UOp::make(Ops::LOAD, dtypes::f32.vec(lanes), {index(buffer, offset)});
}

TEST_CASE("next-tile prefetch: a weight strip read by several passes of a tile") {
  // for tile in 0..16, for row in 0..7, for k in 0..2048: load w[tile * 32768 + k * 16 : +16]
  UOpPtr weights = global(dtypes::f32, 16 * 32768, 1);
  UOpPtr tile = range(16, 0), row = range(7, 1), k = range(2048, 1000);
  UOpPtr strip = vector_load(weights, tile * idx(32768) + k * idx(16));
  std::vector<const UOp*> loops{tile.get(), row.get(), k.get()};
  CHECK(next_tile_prefetch_offset(*strip, loops, kL2) == 32768);
}

TEST_CASE("next-tile prefetch: a strip read by many passes is not prefetched") {
  // A matmul's column strip: for strip, for row tile, for k. Every pass issues the prefetches.
  UOpPtr b = global(dtypes::f32, 1 << 24, 1);
  UOpPtr strip = range(32, 0), k = range(1024, 1000);
  UOpPtr at_bound = range(kMaxPrefetchPasses, 1), beyond = range(kMaxPrefetchPasses + 1, 1);
  UOpPtr load = vector_load(b, strip * idx(32768) + k * idx(32));
  std::vector<const UOp*> few{strip.get(), at_bound.get(), k.get()}, many{strip.get(), beyond.get(), k.get()};
  CHECK(next_tile_prefetch_offset(*load, few, kL2) == 32768);
  CHECK_FALSE(next_tile_prefetch_offset(*load, many, kL2));
  // The passes are the product of the tile's output loops: 8 × 8 row tiles of an image are 64.
  UOpPtr rows = range(8, 1), columns = range(8, 2);
  std::vector<const UOp*> image{strip.get(), rows.get(), columns.get(), k.get()};
  CHECK_FALSE(next_tile_prefetch_offset(*load, image, kL2));
}

TEST_CASE("next-tile prefetch: what is not prefetched") {
  UOpPtr weights = global(dtypes::f32, 1 << 24, 1);
  UOpPtr tile = range(16, 0), row = range(7, 1), k = range(2048, 1000);
  std::vector<const UOp*> loops{tile.get(), row.get(), k.get()};
  // A matrix-vector product: one pass per tile, a stream the hardware follows.
  std::vector<const UOp*> one_pass{tile.get(), k.get()};
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, tile * idx(32768) + k * idx(16)), one_pass, kL2));
  // The load moves with the rows too: each pass reads a strip of its own.
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, tile * idx(32768) + row * idx(4096) + k * idx(16)), loops, kL2));
  // Outside the reduction loop (an epilogue's bias).
  std::vector<const UOp*> outside{tile.get(), row.get()};
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, tile * idx(32768)), outside, kL2));
  // A scalar load (a broadcast row value).
  UOpPtr scalar = UOp::make(Ops::LOAD, dtypes::f32, {index(weights, tile * idx(32768) + k)});
  CHECK_FALSE(next_tile_prefetch_offset(*scalar, loops, kL2));
  // The next tile is the stream's own continuation (4 KB or less ahead) ...
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, tile * idx(512) + k * idx(16)), loops, kL2));
  // ... or its strip would not fit in the L2 beside this tile's (more than a quarter of it).
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, tile * idx(147456) + k * idx(16)), loops, kL2));
  CHECK(next_tile_prefetch_offset(*vector_load(weights, tile * idx(147456) + k * idx(16)), loops, 4 * kL2) == 147456);
  // Not affine in the tile (a merged axis read through a division).
  CHECK_FALSE(next_tile_prefetch_offset(*vector_load(weights, (tile / idx(2)) * idx(32768) + k * idx(16)), loops, kL2));
}

}  // namespace
}  // namespace kiln
