// Loading the code section: it is written to an anonymous memfd and opened with
// dlopen("/proc/self/fd/N"), so nothing touches the disk. The memfd stays open while the library
// is loaded: glibc recognises an already-loaded library by its path, so a reused fd number must not
// alias a library that is still loaded.
#include "runtime/cpu/plan_runner.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "plan/symbolic_metadata.h"
#include "runtime/device_plan.h"
#include "runtime/thread_pool.h"
#include "support/limits.h"

namespace kiln {

struct PlanRunner::RunContext {
  explicit RunContext(const PlanRunner& owner) : runner(owner) {}
  const PlanRunner& runner;
  void* memory = nullptr;  // the plan's arena, then staging space; 64-byte aligned
  std::vector<void*> arguments;
  std::vector<void*> input_data, output_data;    // what the kernels see, per plan input / output
  std::vector<void*> output_destination;         // the caller's buffer when output_data is staging
  std::vector<const kiln_tensor*> bound_inputs, bound_outputs;
  // This run's sizes: each input's and output's bytes and each launch's extent (a fixed-shape
  // plan's, set once). Symbolic plans: the variables' values, scratch for reading them, and the
  // arrays the kernels read them from.
  std::vector<uint64_t> input_bytes, output_bytes;
  std::vector<int64_t> extents;
  std::vector<int64_t> variable_values;
  std::vector<int> first_binder;
  std::vector<int64_t> kernel_variables;
  // The variables' values `extents` and `kernel_variables` were last prepared for (empty: none).
  // Runs at the same shapes, the common case, skip the preparation: ~1,000 size programs
  // evaluated per run for a 4-layer BERT, 0.03 ms of a 0.5 ms run at 9 tokens.
  std::vector<int64_t> prepared_for;
  ~RunContext() { runner.free_context_memory(memory); }
};

namespace {

constexpr uint64_t kAlignment = 64;
uint64_t align_up(uint64_t value) { return (value + kAlignment - 1) / kAlignment * kAlignment; }

std::vector<PlanValue> values_of(const flatbuffers::Vector<flatbuffers::Offset<plan_fb::Value>>& values) {
  std::vector<PlanValue> result;
  for (const plan_fb::Value* value : values) {
    PlanValue entry;
    entry.name = value->name()->str();
    entry.dtype = static_cast<kiln_dtype>(value->dtype());
    if (value->shape() != nullptr) entry.shape.assign(value->shape()->begin(), value->shape()->end());
    entry.byte_size = static_cast<uint64_t>(value->byte_size());
    entry.same_as_output = value->same_as_output();
    result.push_back(std::move(entry));
  }
  return result;
}

[[noreturn]] void bad_argument(const char* function, const std::string& message) {
  throw PlanError(KILN_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + message);
}

[[noreturn]] void inconsistent_plan(const char* function, const std::string& message) {
  throw PlanError(KILN_ERROR_INVALID_PLAN, std::string(function) + ": " + message);
}

constexpr const char* kRun = "kiln_plan_run";

}  // namespace

PlanRunner::PlanRunner(PlanBytes bytes, const PlanRunnerOptions& options)
    : bytes_(std::move(bytes)),
      plan_(verify_plan(bytes_.data(), bytes_.size())),
      shapes_(*plan_.metadata),
      options_(options) {
  const plan_fb::Plan& meta = *plan_.metadata;
  inputs_ = values_of(*meta.inputs());
  outputs_ = values_of(*meta.outputs());
  for (const PlanValue& input : inputs_) input_names_.push_back(input.name);
  lay_out_context();  // before any code is loaded: a plan over the memory limit loads nothing
  if (plan_.code_size > 0) load_code();

  try {
    if (meta.device() != nullptr)
      device_plan_ = std::make_unique<DevicePlan>(meta, plan_.weights, [this](const std::string& line) {
        if (options_.log != nullptr && options_.log_level <= KILN_LOG_DEBUG) log(KILN_LOG_DEBUG, line);
      });
    load_launches();
    if (meta.pinned_inputs() != nullptr)
      for (const plan_fb::PinnedInput* pinned : *meta.pinned_inputs())
        pinned_.emplace_back(static_cast<size_t>(pinned->input()), pinned->bytes());
    if (meta.run_bindings() != nullptr) {
      bindings_at_.resize(launches_.size() + 1);
      for (const plan_fb::RunBinding* binding : *meta.run_bindings())
        bindings_at_[static_cast<size_t>(binding->after_kernel() + 1)].push_back(binding);
      prepare_before_launch_ = launches_sized_by_run(meta);
    }
    if (options_.thread_count > 0 && options_.parallel_for == nullptr)
      own_threads_ = std::make_unique<ThreadPool>(options_.thread_count);
    hook_threads_ = options_.thread_count > 0 ? options_.thread_count : ThreadPool::default_thread_count();
    // One context up front: the first run allocates nothing.
    pool_.push_back(new_context());
    if (options_.log != nullptr && options_.log_level <= KILN_LOG_INFO)
      log(KILN_LOG_INFO, "loaded a plan: " + std::to_string(launches_.size()) + " kernels, arena " +
                             std::to_string(context_bytes_) + " bytes, weights " + std::to_string(plan_.weights_size) +
                             " bytes, " +
                             (device_plan_ ? "device memory " + std::to_string(device_plan_->device_bytes()) + " bytes on " +
                                                 device_plan_->device_name() + ", "
                                           : std::string()) +
                             (options_.parallel_for ? std::string("the caller's parallel_for")
                                                    : std::to_string(own_threads_ ? own_threads_->thread_count()
                                                                                  : default_thread_pool().thread_count()) +
                                                          " threads"));
  } catch (...) {
    unload();  // the destructor does not run for a constructor that throws
    throw;
  }
}

// The code section → a library mapped from an anonymous memfd (see the top of this file).
void PlanRunner::load_code() {
  code_fd_ = ::memfd_create("kiln-plan", MFD_CLOEXEC);
  if (code_fd_ < 0) throw PlanError(KILN_ERROR_IO, std::string("memfd_create failed: ") + std::strerror(errno));
  const unsigned char* code = plan_.code;
  uint64_t left = plan_.code_size;
  while (left > 0) {
    ssize_t written = ::write(code_fd_, code, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      int error = errno;
      ::close(code_fd_);
      throw PlanError(KILN_ERROR_IO, std::string("cannot write the plan's code to a memfd: ") + std::strerror(error));
    }
    code += written;
    left -= static_cast<uint64_t>(written);
  }
  std::string path = "/proc/self/fd/" + std::to_string(code_fd_);
  library_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library_ == nullptr) {
    const char* error = ::dlerror();
    ::close(code_fd_);
    throw PlanError(KILN_ERROR_INVALID_PLAN,
                    std::string("the plan's code cannot be loaded: ") + (error ? error : "dlopen failed"));
  }
}

