// The CUDA device; see cuda_device.h. The driver API's few entry points are declared here from
// NVIDIA's documented C API (CUresult is an int-sized enum whose 0 is success; CUdeviceptr is a 64-bit
// integer; contexts, modules and functions are opaque pointers), so building kiln needs no CUDA header.
#include "runtime/cuda/cuda_device.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/error.h"

namespace kiln {

using CuResult = int;
using CuDevicePtr = unsigned long long;
using CuContext = struct CuContextOpaque*;
using CuModule = struct CuModuleOpaque*;
using CuFunction = struct CuFunctionOpaque*;
using CuStream = struct CuStreamOpaque*;
using CuEvent = struct CuEventOpaque*;
using CuGraph = struct CuGraphOpaque*;
using CuGraphNode = struct CuGraphNodeOpaque*;
using CuGraphExec = struct CuGraphExecOpaque*;

// CUDA_KERNEL_NODE_PARAMS (its _v2 layout, CUDA 12 on; the first ten fields are _v1's).
struct CuKernelNodeParams {
  CuFunction function = nullptr;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned shared_bytes = 0;
  void** parameters = nullptr;
  void** extra = nullptr;
  void* kernel = nullptr;   // CUkernel, unused where `function` is set
  void* context = nullptr;  // CUcontext, ignored where `function` is set
};

struct CudaApi {
  CuResult (*cuInit)(unsigned) = nullptr;
  CuResult (*cuGetErrorName)(CuResult, const char**) = nullptr;
  CuResult (*cuDeviceGetCount)(int*) = nullptr;
  CuResult (*cuDeviceGet)(int*, int) = nullptr;
  CuResult (*cuDeviceGetName)(char*, int, int) = nullptr;
  CuResult (*cuDeviceGetAttribute)(int*, int, int) = nullptr;
  CuResult (*cuDevicePrimaryCtxRetain)(CuContext*, int) = nullptr;
  CuResult (*cuCtxSetCurrent)(CuContext) = nullptr;
  CuResult (*cuCtxSynchronize)() = nullptr;
  CuResult (*cuModuleLoadData)(CuModule*, const void*) = nullptr;
  CuResult (*cuModuleUnload)(CuModule) = nullptr;
  CuResult (*cuModuleGetFunction)(CuFunction*, CuModule, const char*) = nullptr;
  CuResult (*cuMemAlloc)(CuDevicePtr*, size_t) = nullptr;
  CuResult (*cuMemFree)(CuDevicePtr) = nullptr;
  CuResult (*cuMemcpyHtoD)(CuDevicePtr, const void*, size_t) = nullptr;
  CuResult (*cuMemcpyDtoH)(void*, CuDevicePtr, size_t) = nullptr;
  CuResult (*cuMemcpyDtoD)(CuDevicePtr, CuDevicePtr, size_t) = nullptr;
  CuResult (*cuLaunchKernel)(CuFunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CuStream,
                             void**, void**) = nullptr;
  // For the streams callers bring (kiln_run_options.queue).
  CuResult (*cuMemcpyHtoDAsync)(CuDevicePtr, const void*, size_t, CuStream) = nullptr;
  CuResult (*cuMemcpyDtoHAsync)(void*, CuDevicePtr, size_t, CuStream) = nullptr;
  CuResult (*cuMemcpyDtoDAsync)(CuDevicePtr, CuDevicePtr, size_t, CuStream) = nullptr;
  CuResult (*cuStreamSynchronize)(CuStream) = nullptr;
  CuResult (*cuEventCreate)(CuEvent*, unsigned) = nullptr;
  CuResult (*cuEventRecord)(CuEvent, CuStream) = nullptr;
  CuResult (*cuEventSynchronize)(CuEvent) = nullptr;
  CuResult (*cuEventDestroy)(CuEvent) = nullptr;
  CuResult (*cuStreamGetCtx)(CuStream, CuContext*) = nullptr;  // CUDA 9.2 on; null before (not checked then)
  // CUDA graphs (CudaDevice::record): all null where the driver lacks one of them (record then
  // returns null and runs launch kernel by kernel).
  CuResult (*cuGraphCreate)(CuGraph*, unsigned) = nullptr;
  CuResult (*cuGraphAddKernelNode)(CuGraphNode*, CuGraph, const CuGraphNode*, size_t, const CuKernelNodeParams*) = nullptr;
  CuResult (*cuGraphInstantiateWithFlags)(CuGraphExec*, CuGraph, unsigned long long) = nullptr;
  CuResult (*cuGraphLaunch)(CuGraphExec, CuStream) = nullptr;
  CuResult (*cuGraphExecDestroy)(CuGraphExec) = nullptr;
  CuResult (*cuGraphDestroy)(CuGraph) = nullptr;
};

namespace {

constexpr int kComputeCapabilityMajor = 75, kComputeCapabilityMinor = 76;  // CUdevice_attribute values
constexpr CuResult kOutOfMemory = 2;                                       // CUDA_ERROR_OUT_OF_MEMORY
constexpr unsigned kEventDisableTiming = 2;                                 // CU_EVENT_DISABLE_TIMING

[[noreturn]] void unsupported(const std::string& why) { throw UserError("unsupported target: CUDA: " + why); }

std::string error_name(const CudaApi& api, CuResult code) {
  const char* name = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(code, &name) != 0 || name == nullptr)
    return "CUDA error " + std::to_string(code);
  return std::string(name) + " (" + std::to_string(code) + ")";
}

CuDevicePtr device_pointer(const DeviceMemory& memory) {
  return static_cast<CuDevicePtr>(reinterpret_cast<uintptr_t>(memory.handle));
}

template <typename Function>
bool resolve(void* library, const char* name, Function& slot, std::string& why_not) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr) why_not = str_cat("the CUDA driver library has no entry point ", name);
  return slot != nullptr;
}

