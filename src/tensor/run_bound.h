// Sizes the run decides (docs/symbolic-shapes.md, stage 6): a size variable whose value is an
// integer a plan computes during its run (a NonZero count) rather than an input's dimension. An op
// builder makes one with run_bound_size; write_plan finds the value of every such variable its
// graph uses (find_run_bound), schedules it as an extra root and records where the runtime reads it.
#pragma once

#include <optional>
#include <string>

#include "kiln/kiln.hpp"
#include "tensor/dim.h"

namespace kiln {

struct RunBoundValue {
  Tensor value;        // an int32 or int64 scalar whose value is the variable's (a computed value)
  std::string origin;  // the model node or input that decides it, for the run's messages
  // A value read straight from a graph input (run_bound_input_element): the plan input's name and
  // the element's position; write_plan binds it from the caller's buffer before the first kernel.
  std::string input;
  int64_t element = 0;
};

// The size variable `name` in [min, max] whose value is `value`'s (a scalar of int32 or int64),
// known only when a plan runs. The range must hold every value the op can produce (the arena is
// laid out at max; a run that decides a value outside it is refused). The variable is registered
// process-wide by name: a later registration of the same name replaces the earlier one, so names
// must be unique within one graph (an ONNX builder names it after the node's output). The registry
// keeps the value's graph alive until then: one small count graph per name.
Dim run_bound_size(const Tensor& value, const std::string& name, int64_t min, int64_t max, std::string origin);

// The size variable `name` in [min, max] whose value is element `element` (row-major) of graph
// input `input`, an int32 or int64 tensor of fixed shape that the caller gives at run time
// (`kiln compile --value NAME=MIN..MAX`). Registered as run_bound_size registers.
Dim run_bound_input_element(const std::string& input, int64_t element, const std::string& name, int64_t min,
                            int64_t max);

// The value of run-bound variable `name`, if run_bound_size or run_bound_input_element made one.
std::optional<RunBoundValue> find_run_bound(const std::string& name);

}  // namespace kiln