void PlanRunner::load_launches() {
  const plan_fb::Plan& meta = *plan_.metadata;
  // Without a library dlsym(nullptr, …) would search the whole process: refuse instead. A device
  // plan's kernels are the DevicePlan's; the launches here only count arguments.
  bool device = device_plan_ != nullptr;
  if (library_ == nullptr && !device && meta.kernels()->size() != 0)
    throw PlanError(KILN_ERROR_INVALID_PLAN,
                    "the plan lists " + std::to_string(meta.kernels()->size()) + " kernels but has no code");
  for (const plan_fb::Kernel* kernel : *meta.kernels()) {
    void* symbol = device ? nullptr : ::dlsym(library_, kernel->symbol()->c_str());
    if (symbol == nullptr && !device)
      throw PlanError(KILN_ERROR_INVALID_PLAN, "the plan's code lacks kernel " + kernel->symbol()->str());
    Launch launch;
    launch.function = reinterpret_cast<KernelFunction>(symbol);
    launch.first_argument = argument_count_;
    launch.parallel_extent = kernel->parallel_extent();
    launch.minimum_chunk = kernel->minimum_chunk();
    launch.kernel = kernel;
    for (const plan_fb::Slot* slot : *kernel->slots()) {
      if (slot->kind() == plan_fb::SlotKind_GraphInput || slot->kind() == plan_fb::SlotKind_GraphOutput)
        io_slots_.push_back({argument_count_, slot->kind() == plan_fb::SlotKind_GraphOutput, slot->index()});
      ++argument_count_;
    }
    // A kernel that reads variables takes one more argument after its slots: their values.
    if (kernel->variables() != nullptr && kernel->variables()->size() > 0) {
      launch.variables_at = kernel_variable_count_;
      kernel_variable_count_ += kernel->variables()->size();
      ++argument_count_;
    }
    launches_.push_back(launch);
  }
}

void PlanRunner::lay_out_context() {
  // Checked sums: a corrupt plan's sizes must not wrap into a small allocation that the kernels
  // then overrun. The reader bounds each value's bytes; the arena is only known to be >= 0.
  auto add = [](uint64_t total, uint64_t bytes) {
    if (total > UINT64_MAX - kAlignment || bytes > UINT64_MAX - kAlignment - total)
      throw PlanError(KILN_ERROR_OUT_OF_MEMORY, "the plan's scratch memory per run is more than 2^64 bytes");
    return total + align_up(bytes);
  };
  // A device plan's arena and staging live on the device (DevicePlan): no host memory per run.
  bool device = plan_.metadata->device() != nullptr;
  context_bytes_ = device ? 0 : add(0, static_cast<uint64_t>(plan_.metadata->arena_bytes()));
  for (const auto* values : {&inputs_, &outputs_})
    for (const PlanValue& value : *values) {
      staging_offsets_.push_back(context_bytes_);
      if (!device) context_bytes_ = add(context_bytes_, value.byte_size);
    }
  uint64_t limit = options_.max_memory_bytes;
  if (limit > 0 && context_bytes_ > limit) {
    uint64_t arena = align_up(static_cast<uint64_t>(plan_.metadata->arena_bytes()));
    throw PlanError(KILN_ERROR_OUT_OF_MEMORY,
                    "the plan needs " + std::to_string(context_bytes_) + " bytes of scratch memory per run (arena " +
                        std::to_string(arena) + " bytes for intermediate values, staging " +
                        std::to_string(context_bytes_ - arena) +
                        " bytes for inputs and outputs), more than the limit options->max_memory_bytes = " +
                        std::to_string(limit));
  }
}

