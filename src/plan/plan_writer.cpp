// write_plan: schedule → buffer classes → kernel objects → LLD → PlanContents → serialize_plan.
// Everything that reaches the file is ordered by the schedule (never by pointers or hash maps), so
// two compiles of one model give the same bytes.
#include "plan/plan_writer.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "codegen/llvm/llvm_target.h"
#include "driver/compile_kernels.h"
#include "kiln/kiln.h"
#include "passes/pipeline.h"
#include "passes/symbolic.h"
#include "plan/link_shared_object.h"
#include "plan/plan_contents.h"
#include "plan/plan_dtype.h"
#include "plan/plan_format.h"
#include "schedule/schedule.h"
#include "support/error.h"
#include "support/parallel_tasks.h"
#include "tensor/run_bound.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using detail::TensorData;

int kiln_dtype_of(DType dtype) {
  std::optional<kiln_dtype> type = plan::plan_dtype_of(dtype.scalar());
  if (!type) throw UserError(str_cat("a plan cannot hold values of type ", dtype.name()));
  return *type;
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

PlanValueContents value_contents(const std::string& name, const Tensor& tensor, int same_as) {
  PlanValueContents value;
  value.name = name;
  value.dtype = kiln_dtype_of(tensor.data().dtype);
  value.shape = dims_of(tensor);  // symbolic where the tensor's shape is
  value.same_as_output = same_as;
  return value;
}

// The plan's variables: every size variable the kernels read or an input's or output's shape names,
// and the run-time checks (read by no kernel), by name.
std::vector<PlanVariableContents> plan_variables(const Schedule& schedule, const std::vector<PlanValueContents>& inputs,
                                                 const std::vector<PlanValueContents>& outputs,
                                                 const std::vector<VariableSpec>& checks) {
  std::map<std::string, VariableSpec> found;
  auto add = [&](const VariableSpec& spec) {
    auto [at, added] = found.emplace(spec.name, spec);
    if (!added && !(at->second == spec))
      throw UserError(str_cat("size variable '", spec.name, "' has two ranges: ", at->second.min, "..", at->second.max,
                              " and ", spec.min, "..", spec.max));
  };
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (const VariableSpec& spec : kernel.variables) add(spec);
  for (const VariableSpec& spec : checks) add(spec);
  for (const auto* values : {&inputs, &outputs})
    for (const PlanValueContents& value : *values)
      for (const Dim& dim : value.shape)
        if (!dim.is_known())
          for (const UOp* node : toposort(dim.expression()))
            if (node->op() == Ops::DEFINE_VAR) add(node->arg_variable());
  std::vector<PlanVariableContents> variables;
  for (const auto& [name, spec] : found) variables.push_back({name, spec.min, spec.max});
  return variables;
}

// A variable the run decides, as write_plan schedules it: its name, its value (an extra root of the
// schedule, after the plan's outputs) and the node that decides it.
struct RunBoundRoot {
  std::string name;
  RunBoundValue value;
};

// The run-bound variables (run_bound.h) that the kernels of `schedule` or the shapes of `outputs`
// use, and the run-time `checks`, that `known` does not hold yet, by name.
std::vector<RunBoundRoot> new_run_bound_roots(const Schedule& schedule, const std::vector<std::pair<std::string, Tensor>>& outputs,
                                              const std::vector<std::string>& checks,
                                              const std::vector<RunBoundRoot>& known) {
  std::set<std::string> names;
  for (const ScheduledKernel& kernel : schedule.kernels)
    for (const VariableSpec& spec : kernel.variables) names.insert(spec.name);
  for (const auto& [name, tensor] : outputs)
    for (const Dim& dim : dims_of(tensor))
      if (!dim.is_known())
        for (const UOp* node : toposort(dim.expression()))
          if (node->op() == Ops::DEFINE_VAR) names.insert(node->arg_variable().name);
  names.insert(checks.begin(), checks.end());  // read by no kernel: the builder names them
  std::vector<RunBoundRoot> found;
  for (const std::string& name : names) {
    if (std::any_of(known.begin(), known.end(), [&](const RunBoundRoot& root) { return root.name == name; })) continue;
    if (std::optional<RunBoundValue> value = find_run_bound(name)) found.push_back({name, *value});
  }
  return found;
}

// Where the runtime reads each run-bound value (decision 12): the graph input or plan output that
// holds it, or 64 bytes of its own past the memory plan's arena, which no other buffer shares, so
// the value survives until the run ends. The binding is read after the first kernel that touches
// the value's buffer (its producer: the value is a root, so every reader comes later). Returns the
// arena's size with those bytes.
int64_t place_run_bound_values(const Schedule& schedule, const std::vector<RunBoundRoot>& run_bound, size_t output_count,
                               const std::vector<int>& output_of_buffer, const std::map<int64_t, int>& input_of_buffer,
                               const std::vector<std::pair<std::string, Tensor>>& inputs,
                               std::vector<PlanSlotContents>& buffer_slots, PlanContents& contents) {
  int64_t arena_end = schedule.arena_bytes;
  std::map<size_t, PlanSlotContents> placed;  // value buffers given their bytes past the arena
  size_t root = output_count;  // the scheduled values follow the outputs, in run_bound's order
  for (size_t r = 0; r < run_bound.size(); ++r) {
    const std::string& name = run_bound[r].name;
    const std::string& origin = run_bound[r].value.origin;
    if (!run_bound[r].value.input.empty()) {
      // An element of a graph input, read before the first kernel.
      const std::string& input = run_bound[r].value.input;
      auto found = std::find_if(inputs.begin(), inputs.end(), [&](const auto& entry) { return entry.first == input; });
      if (found == inputs.end())
        throw UserError(str_cat("size '", name, "' is read from input '", input, "', which is no input of the plan"));
      int64_t element = found->second.dtype() == ScalarType::Int32 ? 4 : 8;
      PlanRunBindingContents binding;
      binding.variable = name;
      binding.origin = origin;
      binding.dtype = element == 4 ? KILN_DTYPE_INT32 : KILN_DTYPE_INT64;
      binding.source = PlanSlotContents{plan_fb::SlotKind_GraphInput, static_cast<int>(found - inputs.begin()),
                                        run_bound[r].value.element * element, element};
      contents.run_bindings.push_back(std::move(binding));
      continue;
    }
    auto b = static_cast<size_t>(schedule.outputs[root++]);
    const ScheduledBuffer& buffer = schedule.buffers[b];
    int64_t element = buffer.dtype.scalar_bytes();
    PlanRunBindingContents binding;
    binding.variable = name;
    binding.origin = origin;
    binding.dtype = element == 4 ? KILN_DTYPE_INT32 : KILN_DTYPE_INT64;
    if (buffer.kind == ScheduledBuffer::Kind::Input) {
      auto found = input_of_buffer.find(buffer.input_id);
      // A value with data would have been decided at build time, not bound by the run.
      KILN_ASSERT(found != input_of_buffer.end(), "run-bound size ", name, " is a constant");
      binding.source = PlanSlotContents{plan_fb::SlotKind_GraphInput, found->second, 0, element};
    } else {
      if (output_of_buffer[b] >= 0) {
        binding.source = PlanSlotContents{plan_fb::SlotKind_GraphOutput, output_of_buffer[b], 0, element};
      } else if (auto at = placed.find(b); at != placed.end()) {
        // Two variables of one value (two NonZeros of one mask: hash-consing made them one
        // buffer) read the same bytes; placing it twice would leave the first reading bytes that
        // no kernel writes.
        binding.source = at->second;
      } else {
        arena_end = static_cast<int64_t>(align_up(static_cast<uint64_t>(arena_end), 64));
        buffer_slots[b] = PlanSlotContents{plan_fb::SlotKind_Arena, 0, arena_end, element};
        binding.source = buffer_slots[b];
        placed.emplace(b, buffer_slots[b]);
        arena_end += 64;
      }
      for (size_t k = 0; k < schedule.kernels.size() && binding.after_kernel < 0; ++k)
        for (int used : schedule.kernels[k].buffers)
          if (static_cast<size_t>(used) == b) binding.after_kernel = static_cast<int>(k);
      KILN_ASSERT(binding.after_kernel >= 0, "no kernel computes run-bound size ", name);
      // A remainder kernel computes the rest of its main kernel's rows: the value is whole after it.
      while (static_cast<size_t>(binding.after_kernel) + 1 < schedule.kernels.size() &&
             schedule.kernels[static_cast<size_t>(binding.after_kernel) + 1].finishes_previous)
        ++binding.after_kernel;
    }
    contents.run_bindings.push_back(std::move(binding));
  }
  return arena_end;
}

// The data of every BUFFER the graphs of `roots` read, by buffer id (found through the handles'
// inputs); placeholders (graph inputs) have none and are left out.
std::unordered_map<int64_t, const HostBuffer*> data_buffers(const std::vector<const TensorData*>& roots) {
  std::unordered_map<int64_t, const HostBuffer*> buffers;
  std::unordered_set<const TensorData*> seen;
  std::vector<const TensorData*> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    const TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (data->buffer) buffers.emplace(data->buffer_id, data->buffer.get());
    for (const auto& input : data->inputs) stack.push_back(input.get());
  }
  return buffers;
}

