// realize(): schedule the lazy graph, compile its kernels, run them on the CPU (or, with
// KILN_DEVICE=opencl, on the OpenCL device: driver/run_on_device.h), and turn the handles into views
// of their results. This is the in-process (JIT) path; plans reuse the same schedule and kernels.
#include <chrono>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "driver/compile_kernels.h"
#include "driver/run_on_device.h"
#include "ir/evaluate.h"
#include "passes/pipeline.h"
#include "runtime/thread_pool.h"
#include "schedule/schedule.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/kernel_profile.h"
#include "support/large_stack.h"
#include "tensor/tensor_internal.h"

namespace kiln {
namespace {

using detail::TensorData;
using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// A tensor needs no kernel when it is its own buffer in row-major order.
bool is_realized(const TensorData& data) {
  return data.buffer != nullptr && data.buffer->count() == shape_numel(data.shape);
}

// Every buffer the handles of `roots` keep alive, by BUFFER id (found through the handles' inputs),
// and the graph inputs of a plan (graph_input) among them, which have no data.
struct GraphBuffers {
  std::unordered_map<int64_t, std::shared_ptr<HostBuffer>> data;
  std::unordered_map<int64_t, std::string> graph_inputs;
};

GraphBuffers collect_buffers(const std::vector<const TensorData*>& roots) {
  GraphBuffers buffers;
  std::unordered_set<const TensorData*> seen;
  std::vector<const TensorData*> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    const TensorData* data = stack.back();
    stack.pop_back();
    if (!seen.insert(data).second) continue;
    if (!data->graph_input_name.empty()) buffers.graph_inputs.emplace(data->buffer_id, data->graph_input_name);
    if (data->buffer) buffers.data.emplace(data->buffer_id, data->buffer);
    for (const auto& input : data->inputs) stack.push_back(input.get());
  }
  return buffers;
}

// Reading a graph input of a plan here is a UserError that names it.
void reject_graph_inputs(const Schedule& schedule, const GraphBuffers& buffers) {
  for (const ScheduledBuffer& buffer : schedule.buffers) {
    if (buffer.kind != ScheduledBuffer::Kind::Input) continue;
    auto found = buffers.graph_inputs.find(buffer.input_id);
    if (found != buffers.graph_inputs.end())
      throw UserError(str_cat("the value of graph input '", found->second,
                              "' is needed at compile time (it is only known when the plan runs)"));
  }
}

}  // namespace

void run_schedule(const Schedule& schedule, const std::vector<KernelFunction>& functions,
                  const std::vector<void*>& buffer_pointers, const SizeVariableValues* variables) {
  ThreadPool& pool = default_thread_pool();
  std::vector<void*> arguments;
  std::vector<int64_t> values;
  std::vector<KernelLaunchTiming> timings;  // KILN_DEBUG=2: the table at the end
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const ScheduledKernel& kernel = schedule.kernels[k];
    arguments.clear();
    for (int buffer : kernel.buffers) arguments.push_back(buffer_pointers[static_cast<size_t>(buffer)]);
    int64_t extent = 0;
    if (kernel.variables.empty()) {
      extent = kernel.parallel_extent.value("running a kernel in process");
    } else {
      // The kernel's variables, in its order, after the buffers (docs/kernel-ast.md, "Variables").
      // Realizing in process (a value a builder needs now) cannot know them: the model's error,
      // such as a shape computed from a symbolic shape by ops the importer does not follow.
      if (variables == nullptr) {
        std::string names;
        for (const VariableSpec& spec : kernel.variables) names += (names.empty() ? "" : ", ") + spec.name;
        throw UserError(str_cat("unsupported: this value depends on the symbolic size(s) ", names,
                                ", known only when the plan runs, but is needed now (docs/symbolic-shapes.md, decision 9)"));
      }
      values.clear();
      for (const VariableSpec& spec : kernel.variables) values.push_back(size_variable_value(*variables, spec));
      arguments.push_back(values.data());
      extent = evaluate_size(kernel.parallel_extent, *variables);
    }
    KernelFunction function = functions[k];
    void* const* args = arguments.data();
    auto start = Clock::now();
    pool.parallel_for(extent, [&](int64_t begin, int64_t end) { function(args, begin, end); },
                      kernel_minimum_chunk(kernel));
    if (debug_level() >= 2) {
      double ms = milliseconds_since(start);
      double seconds = std::max(ms, 1e-6) / 1000;
      debug_print(str_cat("  run ", kernel.name(), ": ", ms, " ms, ", kernel.estimated_flops / seconds / 1e9,
                          " GFLOP/s, ", kernel.estimated_bytes / seconds / 1e9, " GB/s"));
      timings.push_back({kernel.name(), ms, kernel.estimated_flops, kernel.estimated_bytes, kernel.sources});
    }
  }
  if (timings.size() > 1)  // the table, slowest first; one launch has its line above
    for (const std::string& line : format_kernel_profile(timings)) debug_print(str_cat("  ", line));
}