PlanRunner::~PlanRunner() { unload(); }

void PlanRunner::unload() {
  pool_.clear();
  device_plan_.reset();
  own_threads_.reset();
  if (library_ != nullptr) ::dlclose(library_);
  library_ = nullptr;
  if (code_fd_ >= 0) ::close(code_fd_);
  code_fd_ = -1;
}

void PlanRunner::log(kiln_log_level level, const std::string& message) const {
  if (options_.log != nullptr && level >= options_.log_level) options_.log(options_.log_user_data, level, message.c_str());
}

void* PlanRunner::allocate_context_memory() const {
  size_t bytes = context_bytes_ == 0 ? kAlignment : context_bytes_;
  if (options_.allocator.alloc != nullptr) return options_.allocator.alloc(options_.allocator.user_data, bytes, kAlignment);
  return std::aligned_alloc(kAlignment, bytes);
}

void PlanRunner::free_context_memory(void* memory) const {
  if (memory == nullptr) return;
  if (options_.allocator.free != nullptr)
    options_.allocator.free(options_.allocator.user_data, memory, context_bytes_ == 0 ? kAlignment : context_bytes_);
  else
    std::free(memory);
}

std::unique_ptr<PlanRunner::RunContext> PlanRunner::new_context() const {
  auto context = std::make_unique<RunContext>(*this);
  context->memory = allocate_context_memory();
  if (context->memory == nullptr)
    throw PlanError(KILN_ERROR_OUT_OF_MEMORY, "cannot allocate the plan's arena (" + std::to_string(context_bytes_) + " bytes)");
  context->arguments.assign(argument_count_, nullptr);
  context->kernel_variables.assign(kernel_variable_count_, 0);
  auto* arena = static_cast<unsigned char*>(context->memory);
  for (const Launch& launch : launches_) {
    size_t argument = launch.first_argument;
    for (const plan_fb::Slot* slot : *launch.kernel->slots()) {
      if (slot->kind() == plan_fb::SlotKind_Weight)
        context->arguments[argument] = const_cast<unsigned char*>(plan_.weights) + slot->offset();
      else if (slot->kind() == plan_fb::SlotKind_Arena)
        context->arguments[argument] = arena + slot->offset();
      ++argument;
    }
    if (launch.kernel->variables() != nullptr && launch.kernel->variables()->size() > 0)
      context->arguments[argument] = context->kernel_variables.data() + launch.variables_at;
  }
  for (const PlanValue& value : inputs_) context->input_bytes.push_back(value.byte_size);
  for (const PlanValue& value : outputs_) context->output_bytes.push_back(value.byte_size);
  for (const Launch& launch : launches_) context->extents.push_back(launch.parallel_extent);
  context->variable_values.assign(shapes_.variables().size(), 0);
  context->first_binder.assign(shapes_.variables().size(), -1);
  context->input_data.assign(inputs_.size(), nullptr);
  context->output_data.assign(outputs_.size(), nullptr);
  context->output_destination.assign(outputs_.size(), nullptr);
  context->bound_inputs.assign(inputs_.size(), nullptr);
  context->bound_outputs.assign(outputs_.size(), nullptr);
  return context;
}

void PlanRunner::bind(const kiln_tensor* given, size_t count, const std::vector<PlanValue>& expected, bool outputs,
                      RunContext& context, const char* function, bool shapes_only) const {
  auto bad_argument = [function](const std::string& message) { kiln::bad_argument(function, message); };
  const char* kind = outputs ? "output" : "input";
  auto& bound = outputs ? context.bound_outputs : context.bound_inputs;
  std::fill(bound.begin(), bound.end(), nullptr);
  if (count != expected.size())
    bad_argument("the plan has " + std::to_string(expected.size()) + " " + kind + (expected.size() == 1 ? "" : "s") +
                 ", " + std::to_string(count) + (count == 1 ? " was" : " were") + " given");
  if (count > 0 && given == nullptr) bad_argument(std::string("the ") + kind + "s array is NULL");
  for (size_t i = 0; i < count; ++i) {
    const kiln_tensor& tensor = given[i];
    size_t index = i;
    if (tensor.name != nullptr) {
      index = expected.size();
      for (size_t j = 0; j < expected.size(); ++j)
        if (expected[j].name == tensor.name) index = j;
      if (index == expected.size()) {
        std::string names;
        for (const PlanValue& value : expected) names += (names.empty() ? "" : ", ") + value.name;
        bad_argument(std::string("the plan has no ") + kind + " named '" + tensor.name + "' (its " + kind +
                     "s: " + names + ")");
      }
    }
    const PlanValue& value = expected[index];
    // Built only for a message: a correct run allocates nothing.
    auto label = [&] { return std::string(kind) + " '" + value.name + "'"; };
    if (bound[index] != nullptr) bad_argument(label() + " is given twice");
    bound[index] = &tensor;
    if (tensor.dtype != value.dtype)
      bad_argument(label() + " has dtype " + kiln_dtype_name(tensor.dtype) + ", the plan expects " +
                   kiln_dtype_name(value.dtype));
    if (shapes_.symbolic()) {
      // The dims themselves are checked once the variables are known (bind_symbolic_*).
      if (tensor.rank != value.shape.size() || (tensor.rank > 0 && tensor.shape == nullptr)) {
        const auto& dims = (outputs ? shapes_.output_dims() : shapes_.input_dims())[index];
        std::string shape = tensor.rank > 0 && tensor.shape == nullptr ? "NULL" : shape_text(tensor.shape, tensor.rank);
        bad_argument(label() + " has shape " + shape + ", rank " + std::to_string(tensor.rank) +
                     "; the plan expects rank " + std::to_string(value.shape.size()) + ": " + PlanShapes::shape_text(dims));
      }
      continue;
    }
    if (tensor.rank != value.shape.size() || (tensor.rank > 0 && tensor.shape == nullptr) ||
        (tensor.rank > 0 && std::memcmp(tensor.shape, value.shape.data(), tensor.rank * sizeof(int64_t)) != 0)) {
      std::string shape = tensor.rank > 0 && tensor.shape == nullptr ? "NULL" : shape_text(tensor.shape, tensor.rank);
      bad_argument(label() + " has shape " + shape + ", the plan expects " +
                   shape_text(value.shape.data(), value.shape.size()));
    }
    if (shapes_only) continue;
    if (tensor.byte_size < value.byte_size)
      bad_argument(label() + " has a buffer of " + std::to_string(tensor.byte_size) + " bytes, it needs " +
                   std::to_string(value.byte_size));
    if (tensor.data == nullptr && value.byte_size > 0) bad_argument(label() + " has NULL data");
  }
}