struct LoadedApi {
  CudaApi api;
  bool ok = false;
  std::string why_not;
};

LoadedApi load_api() {
  LoadedApi loaded;
  const char* chosen = std::getenv("KILN_CUDA_LIBRARY");
  std::string name = chosen != nullptr && *chosen != '\0' ? chosen : "libcuda.so.1";
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* error = dlerror();
    loaded.why_not = "cannot load the CUDA driver (" + std::string(error != nullptr ? error : name + ": not found") +
                     "); install NVIDIA's driver or set KILN_CUDA_LIBRARY";
    return loaded;
  }
  CudaApi& a = loaded.api;
  std::string& why = loaded.why_not;
  // The _v2 entry points are the ones cuda.h's macros name (64-bit sizes and pointers).
  loaded.ok = resolve(library, "cuInit", a.cuInit, why) && resolve(library, "cuGetErrorName", a.cuGetErrorName, why) &&
              resolve(library, "cuDeviceGetCount", a.cuDeviceGetCount, why) &&
              resolve(library, "cuDeviceGet", a.cuDeviceGet, why) &&
              resolve(library, "cuDeviceGetName", a.cuDeviceGetName, why) &&
              resolve(library, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, why) &&
              resolve(library, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, why) &&
              resolve(library, "cuCtxSetCurrent", a.cuCtxSetCurrent, why) &&
              resolve(library, "cuCtxSynchronize", a.cuCtxSynchronize, why) &&
              resolve(library, "cuModuleLoadData", a.cuModuleLoadData, why) &&
              resolve(library, "cuModuleUnload", a.cuModuleUnload, why) &&
              resolve(library, "cuModuleGetFunction", a.cuModuleGetFunction, why) &&
              resolve(library, "cuMemAlloc_v2", a.cuMemAlloc, why) && resolve(library, "cuMemFree_v2", a.cuMemFree, why) &&
              resolve(library, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, why) &&
              resolve(library, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, why) &&
              resolve(library, "cuMemcpyDtoD_v2", a.cuMemcpyDtoD, why) &&
              resolve(library, "cuLaunchKernel", a.cuLaunchKernel, why) &&
              resolve(library, "cuMemcpyHtoDAsync_v2", a.cuMemcpyHtoDAsync, why) &&
              resolve(library, "cuMemcpyDtoHAsync_v2", a.cuMemcpyDtoHAsync, why) &&
              resolve(library, "cuMemcpyDtoDAsync_v2", a.cuMemcpyDtoDAsync, why) &&
              resolve(library, "cuStreamSynchronize", a.cuStreamSynchronize, why) &&
              resolve(library, "cuEventCreate", a.cuEventCreate, why) &&
              resolve(library, "cuEventRecord", a.cuEventRecord, why) &&
              resolve(library, "cuEventSynchronize", a.cuEventSynchronize, why) &&
              resolve(library, "cuEventDestroy_v2", a.cuEventDestroy, why);
  a.cuStreamGetCtx = reinterpret_cast<decltype(a.cuStreamGetCtx)>(dlsym(library, "cuStreamGetCtx"));
  // Graphs: cuGraphAddKernelNode_v2 is what cuda.h names from CUDA 12 on (the _v2 parameters);
  // an older driver's plain entry point reads the same fields (the _v1 prefix of the struct).
  auto optional = [&](const char* name, auto& slot) { slot = reinterpret_cast<std::decay_t<decltype(slot)>>(dlsym(library, name)); };
  optional("cuGraphCreate", a.cuGraphCreate);
  optional("cuGraphAddKernelNode_v2", a.cuGraphAddKernelNode);
  if (a.cuGraphAddKernelNode == nullptr) optional("cuGraphAddKernelNode", a.cuGraphAddKernelNode);
  optional("cuGraphInstantiateWithFlags", a.cuGraphInstantiateWithFlags);
  optional("cuGraphLaunch", a.cuGraphLaunch);
  optional("cuGraphExecDestroy", a.cuGraphExecDestroy);
  optional("cuGraphDestroy", a.cuGraphDestroy);
  if (a.cuGraphCreate == nullptr || a.cuGraphAddKernelNode == nullptr || a.cuGraphInstantiateWithFlags == nullptr ||
      a.cuGraphLaunch == nullptr || a.cuGraphExecDestroy == nullptr || a.cuGraphDestroy == nullptr)
    a.cuGraphCreate = nullptr;  // one missing: no graphs at all
  return loaded;  // the library stays loaded for the life of the process
}

