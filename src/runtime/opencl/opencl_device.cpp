// The OpenCL device; see opencl_device.h.
#include "runtime/opencl/opencl_device.h"

#include <cstdlib>
#include <vector>

#include "runtime/opencl/opencl_api.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

[[noreturn]] void unsupported(const std::string& why) { throw UserError("unsupported target: OpenCL: " + why); }

void check(cl_int code, const char* what) {
  if (code != CL_SUCCESS) throw_internal_error(str_cat("OpenCL ", what, " failed: ", opencl_error_name(code)));
}

std::string device_string(const OpenCLApi& api, cl_device_id device, cl_device_info what) {
  size_t size = 0;
  if (api.clGetDeviceInfo(device, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string text(size, '\0');
  if (api.clGetDeviceInfo(device, what, size, text.data(), nullptr) != CL_SUCCESS) return "";
  while (!text.empty() && text.back() == '\0') text.pop_back();
  return text;
}

// The caller's `queue`, or the device's `own` when it is null.
cl_command_queue queue_or(void* queue, void* own) { return static_cast<cl_command_queue>(queue != nullptr ? queue : own); }

bool has_extension(const std::string& extensions, const std::string& name) {
  return (" " + extensions + " ").find(" " + name + " ") != std::string::npos;
}

class OpenCLKernel final : public DeviceKernel {
 public:
  OpenCLKernel(const OpenCLApi& api, cl_program program, cl_kernel kernel, std::string name)
      : api_(api), program_(program), kernel_(kernel), name_(std::move(name)) {}
  ~OpenCLKernel() override {
    api_.clReleaseKernel(kernel_);
    api_.clReleaseProgram(program_);
  }
  const std::string& name() const override { return name_; }
  cl_kernel kernel() const { return kernel_; }

 private:
  const OpenCLApi& api_;
  cl_program program_;
  cl_kernel kernel_;
  std::string name_;
};

}  // namespace

void OpenCLDevice::open(const OpenCLApi& api) {
  api_ = &api;
  cl_uint platform_count = 0;
  cl_int status = api.clGetPlatformIDs(0, nullptr, &platform_count);
  if (status != CL_SUCCESS || platform_count == 0)
    unsupported("no OpenCL platform is installed (clGetPlatformIDs: " + opencl_error_name(status) +
                "); install a driver such as Debian's pocl-opencl-icd");
  std::vector<cl_platform_id> platforms(platform_count);
  check(api.clGetPlatformIDs(platform_count, platforms.data(), nullptr), "clGetPlatformIDs");
  std::vector<cl_device_id> devices;
  for (cl_platform_id platform : platforms) {
    cl_uint count = 0;
    if (api.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &count) != CL_SUCCESS || count == 0) continue;
    std::vector<cl_device_id> found(count);
    if (api.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, count, found.data(), nullptr) == CL_SUCCESS)
      devices.insert(devices.end(), found.begin(), found.end());
  }
  if (devices.empty()) unsupported(str_cat(platform_count, " OpenCL platform(s) but no device"));
  long choice = env_integer("KILN_OPENCL_DEVICE", 0);
  if (choice < 0 || static_cast<size_t>(choice) >= devices.size())
    unsupported(str_cat("KILN_OPENCL_DEVICE=", choice, " but there are ", devices.size(), " devices (0 … ",
                        devices.size() - 1, ")"));
  cl_device_id device = devices[static_cast<size_t>(choice)];
  device_ = device;
  name_ = "opencl:" + device_string(api, device, CL_DEVICE_NAME);
  version_ = device_string(api, device, CL_DEVICE_VERSION);
  std::string extensions = device_string(api, device, CL_DEVICE_EXTENSIONS);
  f16_ = has_extension(extensions, "cl_khr_fp16");
  f64_ = has_extension(extensions, "cl_khr_fp64");
  cl_uint alignment_bits = 0;
  if (api.clGetDeviceInfo(device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof alignment_bits, &alignment_bits, nullptr) == CL_SUCCESS)
    view_alignment_ = alignment_bits / 8;
  cl_device_fp_config single = 0;
  if (api.clGetDeviceInfo(device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof single, &single, nullptr) == CL_SUCCESS)
    correctly_rounded_divide_sqrt_ = (single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;

  cl_int error = CL_SUCCESS;
  cl_context context = api.clCreateContext(nullptr, 1, &device, nullptr, nullptr, &error);
  if (context == nullptr) unsupported("clCreateContext failed: " + opencl_error_name(error));
  context_ = context;
  cl_command_queue queue = api.clCreateCommandQueue(context, device, 0, &error);
  if (queue == nullptr) unsupported("clCreateCommandQueue failed: " + opencl_error_name(error));
  queue_ = queue;
  if (debug_level() >= 1)
    debug_print(str_cat("opencl: ", name_, " (", version_, "; f16 ", f16_ ? "yes" : "no", ", f64 ", f64_ ? "yes" : "no",
                        ", correctly rounded f32 divide/sqrt ", correctly_rounded_divide_sqrt_ ? "yes" : "no", ")"));
}

