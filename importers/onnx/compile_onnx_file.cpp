// compile_onnx_file: the steps that `kiln compile` and compiler.h share, in the order they print.
#include "compile_onnx_file.h"

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <optional>
#include <utility>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/llvm/llvm_target.h"
#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "plan/plan_writer.h"
#include "support/atomic_file.h"
#include "support/large_stack.h"
#include "op_helpers.h"
#include "shape_values.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln::onnx_import {

CompileProgress stderr_compile_progress() {
  auto start = std::chrono::steady_clock::now();
  return [start](const std::string& line) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "kiln compile: [%6.2fs] %s\n", seconds, line.c_str());
  };
}

PinnedValueSpec parse_value_spec(const std::string& text) {
  size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0)
    throw UserError(str_cat("--value '", text, "': expected NAME=V[,V...] (the input's elements, row-major)"));
  PinnedValueSpec spec{text.substr(0, equals), {}, std::nullopt};
  std::string rest = text.substr(equals + 1);
  if (size_t dots = rest.find(".."); dots != std::string::npos) {
    size_t used_min = 0, used_max = 0;
    int64_t min = -1, max = -1;
    try {
      min = std::stoll(rest.substr(0, dots), &used_min);
      max = std::stoll(rest.substr(dots + 2), &used_max);
    } catch (const std::exception&) {
      used_min = 0;
    }
    if (used_min != dots || used_max != rest.size() - dots - 2 || min < 0 || min > max)
      throw UserError(str_cat("--value '", text, "': a range is NAME=MIN..MAX with 0 <= MIN <= MAX"));
    spec.range = std::make_pair(min, max);
    return spec;
  }
  for (size_t begin = 0; begin <= rest.size();) {
    size_t end = std::min(rest.find(',', begin), rest.size());
    if (end > begin) spec.elements.push_back(rest.substr(begin, end - begin));
    begin = end + 1;
  }
  return spec;
}