class CudaKernel final : public DeviceKernel {
 public:
  CudaKernel(const CudaApi& api, CuModule module, CuFunction function, std::string name)
      : api_(api), module_(module), function_(function), name_(std::move(name)) {}
  ~CudaKernel() override { api_.cuModuleUnload(module_); }
  const std::string& name() const override { return name_; }
  CuFunction function() const { return function_; }

 private:
  const CudaApi& api_;
  CuModule module_;
  CuFunction function_;
  std::string name_;
};

// An instantiated CUDA graph. The graph itself is only needed until it is instantiated.
class CudaLaunchGraph final : public LaunchGraph {
 public:
  CudaLaunchGraph(const CudaApi& api, CuGraphExec exec) : api_(api), exec_(exec) {}
  ~CudaLaunchGraph() override { api_.cuGraphExecDestroy(exec_); }
  CuGraphExec exec() const { return exec_; }

 private:
  const CudaApi& api_;
  CuGraphExec exec_;
};

// The grid of a launch of dims.global[0] threads in blocks of dims.local[0] (default
// kCudaThreadsPerBlock): {blocks, threads per block}, blocks 0 for an empty launch.
std::pair<size_t, size_t> grid_of(const LaunchDims& dims, size_t default_block) {
  size_t block = dims.local[0] != 0 ? dims.local[0] : default_block;
  size_t grid = (dims.global[0] + block - 1) / block;
  if (grid > 0x7fffffffu) throw UserError(str_cat("a launch of ", dims.global[0], " threads exceeds CUDA's grid"));
  return {grid, block};
}

