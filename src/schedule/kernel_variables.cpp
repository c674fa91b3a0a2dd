// The size variables of a kernel (schedule.h, kernel_variables): what a runner passes in the
// kernel's extra argument, in the order the renderers read them.
#include <map>

#include "schedule/schedule.h"
#include "support/error.h"

namespace kiln {

std::vector<VariableSpec> kernel_variables(const UOpPtr& ast) {
  std::map<std::string, VariableSpec> by_name;
  for (const UOp* node : toposort(ast)) {
    if (node->op() != Ops::DEFINE_VAR) continue;
    const VariableSpec& spec = node->arg_variable();
    auto [at, added] = by_name.emplace(spec.name, spec);
    KILN_ASSERT(added || at->second == spec, str_cat("kernel ", ast->arg_string(), ": variable '", spec.name,
                                                     "' is defined with two different ranges"));
  }
  std::vector<VariableSpec> variables;
  for (auto& [name, spec] : by_name) variables.push_back(spec);
  return variables;
}

}  // namespace kiln
