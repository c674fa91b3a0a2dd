// A device plan's kernels, memory and runs; see device_plan.h.
#include "runtime/device_plan.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>

#include "runtime/cuda/cuda_device.h"
#include "runtime/opencl/opencl_device.h"
#include "support/error.h"

namespace kiln {

namespace {

// The device's errors as the C API's statuses: its UserErrors (no library, no platform, out of
// memory) as `status`; its InternalErrors (a failed call) as `internal`, which is
// KILN_ERROR_INVALID_PLAN where the plan's own content is what failed (a kernel that does not build).
template <typename Body>
auto as_plan_error(kiln_status status, const std::string& context, Body body,
                   kiln_status internal = KILN_ERROR_INTERNAL) {
  try {
    return body();
  } catch (const UserError& error) {
    throw PlanError(status, context + error.what());
  } catch (const InternalError& error) {
    throw PlanError(internal, context + error.what());
  }
}

// What the plan needs that `device` lacks ("" when nothing): the reader has checked that every
// requirement is "f16", "f64" or "sm_NN".
std::string missing_opencl(const OpenCLDevice& device, const std::string& requirement) {
  if (requirement == "f16" && !device.has_f16()) return "f16 values (cl_khr_fp16)";
  if (requirement == "f64" && !device.has_f64()) return "f64 values (cl_khr_fp64)";
  if (requirement.rfind("sm_", 0) == 0) return "CUDA " + requirement;
  return "";
}

std::string missing_cuda(const CudaDevice& device, const std::string& requirement) {
  int needed = requirement == "f16" ? 53 : requirement.rfind("sm_", 0) == 0 ? std::atoi(requirement.c_str() + 3) : 0;
  if (device.compute_capability() < needed)
    return str_cat(requirement == "f16" ? "f16 values" : "code for " + requirement, " (compute capability ", needed / 10,
                   ".", needed % 10, ")");
  return "";
}

}  // namespace

namespace {

// Launch graphs kept per plan: a symbolic plan's distinct shapes, or a caller's rotating buffers.
constexpr size_t kMaxGraphs = 8;

bool graphs_switched_off() {
  const char* value = std::getenv("KILN_CUDA_GRAPHS");
  return value != nullptr && std::string(value) == "0";
}

}  // namespace

DevicePlan::DevicePlan(const plan_fb::Plan& plan, const unsigned char* weights,
                       std::function<void(const std::string&)> debug_log)
    : use_graphs_(!graphs_switched_off()), debug_log_(std::move(debug_log)) {
  // The reader accepts "opencl" and "cuda" only (check_device_fields).
  bool cuda = plan.device()->str() == "cuda";
  std::string label = cuda ? "CUDA" : "OpenCL";
  OpenCLDevice* opencl = nullptr;
  CudaDevice* cuda_device = nullptr;
  as_plan_error(KILN_ERROR_UNSUPPORTED_TARGET, "the plan is for " + label + ": ", [&] {
    if (cuda) cuda_device = &CudaDevice::instance();
    else opencl = &OpenCLDevice::instance();
  });
  device_ = cuda ? static_cast<Device*>(cuda_device) : static_cast<Device*>(opencl);
  if (plan.device_requirements() != nullptr)
    for (const flatbuffers::String* requirement : *plan.device_requirements()) {
      std::string missing = cuda ? missing_cuda(*cuda_device, requirement->str()) : missing_opencl(*opencl, requirement->str());
      if (!missing.empty())
        throw PlanError(KILN_ERROR_UNSUPPORTED_TARGET, "the plan's kernels need " + missing + ", which " + label +
                                                           " device '" + device_->name() + "' lacks");
    }
  try {
    input_count_ = plan.inputs()->size();
    output_count_ = plan.outputs()->size();
    for (const plan_fb::Value* input : *plan.inputs())
      memory_.push_back(allocate(static_cast<uint64_t>(input->byte_size()), "input '" + input->name()->str() + "'"));
    for (const plan_fb::Value* output : *plan.outputs())
      memory_.push_back(allocate(static_cast<uint64_t>(output->byte_size()), "output '" + output->name()->str() + "'"));
    // The arena: one device buffer, each arena slot a view of it at the CPU plan's offset, so the
    // device holds the arena's bytes, not the sum of its values (ResNet-50: 9.6 MB against 46.4 MB).
    // Two values that share bytes never live at once, and the device runs a plan's kernels in
    // order. A slot the device cannot view (an OpenCL offset off the sub-buffer alignment) gets a
    // buffer of its own, as does each weight (uploaded once).
    std::optional<size_t> arena;
    if (plan.arena_bytes() > 0) {
      arena = memory_.size();
      memory_.push_back(allocate(static_cast<uint64_t>(plan.arena_bytes()), "the arena"));
    }
    std::map<std::tuple<int, int64_t, int64_t>, size_t> slot_memory;
    std::map<std::pair<std::string, std::string>, size_t> built;  // (entry point, program) → kernels_
    size_t variable_values = 0;  // kernel variables so far: PlanRunner numbers them the same way
    for (const plan_fb::Kernel* kernel : *plan.kernels()) {
      Launch launch;
      std::string entry = kernel->device_entry()->str();
      auto [at, added] = built.emplace(std::make_pair(entry, kernel->device_source()->str()), kernels_.size());
      if (added)
        kernels_.push_back(as_plan_error(
            KILN_ERROR_INVALID_PLAN, "kernel " + entry + " does not build: ",
            [&] { return device_->build_kernel(at->first.second, entry); }, KILN_ERROR_INVALID_PLAN));
      launch.kernel = at->second;
      launch.local_size = static_cast<size_t>(kernel->device_local_size());
      if (kernel->variables() != nullptr) {
        launch.variables_at = variable_values;
        launch.variable_count = kernel->variables()->size();
        variable_values += launch.variable_count;
      }
      for (int a = 0; a < kernel->device_arguments(); ++a) {
        const plan_fb::Slot* slot = kernel->slots()->Get(static_cast<flatbuffers::uoffset_t>(a));
        switch (slot->kind()) {
          case plan_fb::SlotKind_GraphInput: launch.arguments.push_back(static_cast<size_t>(slot->index())); break;
          case plan_fb::SlotKind_GraphOutput:
            launch.arguments.push_back(input_count_ + static_cast<size_t>(slot->index()));
            break;
          default: {
            auto key = std::make_tuple(static_cast<int>(slot->kind()), slot->offset(), slot->size());
            auto [found, fresh] = slot_memory.emplace(key, memory_.size());
            bool weight = slot->kind() == plan_fb::SlotKind_Weight;
            DeviceMemory part;
            if (fresh && !weight && arena)
              part = device_->view(memory_[*arena], static_cast<size_t>(slot->offset()), static_cast<size_t>(slot->size()));
            if (fresh && part.handle != nullptr) {
              views_.push_back(memory_.size());
              memory_.push_back(part);
            } else if (fresh) {
              memory_.push_back(allocate(static_cast<uint64_t>(slot->size()), weight ? "a weight" : "an intermediate value"));
              if (weight && slot->size() > 0)
                as_plan_error(KILN_ERROR_INTERNAL, "uploading a weight: ", [&] {
                  device_->copy_to_device(memory_.back(), weights + slot->offset(), static_cast<size_t>(slot->size()));
                });
            }
            launch.arguments.push_back(found->second);
          }
        }
      }
      launches_.push_back(std::move(launch));
    }
    variable_count_ = variable_values;
  } catch (...) {
    release();
    throw;
  }
}

DevicePlan::~DevicePlan() { release(); }

void DevicePlan::release() {
  if (pending_event_ != nullptr) {
    // The kernels still queued on a caller's queue use this plan's buffers: finish them first. A
    // failure there has nowhere to go from a destructor; the buffers are released either way.
    try {
      device_->wait(pending_event_);
    } catch (const std::exception&) {
    }
    device_->release(pending_event_);
    pending_event_ = nullptr;
  }
  graphs_.clear();  // once their last replay has finished, and before the kernels they launch
  kernels_.clear();
  for (size_t view : views_) {
    device_->release_view(memory_[view]);
    memory_[view] = {};
  }
  views_.clear();
  for (const DeviceMemory& memory : memory_)
    if (memory.handle != nullptr) device_->free(memory);
  memory_.clear();
}

DeviceMemory DevicePlan::allocate(uint64_t bytes, const std::string& what) {
  // OpenCL has no empty buffers: an empty value gets one byte that nothing reads.
  uint64_t size = bytes == 0 ? 1 : bytes;
  device_bytes_ += size;
  return as_plan_error(KILN_ERROR_OUT_OF_MEMORY, "device memory for " + what + ": ",
                       [&] { return device_->allocate(static_cast<size_t>(size)); });
}

void DevicePlan::settle_pending(void* queue) {
  if (pending_event_ == nullptr) return;
  void* event = pending_event_;
  pending_event_ = nullptr;
  bool wait = queue != pending_queue_;
  pending_queue_ = nullptr;
  try {
    if (wait) device_->wait(event);
  } catch (...) {
    device_->release(event);
    throw;
  }
  device_->release(event);
}

void DevicePlan::leave_pending(void* queue) {
  pending_event_ = device_->mark(queue);
  pending_queue_ = queue;
}

void DevicePlan::run(const std::vector<const void*>& inputs, const std::vector<uint64_t>& input_bytes,
                     const std::vector<void*>& outputs, const std::vector<uint64_t>& output_bytes,
                     std::span<const int64_t> extents, std::span<const int64_t> kernel_variables,
                     const std::atomic<int>* cancel, double* kernel_seconds, bool on_device, void* queue) {
  KILN_ASSERT(extents.size() == launches_.size() && kernel_variables.size() == variable_count_,
              "a device plan run with ", extents.size(), " extents and ", kernel_variables.size(),
              " variable values for ", launches_.size(), " launches and ", variable_count_, " values");
  std::lock_guard lock(mutex_);
  auto cancelled = [&] { return cancel != nullptr && cancel->load(std::memory_order_acquire) != 0; };
  auto throw_cancelled = [&](size_t done) {
    device_->synchronize(queue);
    throw PlanError(KILN_ERROR_CANCELLED, str_cat("kiln_plan_run: the run was cancelled (", done, " of ", launches_.size(),
                                                  " kernels had run)"));
  };
  // The buffers this run's kernels use: the plan's own, or in place of its inputs and outputs the
  // caller's device memory (empty tensors keep the plan's one-byte buffers: a null cl_mem is no
  // kernel argument).
  std::vector<DeviceMemory> bound = memory_;
  if (on_device) {
    for (size_t i = 0; i < input_count_; ++i)
      if (input_bytes[i] > 0) bound[i] = DeviceMemory{const_cast<void*>(inputs[i]), static_cast<size_t>(input_bytes[i])};
    for (size_t i = 0; i < output_count_; ++i)
      if (output_bytes[i] > 0 && outputs[i] != nullptr)
        bound[input_count_ + i] = DeviceMemory{outputs[i], static_cast<size_t>(output_bytes[i])};
  }
  std::vector<size_t> plan_index;
  std::vector<KernelLaunch> launches = prepare_launches(bound, extents, kernel_variables, plan_index);
  as_plan_error(KILN_ERROR_INTERNAL, "kiln_plan_run on " + device_->name() + ": ", [&] {
    settle_pending(queue);
    if (!on_device)
      for (size_t i = 0; i < input_count_; ++i)
        if (input_bytes[i] > 0) device_->copy_to_device(memory_[i], inputs[i], static_cast<size_t>(input_bytes[i]), queue);
    LaunchGraph* graph = nullptr;
    if (use_graphs_ && kernel_seconds == nullptr) {
      // The key: everything a recorded launch fixes that may differ between runs.
      std::vector<int64_t> key(extents.begin(), extents.end());
      key.insert(key.end(), kernel_variables.begin(), kernel_variables.end());
      for (size_t i = 0; i < input_count_ + output_count_; ++i)
        key.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(bound[i].handle)));
      graph = graph_for(std::move(key), launches);
    }
    if (graph != nullptr) {
      if (cancelled()) throw_cancelled(0);
      device_->replay(*graph, queue);
    }
    for (size_t j = 0; graph == nullptr && j < launches.size(); ++j) {
      if (cancelled()) throw_cancelled(plan_index[j]);
      const KernelLaunch& launch = launches[j];
      auto start = std::chrono::steady_clock::now();
      device_->launch(*launch.kernel, launch.arguments, launch.scalars, launch.dims, queue);
      if (kernel_seconds != nullptr) {
        device_->synchronize(queue);
        kernel_seconds[plan_index[j]] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      }
    }
    if (on_device) {
      // On the device's own queue the caller may use its buffers once the call returns; on its
      // own queue the caller orders what comes next.
      if (queue == nullptr) device_->synchronize(queue);
      else leave_pending(queue);
      return;
    }
    for (size_t i = 0; i < output_count_; ++i)
      if (output_bytes[i] > 0 && outputs[i] != nullptr)
        device_->copy_to_host(outputs[i], memory_[input_count_ + i], static_cast<size_t>(output_bytes[i]), queue);
    device_->synchronize(queue);  // a plan whose outputs are all empty copies nothing back
  });
}