namespace {

// A caller's buffer against the bytes this run needs of it (the symbolic twin of bind's checks).
void check_buffer(const char* function, const char* kind, const std::string& name, const kiln_tensor& tensor,
                  uint64_t bytes) {
  if (tensor.byte_size < bytes)
    bad_argument(function, std::string(kind) + " '" + name + "' has a buffer of " + std::to_string(tensor.byte_size) +
                               " bytes, it needs " + std::to_string(bytes));
  if (tensor.data == nullptr && bytes > 0) bad_argument(function, std::string(kind) + " '" + name + "' has NULL data");
}

}  // namespace

void PlanRunner::bind_symbolic_inputs(RunContext& context, const char* function, bool shapes_only) const {
  shapes_.bind_variables(context.bound_inputs.data(), input_names_, context.variable_values, context.first_binder,
                         function);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    std::span<const int64_t> program = shapes_.input_bytes(i);
    if (program.empty()) continue;  // a fixed input: its bytes never change
    int64_t bytes = PlanShapes::evaluate(program, context.variable_values, function,
                                         [&] { return "the byte size of input '" + inputs_[i].name + "'"; });
    // The staging space holds the bytes at the maxima; a non-monotone program must not pass them.
    if (bytes < 0 || static_cast<uint64_t>(bytes) > inputs_[i].byte_size)
      inconsistent_plan(function, "input '" + inputs_[i].name + "' needs " + std::to_string(bytes) +
                                      " bytes at these shapes, outside 0.." + std::to_string(inputs_[i].byte_size));
    context.input_bytes[i] = static_cast<uint64_t>(bytes);
  }
  if (shapes_only) return;
  for (size_t i = 0; i < inputs_.size(); ++i)
    check_buffer(function, "input", inputs_[i].name, *context.bound_inputs[i], context.input_bytes[i]);
}

void PlanRunner::bind_symbolic_outputs(RunContext& context, const char* function) const {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const PlanValue& value = outputs_[i];
    const kiln_tensor& tensor = *context.bound_outputs[i];
    // Ranks are at most kMaxTensorRank (checked at load): the computed shape fits on the stack.
    int64_t shape[limits::kMaxTensorRank];
    shapes_.output_shape(i, context.variable_values, shape, function);
    // An output whose shape the run decides is given at its upper bound (the variables stand at
    // their maxima here); its buffer, not its shape, is what is checked.
    if (!shapes_.output_run_shaped(i) && tensor.rank > 0 && std::memcmp(tensor.shape, shape, tensor.rank * sizeof(int64_t)) != 0)
      bad_argument(function, "output '" + value.name + "' has shape " + shape_text(tensor.shape, tensor.rank) +
                                 ", the plan computes " + shape_text(shape, tensor.rank) + " for these inputs");
    std::span<const int64_t> program = shapes_.output_bytes(i);
    if (!program.empty()) {
      int64_t bytes = PlanShapes::evaluate(program, context.variable_values, function,
                                           [&] { return "the byte size of output '" + value.name + "'"; });
      if (bytes < 0 || static_cast<uint64_t>(bytes) > value.byte_size)
        inconsistent_plan(function, "output '" + value.name + "' needs " + std::to_string(bytes) +
                                        " bytes at these shapes, outside 0.." + std::to_string(value.byte_size));
      context.output_bytes[i] = static_cast<uint64_t>(bytes);
    }
    // A copied output is its source's value: the copy must not read past the source.
    if (value.same_as_output >= 0 && context.output_bytes[i] != context.output_bytes[static_cast<size_t>(value.same_as_output)])
      inconsistent_plan(function, "output '" + value.name + "' copies an output of another size at these shapes");
    check_buffer(function, "output", value.name, tensor, context.output_bytes[i]);
  }
}

