// order_run_bound_kernels: every kernel that a run-bound size variable sizes or that it reads runs
// after the kernel that computes the variable's value (docs/symbolic-shapes.md, decision 12).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "schedule/schedule.h"

namespace kiln {

// Before: `schedule` is rangeify's, kernels in a data-dependence order, not yet given memory;
// `run_bound_outputs` names, for each run-bound variable, the requested output (its position) that
// holds its value. After: the kernels are in an order that still respects every read and write of a
// buffer, with each kernel that reads a variable (or touches a buffer sized by it) after the
// kernel that writes its value; among kernels free to move, the original order is kept. A
// schedule without such variables is left as it is.
void order_run_bound_kernels(Schedule& schedule, const std::vector<std::pair<std::string, size_t>>& run_bound_outputs);

}  // namespace kiln
