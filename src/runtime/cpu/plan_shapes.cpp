// PlanShapes: the programs are spans into the verified metadata (never copied); the messages are
// built only on the error paths, so a correct run allocates nothing here.
#include "runtime/cpu/plan_shapes.h"

#include <algorithm>

#include "plan/plan_reader.h"
#include "plan/run_bound_metadata.h"
#include "plan/size_program.h"
#include "plan/symbolic_metadata.h"

namespace kiln {
namespace {

[[noreturn]] void bad_argument(const char* function, const std::string& message) {
  throw PlanError(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + message);
}

}  // namespace

PlanShapes::PlanShapes(const plan_fb::Plan& plan) {
  if (plan.variables() != nullptr)
    for (const plan_fb::Variable* variable : *plan.variables()) {
      variables_.push_back({variable->name()->str(), variable->min(), variable->max()});
      names_.push_back(variable->name()->str());
    }
  auto read = [&](const flatbuffers::Vector<flatbuffers::Offset<plan_fb::Value>>& values,
                  std::vector<std::vector<PlanDim>>& dims, std::vector<std::span<const int64_t>>& bytes) {
    for (const plan_fb::Value* value : values) {
      std::vector<PlanDim> entry;
      size_t rank = value->shape() == nullptr ? 0 : value->shape()->size();
      for (size_t d = 0; d < rank; ++d) {
        PlanDim dim;
        auto at = static_cast<flatbuffers::uoffset_t>(d);
        dim.size = value->shape()->Get(at);
        if (dim.size < 0) {  // check_symbolic_metadata: -1 only with a program
          dim.program = program_of(value->dims()->Get(at));
          dim.variable = plan::size_program_variable(dim.program);
          dim.text = plan::size_program_text(dim.program, names_);
        }
        entry.push_back(std::move(dim));
      }
      dims.push_back(std::move(entry));
      bytes.push_back(program_of(value->byte_size_program()));
    }
  };
  read(*plan.inputs(), input_dims_, input_bytes_);
  read(*plan.outputs(), output_dims_, output_bytes_);
  // Made after the dims are complete, so that the text pointers stay valid.
  auto arrays = [](const std::vector<std::vector<PlanDim>>& all, std::vector<DimArrays>& result) {
    for (const std::vector<PlanDim>& dims : all) {
      DimArrays entry;
      for (const PlanDim& dim : dims) {
        entry.texts.push_back(dim.size >= 0 ? nullptr : dim.text.c_str());
        entry.variables.push_back(dim.variable);
      }
      result.push_back(std::move(entry));
    }
  };
  arrays(input_dims_, input_arrays_);
  arrays(output_dims_, output_arrays_);
  run_bound_ = run_bound_variables(plan);
  for (const std::vector<PlanDim>& dims : output_dims_) {
    bool run_shaped = false;
    for (const PlanDim& dim : dims)
      for (size_t i = 0; i + 1 < dim.program.size(); i += 2)
        if (dim.program[i] == static_cast<int64_t>(plan::SizeOp::kVariable) && run_bound(static_cast<size_t>(dim.program[i + 1])))
          run_shaped = true;
    output_run_shaped_.push_back(run_shaped);
  }
}

bool PlanShapes::any_output_run_shaped() const {
  return std::find(output_run_shaped_.begin(), output_run_shaped_.end(), true) != output_run_shaped_.end();
}

std::string PlanShapes::shape_text(const std::vector<PlanDim>& dims) {
  std::string text = "(";
  for (size_t d = 0; d < dims.size(); ++d)
    text += (d ? ", " : "") + (dims[d].size >= 0 ? std::to_string(dims[d].size) : dims[d].text);
  return text + ")";
}

void PlanShapes::throw_program_failure(const char* function, const std::string& what) {
  throw PlanError(KILN_ERROR_INVALID_PLAN, std::string(function) + ": the plan's program for " + what +
                                               " overflows or divides by zero at these input shapes");
}

void PlanShapes::bind_variables(const kiln_tensor* const* bound_inputs, const std::vector<std::string>& input_names,
                                std::span<int64_t> values, std::span<int> first_binder, const char* function) const {
  std::fill(first_binder.begin(), first_binder.end(), -1);
  for (size_t v = 0; v < run_bound_.size(); ++v)
    if (run_bound_[v]) values[v] = variables_[v].max;
  // First the dimensions that are exactly a variable: they give its value.
  for (size_t i = 0; i < input_dims_.size(); ++i)
    for (size_t d = 0; d < input_dims_[i].size(); ++d) {
      int64_t v = input_dims_[i][d].variable;
      if (v < 0) continue;
      auto index = static_cast<size_t>(v);
      const PlanVariable& variable = variables_[index];
      int64_t given = bound_inputs[i]->shape[d];
      if (first_binder[index] < 0) {
        if (given < variable.min || given > variable.max)
          bad_argument(function, "input '" + input_names[i] + "' axis " + std::to_string(d) + " (" + variable.name +
                                     ") is " + std::to_string(given) + "; the plan allows " +
                                     std::to_string(variable.min) + ".." + std::to_string(variable.max));
        values[index] = given;
        first_binder[index] = static_cast<int>(i);
      } else if (values[index] != given) {
        const std::string& first = input_names[static_cast<size_t>(first_binder[index])];
        bad_argument(function, "'" + first + "' gives " + variable.name + "=" + std::to_string(values[index]) + ", '" +
                                   input_names[i] + "' gives " + variable.name + "=" + std::to_string(given));
      }
    }
  // Then every other dimension: a fixed size, or an expression of the variables now known.
  for (size_t i = 0; i < input_dims_.size(); ++i)
    for (size_t d = 0; d < input_dims_[i].size(); ++d) {
      const PlanDim& dim = input_dims_[i][d];
      if (dim.variable >= 0) continue;
      int64_t given = bound_inputs[i]->shape[d];
      int64_t expected = dim.size >= 0 ? dim.size
                                       : evaluate(dim.program, values, function, [&] {
                                         return "input '" + input_names[i] + "' axis " + std::to_string(d);
                                       });
      if (given != expected)
        bad_argument(function, "input '" + input_names[i] + "' axis " + std::to_string(d) + " is " +
                                   std::to_string(given) + "; the plan expects " +
                                   (dim.size >= 0 ? std::to_string(expected)
                                                  : dim.text + " = " + std::to_string(expected) + " for these inputs"));
    }
}

void PlanShapes::output_shape(size_t index, std::span<const int64_t> values, int64_t* out, const char* function) const {
  const std::vector<PlanDim>& dims = output_dims_[index];
  for (size_t d = 0; d < dims.size(); ++d) {
    out[d] = dims[d].size >= 0 ? dims[d].size
                               : evaluate(dims[d].program, values, function, [&] {
                                 return "output " + std::to_string(index) + " axis " + std::to_string(d);
                               });
    if (out[d] < 0)
      throw PlanError(KILN_ERROR_INVALID_PLAN, std::string(function) + ": the plan computes a negative size (" +
                                                   std::to_string(out[d]) + ") for output " + std::to_string(index) +
                                                   " axis " + std::to_string(d) + " at these input shapes");
  }
}

std::vector<bool> launches_sized_by_run(const plan_fb::Plan& meta) {
  const std::vector<bool> variables = run_bound_variables(meta);
  auto reads = [&](const plan_fb::SizeProgram* program) {
    std::span<const int64_t> code = program_of(program);
    for (size_t i = 0; i + 1 < code.size(); i += 2)
      if (code[i] == static_cast<int64_t>(plan::SizeOp::kVariable) && code[i + 1] >= 0 &&
          static_cast<size_t>(code[i + 1]) < variables.size() && variables[static_cast<size_t>(code[i + 1])])
        return true;
    return false;
  };
  std::vector<bool> flags;
  for (const plan_fb::Kernel* kernel : *meta.kernels()) {
    bool uses = kernel->parallel_extent_program() != nullptr && reads(kernel->parallel_extent_program());
    if (kernel->slot_sizes() != nullptr)
      for (const plan_fb::SizeProgram* size : *kernel->slot_sizes()) uses = uses || reads(size);
    if (kernel->variables() != nullptr)
      for (int32_t v : *kernel->variables())
        uses = uses || (v >= 0 && static_cast<size_t>(v) < variables.size() && variables[static_cast<size_t>(v)]);
    flags.push_back(uses);
  }
  return flags;
}

}  // namespace kiln
