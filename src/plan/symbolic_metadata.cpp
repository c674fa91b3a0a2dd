// check_symbolic_metadata: each check names the field it refuses, because a plan that fails here
// was written by a buggy or foreign compiler and the message is all its author gets.
#include "plan/symbolic_metadata.h"

#include <optional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "plan/plan_reader.h"
#include "plan/size_program.h"
#include "support/limits.h"

namespace kiln {
namespace {

std::string number(int64_t value) { return std::to_string(value); }

// A checked program's value with every variable at its maximum; `what` names it in the errors.
int64_t checked_at_maxima(const plan_fb::SizeProgram* table, const std::vector<int64_t>& maxima, const std::string& what) {
  if (table == nullptr || table->code() == nullptr) invalid_plan(what + " has no size program");
  // 8-byte elements the verifier does not align (see aligned_elements in plan_reader.cpp).
  if (table->code()->size() > 0 && reinterpret_cast<uintptr_t>(table->code()->Data()) % 8 != 0)
    invalid_plan(what + " has a misaligned size program");
  std::span<const int64_t> program = program_of(table);
  std::string problem = plan::check_size_program(program, maxima.size());
  if (!problem.empty()) invalid_plan(what + ": " + problem);
  std::optional<int64_t> value = plan::evaluate_size_program(program, maxima);
  if (!value) invalid_plan(what + " overflows or divides by zero with every variable at its maximum");
  return *value;
}

// Whether a (checked) size program reads a variable: (opcode, operand) pairs.
bool reads_a_variable(std::span<const int64_t> program) {
  for (size_t i = 0; i + 1 < program.size(); i += 2)
    if (program[i] == static_cast<int64_t>(plan::SizeOp::kVariable)) return true;
  return false;
}

std::vector<int64_t> check_variables(const plan_fb::Plan& plan) {
  std::vector<int64_t> maxima;
  if (plan.variables() == nullptr) return maxima;
  if (plan.variables()->size() > limits::kMaxPlanVariables)
    invalid_plan("the plan has " + number(plan.variables()->size()) + " variables, more than " +
                 number(limits::kMaxPlanVariables));
  const flatbuffers::String* previous = nullptr;
  for (const plan_fb::Variable* variable : *plan.variables()) {
    if (variable == nullptr || variable->name() == nullptr || variable->name()->size() == 0)
      invalid_plan("a variable without a name");
    std::string name = variable->name()->str();
    // Sorted and unique: kernels list their variables in name order by index, and runs bind by name.
    if (previous != nullptr && !(previous->string_view() < variable->name()->string_view()))
      invalid_plan(previous->string_view() == variable->name()->string_view()
                  ? "two variables are named '" + name + "'"
                  : "the variables are not sorted by name ('" + previous->str() + "' before '" + name + "')");
    previous = variable->name();
    if (variable->min() < 0 || variable->min() > variable->max() || variable->max() > limits::kMaxPlanVariableValue)
      invalid_plan("variable '" + name + "' has the range " + number(variable->min()) + ".." + number(variable->max()) +
              " (a range within 0.." + number(limits::kMaxPlanVariableValue) + " is required)");
    maxima.push_back(variable->max());
  }
  return maxima;
}

// An input's or output's dims and byte size. A value without dims is fixed (checked as in version 1).
void check_value(const plan_fb::Value& value, const char* what, const std::vector<int64_t>& maxima) {
  std::string label = std::string(what) + " '" + value.name()->str() + "'";
  if (value.dims() == nullptr) {
    if (value.byte_size_program() != nullptr) invalid_plan(label + " has a byte size program but no dimension programs");
    return;
  }
  size_t rank = value.shape() == nullptr ? 0 : value.shape()->size();
  if (value.dims()->size() != rank)
    invalid_plan(label + " has " + number(value.dims()->size()) + " dimension programs for rank " + number(rank));
  // The element count at the maxima, saturating above the byte limit (as plan_reader.cpp's check).
  uint64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    auto index = static_cast<flatbuffers::uoffset_t>(d);
    std::string dim = label + " dimension " + number(static_cast<int64_t>(d));
    int64_t size = checked_at_maxima(value.dims()->Get(index), maxima, dim);
    int64_t stored = value.shape()->Get(index);
    if (stored != -1 && stored != size)
      invalid_plan(dim + " is " + number(stored) + " in its shape but " + number(size) + " in its program");
    if (stored >= 0 && program_of(value.dims()->Get(index)).size() != 2)
      invalid_plan(dim + " is fixed (" + number(stored) + ") but its program is not that constant");
    // A -1 is a size the run decides: a program that reads no variable is a constant, and the
    // plan would load but refuse every input at that dim.
    if (stored == -1 && !reads_a_variable(program_of(value.dims()->Get(index))))
      invalid_plan(dim + " is symbolic (-1) in its shape but its program is the constant " + number(size));
    if (size < 0) invalid_plan(dim + " is negative with every variable at its maximum");
    if (size != 0 && count > limits::kMaxTensorBytes / static_cast<uint64_t>(size)) count = limits::kMaxTensorBytes + 1;
    else count *= static_cast<uint64_t>(size);
  }
  if (count > limits::kMaxTensorBytes)
    invalid_plan(label + " has more elements than kiln's limit of " + std::to_string(limits::kMaxTensorBytes) +
            " bytes per tensor allows, with every variable at its maximum");
  int64_t bytes = checked_at_maxima(value.byte_size_program(), maxima, label + " byte size");
  uint64_t expected = count * kiln_dtype_size(static_cast<kiln_dtype>(value.dtype()));
  if (bytes != value.byte_size() || static_cast<uint64_t>(value.byte_size()) != expected)
    invalid_plan(label + " has a byte size (" + number(value.byte_size()) + ", its program " + number(bytes) +
            ") that is not its shape's at the maxima (" + std::to_string(expected) + " bytes)");
}

// A run reads each variable off an input dimension that is exactly that variable, or from a value
// the run computes (a run binding, checked by check_run_bindings).
void check_bindings(const plan_fb::Plan& plan, size_t variable_count) {
  std::vector<bool> bound(variable_count, false);
  if (plan.run_bindings() != nullptr)
    for (const plan_fb::RunBinding* binding : *plan.run_bindings())
      if (binding != nullptr && binding->variable() >= 0 && static_cast<size_t>(binding->variable()) < variable_count)
        bound[static_cast<size_t>(binding->variable())] = true;
  for (const plan_fb::Value* input : *plan.inputs()) {
    if (input->dims() == nullptr) continue;
    for (const plan_fb::SizeProgram* dim : *input->dims()) {
      int64_t variable = plan::size_program_variable(program_of(dim));
      if (variable >= 0) bound[static_cast<size_t>(variable)] = true;
    }
  }
  for (size_t v = 0; v < variable_count; ++v)
    if (!bound[v])
      invalid_plan("variable '" + plan.variables()->Get(static_cast<flatbuffers::uoffset_t>(v))->name()->str() +
              "' is no input's dimension, so a run cannot know its value");
}

void check_kernel(const plan_fb::Kernel& kernel, const std::vector<int64_t>& maxima) {
  std::string label = "kernel " + kernel.symbol()->str();
  if (kernel.variables() != nullptr) {
    int64_t previous = -1;
    for (int32_t variable : *kernel.variables()) {
      // Increasing indices are the kernel's name order, because the plan's variables are sorted.
      if (variable <= previous || static_cast<size_t>(variable) >= maxima.size())
        invalid_plan(label + " lists variable " + number(variable) + ", out of range or out of name order (the plan has " +
                number(static_cast<int64_t>(maxima.size())) + ")");
      previous = variable;
    }
  }
  if (kernel.slot_sizes() != nullptr) {
    if (kernel.slot_sizes()->size() != kernel.slots()->size())
      invalid_plan(label + " has " + number(kernel.slot_sizes()->size()) + " slot size programs for " +
              number(kernel.slots()->size()) + " slots");
    for (flatbuffers::uoffset_t s = 0; s < kernel.slots()->size(); ++s) {
      std::string slot = label + " slot " + number(s) + " size";
      int64_t size = checked_at_maxima(kernel.slot_sizes()->Get(s), maxima, slot);
      // Slot.size was checked against its section; at the maxima the program must be that size.
      if (size != kernel.slots()->Get(s)->size())
        invalid_plan(slot + " is " + number(size) + " with every variable at its maximum, but the slot says " +
                number(kernel.slots()->Get(s)->size()));
    }
  }
  if (kernel.parallel_extent_program() != nullptr) {
    int64_t extent = checked_at_maxima(kernel.parallel_extent_program(), maxima, label + " parallel extent");
    if (extent != kernel.parallel_extent())
      invalid_plan(label + " parallel extent is " + number(extent) + " with every variable at its maximum, but the kernel says " +
              number(kernel.parallel_extent()));
  }
}

}  // namespace