std::vector<KernelLaunch> DevicePlan::prepare_launches(const std::vector<DeviceMemory>& bound, std::span<const int64_t> extents,
                                                       std::span<const int64_t> kernel_variables,
                                                       std::vector<size_t>& plan_index) const {
  std::vector<KernelLaunch> prepared;
  for (size_t k = 0; k < launches_.size(); ++k) {
    const Launch& launch = launches_[k];
    KernelLaunch ready;
    ready.kernel = kernels_[launch.kernel].get();
    ready.dims.global[0] = static_cast<size_t>(extents[k]);
    ready.dims.local[0] = launch.local_size;
    if (ready.dims.global[0] == 0) continue;  // an empty batch or sequence: nothing to compute
    if (launch.local_size != 0 && ready.dims.global[0] % launch.local_size != 0)
      throw PlanError(KILN_ERROR_INVALID_PLAN, str_cat("kernel ", ready.kernel->name(), " has ", ready.dims.global[0],
                                                       " threads at these shapes, not whole work-groups of ",
                                                       launch.local_size));
    for (size_t argument : launch.arguments) ready.arguments.push_back(bound[argument]);
    std::span<const int64_t> variables = kernel_variables.subspan(launch.variables_at, launch.variable_count);
    ready.scalars.assign(variables.begin(), variables.end());
    prepared.push_back(std::move(ready));
    plan_index.push_back(k);
  }
  return prepared;
}