// cuLaunchKernel's kernelParams for one launch: a pointer to each argument's value, which the
// returned storage holds (the driver copies the values at the call).
struct KernelParameters {
  std::vector<CuDevicePtr> pointers;
  std::vector<long long> values;  // the kernel's `long` parameters (LP64)
  std::vector<void*> addresses;
  KernelParameters(std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars)
      : values(scalars.begin(), scalars.end()) {
    for (const DeviceMemory& memory : arguments) pointers.push_back(device_pointer(memory));
    for (CuDevicePtr& pointer : pointers) addresses.push_back(&pointer);
    for (long long& value : values) addresses.push_back(&value);
  }
};

}  // namespace

CudaDevice* CudaDevice::open_once(std::string* why_not) {
  struct Opened {
    CudaDevice* device = nullptr;
    std::string why_not;
  };
  static const Opened opened = [] {
    Opened result;
    static const LoadedApi loaded = load_api();
    if (!loaded.ok) {
      result.why_not = "unsupported target: CUDA: " + loaded.why_not;
      return result;
    }
    auto* device = new CudaDevice();
    try {
      device->open(loaded.api);
      result.device = device;
    } catch (const UserError& error) {
      delete device;
      result.why_not = error.what();
    }
    return result;
  }();
  if (opened.device == nullptr && why_not != nullptr) *why_not = opened.why_not;
  return opened.device;
}

CudaDevice& CudaDevice::instance() {
  std::string why_not;
  CudaDevice* device = open_once(&why_not);
  if (device == nullptr) throw UserError(why_not);
  return *device;
}

bool CudaDevice::available(std::string* why_not) { return open_once(why_not) != nullptr; }

void CudaDevice::open(const CudaApi& api) {
  api_ = &api;
  if (CuResult status = api.cuInit(0); status != 0) unsupported("cuInit failed: " + error_name(api, status));
  int count = 0;
  if (CuResult status = api.cuDeviceGetCount(&count); status != 0 || count == 0)
    unsupported(status != 0 ? "cuDeviceGetCount failed: " + error_name(api, status) : std::string("no CUDA device"));
  const char* chosen = std::getenv("KILN_CUDA_DEVICE");
  int index = chosen != nullptr && *chosen != '\0' ? std::atoi(chosen) : 0;
  if (index < 0 || index >= count) unsupported(str_cat("KILN_CUDA_DEVICE=", index, " but there are ", count, " devices"));
  if (CuResult status = api.cuDeviceGet(&device_, index); status != 0) unsupported("cuDeviceGet failed: " + error_name(api, status));
  char name[256] = {};
  api.cuDeviceGetName(name, sizeof name - 1, device_);
  int major = 0, minor = 0;
  api.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, device_);
  api.cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, device_);
  compute_capability_ = major * 10 + minor;
  name_ = str_cat("cuda:", name, " (sm_", compute_capability_, ")");
  CuContext context = nullptr;
  if (CuResult status = api.cuDevicePrimaryCtxRetain(&context, device_); status != 0)
    unsupported("cuDevicePrimaryCtxRetain failed: " + error_name(api, status));
  context_ = context;
}

// The driver keeps a current context per thread: every call from a new thread sets it first.
void CudaDevice::make_current() const {
  if (CuResult status = api_->cuCtxSetCurrent(static_cast<CuContext>(context_)); status != 0)
    throw_internal_error("cuCtxSetCurrent failed: " + error_name(*api_, status));
}

DeviceMemory CudaDevice::allocate(size_t bytes) {
  std::lock_guard lock(mutex_);
  make_current();
  CuDevicePtr pointer = 0;
  CuResult status = api_->cuMemAlloc(&pointer, bytes == 0 ? 1 : bytes);
  if (status == kOutOfMemory) throw UserError(str_cat("out of device memory on ", name_, ": ", bytes, " bytes"));
  if (status != 0) throw_internal_error("cuMemAlloc failed: " + error_name(*api_, status));
  return DeviceMemory{reinterpret_cast<void*>(static_cast<uintptr_t>(pointer)), bytes};
}

