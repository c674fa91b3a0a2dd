// Next-tile prefetch: a register-tiled conv or matmul reads a strip of its weights for every tile of
// the outermost loop (16-32 filters × the whole reduction) and reads it again on each pass over the
// tile's pixel rows. Only the first pass finds the strip out of cache, and at small images (7×7,
// 14×14) that pass waits on memory for longer than the tile's whole computation: the hardware
// prefetchers follow the strip only once it is being read. The CPU renderer therefore issues, with
// each such vector load, a prefetch of the same element one outer iteration ahead, so the next
// tile's strip arrives in the L2 while this tile computes (docs/optimisation.md, "Prefetching the
// next tile").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ir/uop.h"

namespace kiln {

// Bytes between an access and its copy one tile ahead, below which the hardware's own prefetchers
// already have the next tile (it is the continuation of the stream being read).
constexpr int64_t kMinPrefetchStrideBytes = 4096;

// Passes over a tile's strip above which it is not prefetched: the prefetches are issued on every
// pass and help only the first. A 1024³ matmul (128 passes) ran 3 % faster without them, VGG-19's
// 3x3 convs at 56×56 2-4 %; BERT's products (16 passes) ran 7 % slower with the bound at 8.
constexpr int64_t kMaxPrefetchPasses = 32;

// The element offset to prefetch `load` at (its index plus this is the same element for the next
// iteration of the outermost loop), when the load qualifies: a vector load from a global input buffer
// inside a reduce loop, whose index steps by a constant along the outermost open loop (constant_step:
// at least kMinPrefetchStrideBytes, at most a quarter of the L2) and is independent of every other
// open output loop, which must exist (several passes per tile, at most kMaxPrefetchPasses).
// `open_loops` are the RANGEs enclosing the load, outermost first. Set KILN_PREFETCH=0 to turn
// this off.
std::optional<int64_t> next_tile_prefetch_offset(const UOp& load, std::span<const UOp* const> open_loops,
                                                 int64_t l2_bytes);

// What the prefetches depend on besides the kernel AST ("prefetch off", or the L2 size): part of the
// kernel cache's key, so an object compiled under another setting is never reused.
std::string next_tile_prefetch_setting(int64_t l2_bytes);

}  // namespace kiln
