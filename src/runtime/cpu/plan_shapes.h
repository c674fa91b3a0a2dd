// The run-time side of a symbolic plan (docs/plan-format.md, "Symbolic plans"): its variables, and
// the size programs of its values and kernels, read once at load; per run, the variables' values
// read off the inputs' shapes (with the errors a caller can act on) and every size evaluated from
// them. The caller provides all scratch memory, so a run allocates nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_generated.h"
#include "plan/size_program.h"

namespace kiln {

struct PlanVariable {
  std::string name;
  int64_t min, max;
};

// One dimension of an input or output as the C API reports it.
struct PlanDim {
  int64_t size = -1;                 // a fixed dimension's size, else -1
  std::span<const int64_t> program;  // empty for a fixed dimension
  int64_t variable = -1;             // the variable this dimension is exactly, else -1
  std::string text;                  // "" for a fixed dimension, else "n" or "2 * n"
};

class PlanShapes {
 public:
  // `plan` has passed verify_plan (check_symbolic_metadata included).
  explicit PlanShapes(const plan_fb::Plan& plan);

  // Whether runs must read variables at all; false for every fixed-shape plan.
  bool symbolic() const { return !variables_.empty(); }
  // Variables the run decides (format version 6: Plan.run_bindings): before the run they stand at
  // their maxima, the upper bound every buffer is checked against; the runner sets them when it
  // reaches their bindings. Empty for a plan without bindings.
  bool run_bound(size_t variable) const { return variable < run_bound_.size() && run_bound_[variable]; }
  // Whether output `index` has a dimension over a run-bound variable (its shape is known only after
  // the run).
  bool output_run_shaped(size_t index) const { return index < output_run_shaped_.size() && output_run_shaped_[index]; }
  bool any_output_run_shaped() const;
  const std::vector<PlanVariable>& variables() const { return variables_; }
  // Per input / output, one entry per dimension (empty vectors for a fixed-shape plan).
  const std::vector<std::vector<PlanDim>>& input_dims() const { return input_dims_; }
  const std::vector<std::vector<PlanDim>>& output_dims() const { return output_dims_; }
  // "(batch, 3)": the dims as the plan states them, for messages and `kiln inspect`.
  static std::string shape_text(const std::vector<PlanDim>& dims);

  // Sets every run-bound variable to its maximum, then reads every other variable off `inputs` (bound_inputs[i] is the caller's tensor for plan input i; the
  // ranks were checked) into values[variables().size()], and checks every other input dimension
  // against the value it must have. `first_binder` is scratch of one int per variable. Throws
  // PlanError KILN_ERROR_INVALID_ARGUMENT, prefixed "FUNCTION: ", for a value out of its range, two
  // inputs giving one variable different values, or a dimension that is not its expression's value.
  void bind_variables(const kiln_tensor* const* bound_inputs, const std::vector<std::string>& input_names,
                      std::span<int64_t> values, std::span<int> first_binder, const char* function) const;

  // A program's value for the bound variables. A failure (overflow, division by zero: possible
  // only where a plan's sizes are not monotone in its variables, since the maxima passed at load)
  // throws PlanError KILN_ERROR_INVALID_PLAN naming what(), which is called on failure only, so a
  // run builds no string.
  template <class What>
  static int64_t evaluate(std::span<const int64_t> program, std::span<const int64_t> values, const char* function,
                          What&& what) {
    std::optional<int64_t> value = plan::evaluate_size_program(program, values);
    if (!value) throw_program_failure(function, what());
    return *value;
  }
  [[noreturn]] static void throw_program_failure(const char* function, const std::string& what);
  // The dims of output `index` into out (its rank of them).
  void output_shape(size_t index, std::span<const int64_t> values, int64_t* out, const char* function) const;
  // What kiln_plan_input_info_v2 / _output_info_v2 report, per value: each dimension's text (NULL
  // where fixed) and variable (-1 where not exactly one).
  struct DimArrays {
    std::vector<const char*> texts;
    std::vector<int64_t> variables;
  };
  const DimArrays& input_arrays(size_t index) const { return input_arrays_[index]; }
  const DimArrays& output_arrays(size_t index) const { return output_arrays_[index]; }
  std::span<const int64_t> input_bytes(size_t index) const { return input_bytes_[index]; }
  std::span<const int64_t> output_bytes(size_t index) const { return output_bytes_[index]; }

 private:
  std::vector<PlanVariable> variables_;
  std::vector<std::string> names_;  // the variables' names, for size_program_text
  std::vector<std::vector<PlanDim>> input_dims_, output_dims_;
  std::vector<std::span<const int64_t>> input_bytes_, output_bytes_;
  std::vector<DimArrays> input_arrays_, output_arrays_;  // point into input_dims_ / output_dims_
  std::vector<bool> run_bound_, output_run_shaped_;
};

// Per kernel of a plan with run bindings: whether a variable the run decides sizes it (its extent or
// a slot's size) or is read by it, so that it is prepared only once that variable is bound.
std::vector<bool> launches_sized_by_run(const plan_fb::Plan& meta);

}  // namespace kiln
