// Remainder kernels for symbolic row blocks (CPU targets).
//
// The heuristics tile a symbolic row loop (a matmul's batch·sequence rows, attention's query rows)
// by SPLIT into blocks of B constant rows that a register tile unrolls (heuristics.h). Where B does
// not provably divide the row count E the SPLIT is clamped: ⌈E / B⌉ blocks, the last one computing
// rows past E again. At a row count just past a multiple of B that is nearly twice the work (9
// tokens in blocks of 8 compute 16 rows); fixed plans tile their known rows exactly.
//
// A remainder loop would take the full blocks and then the last E mod B rows one at a time; the
// Opts, which each transform one kernel's loops, cannot express two loop nests. So the kernel is
// peeled in two at the schedule level: the main kernel runs the B·⌊E / B⌋ rows of the full
// blocks, where the same SPLIT now divides exactly (no clamp, no store masks), and a tail kernel,
// launched right after it over the same buffers, runs the E mod B rows left with opts of its own
// (a tile without row blocks), and its columns as the thread axis: a tail of no rows is a launch
// whose threads run no iterations.
#pragma once

#include <optional>
#include <vector>

#include "opt/opt.h"

namespace kiln {

struct RowRemainderSplit {
  UOpPtr main;                 // the kernel over the full blocks' rows; `main_opts` apply to it
  std::vector<Opt> main_opts;  // the opts given, whose row SPLIT now divides the rows exactly
  UOpPtr tail;                 // the kernel over the rows left, unoptimised
  double tail_share = 0;       // its rows at most, over the main kernel's at most: (B - 1) / max E
};

// Where `opts` (the heuristics' choice for `kernel`) split a symbolic output loop into register
// row blocks (a SPLIT by at least 4 that B does not provably divide, its inner loop unrolled), the
// kernel peeled into its main and tail kernels; otherwise nullopt. KILN_ROW_REMAINDERS=0 turns it
// off (for bisecting, and to time plans with and without).
std::optional<RowRemainderSplit> split_row_remainder(const UOpPtr& kernel, const std::vector<Opt>& opts);

// `opts` for a tail kernel, with a SWAP appended where they leave it a thread axis of no iterations
// with every variable at its maximum (its rows, n mod B, at n = 128): a plan records each
// kernel's parallel extent at the maxima and takes one below 1 for a corrupt plan, and the
// threads share a tail's few rows worse than its columns. The widest constant output loop takes
// axis 0; nullopt where there is none (the kernel then stays whole).
std::optional<std::vector<Opt>> with_rows_off_thread_axis(const UOpPtr& tail, std::vector<Opt> opts);

// Whether `range` is a tail kernel's rows (its extent a remainder by a constant, E mod B): the
// heuristics leave those without row blocks, which would compute a whole block for its few rows.
bool is_remainder_rows(const UOp* range);

}  // namespace kiln