void PlanRunner::prepare_symbolic_launches(RunContext& context, size_t first) const {
  if (first == 0 && !context.prepared_for.empty() && context.prepared_for == context.variable_values) return;
  context.prepared_for.clear();  // a throw below leaves nothing marked prepared
  for (size_t k = first; k < launches_.size(); ++k)
    if (prepare_before_launch_.empty() || !prepare_before_launch_[k]) prepare_launch(context, k);
  // Launches prepared at a run binding hold the run's values, which the next run need not share.
  if (first == 0 && bindings_at_.empty()) context.prepared_for = context.variable_values;
}

void PlanRunner::prepare_launch(RunContext& context, size_t k) const {
  {
    const Launch& launch = launches_[k];
    const plan_fb::Kernel& kernel = *launch.kernel;
    auto name = [&] { return "kernel " + kernel.symbol()->str(); };
    if (kernel.parallel_extent_program() != nullptr) {
      int64_t extent = PlanShapes::evaluate(program_of(kernel.parallel_extent_program()), context.variable_values, kRun,
                                            [&] { return "the parallel extent of " + name(); });
      if (extent < 0) inconsistent_plan(kRun, name() + " has a negative parallel extent at these shapes");
      context.extents[k] = extent;
    }
    if (kernel.slot_sizes() != nullptr) {
      // Defence in depth: the maxima were checked against every buffer at load, but a size that is
      // not monotone in the variables could still pass its buffer at smaller values.
      for (flatbuffers::uoffset_t s = 0; s < kernel.slots()->size(); ++s) {
        const plan_fb::Slot& slot = *kernel.slots()->Get(s);
        int64_t size = PlanShapes::evaluate(program_of(kernel.slot_sizes()->Get(s)), context.variable_values, kRun,
                                            [&] { return "the size of " + name() + " slot " + std::to_string(s); });
        uint64_t room = 0;
        switch (slot.kind()) {
          case plan_fb::SlotKind_GraphInput: room = context.input_bytes[static_cast<size_t>(slot.index())]; break;
          case plan_fb::SlotKind_GraphOutput: room = context.output_bytes[static_cast<size_t>(slot.index())]; break;
          case plan_fb::SlotKind_Weight: room = plan_.weights_size - static_cast<uint64_t>(slot.offset()); break;
          default: room = static_cast<uint64_t>(plan_.metadata->arena_bytes() - slot.offset()); break;
        }
        if (size < 0 || static_cast<uint64_t>(size) > room)
          inconsistent_plan(kRun, name() + " slot " + std::to_string(s) + " would touch " + std::to_string(size) +
                                      " bytes at these shapes, where its buffer has " + std::to_string(room));
      }
    }
    if (kernel.variables() != nullptr)
      for (flatbuffers::uoffset_t v = 0; v < kernel.variables()->size(); ++v)
        context.kernel_variables[launch.variables_at + v] =
            context.variable_values[static_cast<size_t>(kernel.variables()->Get(v))];
  }
}

void PlanRunner::apply_run_bindings(RunContext& context, size_t point) const {
  const std::vector<const plan_fb::RunBinding*>& bindings = bindings_at_[point];
  if (bindings.empty()) return;
  for (const plan_fb::RunBinding* binding : bindings) {
    const plan_fb::Slot& source = *binding->source();
    // check_run_bindings: the element lies inside its arena, input or output, aligned to its size.
    const unsigned char* base = nullptr;
    switch (source.kind()) {
      case plan_fb::SlotKind_GraphInput:
        base = static_cast<const unsigned char*>(context.input_data[static_cast<size_t>(source.index())]);
        break;
      case plan_fb::SlotKind_GraphOutput:
        base = static_cast<const unsigned char*>(context.output_data[static_cast<size_t>(source.index())]);
        break;
      default: base = static_cast<const unsigned char*>(context.memory); break;
    }
    int64_t value = 0;
    if (binding->dtype() == KILN_DTYPE_INT32) {
      int32_t narrow = 0;
      std::memcpy(&narrow, base + source.offset(), sizeof narrow);
      value = narrow;
    } else {
      std::memcpy(&value, base + source.offset(), sizeof value);
    }
    auto variable = static_cast<size_t>(binding->variable());
    const PlanVariable& spec = shapes_.variables()[variable];
    if (value < spec.min || value > spec.max)
      bad_argument(kRun, (binding->origin() != nullptr ? binding->origin()->str() : std::string("the plan")) +
                             " decided " + spec.name + "=" + std::to_string(value) + " in this run; the plan allows " +
                             std::to_string(spec.min) + ".." + std::to_string(spec.max));
    context.variable_values[variable] = value;
  }
  // The launches these values size are prepared when they run (prepare_before_launch_).
}