// Device plans: every kernel rendered for the device. OpenCL C is stored as source, built when the
// plan is loaded; CUDA C is compiled now by NVRTC and stored as PTX (RenderedKernel::source then
// holds the PTX). A device that lacks a dtype the plan holds (or, for CUDA, the architecture)
// refuses the plan at load, by its device_requirements. A symbolic kernel takes its variables'
// values as integer parameters after its buffers (c_renderer.h), in Kernel.variables order.
std::vector<RenderedKernel> render_device_kernels(const Schedule& schedule, const PlanWriteOptions& options,
                                                  PlanContents& contents,
                                                  const std::function<void(const std::string&)>& progress) {
  bool cuda = options.device == "cuda";
  const CDeviceFeatures features = cuda ? cuda_device_features(options.cuda_architecture)
                                        : CDeviceFeatures{"opencl (plan)", true, true};
  // Each distinct kernel is rendered (and for CUDA compiled) once, on several threads; repeats
  // copy the first rendering.
  std::map<std::string, size_t> first;  // symbol → position of its distinct rendering
  std::vector<size_t> distinct;         // schedule position of each distinct kernel
  for (size_t k = 0; k < schedule.kernels.size(); ++k)
    if (first.emplace(schedule.kernels[k].name(), distinct.size()).second) distinct.push_back(k);
  std::vector<RenderedKernel> renderings(distinct.size());
  std::mutex progress_mutex;
  size_t compiled = 0;
  run_tasks_in_parallel(distinct.size(), compile_thread_count(), [&](size_t d) {
    const UOpPtr& ast = schedule.kernels[distinct[d]].ast;
    SimplifyMemo memo;  // lowering re-derives the same strides and steps
    if (!cuda) {
      renderings[d] = opencl_render_kernel(ast, features);
      return;
    }
    RenderedKernel source = cuda_render_kernel(ast, features);
    source.source = compile_cuda(source.source, source.name + ".cu", options.cuda_architecture).ptx;
    renderings[d] = std::move(source);
    std::lock_guard lock(progress_mutex);
    if (++compiled % 50 == 0) progress(str_cat(compiled, " kernels compiled by NVRTC"));
  });
  bool f16 = false, f64 = false;
  for (const RenderedKernel& rendering : renderings) {
    f16 = f16 || rendering.uses_f16;
    f64 = f64 || rendering.uses_f64;
  }
  std::vector<RenderedKernel> rendered;
  for (const ScheduledKernel& kernel : schedule.kernels) rendered.push_back(renderings[first.at(kernel.name())]);
  // OpenCL C keeps f16 as bits converted by builtins every device has (opencl_dialect.cpp); CUDA's
  // conversions need compute capability 5.3.
  if (f16 && cuda) contents.device_requirements.push_back("f16");
  if (f64) contents.device_requirements.push_back("f64");
  if (cuda) contents.device_requirements.push_back(str_cat("sm_", options.cuda_architecture));
  progress(str_cat(cuda ? "compiled " : "rendered ", first.size(), " distinct kernels as ",
                   cuda ? str_cat("PTX for sm_", options.cuda_architecture) : std::string("OpenCL C")));
  return rendered;
}

}  // namespace