int64_t size_variable_value(const SizeVariableValues& variables, const VariableSpec& spec) {
  auto found = variables.find(spec.name);
  if (found == variables.end()) throw UserError(str_cat("no value for the size variable '", spec.name, "'"));
  if (found->second < spec.min || found->second > spec.max)
    throw UserError(str_cat("the size variable '", spec.name, "' is ", found->second, "; its range is ", spec.min, "..",
                            spec.max));
  return found->second;
}

int64_t evaluate_size(const Dim& size, const SizeVariableValues& variables) {
  if (size.is_known()) return size.value();
  std::unordered_map<std::string, int128> values(variables.begin(), variables.end());
  std::optional<ScalarValue> value = evaluate(size.expression(), values);
  if (!value) throw UserError(str_cat("the size ", size.text(), " cannot be evaluated for these variable values"));
  return static_cast<int64_t>(value->integer);
}

namespace {

// The device half of realize_pending: host buffers for the inputs and outputs, the schedule run on
// the device (intermediates never leave it).
void realize_on_device(ExecutionDevice device, const std::vector<Tensor*>& pending, const Schedule& schedule,
                       const std::unordered_map<int64_t, std::shared_ptr<HostBuffer>>& inputs) {
  std::vector<std::shared_ptr<HostBuffer>> output_buffers(schedule.buffers.size());
  std::vector<void*> pointers(schedule.buffers.size(), nullptr);
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    if (buffer.kind == ScheduledBuffer::Kind::Input) {
      auto found = inputs.find(buffer.input_id);
      KILN_ASSERT(found != inputs.end(), str_cat("realize: the graph reads buffer ", buffer.input_id,
                                                " that no tensor keeps alive"));
      pointers[b] = found->second->data();
    } else if (buffer.kind == ScheduledBuffer::Kind::Output) {
      output_buffers[b] = std::make_shared<HostBuffer>(buffer.dtype, buffer.count, HostBuffer::Fill::None);
      pointers[b] = output_buffers[b]->data();
    }
  }
  run_schedule_on_device(device, schedule, pointers);
  for (size_t i = 0; i < pending.size(); ++i) {
    int buffer = schedule.outputs[i];
    Shape shape = pending[i]->shape();
    *pending[i] = wrap_buffer(output_buffers[static_cast<size_t>(buffer)], shape);
  }
}

