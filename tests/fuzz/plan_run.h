// Runs a loaded plan once with inputs made up here (a fixed byte pattern), for the plan fuzz target:
// after a plan loads, a run must not crash either.
#pragma once

#include "kiln/kiln.h"

namespace kiln::fuzz {

// Allocates every input and output at the plan's shapes (nothing when they need more than a few
// MiB together, which the fuzzer's memory limit would count against kiln), fills the inputs with a
// fixed pattern and runs the plan on the calling thread. A failed run is not a bug in itself.
void run_with_fixed_inputs(const kiln_plan* plan);

}  // namespace kiln::fuzz