// Opened once per process; a failure is remembered with its message, so every later request for
// the device gets the same answer without probing again.
OpenCLDevice* OpenCLDevice::open_once(std::string* why_not) {
  struct Opened {
    OpenCLDevice* device = nullptr;
    std::string why_not;
  };
  static const Opened opened = [] {
    Opened result;
    std::string missing;
    const OpenCLApi* api = load_opencl_api(&missing);
    if (api == nullptr) {
      result.why_not = "unsupported target: OpenCL: " + missing;
      return result;
    }
    auto* device = new OpenCLDevice();  // never destroyed: the ICD may be gone when statics die
    try {
      device->open(*api);
      result.device = device;
    } catch (const std::exception& error) {
      result.why_not = error.what();
      delete device;
    }
    return result;
  }();
  if (opened.device == nullptr && why_not != nullptr) *why_not = opened.why_not;
  return opened.device;
}

OpenCLDevice& OpenCLDevice::instance() {
  std::string why_not;
  OpenCLDevice* device = open_once(&why_not);
  if (device == nullptr) throw UserError(why_not);
  return *device;
}

bool OpenCLDevice::available(std::string* why_not) { return open_once(why_not) != nullptr; }

DeviceMemory OpenCLDevice::allocate(size_t bytes) {
  cl_int error = CL_SUCCESS;
  // A zero-sized cl_mem is invalid; an empty tensor still gets a distinct (tiny) buffer.
  cl_mem memory = api_->clCreateBuffer(static_cast<cl_context>(context_), CL_MEM_READ_WRITE, bytes == 0 ? 1 : bytes,
                                       nullptr, &error);
  if (memory == nullptr)
    throw UserError(str_cat("OpenCL device ", name_, " cannot allocate ", bytes, " bytes: ", opencl_error_name(error)));
  return DeviceMemory{memory, bytes};
}

void OpenCLDevice::free(DeviceMemory memory) {
  if (memory.handle != nullptr) api_->clReleaseMemObject(static_cast<cl_mem>(memory.handle));
}

DeviceMemory OpenCLDevice::view(DeviceMemory base, size_t offset, size_t bytes) {
  if (view_alignment_ == 0 || offset % view_alignment_ != 0 || bytes == 0 || offset + bytes > base.bytes) return {};
  cl_buffer_region region{offset, bytes};
  cl_int error = CL_SUCCESS;
  cl_mem memory = api_->clCreateSubBuffer(static_cast<cl_mem>(base.handle), CL_MEM_READ_WRITE,
                                          CL_BUFFER_CREATE_TYPE_REGION, &region, &error);
  return memory == nullptr ? DeviceMemory{} : DeviceMemory{memory, bytes};  // any failure: no view
}

void OpenCLDevice::release_view(DeviceMemory view) { free(view); }

void OpenCLDevice::copy_to_device(DeviceMemory destination, const void* source, size_t bytes, void* queue) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  check(api_->clEnqueueWriteBuffer(queue_or(queue, queue_), static_cast<cl_mem>(destination.handle),
                                   CL_TRUE, 0, bytes, source, 0, nullptr, nullptr),
        "clEnqueueWriteBuffer");
}

void OpenCLDevice::copy_to_host(void* destination, DeviceMemory source, size_t bytes, void* queue) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  check(api_->clEnqueueReadBuffer(queue_or(queue, queue_), static_cast<cl_mem>(source.handle), CL_TRUE,
                                  0, bytes, destination, 0, nullptr, nullptr),
        "clEnqueueReadBuffer");
}

void OpenCLDevice::copy_on_device(DeviceMemory destination, DeviceMemory source, size_t bytes, void* queue) {
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  check(api_->clEnqueueCopyBuffer(queue_or(queue, queue_), static_cast<cl_mem>(source.handle),
                                  static_cast<cl_mem>(destination.handle), 0, 0, bytes, 0, nullptr, nullptr),
        "clEnqueueCopyBuffer");
}

