// serialize_plan: PlanContents → flatbuffers metadata → header | metadata | weights | code.
// The flatbuffers calls of a fixed-shape plan are made in exactly the order of the first writer
// (values, weights, kernels, features, plan), so such plans keep their bytes; the version-2 tables
// are made only for plans with variables.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "codegen/llvm/llvm_target.h"
#include "kiln/kiln.h"
#include "plan/plan_contents.h"
#include "plan/plan_format.h"
#include "plan/size_program.h"
#include "plan/size_program_writer.h"
#include "plan/symbolic_metadata.h"
#include "support/error.h"
#include "support/limits.h"

namespace kiln {
namespace {

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The symbolic half of a plan: its variables in name order, and every Dim as a program.
class SymbolicWriter {
 public:
  SymbolicWriter(flatbuffers::FlatBufferBuilder& builder, std::vector<PlanVariableContents> variables)
      : builder_(builder), variables_(std::move(variables)) {
    if (variables_.size() > limits::kMaxPlanVariables)
      throw UserError(str_cat("a plan of ", variables_.size(), " variables (at most ", limits::kMaxPlanVariables, ")"));
    std::sort(variables_.begin(), variables_.end(),
              [](const PlanVariableContents& a, const PlanVariableContents& b) { return a.name < b.name; });
    for (const PlanVariableContents& variable : variables_) {
      if (variable.name.empty()) throw UserError("a plan variable without a name");
      if (!numbers_.emplace(variable.name, static_cast<int64_t>(maxima_.size())).second)
        throw UserError(str_cat("two plan variables are named '", variable.name, "'"));
      if (variable.min < 0 || variable.min > variable.max || variable.max > limits::kMaxPlanVariableValue)
        throw UserError(str_cat("plan variable '", variable.name, "' has the range ", variable.min, "..", variable.max,
                                " (a range within 0..", limits::kMaxPlanVariableValue, " is required)"));
      maxima_.push_back(variable.max);
    }
  }

  bool symbolic() const { return !variables_.empty(); }

  std::vector<int64_t> program(const Dim& dim) const {
    if (dim.is_known()) return {static_cast<int64_t>(plan::SizeOp::kPush), dim.value()};
    return plan::write_size_program(dim.expression(), numbers_);
  }
  // `what` names the size in the error a program that fails at the maxima gets.
  int64_t at_maxima(const std::vector<int64_t>& code, const std::string& what) const {
    std::optional<int64_t> value = plan::evaluate_size_program(code, maxima_);
    if (!value) throw UserError(str_cat(what, " overflows with every variable at its maximum"));
    return *value;
  }
  flatbuffers::Offset<plan_fb::SizeProgram> table(const std::vector<int64_t>& code) {
    return plan_fb::CreateSizeProgramDirect(builder_, &code);
  }
  // The plan indices of a kernel's variables, ascending: the kernel's name order.
  std::vector<int32_t> indices(const std::vector<std::string>& names, const std::string& kernel) const {
    std::set<int32_t> found;
    for (const std::string& name : names) {
      auto at = numbers_.find(name);
      if (at == numbers_.end())
        throw UserError(str_cat("kernel ", kernel, " reads variable '", name, "', which the plan does not define"));
      found.insert(static_cast<int32_t>(at->second));
    }
    return {found.begin(), found.end()};
  }
  int64_t number(const std::string& name) const { return numbers_.at(name); }
  std::vector<flatbuffers::Offset<plan_fb::Variable>> variable_tables() {
    std::vector<flatbuffers::Offset<plan_fb::Variable>> tables;
    for (const PlanVariableContents& variable : variables_)
      tables.push_back(plan_fb::CreateVariableDirect(builder_, variable.name.c_str(), variable.min, variable.max));
    return tables;
  }
  const std::vector<PlanVariableContents>& variables() const { return variables_; }

