// An ONNX If whose condition is known only when a plan runs (it reads a graph input, or sizes the run
// decides): both branches are built over the plan's sizes and each output selects at run time
// (docs/symbolic-shapes.md, decision 20).
#pragma once

#include <vector>

#include "onnx_value.h"
#include "op_registry.h"

namespace kiln::onnx_import {

// Whether an If condition (or any value that steers the build) is known only when the plan runs:
// it reads a graph input placeholder or a size variable.
bool decided_when_plan_runs(const Tensor& value);

// The If's outputs for a condition decided at run time. Each output is Where(condition, then, else);
// an axis whose length differs between the branches becomes a run-bound size chosen by the
// condition, with each branch padded to the longer and cut to the chosen one. A branch that cannot
// be built at the plan's sizes is left out, and the plan refuses at run time a condition that would
// take it, naming the node and the reason.
std::vector<OnnxValue> run_time_if(const OnnxNode& node, const Tensor& condition);

}  // namespace kiln::onnx_import
