// The OpenCL device: the Device interface (runtime/device.h) over OpenCL 1.2, loaded with dlopen
// (opencl_api.h). One device per process, chosen on first use: the first device of the first
// platform that has one, or the Nth device over all platforms with KILN_OPENCL_DEVICE=N. One in-order
// command queue of its own, and the in-order queues callers bring; calls from several threads are
// serialised.
#pragma once

#include <mutex>
#include <string>

#include "runtime/device.h"

namespace kiln {

struct OpenCLApi;

class OpenCLDevice final : public Device {
 public:
  // The process's OpenCL device. Throws a UserError starting "unsupported target: OpenCL" that names
  // what is missing (the library, a platform, a device) when there is none.
  static OpenCLDevice& instance();
  // Whether instance() would succeed; otherwise *why_not says why. Never throws.
  static bool available(std::string* why_not = nullptr);

  const std::string& name() const override { return name_; }
  DeviceMemory allocate(size_t bytes) override;
  void free(DeviceMemory memory) override;
  // A sub-buffer, where `offset` is on the device's base address alignment.
  DeviceMemory view(DeviceMemory base, size_t offset, size_t bytes) override;
  void release_view(DeviceMemory view) override;
  using Device::copy_on_device;
  using Device::copy_to_device;
  using Device::copy_to_host;
  using Device::launch;
  using Device::synchronize;
  void copy_to_device(DeviceMemory destination, const void* source, size_t bytes, void* queue) override;
  void copy_to_host(void* destination, DeviceMemory source, size_t bytes, void* queue) override;
  void copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes, void* queue) override;
  std::unique_ptr<DeviceKernel> build_kernel(const std::string& source, const std::string& name) override;
  void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars,
              const LaunchDims& dims, void* queue) override;
  void synchronize(void* queue) override;
  // A caller's queue must be an in-order queue of this context and device.
  std::string check_queue(void* queue) const override;
  void* mark(void* queue) override;
  void wait(void* event) override;
  void release(void* event) override;
  void* native_context() const override { return context_; }
  void* native_queue() const override { return queue_; }

  // What the device computes: cl_khr_fp16 / cl_khr_fp64, and correctly rounded f32 divide and sqrt
  // (asked for at build time when present; otherwise OpenCL allows 2.5 / 3 ulp).
  bool has_f16() const { return f16_; }
  bool has_f64() const { return f64_; }
  bool correctly_rounded_f32_divide_sqrt() const { return correctly_rounded_divide_sqrt_; }
  const std::string& version() const { return version_; }

  OpenCLDevice(const OpenCLDevice&) = delete;
  OpenCLDevice& operator=(const OpenCLDevice&) = delete;

 private:
  static OpenCLDevice* open_once(std::string* why_not);
  OpenCLDevice() = default;
  ~OpenCLDevice() override = default;  // never destroyed: kernels may be cached until exit
  void open(const OpenCLApi& api);

  const OpenCLApi* api_ = nullptr;
  void* device_ = nullptr;   // cl_device_id
  void* context_ = nullptr;  // cl_context
  void* queue_ = nullptr;    // cl_command_queue
  std::string name_;
  std::string version_;
  bool f16_ = false;
  bool f64_ = false;
  bool correctly_rounded_divide_sqrt_ = false;
  size_t view_alignment_ = 0;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN in bytes (0: unknown, no views)
  std::mutex mutex_;
};

}  // namespace kiln