LaunchGraph* DevicePlan::graph_for(std::vector<int64_t> key, std::span<const KernelLaunch> launches) {
  ++graph_clock_;
  for (CachedGraph& cached : graphs_)
    if (cached.key == key) {
      cached.last_used = graph_clock_;
      return cached.graph.get();
    }
  // A key's first run launches kernel by kernel: recording costs more than one run's launches, and
  // a caller whose device buffers change every run would otherwise record a graph per run.
  auto seen = std::find(seen_once_.begin(), seen_once_.end(), key);
  if (seen == seen_once_.end()) {
    if (seen_once_.size() == 2 * kMaxGraphs) seen_once_.erase(seen_once_.begin());
    seen_once_.push_back(std::move(key));
    return nullptr;
  }
  seen_once_.erase(seen);
  std::unique_ptr<LaunchGraph> graph = device_->record(launches);
  if (graph == nullptr) {
    use_graphs_ = false;  // the device has none: stop keeping keys
    return nullptr;
  }
  if (debug_log_)
    debug_log_(str_cat("recorded a launch graph of ", launches.size(), " kernels on ", device_->name(), " (",
                       graphs_.size() + 1, " for this plan)"));
  if (graphs_.size() == kMaxGraphs)
    graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const CachedGraph& a, const CachedGraph& b) { return a.last_used < b.last_used; }));
  graphs_.push_back(CachedGraph{std::move(key), std::move(graph), graph_clock_});
  return graphs_.back().graph.get();
}

void DevicePlan::copy_device_tensor(void* destination, const void* source, uint64_t bytes, void* queue) {
  std::lock_guard lock(mutex_);
  as_plan_error(KILN_ERROR_INTERNAL, "kiln_plan_run on " + device_->name() + ": ", [&] {
    settle_pending(queue);
    device_->copy_on_device(DeviceMemory{destination, static_cast<size_t>(bytes)},
                            DeviceMemory{const_cast<void*>(source), static_cast<size_t>(bytes)}, static_cast<size_t>(bytes),
                            queue);
    if (queue == nullptr) device_->synchronize(queue);
    else leave_pending(queue);
  });
}

}  // namespace kiln
