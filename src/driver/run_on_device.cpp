// realize()'s device half; see run_on_device.h.
#include "driver/run_on_device.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <algorithm>
#include <functional>

#include "codegen/c_style/cuda_codegen.h"
#include "codegen/c_style/opencl_codegen.h"
#include "codegen/cuda/nvrtc_compiler.h"
#include "runtime/caching_allocator.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/opencl/opencl_device.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

thread_local int scoped_device = -1;  // -1: no override
thread_local const TargetCaps* scoped_caps = nullptr;
std::atomic<uint64_t> launches{0};

using Clock = std::chrono::steady_clock;

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct BuiltKernel {
  std::unique_ptr<DeviceKernel> kernel;
  int buffer_count = 0;
};

// Kernels built in this process, by source: PoCL and GPU drivers take tens of milliseconds per build,
// and realize() sees the same kernels again and again.
struct KernelCache {
  std::mutex mutex;
  std::unordered_map<std::string, BuiltKernel> by_source;
  // Kernel symbol → its entry: a symbol names its AST (driver/compile_kernels.h), so a kernel seen
  // before is neither lowered nor rendered again.
  std::unordered_map<std::string, const BuiltKernel*> by_symbol;
};

// The cache keeps up to KILN_DEVICE_CACHE_MB (default 256) MiB of freed blocks for reuse.
CachingAllocator* new_allocator(Device& device) {
  return new CachingAllocator([&device](size_t bytes) { return device.allocate(bytes); },
                              [&device](DeviceMemory m) { device.free(m); },
                              static_cast<size_t>(std::max(0L, env_integer("KILN_DEVICE_CACHE_MB", 256))) << 20);
}

// What differs between the devices: the device, how a kernel AST becomes what its build_kernel
// takes, and the process's kernel cache and memory cache for it (never destroyed: the driver may be
// gone when statics die).
struct DeviceBackend {
  Device& device;
  std::function<RenderedKernel(const UOpPtr&)> render;
  KernelCache& kernels;
  CachingAllocator& memory;
};

DeviceBackend opencl_backend() {
  OpenCLDevice& device = OpenCLDevice::instance();
  static auto* kernels = new KernelCache();
  static CachingAllocator* memory = new_allocator(device);
  CDeviceFeatures features{device.name(), device.has_f16(), device.has_f64()};
  return {device, [features](const UOpPtr& ast) { return opencl_render_kernel(ast, features); }, *kernels, *memory};
}

// PTX for the newest architecture NVRTC knows that the GPU runs (its own, where NVRTC knows it).
int cuda_ptx_architecture(int compute_capability) {
  const NvrtcInfo* info = nvrtc_info(nullptr);
  int best = 0;
  if (info != nullptr)
    for (int architecture : info->architectures)
      if (architecture <= compute_capability) best = std::max(best, architecture);
  return best != 0 ? best : compute_capability;  // none: compile_cuda names the architectures it has
}

DeviceBackend cuda_backend() {
  CudaDevice& device = CudaDevice::instance();
  static auto* kernels = new KernelCache();
  static CachingAllocator* memory = new_allocator(device);
  int architecture = cuda_ptx_architecture(device.compute_capability());
  CDeviceFeatures features = cuda_device_features(device.compute_capability());
  features.device_name = device.name();
  features.cuda_architecture = architecture;  // the instructions the PTX may use (the mma shape)
  return {device,
          [features, architecture](const UOpPtr& ast) {
            RenderedKernel rendered = cuda_render_kernel(ast, features);
            rendered.source = compile_cuda(rendered.source, rendered.name + ".cu", architecture).ptx;
            return rendered;
          },
          *kernels, *memory};
}

// Every block a run holds, given back to the cache however the run ends.
class RunMemory {
 public:
  explicit RunMemory(CachingAllocator& allocator, size_t buffers) : allocator_(allocator), memory_(buffers) {}
  ~RunMemory() {
    for (DeviceMemory& memory : memory_) allocator_.release(memory);
  }
  DeviceMemory& operator[](size_t b) { return memory_[b]; }
  void allocate(size_t b, size_t bytes) { memory_[b] = allocator_.allocate(bytes); }
  void release(size_t b) {
    allocator_.release(memory_[b]);
    memory_[b] = DeviceMemory{};
  }

 private:
  CachingAllocator& allocator_;
  std::vector<DeviceMemory> memory_;
};

}  // namespace

ExecutionDevice realize_device() {
  if (scoped_device >= 0) return static_cast<ExecutionDevice>(scoped_device);
  const char* chosen = std::getenv("KILN_DEVICE");
  if (chosen == nullptr || *chosen == '\0' || std::string(chosen) == "cpu") return ExecutionDevice::Cpu;
  if (std::string(chosen) == "opencl") return ExecutionDevice::OpenCL;
  if (std::string(chosen) == "cuda") return ExecutionDevice::Cuda;
  throw UserError(str_cat("KILN_DEVICE='", chosen, "' names no device kiln can run on (cpu, opencl, cuda)"));
}

const char* execution_device_name(ExecutionDevice device) {
  return device == ExecutionDevice::OpenCL ? "opencl" : device == ExecutionDevice::Cuda ? "cuda" : "cpu";
}

ScopedRealizeDevice::ScopedRealizeDevice(ExecutionDevice device, const TargetCaps* caps)
    : previous_(scoped_device), previous_caps_(scoped_caps) {
  scoped_device = static_cast<int>(device);
  scoped_caps = caps;
}
ScopedRealizeDevice::~ScopedRealizeDevice() {
  scoped_device = previous_;
  scoped_caps = previous_caps_;
}