namespace {

// "(1, -2)": the first elements of a small tensor's bytes, for messages.
std::string values_text(kiln_dtype dtype, const unsigned char* bytes, size_t size) {
  size_t element = kiln_dtype_size(dtype);
  std::string text = "(";
  size_t count = element == 0 ? 0 : size / element;
  for (size_t i = 0; i < count && i < 8; ++i) {
    const unsigned char* at = bytes + i * element;
    std::string value;
    switch (dtype) {
      case KILN_DTYPE_INT64: { int64_t v; std::memcpy(&v, at, 8); value = std::to_string(v); break; }
      case KILN_DTYPE_INT32: { int32_t v; std::memcpy(&v, at, 4); value = std::to_string(v); break; }
      case KILN_DTYPE_FLOAT32: { float v; std::memcpy(&v, at, 4); value = std::to_string(v); break; }
      case KILN_DTYPE_FLOAT64: { double v; std::memcpy(&v, at, 8); value = std::to_string(v); break; }
      case KILN_DTYPE_BOOL: case KILN_DTYPE_UINT8: value = std::to_string(at[0]); break;
      default: value = "?"; break;
    }
    text += (i ? ", " : "") + value;
  }
  return text + (count > 8 ? ", ...)" : ")");
}

}  // namespace

void PlanRunner::check_pinned_inputs(const RunContext& context) const {
  for (const auto& [index, bytes] : pinned_) {
    const kiln_tensor& tensor = *context.bound_inputs[index];
    // bind() checked the shape and the buffer (at least byte_size bytes, the pinned size).
    if (bytes->size() == 0 || std::memcmp(tensor.data, bytes->data(), bytes->size()) == 0) continue;
    const PlanValue& input = inputs_[index];
    bad_argument(kRun, "input '" + input.name + "' holds " +
                           values_text(input.dtype, static_cast<const unsigned char*>(tensor.data), bytes->size()) +
                           "; this plan was compiled for " + values_text(input.dtype, bytes->data(), bytes->size()) +
                           " only (kiln compile --value " + input.name + "=...)");
  }
}

void PlanRunner::finish_output_shapes(RunContext& context, int64_t* shapes) const {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    std::span<const int64_t> program = shapes_.output_bytes(i);
    if (!program.empty()) {
      int64_t bytes = PlanShapes::evaluate(program, context.variable_values, kRun,
                                           [&] { return "the byte size of output '" + outputs_[i].name + "'"; });
      // The caller's buffer was checked at the bound; a size past it (a program not monotone in a
      // run-bound variable) must not be copied.
      if (bytes < 0 || static_cast<uint64_t>(bytes) > context.output_bytes[i])
        inconsistent_plan(kRun, "output '" + outputs_[i].name + "' needs " + std::to_string(bytes) +
                                    " bytes after the run, more than its upper bound " +
                                    std::to_string(context.output_bytes[i]));
      context.output_bytes[i] = static_cast<uint64_t>(bytes);
    }
    if (shapes == nullptr) continue;
    if (shapes_.symbolic()) shapes_.output_shape(i, context.variable_values, shapes, kRun);
    else std::copy(outputs_[i].shape.begin(), outputs_[i].shape.end(), shapes);
    shapes += outputs_[i].shape.size();
  }
}

// Outputs must not overlap inputs or each other (kiln.h): a kernel would read what another has
// already overwritten, a wrong answer with no error. Empty tensors overlap nothing. Device memory
// is a handle (a cl_mem is not an address), so device tensors can only be told apart: an output
// that is an input's or another output's memory is refused.
void PlanRunner::check_overlaps(const RunContext& context, bool device_memory) const {
  auto overlap = [&](const kiln_tensor& a, uint64_t a_bytes, const kiln_tensor& b, uint64_t b_bytes) {
    if (a_bytes == 0 || b_bytes == 0) return false;
    if (device_memory) return a.data == b.data;
    auto a_begin = reinterpret_cast<uintptr_t>(a.data), b_begin = reinterpret_cast<uintptr_t>(b.data);
    return a_begin < b_begin + b_bytes && b_begin < a_begin + a_bytes;
  };
  const char* verb = device_memory ? "' is the device memory of " : "' overlaps ";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const kiln_tensor& output = *context.bound_outputs[i];
    for (size_t j = 0; j < inputs_.size(); ++j)
      if (overlap(output, context.output_bytes[i], *context.bound_inputs[j], context.input_bytes[j]))
        bad_argument(kRun, "output '" + outputs_[i].name + verb + "input '" + inputs_[j].name + "'");
    for (size_t j = 0; j < i; ++j)
      if (overlap(output, context.output_bytes[i], *context.bound_outputs[j], context.output_bytes[j]))
        bad_argument(kRun, "output '" + outputs_[i].name + verb + "output '" + outputs_[j].name + "'");
  }
}

namespace {

// One kernel handed to the caller's parallel_for: chunk i is [i * chunk, min((i + 1) * chunk, extent)).
struct HookLaunch {
  void (*function)(void* const*, int64_t, int64_t);
  void* const* arguments;
  int64_t extent, chunk;
  const std::atomic<int>* cancel;
};

void run_hook_chunk(void* context, size_t index) {
  const auto& launch = *static_cast<const HookLaunch*>(context);
  if (launch.cancel != nullptr && launch.cancel->load(std::memory_order_relaxed) != 0) return;
  int64_t begin = static_cast<int64_t>(index) * launch.chunk;
  int64_t end = std::min(launch.extent, begin + launch.chunk);
  if (begin < end) launch.function(launch.arguments, begin, end);
}

// One chunk of a launch, timed for a tracer (the traced path only: untraced runs call the kernel
// directly).
void run_traced_chunk(RunTracer& tracer, size_t kernel, void (*function)(void* const*, int64_t, int64_t),
                      void* const* arguments, int64_t begin, int64_t end) {
  auto start = RunTracer::Clock::now();
  function(arguments, begin, end);
  tracer.chunk(kernel, begin, end, start, RunTracer::Clock::now());
}

bool cancelled(const std::atomic<int>* cancel) {
  return cancel != nullptr && cancel->load(std::memory_order_acquire) != 0;
}

[[noreturn]] void throw_cancelled(size_t kernel, size_t kernels) {
  throw PlanError(KILN_ERROR_CANCELLED, "kiln_plan_run: the run was cancelled (" +
                                            (kernel == 0 ? std::string("before its first kernel)")
                                                         : std::to_string(kernel) + " of " + std::to_string(kernels) +
                                                               " kernels had run)"));
}

}  // namespace