namespace {

// The constant a pinned input stands for: its elements parsed as the placeholder's dtype, which
// must have a known shape with exactly that many elements.
Tensor pinned_value(const PinnedValueSpec& spec, const Tensor& placeholder) {
  if (!all_known(dims_of(placeholder)))
    throw UserError(str_cat("--value ", spec.name, ": the input has a symbolic shape ", dims_string(dims_of(placeholder)),
                            "; a pinned input needs a fixed one (--shape)"));
  Shape shape = placeholder.shape();
  int64_t count = placeholder.numel();
  if (static_cast<int64_t>(spec.elements.size()) != count)
    throw UserError(str_cat("--value ", spec.name, ": ", spec.elements.size(), " values for an input of shape ",
                            shape_string(shape), " (", count, " elements)"));
  std::vector<double> numbers;
  std::vector<int64_t> integers;
  bool integral = is_integral(placeholder.dtype()) || placeholder.dtype() == ScalarType::Bool;
  for (const std::string& element : spec.elements) {
    size_t used = 0;
    try {
      if (integral) integers.push_back(std::stoll(element, &used));
      else numbers.push_back(std::stod(element, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != element.size())
      throw UserError(str_cat("--value ", spec.name, ": '", element, "' is not ", integral ? "an integer" : "a number"));
  }
  Tensor value = integral ? Tensor::from_vector(integers, shape) : Tensor::from_vector(numbers, shape);
  Tensor typed = value.cast(placeholder.dtype());
  typed.realize();  // a tensor with data, as an initializer is
  return typed;
}

// What the graph sees for an input given as sizes the run decides (--value NAME=MIN..MAX): a shape
// value (shape_values.h) whose elements are run-bound sizes, each read from the caller's input
// before the first kernel. Its data equals the input's, so a model may also use it as data.
Tensor run_time_sizes(const PinnedValueSpec& spec, const Tensor& placeholder) {
  if (placeholder.dtype() != ScalarType::Int64 || !all_known(dims_of(placeholder)) || placeholder.ndim() > 1 ||
      placeholder.numel() > 64)
    throw UserError(str_cat("--value ", spec.name, "=MIN..MAX: the input must be an int64 scalar or 1-D tensor of at "
                            "most 64 elements with a fixed shape, not ", scalar_type_name(placeholder.dtype()), " ",
                            dims_string(dims_of(placeholder))));
  Dims sizes;
  for (int64_t i = 0; i < placeholder.numel(); ++i)
    sizes.push_back(run_bound_input_element(spec.name, i, placeholder.ndim() == 0 ? spec.name : str_cat(spec.name, "[", i, "]"),
                                            spec.range->first, spec.range->second));
  return shape_value_tensor(sizes, placeholder.ndim() == 0);
}

}  // namespace

OnnxGraph build_onnx_graph(const std::string& model_path, const OnnxCompileOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  progress("loading " + model_path);
  OnnxModel model = OnnxModel::load_file(model_path);
  OnnxGraph graph;
  ScopedMatmulPrecision precision(options.precision);
  try {
    // A dimension given a range (--shape NAME=MIN..MAX) stays symbolic: a size variable of the
    // plan (docs/symbolic-shapes.md).
    for (const auto& [name, dims] : model.bind_input_dims(options.shapes, UnboundSymbols::Error)) {
      ScalarType dtype = ScalarType::Float32;  // an input the model leaves untyped
      for (const auto& info : model.inputs())
        if (info.name == name && info.dtype) dtype = *info.dtype;
      graph.inputs.emplace_back(name, symbolic_graph_input(name, dims, dtype));
    }
    // Pinned inputs reach the graph as constants: builders read their values as they read
    // initializers (a reduction's axes, a Pad's pads), and the plan checks every run's bytes.
    std::vector<std::pair<std::string, Tensor>> built_inputs = graph.inputs;
    for (const PinnedValueSpec& spec : options.values) {
      auto input = std::find_if(built_inputs.begin(), built_inputs.end(), [&](const auto& entry) { return entry.first == spec.name; });
      if (input == built_inputs.end()) {
        std::string names;
        for (const auto& entry : graph.inputs) names += (names.empty() ? "" : ", ") + entry.first;
        throw UserError(str_cat("--value names no input of the model: '", spec.name, "' (its inputs: ", names, ")"));
      }
      if (spec.range) {
        input->second = run_time_sizes(spec, input->second);
        continue;
      }
      Tensor value = pinned_value(spec, input->second);
      std::string bytes(static_cast<size_t>(value.numel()) * scalar_type_size(value.dtype()), '\0');
      value.copy_to(bytes.data(), bytes.size());
      graph.pinned.emplace_back(spec.name, std::move(bytes));
      input->second = value;
    }
    progress("building the graph");
    RunTimeCheckRecorder checks;  // a run-time If with one branch built makes one
    graph.outputs = model.build(built_inputs);
    graph.run_time_checks = checks.names();
  } catch (const UserError& error) {
    throw UserError(str_cat(model_path, ": ", error.what()));
  }
  return graph;
}

std::string compile_onnx_plan(const std::string& model_path, const OnnxCompileOptions& options) {
  // The database first: a bad one is reported before the (longer) model work.
  std::optional<TuningDb> tuning;
  if (!options.tuning_path.empty()) {
    tuning = TuningDb::load_file(options.tuning_path);
    if (options.progress) options.progress(str_cat("tuning database ", options.tuning_path, ": ", tuning->size(), " entries"));
  }
  // Import and scheduling recurse as deep as the graph (up to limits::kMaxGraphDepth nodes, each
  // several UOps): run them on a stack sized for that, not on the caller's.
  std::string plan;
  if (options.cpu_architecture.empty() && !options.cpu_name.empty())
    throw UserError("a CPU name (--cpu " + options.cpu_name + ") needs a CPU target architecture (--target aarch64 or x86_64)");
  std::optional<CpuTarget> cpu_target;
  if (!options.cpu_architecture.empty()) {
    if (!options.device.empty() && options.device != "cpu")
      throw UserError("a CPU target architecture applies to CPU plans only, not to '" + options.device + "' plans");
    cpu_target = CpuTarget::cross(options.cpu_architecture, options.cpu_name);
  }
  const TargetCaps* device_caps = options.device == "cuda"     ? &cuda_target_caps(options.cuda_architecture)
                                  : options.device == "opencl" ? &opencl_target_caps()
                                  : cpu_target                 ? &cpu_target->caps()
                                                               : &host_cpu_caps();
  if (options.precision == MatmulPrecision::kBFloat16 && !device_caps->amx_bf16 && options.progress)
    options.progress("--precision bf16: the target has no AMX bf16 tiles, so its matmuls stay fp32");
  run_on_large_stack([&] {
    ScopedGraphTarget target(device_caps);  // the graph's layouts for the device the plan is for
    OnnxGraph graph = build_onnx_graph(model_path, options);
    PlanWriteOptions write_options;
    write_options.progress = options.progress;
    write_options.tuning = tuning ? &*tuning : nullptr;
    write_options.device = options.device == "cpu" ? "" : options.device;
    write_options.cuda_architecture = options.cuda_architecture;
    write_options.cpu_target = cpu_target ? &*cpu_target : nullptr;
    write_options.pinned_inputs = graph.pinned;
    write_options.run_time_checks = graph.run_time_checks;
    plan = write_plan(graph.inputs, graph.outputs, write_options);
  });
  return plan;
}

PlanFileError::PlanFileError(Step step, std::string temporary, std::string target, std::string reason)
    : UserError(step == Step::Write ? str_cat("cannot write the plan to '", temporary, "'")
                                    : str_cat("cannot rename '", temporary, "' to '", target, "': ", reason)),
      step(step),
      temporary(std::move(temporary)),
      target(std::move(target)),
      reason(std::move(reason)) {}

void save_plan_file(const std::string& plan_path, const std::string& plan) {
  std::string temporary = plan_path + ".tmp";
  std::optional<AtomicWriteFailure> failure = write_file_atomically(plan_path, temporary, plan);
  if (!failure) return;
  PlanFileError::Step step =
      failure->step == AtomicWriteFailure::Step::Write ? PlanFileError::Step::Write : PlanFileError::Step::Rename;
  throw PlanFileError(step, step == PlanFileError::Step::Write ? failure->file : temporary, plan_path, failure->reason);
}

void compile_onnx_file(const std::string& model_path, const std::string& plan_path, const OnnxCompileOptions& options) {
  std::string plan = compile_onnx_plan(model_path, options);
  save_plan_file(plan_path, plan);
  if (options.progress) options.progress(str_cat("wrote ", plan_path, " (", plan.size(), " bytes)"));
}

}  // namespace kiln::onnx_import
