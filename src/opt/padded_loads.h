// Loads at padded points without a mask. PADTO (opt.h) masks every load and store that depends on
// the padded loop with `r < E`, so the extra iterations touch no memory. In a register tile whose
// padded rows are unrolled (a strided conv's windows, a conv's pixel block over an image of symbolic
// size, the rows of a matmul), each of those loads is a scalar behind its own branch in the
// innermost loop: wav2vec2's second conv spent 1.07 ms per run where its fixed twin spent 0.61.
// A padded point's stores are masked by the same condition, so what its loads read is never
// stored: it may read anything in bounds. Here such a load reads what the point with the padded
// rows set to 0 reads instead (each row variable r becomes `where(r < E, r, 0)`, which depends on
// the output loops only and leaves the reduction loops), and loses the mask.
#pragma once

#include "ir/uop.h"

namespace kiln {

// `kernel` (an optimised kernel AST: a SINK of stores) with each load's mask condition removed
// where the condition (a) is also a condition of every store of the kernel, (b) depends on output
// loops and unrolled rows only (never on a reduction, whose other points it would change, nor on
// vector lanes, where a mask keeps a contiguous vector load and the select would make a gather),
// (c) compares with a symbolic end (fixed plans keep their masks and their bytes), and (d) is
// provably true at the point with its rows at 0. The load then reads at that point when the
// condition fails. Other kernels are returned unchanged.
UOpPtr unmask_padded_loads(const UOpPtr& kernel);

}  // namespace kiln
