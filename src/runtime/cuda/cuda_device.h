// The CUDA device: the Device interface (runtime/device.h) over NVIDIA's driver API, loaded from
// libcuda.so.1 with dlopen at run time, so nothing links against CUDA and a machine without a GPU
// driver builds and runs kiln (only a request for this device fails, with a UserError naming what is
// missing). One device per process (KILN_CUDA_DEVICE=N, default 0), its primary context, the
// default stream or a stream the caller brings; calls from several threads are serialised. Kernels are PTX or cubins made by NVRTC
// (codegen/cuda/nvrtc_compiler.h), loaded with cuModuleLoadData; a launch runs one thread per index
// of LaunchDims::global[0], in blocks of LaunchDims::local[0] (default kCudaThreadsPerBlock).
//
// Written without a GPU; first run on an NVIDIA H200 (2026-11-27), where the whole CUDA suite passed
// (docs/backends.md, "Measured on an NVIDIA H200").
#pragma once

#include <mutex>
#include <string>

#include "runtime/device.h"

namespace kiln {

struct CudaApi;

class CudaDevice final : public Device {
 public:
  // A whole number of warps: kernels that give an output a warp (opt/gpu_grid.h) rely on every warp
  // lying in one block, all in or all out of the grid guard, so that all its lanes reach the shuffles.
  static constexpr size_t kCudaThreadsPerBlock = 128;
  static_assert(kCudaThreadsPerBlock % 32 == 0);

  // The process's CUDA device. Throws a UserError starting "unsupported target: CUDA: " naming what is
  // missing (the driver library, an entry point, a device; cuInit's error) when there is none.
  static CudaDevice& instance();
  // Whether instance() would succeed; otherwise *why_not says why. Never throws.
  static bool available(std::string* why_not = nullptr);

  const std::string& name() const override { return name_; }
  DeviceMemory allocate(size_t bytes) override;
  void free(DeviceMemory memory) override;
  // A pointer into `base`: nothing to create or release.
  DeviceMemory view(DeviceMemory base, size_t offset, size_t bytes) override;
  void release_view(DeviceMemory) override {}
  using Device::copy_on_device;
  using Device::copy_to_device;
  using Device::copy_to_host;
  using Device::launch;
  using Device::synchronize;
  void copy_to_device(DeviceMemory destination, const void* source, size_t bytes, void* queue) override;
  void copy_to_host(void* destination, DeviceMemory source, size_t bytes, void* queue) override;
  void copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes, void* queue) override;
  // `source` is PTX text or a cubin image; `name` the extern "C" kernel function in it.
  std::unique_ptr<DeviceKernel> build_kernel(const std::string& source, const std::string& name) override;
  void launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars,
              const LaunchDims& dims, void* queue) override;
  // A CUDA graph of the launches (a chain of kernel nodes), instantiated once; null where the driver
  // has no graphs (before CUDA 11.4).
  std::unique_ptr<LaunchGraph> record(std::span<const KernelLaunch> launches) override;
  void replay(LaunchGraph& graph, void* queue) override;
  void synchronize(void* queue) override;
  // A caller's stream must belong to the primary context (checked where the driver has
  // cuStreamGetCtx, CUDA 9.2 on).
  std::string check_queue(void* queue) const override;
  void* mark(void* queue) override;
  void wait(void* event) override;
  void release(void* event) override;
  void* native_context() const override { return context_; }

  // Compute capability as NN (90 for sm_90).
  int compute_capability() const { return compute_capability_; }

  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

 private:
  static CudaDevice* open_once(std::string* why_not);
  CudaDevice() = default;
  ~CudaDevice() override = default;  // never destroyed: modules may be cached until exit
  void open(const CudaApi& api);
  void make_current() const;
  // Throws an InternalError naming `what` and the driver's error when `status` is not CUDA_SUCCESS.
  void check(int status, const char* what) const;

  const CudaApi* api_ = nullptr;
  int device_ = 0;
  void* context_ = nullptr;  // CUcontext (the primary context)
  std::string name_;
  int compute_capability_ = 0;
  std::mutex mutex_;
};

}  // namespace kiln
