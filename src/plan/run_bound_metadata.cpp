// check_run_bindings: as check_symbolic_metadata, each check names what it refuses, because a plan
// that fails here was written by a buggy or foreign compiler and the message is all its author gets.
#include "plan/run_bound_metadata.h"

#include <string>

#include "kiln/kiln.h"
#include "plan/plan_format.h"
#include "plan/plan_reader.h"
#include "plan/size_program.h"
#include "plan/symbolic_metadata.h"

namespace kiln {
namespace {

std::string number(int64_t value) { return std::to_string(value); }

bool reads_variable(std::span<const int64_t> program, int64_t variable) {
  for (size_t i = 0; i + 1 < program.size(); i += 2)
    if (program[i] == static_cast<int64_t>(plan::SizeOp::kVariable) && program[i + 1] == variable) return true;
  return false;
}

// Whether a kernel reads `variable` or is sized by it.
bool kernel_uses(const plan_fb::Kernel& kernel, int64_t variable) {
  if (kernel.variables() != nullptr)
    for (int32_t v : *kernel.variables())
      if (v == variable) return true;
  if (reads_variable(program_of(kernel.parallel_extent_program()), variable)) return true;
  if (kernel.slot_sizes() != nullptr)
    for (const plan_fb::SizeProgram* size : *kernel.slot_sizes())
      if (reads_variable(program_of(size), variable)) return true;
  return false;
}

// The element lies inside its value: a fixed-size graph input or output (a symbolic one could be
// smaller than the offset at some run), or the arena.
void check_source(const plan_fb::Plan& plan, const plan_fb::Slot& slot, const std::string& label) {
  int64_t element = slot.size();
  bool ok = slot.offset() >= 0 && slot.offset() % element == 0;
  auto inside_value = [&](const flatbuffers::Vector<flatbuffers::Offset<plan_fb::Value>>& values) {
    if (slot.index() < 0 || static_cast<size_t>(slot.index()) >= values.size()) return false;
    const plan_fb::Value& value = *values.Get(static_cast<flatbuffers::uoffset_t>(slot.index()));
    return value.dims() == nullptr && slot.offset() <= value.byte_size() - element;
  };
  switch (slot.kind()) {
    case plan_fb::SlotKind_Arena: ok = ok && slot.offset() <= plan.arena_bytes() - element; break;
    case plan_fb::SlotKind_GraphInput: ok = ok && inside_value(*plan.inputs()); break;
    case plan_fb::SlotKind_GraphOutput: ok = ok && inside_value(*plan.outputs()); break;
    default: ok = false;
  }
  if (!ok) invalid_plan(label + " reads an element outside the arena or a fixed-size input or output");
}

}  // namespace

std::vector<bool> run_bound_variables(const plan_fb::Plan& plan) {
  std::vector<bool> bound(plan.variables() == nullptr ? 0 : plan.variables()->size(), false);
  if (plan.run_bindings() != nullptr)
    for (const plan_fb::RunBinding* binding : *plan.run_bindings()) bound[static_cast<size_t>(binding->variable())] = true;
  return bound;
}

void check_run_bindings(const plan_fb::Plan& plan, uint32_t version) {
  if (plan.run_bindings() == nullptr) return;
  if (version < plan::kPlanFormatVersionRunBound)
    invalid_plan("a plan of format version " + number(version) + " has run bindings (a format version " +
                 number(plan::kPlanFormatVersionRunBound) + " field)");
  if (plan.device() != nullptr) invalid_plan("a device plan has run bindings (sizes the run decides are CPU-only)");
  size_t variable_count = plan.variables() == nullptr ? 0 : plan.variables()->size();
  std::vector<bool> bound(variable_count, false);
  auto kernel_count = static_cast<int64_t>(plan.kernels()->size());
  for (flatbuffers::uoffset_t b = 0; b < plan.run_bindings()->size(); ++b) {
    const plan_fb::RunBinding* binding = plan.run_bindings()->Get(b);
    std::string label = "run binding " + number(b);
    if (binding == nullptr || binding->source() == nullptr) invalid_plan(label + " has no source");
    int32_t variable = binding->variable();
    if (variable < 0 || static_cast<size_t>(variable) >= variable_count)
      invalid_plan(label + " binds variable " + number(variable) + " (the plan has " + number(static_cast<int64_t>(variable_count)) + ")");
    std::string name = plan.variables()->Get(static_cast<flatbuffers::uoffset_t>(variable))->name()->str();
    label += " ('" + name + "')";
    if (bound[static_cast<size_t>(variable)]) invalid_plan("variable '" + name + "' is bound by the run twice");
    bound[static_cast<size_t>(variable)] = true;
    for (const plan_fb::Value* input : *plan.inputs())
      if (input->dims() != nullptr)
        for (const plan_fb::SizeProgram* dim : *input->dims())
          if (reads_variable(program_of(dim), variable))
            invalid_plan("input '" + input->name()->str() + "' has a dimension over '" + name +
                         "', which the run decides, so no caller could give it");
    auto dtype = static_cast<kiln_dtype>(binding->dtype());
    if (dtype != KILN_DTYPE_INT32 && dtype != KILN_DTYPE_INT64)
      invalid_plan(label + " reads a value of dtype " + number(binding->dtype()) + " (int32 or int64 is required)");
    if (binding->source()->size() != static_cast<int64_t>(kiln_dtype_size(dtype)))
      invalid_plan(label + " reads " + number(binding->source()->size()) + " bytes for one " + kiln_dtype_name(dtype));
    check_source(plan, *binding->source(), label);
    int32_t after = binding->after_kernel();
    if (after < -1 || after >= kernel_count)
      invalid_plan(label + " is read after kernel " + number(after) + " (the plan has " + number(kernel_count) + ")");
    for (int32_t k = 0; k <= after; ++k) {
      const plan_fb::Kernel& kernel = *plan.kernels()->Get(static_cast<flatbuffers::uoffset_t>(k));
      if (kernel_uses(kernel, variable))
        invalid_plan("kernel " + kernel.symbol()->str() + " (" + number(k) + " of the launch list) uses '" + name +
                     "', which the run decides only after kernel " + number(after));
    }
  }
}

void check_pinned_inputs(const plan_fb::Plan& plan, uint32_t version) {
  if (plan.pinned_inputs() == nullptr) return;
  if (version < plan::kPlanFormatVersionRunBound)
    invalid_plan("a plan of format version " + number(version) + " has pinned inputs (a format version " +
                 number(plan::kPlanFormatVersionRunBound) + " field)");
  if (plan.device() != nullptr) invalid_plan("a device plan has pinned inputs");
  std::vector<bool> seen(plan.inputs()->size(), false);
  for (const plan_fb::PinnedInput* pinned : *plan.pinned_inputs()) {
    if (pinned == nullptr || pinned->bytes() == nullptr) invalid_plan("a pinned input without bytes");
    int32_t index = pinned->input();
    if (index < 0 || static_cast<size_t>(index) >= seen.size())
      invalid_plan("a pinned value of input " + number(index) + " (the plan has " + number(static_cast<int64_t>(seen.size())) + ")");
    const plan_fb::Value& input = *plan.inputs()->Get(static_cast<flatbuffers::uoffset_t>(index));
    std::string label = "the pinned value of input '" + input.name()->str() + "'";
    if (seen[static_cast<size_t>(index)]) invalid_plan("input '" + input.name()->str() + "' is pinned twice");
    seen[static_cast<size_t>(index)] = true;
    if (input.dims() != nullptr) invalid_plan(label + ": the input has a symbolic shape");
    if (static_cast<int64_t>(pinned->bytes()->size()) != input.byte_size())
      invalid_plan(label + " has " + number(pinned->bytes()->size()) + " bytes; the input has " + number(input.byte_size()));
  }
}

}  // namespace kiln
