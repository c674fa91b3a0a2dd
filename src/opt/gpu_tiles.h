// Register tiles for GPU kernels: several outputs per thread, so that the loads they share are made
// once per reduction step instead of once per output.
//
// With one thread per output (gpu_grid.h) a matmul thread loads one row value and one column value
// per step for one FMA, and its neighbours load the same values again. A thread that computes T×U
// outputs (T along one output axis, U along another) loads T + U values per step for T·U FMAs. The
// axes chosen are ones some reduction load does not depend on (a matmul's rows for the column
// operand, its columns for the row operand; a conv's filters for the image, its pixels for the
// weights), so each load is shared by the copies along that axis.
//
// The tile is strided, not contiguous: output r = j·(E/T) + r', for copy j of thread r'. Neighbouring
// threads then still read neighbouring elements in each copy's load and store, so a warp's accesses
// stay coalesced; a contiguous tile (r = r'·T + j) would spread each load of a warp over T times the
// memory sectors. The copies are UNROLL ranges: the expander makes them, and the linearizer runs
// their reductions in one loop nest with one accumulator each (docs/kernel-ast.md).
#pragma once

#include "ir/uop.h"

namespace kiln {

// `kernel` (a SINK of stores, unoptimised, fixed shapes) with register tiles of at most
// `largest_tile` outputs along each of at most two output axes, where the kernel has a reduction
// whose loads such axes share and enough outputs that `minimum_threads` threads remain; unchanged
// otherwise (and when `largest_tile` < 2). Only constant axes are tiled; symbolic extents count at
// their maxima.
UOpPtr gpu_register_tiles(const UOpPtr& kernel, int largest_tile, int64_t minimum_threads);

}  // namespace kiln