PlanSchedule schedule_plan(const std::vector<std::pair<std::string, Tensor>>& outputs, const PlanWriteOptions& options,
                           size_t run_bound_values) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  PlanSchedule planned;
  for (const auto& [name, tensor] : outputs) {
    if (!tensor.defined()) throw UserError(str_cat("plan output '", name, "' is an empty Tensor"));
    planned.values.push_back(tensor);
  }
  if (options.fold_constants) {
    progress("folding constants");
    ConstantFoldReport folded;
    // Device plans keep f16 weights f16: tensor cores take them, and the plan is half the size.
    planned.values = fold_constants(planned.values, {}, &folded, nullptr, !options.device.empty());
    progress(str_cat("folded ", folded.values, " weight-only values (", folded.bytes, " bytes)"));
  }
  std::vector<UOpPtr> nodes;
  for (const Tensor& tensor : planned.values) nodes.push_back(tensor.data().node);
  progress("scheduling");
  // CPU plans hold intermediate f16/bf16 values as f32 (TargetCaps::narrow_floats_stored_wide).
  ScheduleOptions schedule_options{options.device.empty() && cpu_target_caps(options.cpu_target).narrow_floats_stored_wide, {}};
  for (size_t i = outputs.size() - run_bound_values; i < outputs.size(); ++i)
    schedule_options.run_bound_outputs.emplace_back(outputs[i].first, i);
  planned.schedule = create_schedule(nodes, schedule_options);
  return planned;
}