// A run context taken from the pool (a new one when every context is busy) and given back when the
// lease ends, whatever the call's outcome: a failed call leaves the plan as it found it.
class PlanRunner::ContextLease {
 public:
  explicit ContextLease(const PlanRunner& runner) : runner_(runner) {
    {
      std::lock_guard lock(runner.pool_mutex_);
      if (!runner.pool_.empty()) {
        context_ = std::move(runner.pool_.back());
        runner.pool_.pop_back();
      }
    }
    if (!context_) {  // more concurrent runs than ever before
      context_ = runner.new_context();
      if (runner.options_.log != nullptr && runner.options_.log_level <= KILN_LOG_DEBUG)
        runner.log(KILN_LOG_DEBUG, "more concurrent runs than before: allocated one more run context (" +
                                       std::to_string(runner.context_bytes_) + " bytes)");
    }
  }
  ~ContextLease() {
    std::lock_guard lock(runner_.pool_mutex_);
    runner_.pool_.push_back(std::move(context_));
  }
  ContextLease(const ContextLease&) = delete;
  ContextLease& operator=(const ContextLease&) = delete;
  RunContext& operator*() const { return *context_; }
  RunContext* operator->() const { return context_.get(); }

 private:
  const PlanRunner& runner_;
  std::unique_ptr<RunContext> context_;
};

void PlanRunner::output_shape(const kiln_tensor* inputs, size_t input_count, size_t index, int64_t* out,
                              const char* function) const {
  ContextLease context(*this);
  bind(inputs, input_count, inputs_, false, *context, function, true);
  const PlanValue& output = outputs_[index];
  if (!shapes_.symbolic()) {
    std::copy(output.shape.begin(), output.shape.end(), out);
    return;
  }
  bind_symbolic_inputs(*context, function, true);
  shapes_.output_shape(index, context->variable_values, out, function);
}