 private:
  flatbuffers::FlatBufferBuilder& builder_;
  std::vector<PlanVariableContents> variables_;
  std::map<std::string, int64_t> numbers_;
  std::vector<int64_t> maxima_;
};

bool any_symbolic(const std::vector<Dim>& dims) {
  return std::any_of(dims.begin(), dims.end(), [](const Dim& dim) { return !dim.is_known(); });
}

flatbuffers::Offset<plan_fb::Value> write_value(flatbuffers::FlatBufferBuilder& builder, SymbolicWriter& symbols,
                                                const PlanValueContents& value, const char* what) {
  auto element_bytes = static_cast<int64_t>(kiln_dtype_size(static_cast<kiln_dtype>(value.dtype)));
  if (element_bytes == 0) throw UserError(str_cat(what, " '", value.name, "' has no kiln_dtype"));
  if (!any_symbolic(value.shape)) {
    std::vector<int64_t> shape;
    int64_t count = 1;
    for (const Dim& dim : value.shape) {
      shape.push_back(dim.value());
      count *= dim.value();
    }
    return plan_fb::CreateValueDirect(builder, value.name.c_str(), value.dtype, &shape, count * element_bytes,
                                      value.same_as_output);
  }
  std::string label = str_cat(what, " '", value.name, "'");
  std::vector<int64_t> shape;
  std::vector<flatbuffers::Offset<plan_fb::SizeProgram>> dims;
  Dim bytes = element_bytes;
  for (const Dim& dim : value.shape) {
    shape.push_back(dim.is_known() ? dim.value() : -1);
    dims.push_back(symbols.table(symbols.program(dim)));
    bytes = bytes * dim;
  }
  std::vector<int64_t> byte_program = symbols.program(bytes);
  int64_t byte_size = symbols.at_maxima(byte_program, label + " byte size");
  auto byte_table = symbols.table(byte_program);
  return plan_fb::CreateValueDirect(builder, value.name.c_str(), value.dtype, &shape, byte_size, value.same_as_output,
                                    &dims, byte_table);
}

flatbuffers::Offset<plan_fb::Kernel> write_kernel(flatbuffers::FlatBufferBuilder& builder, SymbolicWriter& symbols,
                                                  const PlanKernelContents& kernel) {
  bool device = !kernel.device_entry.empty();
  std::vector<Dim> slot_sizes;
  for (const PlanSlotContents& slot : kernel.slots) slot_sizes.push_back(slot.size);
  bool symbolic_slots = any_symbolic(slot_sizes);
  bool symbolic_extent = !kernel.parallel_extent.is_known();
  if (!symbolic_slots && !symbolic_extent && kernel.variables.empty()) {
    std::vector<plan_fb::Slot> slots;
    for (const PlanSlotContents& slot : kernel.slots)
      slots.emplace_back(slot.kind, slot.index, slot.offset, slot.size.value());
    std::vector<flatbuffers::Offset<flatbuffers::String>> sources;
    for (const std::string& source : kernel.sources) sources.push_back(builder.CreateString(source));
    return plan_fb::CreateKernelDirect(builder, kernel.symbol.c_str(), &slots, kernel.parallel_extent.value(),
                                       kernel.minimum_chunk, kernel.estimated_flops, kernel.estimated_bytes, &sources,
                                       nullptr, nullptr, 0, device ? kernel.device_source.c_str() : nullptr,
                                       device ? kernel.device_entry.c_str() : nullptr, kernel.device_arguments,
                                       kernel.device_local_size);
  }
  std::string label = "kernel " + kernel.symbol;
  std::vector<plan_fb::Slot> slots;
  std::vector<flatbuffers::Offset<plan_fb::SizeProgram>> size_tables;
  for (size_t s = 0; s < kernel.slots.size(); ++s) {
    const PlanSlotContents& slot = kernel.slots[s];
    std::vector<int64_t> code = symbols.program(slot.size);
    slots.emplace_back(slot.kind, slot.index, slot.offset, symbols.at_maxima(code, str_cat(label, " slot ", s, " size")));
    if (symbolic_slots) size_tables.push_back(symbols.table(code));
  }
  std::vector<int64_t> extent_code = symbols.program(kernel.parallel_extent);
  int64_t extent = symbols.at_maxima(extent_code, label + " parallel extent");
  flatbuffers::Offset<plan_fb::SizeProgram> extent_table = symbolic_extent ? symbols.table(extent_code) : 0;
  std::vector<int32_t> variables = symbols.indices(kernel.variables, kernel.symbol);
  std::vector<flatbuffers::Offset<flatbuffers::String>> sources;
  for (const std::string& source : kernel.sources) sources.push_back(builder.CreateString(source));
  return plan_fb::CreateKernelDirect(builder, kernel.symbol.c_str(), &slots, extent, kernel.minimum_chunk,
                                     kernel.estimated_flops, kernel.estimated_bytes, &sources,
                                     variables.empty() ? nullptr : &variables, symbolic_slots ? &size_tables : nullptr,
                                     extent_table, device ? kernel.device_source.c_str() : nullptr,
                                     device ? kernel.device_entry.c_str() : nullptr, kernel.device_arguments,
                                     kernel.device_local_size);
}

// The reader refuses a plan whose variable no input dimension is exactly (a run could not know it),
// unless the run decides it (a run binding).
void check_every_variable_bound(const SymbolicWriter& symbols, const std::vector<PlanValueContents>& inputs,
                                const std::vector<PlanRunBindingContents>& run_bindings) {
  std::set<int64_t> bound;
  for (const PlanRunBindingContents& binding : run_bindings) {
    const std::vector<PlanVariableContents>& variables = symbols.variables();
    if (std::none_of(variables.begin(), variables.end(),
                     [&](const PlanVariableContents& v) { return v.name == binding.variable; }))
      throw UserError(str_cat("a run binding of '", binding.variable, "', which the plan does not define"));
    bound.insert(symbols.number(binding.variable));
  }
  for (const PlanValueContents& input : inputs)
    for (const Dim& dim : input.shape)
      if (!dim.is_known()) {
        int64_t variable = plan::size_program_variable(symbols.program(dim));
        if (variable >= 0) bound.insert(variable);
      }
  for (const PlanVariableContents& variable : symbols.variables())
    if (bound.count(symbols.number(variable.name)) == 0)
      throw UserError(str_cat("plan variable '", variable.name,
                              "' is no input's dimension, so a run could not know its value"));
}

// Run bindings (format version 6), checked as the reader will: each binds a variable of the plan
// once, no input's shape reads it, and no kernel at or before its binding point reads it or is
// sized by it (that kernel would run before the value is known).
std::vector<flatbuffers::Offset<plan_fb::RunBinding>> write_run_bindings(flatbuffers::FlatBufferBuilder& builder,
                                                                         const SymbolicWriter& symbols,
                                                                         const PlanContents& contents) {
  std::vector<flatbuffers::Offset<plan_fb::RunBinding>> tables;
  std::set<int64_t> seen;
  for (const PlanRunBindingContents& binding : contents.run_bindings) {
    int64_t number = symbols.number(binding.variable);  // defined: check_every_variable_bound
    if (!seen.insert(number).second) throw UserError(str_cat("variable '", binding.variable, "' is bound twice by the run"));
    auto reads = [&](const Dim& dim) {
      if (dim.is_known()) return false;
      std::vector<int64_t> code = symbols.program(dim);
      for (size_t i = 0; i + 1 < code.size(); i += 2)
        if (code[i] == static_cast<int64_t>(plan::SizeOp::kVariable) && code[i + 1] == number) return true;
      return false;
    };
    for (const PlanValueContents& input : contents.inputs)
      if (std::any_of(input.shape.begin(), input.shape.end(), reads))
        throw UserError(str_cat("input '", input.name, "' has a shape over '", binding.variable,
                                "', which only the run decides"));
    for (int k = 0; k <= binding.after_kernel && k < static_cast<int>(contents.kernels.size()); ++k) {
      const PlanKernelContents& kernel = contents.kernels[static_cast<size_t>(k)];
      bool sized = reads(kernel.parallel_extent) ||
                   std::any_of(kernel.slots.begin(), kernel.slots.end(), [&](const PlanSlotContents& s) { return reads(s.size); }) ||
                   std::find(kernel.variables.begin(), kernel.variables.end(), binding.variable) != kernel.variables.end();
      if (sized)
        throw UserError(str_cat("unsupported: kernel ", kernel.symbol, " (", k, " of the launch list) is sized by '",
                                binding.variable, "', which the run decides only after kernel ", binding.after_kernel,
                                binding.origin.empty() ? "" : str_cat(" (", binding.origin, ")")));
    }
    const PlanSlotContents& source = binding.source;
    plan_fb::Slot slot(source.kind, source.index, source.offset, source.size.value());
    tables.push_back(plan_fb::CreateRunBindingDirect(builder, static_cast<int32_t>(number), &slot, binding.dtype,
                                                     binding.after_kernel,
                                                     binding.origin.empty() ? nullptr : binding.origin.c_str()));
  }
  return tables;
}

std::string assemble(const std::string& metadata, const PlanContents& contents, uint32_t version) {
  uint64_t metadata_offset = plan::kPlanHeaderSize;
  uint64_t weights_offset = align_up(metadata_offset + metadata.size(), plan::kPlanSectionAlignment);
  uint64_t code_offset = align_up(weights_offset + contents.weights.size(), plan::kPlanSectionAlignment);
  uint64_t file_size = code_offset + contents.code.size();
  std::string file(file_size, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(file.data());
  std::copy(metadata.begin(), metadata.end(), file.begin() + static_cast<std::ptrdiff_t>(metadata_offset));
  std::copy(contents.weights.begin(), contents.weights.end(), file.begin() + static_cast<std::ptrdiff_t>(weights_offset));
  std::copy(contents.code.begin(), contents.code.end(), file.begin() + static_cast<std::ptrdiff_t>(code_offset));
  namespace field = plan::header_field;
  std::copy(std::begin(plan::kPlanMagic), std::end(plan::kPlanMagic), file.begin());
  plan::write_u32(bytes + field::format_version, version);
  plan::write_u32(bytes + field::header_size, static_cast<uint32_t>(plan::kPlanHeaderSize));
  plan::write_u64(bytes + field::file_size, file_size);
  plan::write_u64(bytes + field::metadata_offset, metadata_offset);
  plan::write_u64(bytes + field::metadata_size, metadata.size());
  plan::write_u64(bytes + field::weights_offset, weights_offset);
  plan::write_u64(bytes + field::weights_size, contents.weights.size());
  plan::write_u64(bytes + field::code_offset, code_offset);
  plan::write_u64(bytes + field::code_size, contents.code.size());
  plan::write_u64(bytes + field::content_hash,
                  plan::plan_content_hash(bytes + plan::kPlanHeaderSize, file_size - plan::kPlanHeaderSize));
  return file;
}

}  // namespace

void set_cpu_target(PlanContents& contents, const CpuTarget* cross_target) {
  const CpuTarget& target = cross_target != nullptr ? *cross_target : CpuTarget::host();
  contents.target_triple = target.triple();
  contents.cpu_name = target.cpu();
  // "+avx2,+fma,-sse4a,..." → the enabled features, sorted.
  contents.cpu_features.clear();
  const std::string& features = target.features();
  for (size_t begin = 0; begin < features.size();) {
    size_t end = std::min(features.find(',', begin), features.size());
    if (end - begin > 1 && features[begin] == '+') contents.cpu_features.push_back(features.substr(begin + 1, end - begin - 1));
    begin = end + 1;
  }
  std::sort(contents.cpu_features.begin(), contents.cpu_features.end());
}

std::string serialize_plan(const PlanContents& contents) {
  flatbuffers::FlatBufferBuilder builder;
  SymbolicWriter symbols(builder, contents.variables);
  if (symbols.symbolic() || !contents.run_bindings.empty())
    check_every_variable_bound(symbols, contents.inputs, contents.run_bindings);
  std::vector<flatbuffers::Offset<plan_fb::Value>> inputs, outputs;
  for (const PlanValueContents& input : contents.inputs) inputs.push_back(write_value(builder, symbols, input, "input"));
  for (const PlanValueContents& output : contents.outputs)
    outputs.push_back(write_value(builder, symbols, output, "output"));
  std::vector<flatbuffers::Offset<plan_fb::Weight>> weights;
  for (const auto& [offset, size] : contents.weight_ranges)
    weights.push_back(plan_fb::CreateWeight(builder, static_cast<int64_t>(offset), static_cast<int64_t>(size)));
  std::vector<flatbuffers::Offset<plan_fb::Kernel>> kernels;
  for (const PlanKernelContents& kernel : contents.kernels) kernels.push_back(write_kernel(builder, symbols, kernel));
  std::vector<flatbuffers::Offset<flatbuffers::String>> features;
  for (const std::string& feature : contents.cpu_features) features.push_back(builder.CreateString(feature));
  bool device = !contents.device.empty();
  bool run_bound = !contents.run_bindings.empty() || !contents.pinned_inputs.empty();
  if (!contents.run_bindings.empty() && device)
    throw UserError("unsupported: sizes decided by the run (" + contents.run_bindings.front().variable + ") in a device plan");
  if (!contents.pinned_inputs.empty() && device)
    throw UserError("unsupported: inputs compiled for one value (kiln compile --value) in a device plan");
  bool local_sizes = std::ranges::any_of(contents.kernels, [](const PlanKernelContents& k) { return k.device_local_size != 0; });
  uint32_t version = run_bound                ? plan::kPlanFormatVersionRunBound
                     : device && symbols.symbolic() ? plan::kPlanFormatVersionSymbolicDevice
                     : local_sizes                ? plan::kPlanFormatVersionLocalSizes
                     : device              ? plan::kPlanFormatVersionDevice
                     : symbols.symbolic() ? plan::kPlanFormatVersionSymbolic
                                          : plan::kPlanFormatVersionFixedShapes;
  std::vector<flatbuffers::Offset<plan_fb::Variable>> variables = symbols.variable_tables();
  std::vector<flatbuffers::Offset<flatbuffers::String>> requirements;
  for (const std::string& requirement : contents.device_requirements) requirements.push_back(builder.CreateString(requirement));
  // Made only for a plan that has them, so every other plan keeps its bytes.
  std::vector<flatbuffers::Offset<plan_fb::RunBinding>> run_bindings;
  if (!contents.run_bindings.empty()) run_bindings = write_run_bindings(builder, symbols, contents);
  std::vector<flatbuffers::Offset<plan_fb::PinnedInput>> pinned;
  for (const PlanPinnedInputContents& input : contents.pinned_inputs) {
    if (input.input < 0 || static_cast<size_t>(input.input) >= contents.inputs.size())
      throw UserError(str_cat("a pinned value of input ", input.input, ", which the plan does not have"));
    std::vector<uint8_t> bytes(input.bytes.begin(), input.bytes.end());
    pinned.push_back(plan_fb::CreatePinnedInputDirect(builder, input.input, &bytes));
  }
  auto root = plan_fb::CreatePlanDirect(builder, version, KILN_VERSION_STRING, contents.target_triple.c_str(),
                                        contents.cpu_name.c_str(), &features, &inputs, &outputs, &weights,
                                        contents.arena_bytes, &kernels, symbols.symbolic() ? &variables : nullptr,
                                        device ? contents.device.c_str() : nullptr, device ? &requirements : nullptr,
                                        contents.run_bindings.empty() ? nullptr : &run_bindings,
                                        contents.pinned_inputs.empty() ? nullptr : &pinned);
  builder.Finish(root, plan_fb::PlanIdentifier());
  std::string metadata(reinterpret_cast<const char*>(builder.GetBufferPointer()), builder.GetSize());
  return assemble(metadata, contents, version);
}

}  // namespace kiln