const TargetCaps& execution_target_caps(ExecutionDevice device) {
  if (scoped_caps != nullptr) return *scoped_caps;
  if (device == ExecutionDevice::OpenCL) return opencl_target_caps();
  if (device == ExecutionDevice::Cuda) {
    // The machine's GPU decides which tensor cores there are; without one, sm_75's caps (the plans'
    // default): the run then fails, saying why there is no device.
    int architecture = 75;
    if (CudaDevice::available()) architecture = cuda_ptx_architecture(CudaDevice::instance().compute_capability());
    return cuda_target_caps(architecture);
  }
  return host_cpu_caps();
}

namespace {
thread_local const TargetCaps* scoped_graph_target = nullptr;
}  // namespace

const TargetCaps& graph_target_caps() {
  return scoped_graph_target != nullptr ? *scoped_graph_target : execution_target_caps(realize_device());
}

ScopedGraphTarget::ScopedGraphTarget(const TargetCaps* caps) : previous_(scoped_graph_target) {
  if (caps != nullptr) scoped_graph_target = caps;
}

ScopedGraphTarget::~ScopedGraphTarget() { scoped_graph_target = previous_; }

void run_schedule_on_device(ExecutionDevice where, const Schedule& schedule, const std::vector<void*>& host) {
  KILN_ASSERT(where != ExecutionDevice::Cpu, "run_schedule_on_device runs on OpenCL or CUDA");
  DeviceBackend backend = where == ExecutionDevice::Cuda ? cuda_backend() : opencl_backend();
  Device& device = backend.device;
  auto start = Clock::now();
  std::vector<const BuiltKernel*> kernels;
  int built = 0;
  KernelCache& cache = backend.kernels;
  for (const ScheduledKernel& kernel : schedule.kernels) {
    const BuiltKernel* entry = nullptr;
    {
      std::lock_guard lock(cache.mutex);
      if (auto known = cache.by_symbol.find(kernel.name()); known != cache.by_symbol.end()) entry = known->second;
    }
    if (entry == nullptr) {
      RenderedKernel rendered = backend.render(kernel.ast);
      std::lock_guard lock(cache.mutex);
      auto found = cache.by_source.find(rendered.source);
      if (found == cache.by_source.end()) {
        BuiltKernel built_kernel{device.build_kernel(rendered.source, rendered.name), rendered.buffer_count};
        found = cache.by_source.emplace(rendered.source, std::move(built_kernel)).first;
        ++built;
      }
      entry = &found->second;
      cache.by_symbol.emplace(kernel.name(), entry);
    }
    if (entry->buffer_count > static_cast<int>(kernel.buffers.size()))
      throw_internal_error(str_cat("kernel ", kernel.name(), " takes ", entry->buffer_count,
                                   " buffers, the schedule binds ", kernel.buffers.size()));
    kernels.push_back(entry);
  }
  double build_ms = milliseconds_since(start);

  // The last kernel that touches each buffer: intermediates go back to the cache after it.
  std::vector<int64_t> last_use(schedule.buffers.size(), -1);
  for (size_t k = 0; k < schedule.kernels.size(); ++k)
    for (int b : schedule.kernels[k].buffers) last_use[static_cast<size_t>(b)] = static_cast<int64_t>(k);

  start = Clock::now();
  RunMemory memory(backend.memory, schedule.buffers.size());
  std::vector<DeviceMemory> arguments;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    const ScheduledKernel& kernel = schedule.kernels[k];
    arguments.clear();
    for (int slot = 0; slot < kernels[k]->buffer_count; ++slot) {
      auto b = static_cast<size_t>(kernel.buffers[static_cast<size_t>(slot)]);
      const ScheduledBuffer& buffer = schedule.buffers[b];
      if (memory[b].handle == nullptr) {
        memory.allocate(b, static_cast<size_t>(buffer.bytes()));
        if (buffer.kind == ScheduledBuffer::Kind::Input)
          device.copy_to_device(memory[b], host[b], static_cast<size_t>(buffer.bytes()));
      }
      arguments.push_back(memory[b]);
    }
    LaunchDims dims;
    int64_t extent = kernel.parallel_extent.value("running a kernel on a device");
    dims.global[0] = static_cast<size_t>(extent);
    dims.local[0] = static_cast<size_t>(kernel.group_size);  // 0: the device chooses
    auto launched = Clock::now();
    // An empty axis 0 (a tensor with no elements) has nothing to run; OpenCL 1.2 refuses a global
    // size of 0, so there is no launch at all, as the CPU runs no chunk.
    if (extent > 0) {
      device.launch(*kernels[k]->kernel, arguments, dims);
      ++launches;
    }
    if (debug_level() >= 2) {
      device.synchronize();
      debug_print(str_cat("  run ", kernel.name(), " on ", device.name(), ": ", milliseconds_since(launched), " ms, ",
                          extent, " work-items"));
    }
    for (int b : kernel.buffers)
      if (last_use[static_cast<size_t>(b)] == static_cast<int64_t>(k) &&
          schedule.buffers[static_cast<size_t>(b)].kind == ScheduledBuffer::Kind::Intermediate)
        memory.release(static_cast<size_t>(b));
  }
  for (size_t b = 0; b < schedule.buffers.size(); ++b)
    if (schedule.buffers[b].kind == ScheduledBuffer::Kind::Output && memory[b].handle != nullptr)
      device.copy_to_host(host[b], memory[b], static_cast<size_t>(schedule.buffers[b].bytes()));
  device.synchronize();
  if (debug_level() >= 1)
    debug_print(str_cat("realize on ", device.name(), ": ", schedule.kernels.size(), " kernels (", built,
                        " built); build ", build_ms, " ms, run ", milliseconds_since(start), " ms"));
}

uint64_t device_kernel_launches() { return launches.load(); }

}  // namespace kiln