void PlanRunner::run(const kiln_tensor* inputs, size_t input_count, const kiln_tensor* outputs,
                     size_t output_count, const RunSettings& settings) const {
  if (cancelled(settings.cancel)) throw_cancelled(0, launches_.size());
  ContextLease context(*this);
  bind(inputs, input_count, inputs_, false, *context, kRun);
  if (shapes_.symbolic()) bind_symbolic_inputs(*context, kRun, false);
  if (!pinned_.empty()) check_pinned_inputs(*context);
  bind(outputs, output_count, outputs_, true, *context, kRun);
  if (shapes_.symbolic()) {
    bind_symbolic_outputs(*context, kRun);
    prepare_symbolic_launches(*context);
  }
  if (settings.output_shapes == nullptr && shapes_.any_output_run_shaped())
    for (size_t i = 0; i < outputs_.size(); ++i)
      if (shapes_.output_run_shaped(i))
        bad_argument(kRun, "output '" + outputs_[i].name + "' has a shape the run decides, " +
                               PlanShapes::shape_text(shapes_.output_dims()[i]) +
                               "; run with kiln_run_options.output_shapes to learn it");
  if (settings.tensors_on_device && device_plan_ == nullptr)
    bad_argument(kRun, "options->tensors_on_device is for plans compiled for a device (--target cuda or opencl); "
                       "this plan is for the CPU");
  if (settings.queue != nullptr) {
    if (device_plan_ == nullptr)
      bad_argument(kRun, "options->queue is for plans compiled for a device (--target cuda or opencl); this plan is "
                         "for the CPU");
    if (std::string why_not = device_plan_->check_queue(settings.queue); !why_not.empty())
      bad_argument(kRun, "options->queue cannot take this plan's work: " + why_not);
  }
  check_overlaps(*context, settings.tensors_on_device);
  if (device_plan_ != nullptr) {
    run_on_device(*context, settings);
    if (settings.output_shapes != nullptr) finish_output_shapes(*context, settings.output_shapes);
    return;
  }
  auto* memory = static_cast<unsigned char*>(context->memory);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    void* data = context->bound_inputs[i]->data;
    if (reinterpret_cast<uintptr_t>(data) % kAlignment != 0) {
      void* staging = memory + staging_offsets_[i];
      std::memcpy(staging, data, context->input_bytes[i]);
      data = staging;
    }
    context->input_data[i] = data;
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    void* data = context->bound_outputs[i]->data;
    context->output_destination[i] = nullptr;
    if (reinterpret_cast<uintptr_t>(data) % kAlignment != 0) {
      context->output_destination[i] = data;
      data = memory + staging_offsets_[inputs_.size() + i];
    }
    context->output_data[i] = data;
  }
  for (const IoSlot& slot : io_slots_)
    context->arguments[slot.argument] =
        slot.output ? context->output_data[static_cast<size_t>(slot.index)] : context->input_data[static_cast<size_t>(slot.index)];

  ThreadPool* pool = options_.parallel_for ? nullptr : own_threads_ ? own_threads_.get() : &default_thread_pool();
  const std::atomic<int>* cancel = settings.cancel;
  void* const* arguments = context->arguments.data();
  RunTracer* tracer = settings.tracer;
  auto run_launch = [&](const Launch& launch, size_t kernel) {
    void* const* args = arguments + launch.first_argument;
    KernelFunction function = launch.function;
    int64_t extent = context->extents[kernel];
    if (extent <= 0) return;
    int64_t minimum_chunk = std::max<int64_t>(launch.minimum_chunk, 1);
    if (pool == nullptr) {
      // The caller's parallel_for: about four chunks per thread it may have (the run's thread
      // count, else the plan's, else KILN_THREADS or the cores), none shorter than minimum_chunk.
      int64_t threads = settings.thread_count > 0 ? settings.thread_count : hook_threads_;
      int64_t chunk = std::max(minimum_chunk, (extent + 4 * threads - 1) / (4 * threads));
      HookLaunch hook{function, args, extent, chunk, cancel};
      options_.parallel_for(options_.parallel_for_user_data, static_cast<size_t>((extent + chunk - 1) / chunk),
                            run_hook_chunk, &hook);
      return;
    }
    if (settings.thread_count == 1) {
      if (tracer == nullptr) function(args, 0, extent);
      else run_traced_chunk(*tracer, kernel, function, args, 0, extent);
      return;
    }
    // thread_count T > 1 caps the chunks at T, so at most T threads get work.
    int64_t max_chunks = settings.thread_count > 1 ? settings.thread_count : 0;
    pool->parallel_for(
        extent,
        [&](int64_t begin, int64_t end) {
          if (cancel != nullptr && cancel->load(std::memory_order_relaxed) != 0) return;
          if (tracer == nullptr) function(args, begin, end);
          else run_traced_chunk(*tracer, kernel, function, args, begin, end);
        },
        minimum_chunk, max_chunks);
  };
  const bool run_bound = !bindings_at_.empty();
  if (run_bound) apply_run_bindings(*context, 0);
  for (size_t k = 0; k < launches_.size(); ++k) {
    if (cancelled(cancel)) throw_cancelled(k, launches_.size());
    if (settings.kernel_seconds == nullptr && tracer == nullptr) {
      if (run_bound && prepare_before_launch_[k]) prepare_launch(*context, k);
      run_launch(launches_[k], k);
      if (run_bound) apply_run_bindings(*context, k + 1);
      continue;
    }
    if (run_bound && prepare_before_launch_[k]) prepare_launch(*context, k);
    auto start = std::chrono::steady_clock::now();
    run_launch(launches_[k], k);
    auto end = std::chrono::steady_clock::now();
    if (settings.kernel_seconds != nullptr) settings.kernel_seconds[k] += std::chrono::duration<double>(end - start).count();
    if (tracer != nullptr) tracer->launch(k, start, end);
    if (run_bound) apply_run_bindings(*context, k + 1);
  }
  if (cancelled(cancel)) throw_cancelled(launches_.size(), launches_.size());
  if (run_bound || settings.output_shapes != nullptr) finish_output_shapes(*context, settings.output_shapes);
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (context->output_destination[i] != nullptr)
      std::memcpy(context->output_destination[i], context->output_data[i], context->output_bytes[i]);
  copy_same_outputs(*context);
}

void PlanRunner::copy_same_outputs(const RunContext& context) const {
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i].same_as_output >= 0 && context.output_bytes[i] > 0)
      std::memcpy(context.bound_outputs[i]->data,
                  context.bound_outputs[static_cast<size_t>(outputs_[i].same_as_output)]->data, context.output_bytes[i]);
}

// A device plan: the caller's buffers go to the device and back as they are (no alignment staging:
// the copies do not care), and the outputs that copy another are filled on the host afterwards;
// device tensors are the kernels' arguments themselves, and those outputs are device copies.
void PlanRunner::run_on_device(RunContext& context, const RunSettings& settings) const {
  std::vector<const void*> inputs(inputs_.size());
  std::vector<void*> outputs(outputs_.size(), nullptr);
  for (size_t i = 0; i < inputs_.size(); ++i) inputs[i] = context.bound_inputs[i]->data;
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i].same_as_output < 0) outputs[i] = context.bound_outputs[i]->data;
  device_plan_->run(inputs, context.input_bytes, outputs, context.output_bytes, context.extents, context.kernel_variables,
                    settings.cancel, settings.kernel_seconds, settings.tensors_on_device, settings.queue);
  if (!settings.tensors_on_device) {
    copy_same_outputs(context);
    return;
  }
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i].same_as_output >= 0 && context.output_bytes[i] > 0)
      device_plan_->copy_device_tensor(context.bound_outputs[i]->data,
                                       context.bound_outputs[static_cast<size_t>(outputs_[i].same_as_output)]->data,
                                       context.output_bytes[i], settings.queue);
}

}  // namespace kiln