void CudaDevice::free(DeviceMemory memory) {
  if (memory.handle == nullptr) return;
  std::lock_guard lock(mutex_);
  make_current();
  api_->cuMemFree(device_pointer(memory));
}

DeviceMemory CudaDevice::view(DeviceMemory base, size_t offset, size_t bytes) {
  if (bytes == 0 || offset + bytes > base.bytes) return {};
  return DeviceMemory{reinterpret_cast<void*>(static_cast<uintptr_t>(device_pointer(base) + offset)), bytes};
}

// The device's own queue is the legacy default stream, with the synchronous copies; a caller's stream
// gets the asynchronous copies, and waits where the Device contract says a copy returns with the
// host memory free or filled.
void CudaDevice::copy_to_device(DeviceMemory destination, const void* source, size_t bytes, void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  if (queue == nullptr) {
    check(api_->cuMemcpyHtoD(device_pointer(destination), source, bytes), "cuMemcpyHtoD");
    return;
  }
  check(api_->cuMemcpyHtoDAsync(device_pointer(destination), source, bytes, static_cast<CuStream>(queue)), "cuMemcpyHtoDAsync");
  check(api_->cuStreamSynchronize(static_cast<CuStream>(queue)), "cuStreamSynchronize");
}

void CudaDevice::copy_to_host(void* destination, DeviceMemory source, size_t bytes, void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  if (queue == nullptr) {
    check(api_->cuMemcpyDtoH(destination, device_pointer(source), bytes), "cuMemcpyDtoH");
    return;
  }
  check(api_->cuMemcpyDtoHAsync(destination, device_pointer(source), bytes, static_cast<CuStream>(queue)), "cuMemcpyDtoHAsync");
  check(api_->cuStreamSynchronize(static_cast<CuStream>(queue)), "cuStreamSynchronize");
}

void CudaDevice::copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes, void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  if (queue == nullptr) check(api_->cuMemcpyDtoD(device_pointer(destination), device_pointer(source), bytes), "cuMemcpyDtoD");
  else
    check(api_->cuMemcpyDtoDAsync(device_pointer(destination), device_pointer(source), bytes, static_cast<CuStream>(queue)),
          "cuMemcpyDtoDAsync");
}

std::unique_ptr<DeviceKernel> CudaDevice::build_kernel(const std::string& source, const std::string& name) {
  std::lock_guard lock(mutex_);
  make_current();
  CuModule module = nullptr;
  // PTX is text and must end in a NUL; a cubin is an image whose size the ELF header gives.
  if (CuResult status = api_->cuModuleLoadData(&module, source.c_str()); status != 0)
    throw_internal_error(str_cat("cuModuleLoadData failed for kernel ", name, " on ", name_, ": ", error_name(*api_, status)));
  CuFunction function = nullptr;
  if (CuResult status = api_->cuModuleGetFunction(&function, module, name.c_str()); status != 0) {
    api_->cuModuleUnload(module);
    throw_internal_error(str_cat("the module of kernel ", name, " has no such function: ", error_name(*api_, status)));
  }
  return std::make_unique<CudaKernel>(*api_, module, function, name);
}

void CudaDevice::launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars,
                        const LaunchDims& dims, void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  KernelParameters parameters(arguments, scalars);
  auto [grid, block] = grid_of(dims, kCudaThreadsPerBlock);
  if (grid == 0) return;
  CuResult status = api_->cuLaunchKernel(static_cast<CudaKernel&>(kernel).function(), static_cast<unsigned>(grid), 1, 1,
                                         static_cast<unsigned>(block), 1, 1, 0, static_cast<CuStream>(queue),
                                         parameters.addresses.data(), nullptr);
  if (status != 0) throw_internal_error(str_cat("cuLaunchKernel failed for ", kernel.name(), ": ", error_name(*api_, status)));
}