std::string write_plan(const std::vector<std::pair<std::string, Tensor>>& inputs,
                       const std::vector<std::pair<std::string, Tensor>>& outputs, const PlanWriteOptions& options) {
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const bool device = !options.device.empty();
  std::map<int64_t, int> input_of_buffer;  // placeholder buffer id → input position
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& tensor = inputs[i].second;
    if (!tensor.defined() || tensor.data().graph_input_name.empty())
      throw UserError(str_cat("plan input '", inputs[i].first, "' is not a graph input placeholder"));
    input_of_buffer[tensor.data().buffer_id] = static_cast<int>(i);
  }
  // Values that decide run-bound sizes are scheduled as extra roots after the outputs, so each is
  // stored where the runtime can read it (docs/symbolic-shapes.md, decision 12); a value may use
  // another run-bound size, hence the loop until no new one appears.
  std::vector<RunBoundRoot> run_bound;
  std::vector<std::pair<std::string, Tensor>> roots_to_schedule = outputs;
  PlanSchedule planned = schedule_plan(roots_to_schedule, options);
  for (;;) {
    std::vector<RunBoundRoot> found = new_run_bound_roots(planned.schedule, roots_to_schedule, options.run_time_checks, run_bound);
    if (found.empty()) break;
    bool new_roots = false;
    for (RunBoundRoot& root : found) {
      // A value read straight from a graph input needs no kernel: it is bound from the input.
      if (root.value.input.empty()) {
        roots_to_schedule.emplace_back(root.name, root.value.value);
        new_roots = true;
      }
      run_bound.push_back(std::move(root));
    }
    if (!new_roots) break;
    planned = schedule_plan(roots_to_schedule, options, roots_to_schedule.size() - outputs.size());
  }
  if (!run_bound.empty() && device)
    throw UserError(str_cat("unsupported: sizes decided by the run (", run_bound.front().name, ", ",
                            run_bound.front().value.origin, ") in a device plan"));
  Schedule& schedule = planned.schedule;
  std::vector<const TensorData*> roots;
  for (const Tensor& tensor : planned.values) roots.push_back(&tensor.data());
  if (device && options.device != "opencl" && options.device != "cuda")
    throw UserError("unsupported: plans for device '" + options.device + "' (plans are for the CPU, OpenCL or CUDA)");
  if (device && options.tuning != nullptr) throw UserError("a tuning database applies to CPU plans only, not to device plans");
  if (device && options.cpu_target != nullptr)
    throw UserError("a CPU target (" + options.cpu_target->triple() + ") applies to CPU plans only, not to device plans");
  OptimizeOptions optimize_options;
  optimize_options.tuning = options.tuning;
  if (options.tuning != nullptr) optimize_options.target_id = cpu_target_id(options.cpu_target);
  const TargetCaps& caps = !device                    ? cpu_target_caps(options.cpu_target)
                           : options.device == "cuda" ? cuda_target_caps(options.cuda_architecture)
                                                      : opencl_target_caps();
  unsigned threads = compile_thread_count();
  progress(str_cat("choosing opts for ", schedule.kernels.size(), " kernels on ", threads, threads == 1 ? " thread" : " threads"));
  OptimizeReport optimized = optimize_schedule(schedule, caps, optimize_options);
  if (optimized.amx_kernels > 0)
    progress(str_cat(optimized.amx_kernels, " of ", optimized.kernels, " kernels on AMX tiles (bf16 products)"));
  if (options.tuning != nullptr)
    progress(str_cat("opts of ", optimized.from_tuning, " of ", optimized.kernels,
                     " kernels from the tuning database ", options.tuning->source(), ", the others' from the heuristics"));
  auto buffer_data = data_buffers(roots);

  // Classify the schedule's buffers. An output buffer belongs to the first output that names it;
  // later outputs of the same node are copies of it (same_as_output).
  std::vector<int> output_of_buffer(schedule.buffers.size(), -1);
  std::vector<int> same_as_output(outputs.size(), -1);
  for (size_t i = 0; i < outputs.size(); ++i) {
    int& owner = output_of_buffer[static_cast<size_t>(schedule.outputs[i])];
    if (owner < 0) owner = static_cast<int>(i);
    else same_as_output[i] = owner;
  }
  PlanContents contents;
  std::string& weights = contents.weights;
  std::map<int64_t, uint64_t> weight_offset_of_buffer;  // data buffer id → offset in `weights`
  std::vector<PlanSlotContents> buffer_slots(schedule.buffers.size());
  auto slot = [](plan_fb::SlotKind kind, int index, int64_t offset, const Dim& size) {
    return PlanSlotContents{kind, index, offset, size};
  };
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    // The bytes a kernel touches: exact per run where the count is symbolic (the arena holds the
    // count at the variables' maxima, buffer.bytes()).
    Dim bytes = buffer.elements.is_known() ? Dim(buffer.bytes()) : buffer.elements * buffer.dtype.scalar_bytes();
    switch (buffer.kind) {
      case ScheduledBuffer::Kind::Input: {
        if (auto found = input_of_buffer.find(buffer.input_id); found != input_of_buffer.end()) {
          buffer_slots[b] = slot(plan_fb::SlotKind_GraphInput, found->second, 0, bytes);
          break;
        }
        auto data = buffer_data.find(buffer.input_id);
        if (data == buffer_data.end()) {
          // A placeholder that is not among `inputs`: the graph reads an input the caller left out.
          throw UserError(str_cat("the outputs read a graph input that is not an input of the plan (buffer ",
                                  buffer.input_id, ")"));
        }
        auto [at, added] = weight_offset_of_buffer.emplace(buffer.input_id, 0);
        if (added) {
          at->second = align_up(weights.size(), plan::kPlanWeightAlignment);
          weights.resize(at->second, '\0');
          weights.append(static_cast<const char*>(data->second->data()), data->second->bytes());
          contents.weight_ranges.emplace_back(at->second, data->second->bytes());
        }
        buffer_slots[b] = slot(plan_fb::SlotKind_Weight, 0, static_cast<int64_t>(at->second), bytes);
        break;
      }
      case ScheduledBuffer::Kind::Output:
        // A run-bound value that is no output of the plan gets its own bytes past the memory
        // plan's arena (placed below), alive for the whole run.
        if (output_of_buffer[b] < 0) break;
        buffer_slots[b] = slot(plan_fb::SlotKind_GraphOutput, output_of_buffer[b], 0, bytes);
        break;
      case ScheduledBuffer::Kind::Intermediate:
        buffer_slots[b] = slot(plan_fb::SlotKind_Arena, 0, buffer.arena_offset, bytes);
        break;
    }
  }

  int64_t arena_bytes =
      place_run_bound_values(schedule, run_bound, outputs.size(), output_of_buffer, input_of_buffer, inputs, buffer_slots,
                             contents);

  // Kernel objects, one per distinct symbol (a symbol names its AST, so equal symbols are equal code).
  KernelBuildOptions build_options;
  build_options.product = KernelProduct::Object;
  build_options.progress = options.progress;
  build_options.target = options.cpu_target;
  std::vector<std::string> objects;
  int from_cache_count = 0;
  std::vector<RenderedKernel> device_kernels = device ? render_device_kernels(schedule, options, contents, progress)
                                                      : std::vector<RenderedKernel>{};
  for (KernelBuild& kernel : device ? std::vector<KernelBuild>{} : compile_schedule_kernels(schedule, build_options)) {
    if (kernel.repeat) continue;
    objects.push_back(std::move(kernel.object));
    if (kernel.from_cache) ++from_cache_count;
  }
  // A graph that folds away completely (every output a weight or an input's known shape) has no
  // kernels: its code section is empty, and the runtime loads no library for it.
  if (!objects.empty()) {
    progress(str_cat("linking ", objects.size(), " kernel objects"));
    contents.code = link_shared_object(objects);
  }

  // The layout: sizes are Dims, symbolic where the graph's are (a plan with variables is written
  // as format version 2).
  set_cpu_target(contents, options.cpu_target);
  if (device) {
    contents.device = options.device;
    contents.cpu_features.clear();  // no CPU code to need them
    contents.cpu_name = "none, kernels for " + options.device;  // what `kiln inspect` prints as the CPU
  }
  for (const auto& [name, tensor] : inputs) contents.inputs.push_back(value_contents(name, tensor, -1));
  for (size_t i = 0; i < outputs.size(); ++i)
    contents.outputs.push_back(value_contents(outputs[i].first, outputs[i].second, same_as_output[i]));
  for (const ScheduledKernel& kernel : schedule.kernels) {
    PlanKernelContents entry;
    entry.symbol = kernel.name();
    for (int buffer : kernel.buffers) entry.slots.push_back(buffer_slots[static_cast<size_t>(buffer)]);
    entry.parallel_extent = kernel.parallel_extent;
    entry.minimum_chunk = kernel_minimum_chunk(kernel);
    entry.estimated_flops = kernel.estimated_flops;
    entry.estimated_bytes = kernel.estimated_bytes;
    entry.sources = kernel.sources;
    for (const VariableSpec& variable : kernel.variables) entry.variables.push_back(variable.name);
    if (device) {
      const RenderedKernel& rendered = device_kernels[contents.kernels.size()];
      entry.device_source = rendered.source;
      entry.device_entry = rendered.name;
      entry.device_arguments = rendered.buffer_count;
      KILN_ASSERT(rendered.variables == entry.variables, "device kernel ", rendered.name,
                  " takes other variables than the schedule gives it");
      entry.device_local_size = kernel.group_size;
    }
    contents.kernels.push_back(std::move(entry));
  }
  contents.arena_bytes = arena_bytes;  // laid out at the variables' maxima, then the run-bound values
  std::vector<VariableSpec> checks;
  for (const RunBoundRoot& root : run_bound)
    if (root.value.check) checks.push_back(*root.value.check);
  contents.variables = plan_variables(schedule, contents.inputs, contents.outputs, checks);
  for (const auto& [name, bytes] : options.pinned_inputs) {
    auto input = std::find_if(inputs.begin(), inputs.end(), [&](const auto& entry) { return entry.first == name; });
    if (input == inputs.end()) throw UserError(str_cat("a pinned value of '", name, "', which is no input of the plan"));
    contents.pinned_inputs.push_back({static_cast<int>(input - inputs.begin()), bytes});
  }
  std::string file = serialize_plan(contents);
  std::string kernels = device ? str_cat(" (", options.device == "cuda" ? "PTX" : "OpenCL C", ", built when the plan is loaded)")
                                : str_cat(" (", objects.size(), " distinct, ", from_cache_count, " from the disk cache)");
  progress(str_cat("plan: ", schedule.kernels.size(), " kernel launches", kernels, ", ", weights.size(),
                   " bytes of weights, arena ", arena_bytes, " bytes, ", file.size(), " bytes in all"));
  return file;
}

}  // namespace kiln
