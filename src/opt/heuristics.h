// The hand-coded optimisation heuristics: which Opt actions each kernel gets on a target, chosen
// deterministically from the kernel AST and the target's capabilities (no timing), in the spirit of
// tinygrad's hand_coded_optimizations.
//
//  1. Vector axis: an output axis along which the stores are contiguous and every load that varies
//     with it inside a reduction is contiguous too gets an UPCAST of the target's vector lanes (or
//     the largest power of two ≥ 4 below it that divides it); failing that, scattered stores or
//     gathered loads, but only under a register tile. Narrow image axes are tried merged (MERGE)
//     and padded to the lanes (PADTO).
//  2. Register tile, for kernels with a reduction: another output axis that the vector loads inside
//     the reduction do not depend on (a matmul's rows, a conv's output channels) gets an UNROLL of R,
//     and the vector axis an UNROLL of C, so R·C vector accumulators share every load of one step.
//     R·C is sized to the target's register file. Failing such rows, a sliding window (a depthwise
//     conv's output rows with its kernel rows unrolled).
//  3. Loop order: the tile's columns outermost (SWAP) when their strip fits in half the L2.
//  4. The threads' split (axis 0): a conv whose axis 0 would be its filter tiles splits its pixel
//     rows in blocks instead (row blocks; a symbolic row count into a constant number of them by
//     BLOCKS), so that chained kernels read what the same core wrote;
//     otherwise axis 0 is given enough iterations for the threads (SWAP or MERGE); a small
//     symbolic axis 0 (a batch) is merged with the widest constant output loop.
//  0. First, in a kernel with a reduction whose rows are a symbolic loop (a matmul over
//     `batch·sequence` tokens), that loop is SPLIT into a symbolic outer loop and a constant inner
//     loop of kRowBlock (8) rows, which 1-3 tile like any constant loop; kept only when the
//     tile takes its rows from the inner loop. A constant row loop that no tile's row count divides
//     (37 tokens) is offered the same SPLIT as one more padded candidate of step 1.
//     Before that, a symbolic output loop along which the stores are contiguous (a conv's pixels
//     over an image of any size, attention's keys over a sequence of any length) is PADTO'd to the
//     vector lanes and SPLIT by them, so that its inner block is a constant loop that 1-3 vectorise;
//     the iterations past its end are masked, not clamped, so the block's loads stay vectors. Kept
//     only when the tile's UPCAST is that block (or its rows are; a 1x1 conv's tile then takes the
//     image's next row as a second column). A reduction with no vector among its output axes whose
//     loads are contiguous along a symbolic reduce loop (a global average pool over an image of any
//     size) gets that loop in padded vector blocks the same way (PADTO, SPLIT, UPCAST of the block).
// docs/optimisation.md gives the reasons and measurements for each rule.
// The Opt list, the new AST and the new extent of axis 0 (the thread split) replace the kernel's.
#pragma once

#include <vector>

#include "codegen/target.h"
#include "opt/opt.h"
#include "schedule/schedule.h"
#include "tensor/dim.h"

namespace kiln {

std::vector<Opt> hand_coded_opts(const UOpPtr& kernel, const TargetCaps& caps);

// optimize_schedule (optimize_schedule.h) applies these, or a tuning database's, to a schedule.

// `opts` (a tuning database's entry) with row blocks as axis 0 where the heuristics would add them
// (docs/optimisation.md, heuristics step 6); `opts` unchanged otherwise, and under KILN_ROW_BLOCKS=0.
std::vector<Opt> with_thread_row_blocks(const UOpPtr& kernel, std::vector<Opt> opts, const TargetCaps& caps);

// The extent of a kernel's axis 0 (1 when it has none).
Dim parallel_extent_of(const UOpPtr& kernel);

}  // namespace kiln
