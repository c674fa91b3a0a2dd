// run_time_if: an If decided when the plan runs (docs/symbolic-shapes.md, decision 20). Both
// branches are built over the plan's sizes, as the graph's other values are, and each output selects
// between them; where the branches' shapes differ, the output's length along that axis is a
// run-bound size that the condition chooses. This is correct because ONNX branches have no side
// effects and each is built for every value of the sizes in their ranges (a detector's "no boxes?"
// branch and its NMS branch at zero boxes give the same empty result). A branch that cannot be built
// at these sizes (it reshapes for another input rate) leaves the plan with the other one and a check
// that refuses, at run time, a condition that would need it.
#include "run_time_if.h"

#include <algorithm>
#include <optional>
#include <string>

#include "onnx/onnx_pb.h"
#include "support/error.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {
namespace {

using Values = std::vector<OnnxValue>;

// One branch as built: its outputs, or why it could not be built at the plan's sizes.
struct Branch {
  const char* name;  // "then" or "else"
  std::optional<Values> outputs;
  std::string failure;
};

Branch build_branch(const OnnxNode& node, const char* name) {
  Branch branch{name, std::nullopt, {}};
  const onnx::GraphProto& graph = node.attr_graph(str_cat(name, "_branch"));
  // A malformed model is an error whichever branch a run would take; only building may fail here.
  if (static_cast<size_t>(graph.output_size()) != node.output_count())
    node.fail(str_cat("the ", name, " branch has ", graph.output_size(), " outputs but the node has ",
                      node.output_count()));
  try {
    branch.outputs = node.run_graph(graph, {});
  } catch (const UserError& error) {
    branch.failure = error.what();
  }
  return branch;
}

// A build failure's text for a run's message: its first kMaxReason characters (a symbolic size in
// it can run to kilobytes).
std::string shortened(const std::string& text) {
  constexpr size_t kMaxReason = 300;
  return text.size() <= kMaxReason ? text : text.substr(0, kMaxReason) + "...";
}

const Tensor& branch_tensor(const OnnxNode& node, const OnnxValue& value, size_t k) {
  if (!value.is_tensor())
    node.fail(str_cat("unsupported: output ", k, " is a ", value.kind_name(),
                      " and the condition is only known when the plan runs (a run-time If selects tensors only)"));
  return value.tensor();
}

// `t` padded with zeros to `longest` and cut to `chosen` along each axis where `fit` says so.
Tensor fit_to(const Tensor& t, const Dims& chosen, const Dims& longest, const std::vector<bool>& fit) {
  Dims dims = dims_of(t), pads(2 * dims.size(), Dim(0));
  DimRanges ranges;
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    if (fit[axis]) pads[2 * axis + 1] = longest[axis] - dims[axis];
    ranges.emplace_back(Dim(0), fit[axis] ? chosen[axis] : dims[axis]);
  }
  return shrink_to(pad_zero_dims(t, pads), ranges);
}

// Output k of a run-time If: `chosen` (a bool scalar) selects `a` (then) or `b` (else).
Tensor select_output(const OnnxNode& node, size_t k, const Tensor& chosen, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    node.fail(str_cat("the branches give output ", k, " different dtypes (", scalar_type_name(a.dtype()), " and ",
                      scalar_type_name(b.dtype()), ")"));
  Dims da = dims_of(a), db = dims_of(b);
  if (da.size() != db.size())
    node.fail(str_cat("unsupported: the condition is only known when the plan runs, and the branches give output ", k,
                      " different ranks (then ", dims_string(da), ", else ", dims_string(db), ")"));
  if (da == db) return chosen.where(a, b);
  Dims chosen_dims(da.size(), Dim(0)), longest(da.size(), Dim(0));
  std::vector<bool> fit(da.size(), false);
  for (size_t axis = 0; axis < da.size(); ++axis) {
    if (da[axis] == db[axis]) {
      chosen_dims[axis] = da[axis];
      continue;
    }
    // The length the condition chooses, a size the run decides; the longer branch's maximum bounds it.
    fit[axis] = true;
    longest[axis] = Dim(std::max(da[axis].max(), db[axis].max()));
    Tensor length = chosen.where(dim_tensor(da[axis], ScalarType::Int64), dim_tensor(db[axis], ScalarType::Int64));
    chosen_dims[axis] = run_bound_size(length, str_cat("If(", node.output_name(k), ")[", axis, "]"),
                                       std::min(da[axis].min(), db[axis].min()), longest[axis].value(), node.describe());
  }
  return chosen.where(fit_to(a, chosen_dims, longest, fit), fit_to(b, chosen_dims, longest, fit));
}

}  // namespace

bool decided_when_plan_runs(const Tensor& value) {
  if (reads_graph_input(value)) return true;
  for (const UOp* op : toposort(value.data().node)) {
    if (op->op() == Ops::DEFINE_VAR) return true;
    if (op->op() == Ops::RESHAPE || op->op() == Ops::EXPAND || op->op() == Ops::PAD || op->op() == Ops::SHRINK)
      for (int64_t arg : op->arg_list())
        if (is_dim_marker(arg)) return true;
  }
  return false;
}

Values run_time_if(const OnnxNode& node, const Tensor& condition) {
  if (condition.numel() != 1) node.fail(str_cat("the condition must hold exactly one value, it has ", condition.numel()));
  const Tensor chosen = condition.cast(ScalarType::Bool).reshape({});
  Branch then_branch = build_branch(node, "then"), else_branch = build_branch(node, "else");
  if (!then_branch.outputs && !else_branch.outputs)
    node.fail(str_cat("the condition is only known when the plan runs, and neither branch can be built at the plan's "
                      "sizes: then: ", then_branch.failure, "; else: ", else_branch.failure));
  if (!then_branch.outputs || !else_branch.outputs) {
    // One branch only: the plan computes it, and a run whose condition takes the other is refused
    // before any kernel after the condition's runs (a check on the condition as 0 or 1).
    const Branch& built = then_branch.outputs ? then_branch : else_branch;
    const Branch& missing = then_branch.outputs ? else_branch : then_branch;
    int64_t allowed = then_branch.outputs ? 1 : 0;
    Values outputs = *built.outputs;
    std::string origin = str_cat(node.describe(), ", whose ", missing.name, " branch was not built (",
                                 shortened(missing.failure), "),");
    std::string name = str_cat("If(", node.output_name(0), ").condition");
    for (size_t k = 0; k < outputs.size(); ++k) branch_tensor(node, outputs[k], k);
    check_at_run_time(chosen.cast(ScalarType::Int64), name, allowed, allowed, origin);
    return outputs;
  }
  Values outputs;
  for (size_t k = 0; k < node.output_count(); ++k)
    outputs.emplace_back(select_output(node, k, chosen, branch_tensor(node, (*then_branch.outputs)[k], k),
                                       branch_tensor(node, (*else_branch.outputs)[k], k)));
  return outputs;
}

}  // namespace kiln::onnx_import
