// The device interface of the runtime: what running kernels on an accelerator takes, whatever the
// API underneath (OpenCL today, src/runtime/opencl/; CUDA's driver API is meant to be a second
// implementation). Memory is opaque (a DeviceMemory handle), programs are built from source at run
// time, and launches are queued in order: a copy or launch sees the effects of every earlier one, and
// synchronize() waits for all of them. Only libc and libdl are needed: an implementation loads its
// API with dlopen, so a process without it still runs (and gets a UserError naming what is missing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

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

class Device {
 public:
  virtual ~Device() = default;

  // "opencl:NAME" and the like: printed by KILN_DEBUG and named in errors.
  virtual const std::string& name() const = 0;

  // Raw device memory; allocate throws a UserError naming the size when the device is out of memory.
  // Callers that allocate often go through a CachingAllocator (caching_allocator.h) instead.
  virtual DeviceMemory allocate(size_t bytes) = 0;
  virtual void free(DeviceMemory memory) = 0;

  // Copies; each returns once the host memory may be reused (host → device) or holds the data
  // (device → host). Device → device copies are queued.
  virtual void copy_to_device(DeviceMemory destination, const void* source, size_t bytes) = 0;
  virtual void copy_to_host(void* destination, DeviceMemory source, size_t bytes) = 0;
  virtual void copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes) = 0;

  // Builds `source` (in the device's kernel language) and returns its kernel `name`. A build error
  // is an InternalError carrying the compiler's log and the source (generated code must build).
  virtual std::unique_ptr<DeviceKernel> build_kernel(const std::string& source, const std::string& name) = 0;

  // Queues `kernel` with one memory argument per parameter, in order.
  virtual void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, const LaunchDims& dims) = 0;

  // Waits until every queued copy and launch has finished.
  virtual void synchronize() = 0;

  // The API's own handles, for callers that bring device memory of their own (kiln_plan_device):
  // the context (a cl_context, the CUcontext) and the queue (a cl_command_queue; null for CUDA's
  // default stream). Null for devices without them.
  virtual void* native_context() const { return nullptr; }
  virtual void* native_queue() const { return nullptr; }
};

}  // namespace kiln
