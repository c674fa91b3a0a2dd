// The load-time checks of a plan's run bindings (format version 6: variables the run decides;
// docs/symbolic-shapes.md, stage 6, decision 15). Part of the plan reader, in libkiln: a run reads
// the value of each binding from the slot it names, so that slot must lie inside its section, and
// no kernel may run before its sizes are known.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/plan_generated.h"

namespace kiln {

// Whether variable v is bound by the run, one flag per plan variable (all false without bindings).
// The plan has passed check_run_bindings.
std::vector<bool> run_bound_variables(const plan_fb::Plan& plan);

// Checks Plan.run_bindings of a verified flatbuffer whose other fields passed the consistency and
// symbolic checks, each failure a PlanError KILN_ERROR_INVALID_PLAN naming the binding: a variable
// in range, bound once and by no input dimension; an element of int32 or int64 inside the arena or
// inside a fixed-size graph input or output, aligned to its size; a binding point within the launch
// list; and no kernel at or before it listing the variable or having a size program over it.
// Plans below `kPlanFormatVersionRunBound` and device plans may not have bindings.
void check_run_bindings(const plan_fb::Plan& plan, uint32_t version);

// Checks Plan.pinned_inputs (format version 6, CPU plans): each names an input once, the input has
// a fixed shape, and the pinned bytes are its byte size. PlanError KILN_ERROR_INVALID_PLAN.
void check_pinned_inputs(const plan_fb::Plan& plan, uint32_t version);

}  // namespace kiln