std::unique_ptr<DeviceKernel> OpenCLDevice::build_kernel(const std::string& source, const std::string& name) {
  const char* text = source.c_str();
  size_t length = source.size();
  cl_int error = CL_SUCCESS;
  cl_program program = api_->clCreateProgramWithSource(static_cast<cl_context>(context_), 1, &text, &length, &error);
  check(error, "clCreateProgramWithSource");
  // kiln's f32 division and sqrt are IEEE's (docs/kernel-ast.md); OpenCL's default allows 2.5 ulp.
  std::string options = "-cl-std=CL1.2";
  if (correctly_rounded_divide_sqrt_) options += " -cl-fp32-correctly-rounded-divide-sqrt";
  auto device = static_cast<cl_device_id>(device_);
  cl_int built = api_->clBuildProgram(program, 1, &device, options.c_str(), nullptr, nullptr);
  if (built != CL_SUCCESS) {
    size_t size = 0;
    api_->clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    if (size != 0) api_->clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    api_->clReleaseProgram(program);
    throw InternalError(str_cat("OpenCL could not build kernel '", name, "' on ", name_, ": ", opencl_error_name(built),
                                "\n", log),
                        std::source_location::current(), source);
  }
  cl_kernel kernel = api_->clCreateKernel(program, name.c_str(), &error);
  if (kernel == nullptr) {
    api_->clReleaseProgram(program);
    check(error, "clCreateKernel");
  }
  return std::make_unique<OpenCLKernel>(*api_, program, kernel, name);
}

void OpenCLDevice::launch(DeviceKernel& kernel, std::span<const DeviceMemory> arguments, std::span<const int64_t> scalars,
                          const LaunchDims& dims, void* queue) {
  auto* opencl = dynamic_cast<OpenCLKernel*>(&kernel);
  KILN_ASSERT(opencl != nullptr, "a kernel of another device launched on ", name_);
  std::lock_guard lock(mutex_);  // kernel arguments are state of the kernel object until the launch
  for (size_t i = 0; i < arguments.size(); ++i) {
    auto memory = static_cast<cl_mem>(arguments[i].handle);
    check(api_->clSetKernelArg(opencl->kernel(), static_cast<cl_uint>(i), sizeof(cl_mem), &memory), "clSetKernelArg");
  }
  for (size_t i = 0; i < scalars.size(); ++i) {
    cl_long value = scalars[i];
    check(api_->clSetKernelArg(opencl->kernel(), static_cast<cl_uint>(arguments.size() + i), sizeof(cl_long), &value),
          "clSetKernelArg");
  }
  cl_uint dimensions = dims.global[2] > 1 ? 3 : dims.global[1] > 1 ? 2 : 1;
  bool local_given = dims.local[0] != 0;
  check(api_->clEnqueueNDRangeKernel(queue_or(queue, queue_), opencl->kernel(), dimensions, nullptr,
                                     dims.global, local_given ? dims.local : nullptr, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel");
}

void OpenCLDevice::synchronize(void* queue) {
  std::lock_guard lock(mutex_);
  check(api_->clFinish(queue_or(queue, queue_)), "clFinish");
}

std::string OpenCLDevice::check_queue(void* queue) const {
  auto commands = static_cast<cl_command_queue>(queue);
  cl_context context = nullptr;
  cl_device_id device = nullptr;
  cl_command_queue_properties properties = 0;
  cl_int status = api_->clGetCommandQueueInfo(commands, CL_QUEUE_CONTEXT, sizeof context, &context, nullptr);
  if (status != CL_SUCCESS) return "it is no OpenCL command queue (clGetCommandQueueInfo: " + opencl_error_name(status) + ")";
  if (context != static_cast<cl_context>(context_))
    return "it belongs to another OpenCL context than libkiln's (kiln_plan_device returns that context)";
  check(api_->clGetCommandQueueInfo(commands, CL_QUEUE_DEVICE, sizeof device, &device, nullptr), "clGetCommandQueueInfo");
  if (device != static_cast<cl_device_id>(device_)) return "it is a queue of another device than " + name_;
  check(api_->clGetCommandQueueInfo(commands, CL_QUEUE_PROPERTIES, sizeof properties, &properties, nullptr),
        "clGetCommandQueueInfo");
  // The plan's kernels rely on running in order: each reads what the one before it wrote.
  if ((properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0) return "it runs its commands out of order";
  return "";
}

void* OpenCLDevice::mark(void* queue) {
  std::lock_guard lock(mutex_);
  cl_event event = nullptr;
  check(api_->clEnqueueMarkerWithWaitList(queue_or(queue, queue_), 0, nullptr, &event), "clEnqueueMarkerWithWaitList");
  return event;
}

void OpenCLDevice::wait(void* event) {
  auto marker = static_cast<cl_event>(event);
  check(api_->clWaitForEvents(1, &marker), "clWaitForEvents");
}

void OpenCLDevice::release(void* event) {
  if (event != nullptr) api_->clReleaseEvent(static_cast<cl_event>(event));
}

}  // namespace kiln