// The launches become a chain of kernel nodes (each depends on the one before, as on a stream),
// instantiated once; the graph itself is destroyed after instantiation.
std::unique_ptr<LaunchGraph> CudaDevice::record(std::span<const KernelLaunch> launches) {
  if (api_->cuGraphCreate == nullptr) return nullptr;
  std::lock_guard lock(mutex_);
  make_current();
  CuGraph graph = nullptr;
  check(api_->cuGraphCreate(&graph, 0), "cuGraphCreate");
  CuGraphExec exec = nullptr;
  CuResult status = 0;
  const char* failed = nullptr;
  CuGraphNode previous = nullptr;
  for (const KernelLaunch& launch : launches) {
    auto [grid, block] = grid_of(launch.dims, kCudaThreadsPerBlock);
    if (grid == 0) continue;
    KernelParameters parameters(launch.arguments, launch.scalars);
    CuKernelNodeParams node_parameters;
    node_parameters.function = static_cast<CudaKernel*>(launch.kernel)->function();
    node_parameters.grid[0] = static_cast<unsigned>(grid);
    node_parameters.block[0] = static_cast<unsigned>(block);
    node_parameters.parameters = parameters.addresses.data();
    CuGraphNode node = nullptr;
    status = api_->cuGraphAddKernelNode(&node, graph, previous != nullptr ? &previous : nullptr, previous != nullptr ? 1 : 0,
                                        &node_parameters);
    if (status != 0) {
      failed = "cuGraphAddKernelNode";
      break;
    }
    previous = node;
  }
  if (status == 0) {
    status = api_->cuGraphInstantiateWithFlags(&exec, graph, 0);
    if (status != 0) failed = "cuGraphInstantiate";
  }
  api_->cuGraphDestroy(graph);
  check(status, failed);
  return std::make_unique<CudaLaunchGraph>(*api_, exec);
}

void CudaDevice::replay(LaunchGraph& graph, void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  check(api_->cuGraphLaunch(static_cast<CudaLaunchGraph&>(graph).exec(), static_cast<CuStream>(queue)), "cuGraphLaunch");
}

void CudaDevice::synchronize(void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  if (queue != nullptr) check(api_->cuStreamSynchronize(static_cast<CuStream>(queue)), "cuStreamSynchronize (a kernel faulted?)");
  else check(api_->cuCtxSynchronize(), "cuCtxSynchronize (a kernel faulted?)");
}

std::string CudaDevice::check_queue(void* queue) const {
  if (api_->cuStreamGetCtx == nullptr) return "";  // a driver before CUDA 9.2 cannot say; the caller vouches
  CuContext context = nullptr;
  if (CuResult status = api_->cuStreamGetCtx(static_cast<CuStream>(queue), &context); status != 0)
    return "it is no CUDA stream (cuStreamGetCtx: " + error_name(*api_, status) + ")";
  if (context != static_cast<CuContext>(context_))
    return "it is a stream of another context than the primary context of " + name_ + " (kiln_plan_device returns it)";
  return "";
}

void* CudaDevice::mark(void* queue) {
  std::lock_guard lock(mutex_);
  make_current();
  CuEvent event = nullptr;
  check(api_->cuEventCreate(&event, kEventDisableTiming), "cuEventCreate");
  if (CuResult status = api_->cuEventRecord(event, static_cast<CuStream>(queue)); status != 0) {
    api_->cuEventDestroy(event);
    check(status, "cuEventRecord");
  }
  return event;
}

void CudaDevice::wait(void* event) {
  std::lock_guard lock(mutex_);
  make_current();
  check(api_->cuEventSynchronize(static_cast<CuEvent>(event)), "cuEventSynchronize (a kernel faulted?)");
}

void CudaDevice::release(void* event) {
  if (event == nullptr) return;
  std::lock_guard lock(mutex_);
  make_current();
  api_->cuEventDestroy(static_cast<CuEvent>(event));
}

void CudaDevice::check(int status, const char* what) const {
  if (status != 0) throw_internal_error(str_cat(what, " failed: ", error_name(*api_, status)));
}

}  // namespace kiln
