// Sizes the run decides (docs/symbolic-shapes.md, stage 6): a size variable whose value is an
// integer a plan computes during its run (a NonZero count) rather than an input's dimension. An op
// builder makes one with run_bound_size; write_plan finds the value of every such variable its
// graph uses (find_run_bound), schedules it as an extra root and records where the runtime reads it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"
#include "ir/uop.h"
#include "tensor/dim.h"

namespace kiln {

struct RunBoundValue {
  Tensor value;        // an int32 or int64 scalar whose value is the variable's (a computed value)
  std::string origin;  // the model node or input that decides it, for the run's messages
  // A value read straight from a graph input (run_bound_input_element): the plan input's name and
  // the element's position; write_plan binds it from the caller's buffer before the first kernel.
  std::string input;
  int64_t element = 0;
  // A check (check_at_run_time): no kernel reads the variable, so the plan learns its range here.
  std::optional<VariableSpec> check;
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

// A condition a run must meet: run-bound variable `name`, bound to `value` (an int32 or int64
// scalar), must lie in [min, max], or kiln_plan_run refuses the run with `origin` in its message
// (a run-time If whose other branch could not be built: docs/symbolic-shapes.md, decision 20). No
// kernel reads the variable, so no graph finds it by its uses: the graph's builder collects the
// checks it makes with a RunTimeCheckRecorder and hands them to write_plan
// (PlanWriteOptions::run_time_checks).
void check_at_run_time(const Tensor& value, const std::string& name, int64_t min, int64_t max, std::string origin);

// While one lives, the checks made on its thread are recorded in it (the innermost one, if nested).
class RunTimeCheckRecorder {
 public:
  RunTimeCheckRecorder();
  ~RunTimeCheckRecorder();
  RunTimeCheckRecorder(const RunTimeCheckRecorder&) = delete;
  RunTimeCheckRecorder& operator=(const RunTimeCheckRecorder&) = delete;
  const std::vector<std::string>& names() const { return names_; }
  void add(const std::string& name);

 private:
  std::vector<std::string> names_;
  RunTimeCheckRecorder* outer_;
};

// `size` as an int64 scalar tensor computed from the run-bound values it reads (their tensors, not
// their variables), or nullopt when it reads none that a kernel computes. A value computed from
// the tensors comes after the kernels that compute them; one computed from the variables would not,
// as nothing but the binding orders a variable's reader after its value (dim_tensor uses this).
std::optional<Tensor> size_from_run_values(const Dim& size);

// The value of run-bound variable `name`, if run_bound_size or run_bound_input_element made one.
std::optional<RunBoundValue> find_run_bound(const std::string& name);

}  // namespace kiln
