// The hand-coded optimisation heuristics; see heuristics.h. This file picks which rule a kernel
// gets; the rules live in tile_opts.cpp, symbolic_tiles.cpp and thread_blocks.cpp (declared in
// heuristics_internal.h), the questions they ask of a kernel in kernel_analysis.h.
#include "opt/heuristics.h"

#include <algorithm>
#include <optional>

#include "opt/dot_products.h"
#include "opt/heuristics_internal.h"
#include "opt/kernel_analysis.h"
#include "support/debug.h"

namespace kiln {

namespace heuristics {

std::vector<Opt> tile_opts_of(const UOpPtr& kernel, const TargetCaps& caps) {
  if (std::optional<std::vector<Opt>> merged = merged_pixel_block_opts(kernel, caps)) return *merged;
  if (std::optional<std::vector<Opt>> blocks = vector_block_opts(kernel, caps)) return *blocks;
  if (const UOp* rows = symbolic_row_loop(kernel)) {
    Opt split{OptOp::Split, rows->arg_int(), symbolic_row_block(kernel)};
    UOpPtr blocked = apply_opt(kernel, split);
    std::vector<Opt> tiles = constant_loop_opts(blocked, caps);
    std::vector<const UOp*> ranges = kernel_ranges(blocked);
    int64_t block_axis = 0;
    for (const UOp* range : ranges)
      if (axis_kind(range->arg_int()) == AxisKind::Loop) block_axis = std::max(block_axis, range->arg_int());
    bool tiles_rows = std::any_of(tiles.begin(), tiles.end(), [&](const Opt& opt) {
      return opt.op == OptOp::Unroll && opt.axis == block_axis;
    });
    if (tiles_rows) {
      tiles.insert(tiles.begin(), split);
      return tiles;
    }
  }
  if (std::optional<std::vector<Opt>> reduced = symbolic_reduce_vector_opts(kernel, caps)) return *reduced;
  std::vector<Opt> opts = constant_loop_opts(kernel, caps);
  if (opts.empty())
    if (std::optional<std::vector<Opt>> transposed = transposed_block_opts(kernel, caps)) return *transposed;
  return opts;
}

}  // namespace heuristics

using namespace heuristics;

Dim parallel_extent_of(const UOpPtr& kernel) {
  for (const UOp* range : kernel_ranges(kernel))
    if (range->arg_int() == 0) return Dim(range->src(0));
  return 1;
}

namespace {

// with_row_blocks, unless KILN_ROW_BLOCKS=0, the target lays kernels out as a GPU grid, or there
// are no tile opts to add blocks to.
std::optional<std::vector<Opt>> row_blocks_if_enabled(const UOpPtr& kernel, const std::vector<Opt>& opts,
                                                      const TargetCaps& caps) {
  if (caps.output_grid || opts.empty() || env_integer("KILN_ROW_BLOCKS", 1) == 0) return std::nullopt;
  return with_row_blocks(kernel, opts, caps);
}

}  // namespace

std::vector<Opt> with_thread_row_blocks(const UOpPtr& kernel, std::vector<Opt> opts, const TargetCaps& caps) {
  if (std::optional<std::vector<Opt>> blocked = row_blocks_if_enabled(kernel, opts, caps)) return *blocked;
  return opts;
}

std::vector<Opt> hand_coded_opts(const UOpPtr& kernel, const TargetCaps& caps) {
  // These heuristics size tiles for a CPU's registers, caches and thread pool. A GPU target lays
  // its kernels out as a launch grid instead (opt/gpu_grid.h); a CPU loop SWAP there left ResNet-50's
  // channels-last copies on 14 threads, 23 % of its time on an H200.
  if (caps.output_grid) return {};
  std::optional<std::vector<Opt>> dot_products = dot_product_tile(kernel, caps);
  std::vector<Opt> opts = dot_products ? *dot_products : tile_opts_of(kernel, caps);
  if (opts.empty()) {
    opts = symbolic_rows_merged(kernel);
    return with_symbolic_axis_merged(kernel, apply_opts(kernel, opts), std::move(opts));
  }
  if (std::optional<std::vector<Opt>> blocked = row_blocks_if_enabled(kernel, opts, caps)) return *blocked;
  return with_parallel_axis(kernel, std::move(opts));
}

}  // namespace kiln
