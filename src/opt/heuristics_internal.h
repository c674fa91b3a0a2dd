// The rules of the hand-coded heuristics that their files share (heuristics.h gives the steps;
// each function's definition says why, with the measurements). tile_opts.cpp: register tiles over
// constant loops; symbolic_tiles.cpp: tiles over symbolic loops; thread_blocks.cpp: the threads'
// split; heuristics.cpp: which rule a kernel gets.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/target.h"
#include "ir/uop.h"
#include "opt/opt.h"

namespace kiln::heuristics {

// tile_opts.cpp

// Rows per block of a SPLIT row loop (step 0, and rows no tile divides). A multiple of the AVX2
// tile's 4 rows and of the vector lanes; a sequence of 37 tokens computes 3 rows more.
constexpr int64_t kRowBlock = 8;

// The register tile of a kernel as it is: vector axis, rows, columns and loop order (steps 1-3).
// `rows_only`: the id of an output axis that may be the tile's rows but not its vector (-1: none).
std::vector<Opt> tile_opts(const UOpPtr& kernel, const TargetCaps& caps, int64_t rows_only = -1);

// The opts of steps 1-3 over the kernel's constant loops: tile_opts of the kernel and of its
// merged, padded and row-blocked candidates, the best one; or a transposing copy's SWAP.
std::vector<Opt> constant_loop_opts(const UOpPtr& kernel, const TargetCaps& caps);

// Rows per block of a symbolic row loop (fewer for integer sums).
int64_t symbolic_row_block(const UOpPtr& kernel);

// The symbolic output loop of a reduction kernel that step 0 splits into blocks, or null.
const UOp* symbolic_row_loop(const UOpPtr& kernel);

// symbolic_tiles.cpp

// A symbolic contiguous axis in padded blocks of one vector, tiled (nullopt where that is not kept).
std::optional<std::vector<Opt>> vector_block_opts(const UOpPtr& kernel, const TargetCaps& caps);

// A reduction along a symbolic axis whose loads are contiguous along it, in vector blocks.
std::optional<std::vector<Opt>> symbolic_reduce_vector_opts(const UOpPtr& kernel, const TargetCaps& caps);

// An elementwise kernel's symbolic rows and columns as one loop (empty where not).
std::vector<Opt> symbolic_rows_merged(const UOpPtr& kernel);

// A reduction over an image of any size with its rows and columns merged, in vector blocks.
std::optional<std::vector<Opt>> merged_pixel_block_opts(const UOpPtr& kernel, const TargetCaps& caps);

// A transposing copy over a symbolic axis, vectorised along its stores.
std::optional<std::vector<Opt>> transposed_block_opts(const UOpPtr& kernel, const TargetCaps& caps);

// thread_blocks.cpp

// `opts` with a small symbolic axis 0 (a batch) merged with the channels or swapped with the rows.
std::vector<Opt> with_symbolic_axis_merged(const UOpPtr& kernel, const UOpPtr& tiled, std::vector<Opt> opts);

// `opts` with axis 0 given enough iterations for the threads.
std::vector<Opt> with_parallel_axis(const UOpPtr& kernel, std::vector<Opt> opts);

// `opts` with a conv's pixel rows in blocks as axis 0, where that keeps chained kernels on one core.
std::optional<std::vector<Opt>> with_row_blocks(const UOpPtr& kernel, const std::vector<Opt>& opts,
                                                const TargetCaps& caps);

// heuristics.cpp

// The tile opts of a kernel, before the threads' split: the first of the rules above that applies.
std::vector<Opt> tile_opts_of(const UOpPtr& kernel, const TargetCaps& caps);

}  // namespace kiln::heuristics
