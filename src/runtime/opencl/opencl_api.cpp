// Loading the OpenCL ICD loader with dlopen; see opencl_api.h.
#include "runtime/opencl/opencl_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace kiln {

namespace {

struct LoadedApi {
  OpenCLApi api;
  bool ok = false;
  std::string why_not;
};

LoadedApi load() {
  LoadedApi loaded;
  const char* chosen = std::getenv("KILN_OPENCL_LIBRARY");
  std::string names[] = {chosen != nullptr && *chosen != '\0' ? chosen : "libOpenCL.so.1", "libOpenCL.so"};
  void* library = nullptr;
  std::string errors;
  for (const std::string& name : names) {
    // RTLD_LOCAL: the ICD's symbols (and the LLVM inside PoCL) stay out of the global namespace.
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) break;
    const char* error = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(error != nullptr ? error : name + ": not found");
    if (chosen != nullptr && *chosen != '\0') break;  // an explicit choice has no fallback
  }
  if (library == nullptr) {
    loaded.why_not = "cannot load the OpenCL library (" + errors +
                     "); install an OpenCL ICD loader and driver, e.g. Debian's ocl-icd-libopencl1 and pocl-opencl-icd";
    return loaded;
  }
#define KILN_OPENCL_RESOLVE(name)                                                                        \
  loaded.api.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));                          \
  if (loaded.api.name == nullptr) {                                                                      \
    loaded.why_not = "the OpenCL library has no entry point " #name " (an OpenCL 1.2 loader is needed)"; \
    return loaded;                                                                                       \
  }
  KILN_OPENCL_FUNCTIONS(KILN_OPENCL_RESOLVE)
#undef KILN_OPENCL_RESOLVE
  // The library stays loaded for the life of the process: devices and kernels refer into it.
  loaded.ok = true;
  return loaded;
}

}  // namespace

const OpenCLApi* load_opencl_api(std::string* why_not) {
  static const LoadedApi loaded = load();
  if (!loaded.ok) {
    if (why_not != nullptr) *why_not = loaded.why_not;
    return nullptr;
  }
  return &loaded.api;
}

std::string opencl_error_name(cl_int code) {
  const char* name = nullptr;
  switch (code) {
    case CL_SUCCESS: name = "CL_SUCCESS"; break;
    case CL_DEVICE_NOT_FOUND: name = "CL_DEVICE_NOT_FOUND"; break;
    case CL_DEVICE_NOT_AVAILABLE: name = "CL_DEVICE_NOT_AVAILABLE"; break;
    case CL_COMPILER_NOT_AVAILABLE: name = "CL_COMPILER_NOT_AVAILABLE"; break;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: name = "CL_MEM_OBJECT_ALLOCATION_FAILURE"; break;
    case CL_OUT_OF_RESOURCES: name = "CL_OUT_OF_RESOURCES"; break;
    case CL_OUT_OF_HOST_MEMORY: name = "CL_OUT_OF_HOST_MEMORY"; break;
    case CL_BUILD_PROGRAM_FAILURE: name = "CL_BUILD_PROGRAM_FAILURE"; break;
    case CL_INVALID_VALUE: name = "CL_INVALID_VALUE"; break;
    case CL_INVALID_PLATFORM: name = "CL_INVALID_PLATFORM"; break;
    case CL_INVALID_DEVICE: name = "CL_INVALID_DEVICE"; break;
    case CL_INVALID_CONTEXT: name = "CL_INVALID_CONTEXT"; break;
    case CL_INVALID_COMMAND_QUEUE: name = "CL_INVALID_COMMAND_QUEUE"; break;
    case CL_INVALID_MEM_OBJECT: name = "CL_INVALID_MEM_OBJECT"; break;
    case CL_INVALID_BUILD_OPTIONS: name = "CL_INVALID_BUILD_OPTIONS"; break;
    case CL_INVALID_PROGRAM: name = "CL_INVALID_PROGRAM"; break;
    case CL_INVALID_PROGRAM_EXECUTABLE: name = "CL_INVALID_PROGRAM_EXECUTABLE"; break;
    case CL_INVALID_KERNEL_NAME: name = "CL_INVALID_KERNEL_NAME"; break;
    case CL_INVALID_KERNEL: name = "CL_INVALID_KERNEL"; break;
    case CL_INVALID_ARG_INDEX: name = "CL_INVALID_ARG_INDEX"; break;
    case CL_INVALID_ARG_VALUE: name = "CL_INVALID_ARG_VALUE"; break;
    case CL_INVALID_ARG_SIZE: name = "CL_INVALID_ARG_SIZE"; break;
    case CL_INVALID_KERNEL_ARGS: name = "CL_INVALID_KERNEL_ARGS"; break;
    case CL_INVALID_WORK_DIMENSION: name = "CL_INVALID_WORK_DIMENSION"; break;
    case CL_INVALID_WORK_GROUP_SIZE: name = "CL_INVALID_WORK_GROUP_SIZE"; break;
    case CL_INVALID_GLOBAL_WORK_SIZE: name = "CL_INVALID_GLOBAL_WORK_SIZE"; break;
    case CL_INVALID_BUFFER_SIZE: name = "CL_INVALID_BUFFER_SIZE"; break;
    case -1001: name = "CL_PLATFORM_NOT_FOUND_KHR"; break;  // the ICD loader found no platform
    default: break;
  }
  return std::string(name != nullptr ? name : "OpenCL error") + " (" + std::to_string(code) + ")";
}

}  // namespace kiln