std::span<const int64_t> program_of(const plan_fb::SizeProgram* program) {
  if (program == nullptr || program->code() == nullptr) return {};
  return {program->code()->data(), program->code()->size()};
}

bool has_symbolic_fields(const plan_fb::Plan& plan) {
  if (plan.variables() != nullptr || plan.run_bindings() != nullptr) return true;
  for (const auto* values : {plan.inputs(), plan.outputs()}) {
    if (values == nullptr) continue;
    for (const plan_fb::Value* value : *values)
      if (value != nullptr && (value->dims() != nullptr || value->byte_size_program() != nullptr)) return true;
  }
  if (plan.kernels() != nullptr)
    for (const plan_fb::Kernel* kernel : *plan.kernels())
      if (kernel != nullptr && (kernel->variables() != nullptr || kernel->slot_sizes() != nullptr ||
                                kernel->parallel_extent_program() != nullptr))
        return true;
  return false;
}

void check_symbolic_metadata(const plan_fb::Plan& plan) {
  std::vector<int64_t> maxima = check_variables(plan);
  for (const plan_fb::Value* value : *plan.inputs()) check_value(*value, "input", maxima);
  for (const plan_fb::Value* value : *plan.outputs()) check_value(*value, "output", maxima);
  check_bindings(plan, maxima.size());
  for (const plan_fb::Kernel* kernel : *plan.kernels()) check_kernel(*kernel, maxima);
}

}  // namespace kiln
