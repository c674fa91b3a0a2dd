// The load-time checks of a symbolic plan's fields (format version 2: variables and size programs;
// docs/plan-format.md, "Symbolic plans"). Part of the plan reader, in libkiln: the metadata is
// untrusted until these pass, and a run then relies on them (every program well formed, every
// variable readable from an input, every size at the maxima within the plan's sections).
#pragma once

#include <cstdint>
#include <span>

#include "plan/plan_generated.h"

namespace kiln {

// The instructions of a size program table (empty when it is absent). The table must have passed
// the flatbuffers verifier and check_symbolic_metadata's alignment check.
std::span<const int64_t> program_of(const plan_fb::SizeProgram* program);

// Whether the metadata carries any field of format version 2 (a variable or a size program).
bool has_symbolic_fields(const plan_fb::Plan& plan);

// Checks every version-2 field of a verified flatbuffer, after the fixed-shape consistency checks
// (check_consistency in plan_reader.cpp), each failure a PlanError KILN_ERROR_INVALID_PLAN naming
// the field: variables (non-empty unique names sorted by name, 0 <= min <= max <=
// limits::kMaxPlanVariableValue, at most limits::kMaxPlanVariables), every program
// (check_size_program), every variable bound by an input dimension that is exactly that variable,
// kernel variable indices (valid, in name order), and with every variable at its maximum: every
// program evaluates, fixed dims and stored maxima (shape, byte_size, Slot.size, parallel_extent)
// equal their programs' values, so the section checks made on those maxima cover the largest run.
void check_symbolic_metadata(const plan_fb::Plan& plan);

}  // namespace kiln
