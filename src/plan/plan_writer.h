// The plan writer (compiler side): a lazy Tensor graph whose inputs are graph_input placeholders →
// the bytes of one plan file (docs/plan-format.md).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.hpp"

namespace kiln {

struct PlanWriteOptions {
  // Called with one line per stage (scheduling, each kernel compiled, linking); may be empty.
  std::function<void(const std::string&)> progress;
  // Compute every weight-only value that run-time values read (a transposed weight, BatchNorm's
  // scale) once, now, and store it as a weight (fold_constants in src/tensor/tensor_internal.h).
  bool fold_constants = true;
};

// Schedules `outputs` (no realize), compiles and links their kernels for the host CPU, and lays
// out the plan: every schedule buffer is a graph input (one of `inputs`, made with graph_input),
// a graph output, a weight (a buffer with data: its bytes are stored in the plan) or an
// intermediate (an offset in the arena). Equal graphs give byte-identical plans. Throws UserError
// when an output is not defined or an input is not a graph_input placeholder.
std::string write_plan(const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::vector<std::pair<std::string, Tensor>>& outputs,
                       const PlanWriteOptions& options = {});

}  // namespace kiln
