// The device half of a plan runner (libkiln): a device plan's kernels (format version 3: OpenCL C
// built by the OpenCL driver, or PTX loaded by the CUDA driver) built once at load, its weights uploaded once, and one device buffer per input, output, weight and
// arena slot. A run uploads the inputs, launches every kernel in order (one work-item per index of
// its parallel extent) and downloads the outputs; runs of one plan are queued one after another, on
// the device's own queue or on one the caller brings. PlanRunner
// (runtime/cpu/plan_runner.h) binds and checks the caller's tensors as for a CPU plan and hands the
// run here. Errors are PlanErrors: no device or a missing feature is KILN_ERROR_UNSUPPORTED_TARGET.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "plan/plan_reader.h"
#include "runtime/device.h"

namespace kiln {

class DevicePlan {
 public:
  // Opens the plan's device, checks its requirements, builds every distinct kernel and uploads the
  // weights. Throws PlanError. `debug_log` (may be empty) receives a line where a run records a
  // launch graph.
  DevicePlan(const plan_fb::Plan& plan, const unsigned char* weights,
             std::function<void(const std::string&)> debug_log = {});
  ~DevicePlan();
  DevicePlan(const DevicePlan&) = delete;
  DevicePlan& operator=(const DevicePlan&) = delete;

  const std::string& device_name() const { return device_->name(); }
  void* native_context() const { return device_->native_context(); }
  void* native_queue() const { return device_->native_queue(); }
  // Device memory the plan holds while loaded (weights, arena slots, inputs and outputs).
  uint64_t device_bytes() const { return device_bytes_; }

  // inputs[i] / outputs[i]: the caller's host buffers of input_bytes[i] / output_bytes[i] bytes,
  // or with `on_device` the caller's device memory (DeviceMemory handles: a CUdeviceptr, a cl_mem),
  // which the kernels then use in place of the plan's own input and output buffers (a null output:
  // not wanted, as for host buffers). A non-zero *cancel stops the run before the next kernel
  // (PlanError KILN_ERROR_CANCELLED). kernel_seconds (may be null): the time of launch k,
  // synchronised, is added to kernel_seconds[k].
  //
  // `queue` null: the work goes on the device's own queue, and run returns once it has finished.
  // Otherwise it goes on the caller's queue (check_queue has accepted it), after the caller's
  // earlier work there; with host buffers run still returns with the outputs filled, but with
  // device memory it returns once the work is queued (the caller synchronises its queue). The
  // plan's own buffers are then in use until that work finishes: the next run on another queue,
  // and the plan's destruction, wait for it first.
  //
  // Launch graphs (CUDA graphs; docs/backends.md): the second run with the same extents, variable
  // values and buffers records its launches once, and that run and every later one like it replays
  // them as one submission. Not while kernels are timed (kernel_seconds), nor where
  // KILN_CUDA_GRAPHS=0 was set when the plan was loaded. A replayed run is cancelled before it is
  // queued, not between its kernels.
  //
  // `extents[k]`: launch k's parallel extent at this run's shapes (a launch of none is skipped);
  // `kernel_variables`: the values of every kernel's variables, each kernel's in its
  // Kernel.variables order, kernels in plan order (PlanRunner evaluates both per run; a fixed-shape
  // plan's are its stored extents and no variables).
  void run(const std::vector<const void*>& inputs, const std::vector<uint64_t>& input_bytes,
           const std::vector<void*>& outputs, const std::vector<uint64_t>& output_bytes,
           std::span<const int64_t> extents, std::span<const int64_t> kernel_variables,
           const std::atomic<int>* cancel, double* kernel_seconds, bool on_device, void* queue);

  // Copies `bytes` between two of the caller's device buffers (an output that is a copy of another),
  // on `queue` as run does.
  void copy_device_tensor(void* destination, const void* source, uint64_t bytes, void* queue);

  // "" when runs may go on the caller's `queue`, else why not (Device::check_queue).
  std::string check_queue(void* queue) const { return device_->check_queue(queue); }

 private:
  struct Launch {
    size_t kernel;                  // index of the built kernel in kernels_
    std::vector<size_t> arguments;  // indices into memory_, one per device argument
    size_t local_size;  // the work-group size the kernel needs; 0: the device chooses
    // The kernel's size variables: `variable_count` values from `variables_at` in run's
    // kernel_variables, passed after the buffers.
    size_t variables_at = 0, variable_count = 0;
  };
  // A launch graph recorded for one run's key (extents, variable values, the buffers bound).
  struct CachedGraph {
    std::vector<int64_t> key;
    std::unique_ptr<LaunchGraph> graph;
    uint64_t last_used = 0;
  };
  DeviceMemory allocate(uint64_t bytes, const std::string& what);
  // This run's launches, skipping empty ones; `plan_index[j]` is launch j's index in launches_.
  std::vector<KernelLaunch> prepare_launches(const std::vector<DeviceMemory>& bound, std::span<const int64_t> extents,
                                             std::span<const int64_t> kernel_variables,
                                             std::vector<size_t>& plan_index) const;
  // The graph to replay for a run with `key`: a cached one, one recorded now (the key's second run),
  // or null (its first run, or no graphs on this device). mutex_ held.
  LaunchGraph* graph_for(std::vector<int64_t> key, std::span<const KernelLaunch> launches);
  void release();
  // Before work goes on `queue`: waits for the work the last run left on another queue (work on the
  // same queue runs after it anyway) and forgets it. Called with mutex_ held.
  void settle_pending(void* queue);
  // After work went on a caller's `queue` without waiting for it: remembers it (mutex_ held).
  void leave_pending(void* queue);

  Device* device_ = nullptr;
  std::vector<std::unique_ptr<DeviceKernel>> kernels_;
  std::vector<DeviceMemory> memory_;  // inputs, outputs, the arena, then weights and arena slots
  std::vector<size_t> views_;         // the entries of memory_ that are views of the arena
  std::vector<Launch> launches_;
  size_t variable_count_ = 0;  // the kernels' variables, all launches together
  size_t input_count_ = 0, output_count_ = 0;
  uint64_t device_bytes_ = 0;
  std::mutex mutex_;
  bool use_graphs_ = true;
  std::function<void(const std::string&)> debug_log_;
  std::vector<CachedGraph> graphs_;             // at most kMaxGraphs, the least recently used evicted
  std::vector<std::vector<int64_t>> seen_once_;  // keys run once without a graph, the oldest dropped
  uint64_t graph_clock_ = 0;
  // Work a run left unfinished on a caller's queue: an event that completes with it, and the queue.
  void* pending_event_ = nullptr;
  void* pending_queue_ = nullptr;
};

}  // namespace kiln