// The work of realize_tensors once it knows what is pending.
void realize_pending(const std::vector<Tensor*>& pending, const std::vector<UOpPtr>& outputs,
                     const std::vector<const TensorData*>& roots, ExecutionDevice device, const TargetCaps& caps) {
  // This may be another thread than the caller's: realizes nested in this one (constant folding)
  // run on the same device.
  ScopedRealizeDevice same_device(device, &caps);
  GraphBuffers buffers = collect_buffers(roots);
  const auto& inputs = buffers.data;

  auto start = Clock::now();
  Schedule schedule = create_schedule(outputs, ScheduleOptions{caps.narrow_floats_stored_wide, {}});
  optimize_schedule(schedule, caps);
  double schedule_ms = milliseconds_since(start);
  reject_graph_inputs(schedule, buffers);  // before anything is compiled
  if (device != ExecutionDevice::Cpu) return realize_on_device(device, pending, schedule, inputs);

  start = Clock::now();
  std::vector<KernelFunction> functions;
  int compiled = 0, cached = 0, reused = 0;
  for (const KernelBuild& kernel : compile_schedule_kernels(schedule)) {
    functions.push_back(kernel.function);
    if (kernel.reused) ++reused;
    else if (kernel.from_cache) ++cached;
    else ++compiled;
  }
  double codegen_ms = milliseconds_since(start);
  if (debug_level() >= 1)
    debug_print(str_cat("realize: ", schedule.kernels.size(), " kernels (", compiled, " compiled, ", cached,
                        " from the disk cache, ", reused, " already loaded); schedule ", schedule_ms, " ms, codegen ",
                        codegen_ms, " ms; arena ", schedule.arena_bytes, " bytes for ", schedule.intermediate_bytes,
                        " bytes of intermediates"));

  // Buffers: inputs are the graph's own, outputs are new, intermediates live in one arena.
  std::vector<std::shared_ptr<HostBuffer>> output_buffers(schedule.buffers.size());
  auto arena = std::make_shared<HostBuffer>(dtypes::u8, schedule.arena_bytes, HostBuffer::Fill::None);
  std::vector<void*> pointers(schedule.buffers.size(), nullptr);
  for (size_t b = 0; b < schedule.buffers.size(); ++b) {
    const ScheduledBuffer& buffer = schedule.buffers[b];
    switch (buffer.kind) {
      case ScheduledBuffer::Kind::Input: {
        auto found = inputs.find(buffer.input_id);
        KILN_ASSERT(found != inputs.end(), str_cat("realize: the graph reads buffer ", buffer.input_id,
                                                  " that no tensor keeps alive"));
        pointers[b] = found->second->data();
        break;
      }
      case ScheduledBuffer::Kind::Output:
        // Every element of an output is stored by its kernel, so it needs no zeroing first.
        output_buffers[b] = std::make_shared<HostBuffer>(buffer.dtype, buffer.count, HostBuffer::Fill::None);
        pointers[b] = output_buffers[b]->data();
        break;
      case ScheduledBuffer::Kind::Intermediate:
        pointers[b] = static_cast<char*>(arena->data()) + buffer.arena_offset;
        break;
    }
  }
  start = Clock::now();
  run_schedule(schedule, functions, pointers);
  if (debug_level() >= 1) debug_print(str_cat("realize: ran in ", milliseconds_since(start), " ms"));

  for (size_t i = 0; i < pending.size(); ++i) {
    int buffer = schedule.outputs[i];
    Shape shape = pending[i]->shape();
    *pending[i] = wrap_buffer(output_buffers[static_cast<size_t>(buffer)], shape);
  }
}

}  // namespace

void realize_tensors(const std::vector<Tensor*>& tensors) {
  std::vector<Tensor*> pending;
  std::vector<UOpPtr> outputs;
  std::vector<const TensorData*> roots;
  for (Tensor* tensor : tensors) {
    if (tensor == nullptr || !tensor->defined()) throw UserError("realize: an empty Tensor");
    if (is_realized(tensor->data())) continue;
    pending.push_back(tensor);
    outputs.push_back(tensor->data().node);
    roots.push_back(&tensor->data());
  }
  if (pending.empty()) return;
  // Asked here, on the caller's thread: a ScopedRealizeDevice is per thread.
  ExecutionDevice device = realize_device();
  const TargetCaps& caps = execution_target_caps(device);
  // Collecting buffers, scheduling and the rewrites recurse as deep as the graph: a deep model (or
  // any large one under AddressSanitizer's bigger frames) needs more than a default thread's stack.
  run_on_large_stack([&] { realize_pending(pending, outputs, roots, device, caps); });
}

Tensor& Tensor::realize() {
  realize_tensors({this});
  return *this;
}

void Tensor::realize_all(std::vector<Tensor*> tensors) { realize_tensors(tensors); }

void Tensor::copy_to(void* destination, size_t bytes) const {
  size_t needed = static_cast<size_t>(numel()) * static_cast<size_t>(scalar_type_size(dtype()));
  if (bytes != needed)
    throw UserError(str_cat("copy_to: the tensor holds ", needed, " bytes, the destination ", bytes));
  if (needed == 0) return;
  if (destination == nullptr) throw UserError("copy_to: destination is NULL");
  Tensor computed = *this;
  computed.realize();
  std::memcpy(destination, computed.data().buffer->data(), needed);
}

double Tensor::item() const {
  if (numel() != 1) throw UserError(str_cat("item: the tensor has ", numel(), " elements, not 1"));
  return to_vector<double>()[0];
}

}  // namespace kiln
