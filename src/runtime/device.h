// The device interface of the runtime: what running kernels on an accelerator takes, whatever the
// API underneath (OpenCL in src/runtime/opencl/, CUDA's driver API in src/runtime/cuda/). Memory is
// opaque (a DeviceMemory handle), programs are built at run time, and copies and launches are queued
// in order on a queue (the device's own, or one the caller brings): each sees the effects of every
// earlier one on its queue, and synchronize() waits for all of them. Only libc and libdl are needed:
// an implementation loads its API with dlopen, so a process without it still runs (and gets a
// UserError naming what is missing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln {

// A block of device memory; `handle` is the API's own (a cl_mem, a CUdeviceptr).
struct DeviceMemory {
  void* handle = nullptr;
  size_t bytes = 0;
};

// A kernel built for one device, ready to launch. Owned by the device's caller; freed with it.
class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  virtual const std::string& name() const = 0;
};

// The launch grid: global work-items per dimension, and the workgroup size (0: the device chooses).
struct LaunchDims {
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};
};

// One kernel launch, as Device::record takes it: the kernel, its memory arguments, then its 64-bit
// scalars (as Device::launch), and the grid.
struct KernelLaunch {
  DeviceKernel* kernel = nullptr;
  std::vector<DeviceMemory> arguments;
  std::vector<int64_t> scalars;
  LaunchDims dims;
};

// A sequence of launches recorded once and replayed as one submission (a CUDA graph): the host
// pays one call per run instead of one per kernel. Its arguments, scalars and grids are fixed when
// recorded. Owned by the device's caller; freed before the kernels it launches.
class LaunchGraph {
 public:
  virtual ~LaunchGraph() = default;
};

class Device {
 public:
  virtual ~Device() = default;

  // "opencl:NAME" and the like: printed by KILN_DEBUG and named in errors.
  virtual const std::string& name() const = 0;

  // Raw device memory; allocate throws a UserError naming the size when the device is out of memory.
  // Callers that allocate often go through a CachingAllocator (caching_allocator.h) instead.
  virtual DeviceMemory allocate(size_t bytes) = 0;
  virtual void free(DeviceMemory memory) = 0;

  // Bytes [offset, offset + bytes) of `base` as memory of their own, which kernels take as a buffer
  // (a device plan's arena slots); a null handle where the device cannot make that view (OpenCL: an
  // offset not on CL_DEVICE_MEM_BASE_ADDR_ALIGN), and by default. release_view before base is freed.
  virtual DeviceMemory view(DeviceMemory /*base*/, size_t /*offset*/, size_t /*bytes*/) { return {}; }
  virtual void release_view(DeviceMemory /*view*/) {}

  // Copies and launches go on a queue: `queue` null for the device's own, else one the caller brought
  // (kiln_run_options.queue: a cl_command_queue of native_context(), a CUstream of it), which
  // check_queue() has accepted. The overloads without `queue` use the device's own.
  //
  // Copies; host → device returns once the host memory may be reused, device → host once the host
  // memory holds the data (both wait for the queue's earlier work); device → device is queued.
  virtual void copy_to_device(DeviceMemory destination, const void* source, size_t bytes, void* queue) = 0;
  virtual void copy_to_host(void* destination, DeviceMemory source, size_t bytes, void* queue) = 0;
  virtual void copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes, void* queue) = 0;
  void copy_to_device(DeviceMemory destination, const void* source, size_t bytes) {
    copy_to_device(destination, source, bytes, nullptr);
  }
  void copy_to_host(void* destination, DeviceMemory source, size_t bytes) { copy_to_host(destination, source, bytes, nullptr); }
  void copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes) {
    copy_on_device(destination, source, bytes, nullptr);
  }

  // Builds `source` (in the device's kernel language) and returns its kernel `name`. A build error
  // is an InternalError carrying the compiler's log and the source (generated code must build).
  virtual std::unique_ptr<DeviceKernel> build_kernel(const std::string& source, const std::string& name) = 0;

  // Queues `kernel` with one memory argument per buffer parameter, in order, then one 64-bit
  // integer per scalar parameter (a symbolic kernel's size variables, c_renderer.h).
  virtual void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars,
                      const LaunchDims& dims, void* queue) = 0;
  void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, const LaunchDims& dims, void* queue) {
    launch(kernel, arguments, {}, dims, queue);
  }
  void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, const LaunchDims& dims) {
    launch(kernel, arguments, {}, dims, nullptr);
  }

  // Records `launches` (none with an empty grid), to run in order, each after the one before;
  // null where the device cannot (the default: OpenCL has no such thing here). replay() queues the
  // whole sequence on `queue` as launch() would queue each.
  virtual std::unique_ptr<LaunchGraph> record(std::span<const KernelLaunch> /*launches*/) { return nullptr; }
  virtual void replay(LaunchGraph& /*graph*/, void* /*queue*/) {}

  // Waits until every copy and launch queued on `queue` has finished.
  virtual void synchronize(void* queue) = 0;
  void synchronize() { synchronize(nullptr); }

  // "" when work may be queued on the caller's `queue` (non-null), else why not (a queue of another
  // context or device, one that runs its commands out of order). A handle that is no queue at all
  // cannot be told apart safely; the caller vouches for it.
  virtual std::string check_queue(void* queue) const = 0;

  // Events, for work that a run leaves queued on a caller's queue: mark() returns a handle that
  // completes when everything queued on `queue` so far has; wait() blocks until it has; release()
  // frees it (done or not). Handles are the API's own (a cl_event, a CUevent) and outlive the queue.
  virtual void* mark(void* queue) = 0;
  virtual void wait(void* event) = 0;
  virtual void release(void* event) = 0;

  // The API's own handles, for callers that bring device memory of their own (kiln_plan_device):
  // the context (a cl_context, the CUcontext) and the queue (a cl_command_queue; null for CUDA's
  // default stream). Null for devices without them.
  virtual void* native_context() const { return nullptr; }
  virtual void* native_queue() const { return nullptr; }
};

}  // namespace kiln
