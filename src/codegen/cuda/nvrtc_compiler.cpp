// NVRTC loaded with dlopen; see nvrtc_compiler.h. The few entry points are declared here from NVRTC's
// documented C API (nvrtcResult is an int-sized enum whose 0 is success; a program is an opaque
// pointer), so that building kiln needs no CUDA header.
#include "codegen/cuda/nvrtc_compiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>

#include "support/error.h"

namespace kiln {

namespace {

using NvrtcProgram = struct NvrtcProgramOpaque*;
using NvrtcResult = int;

struct NvrtcApi {
  const char* (*nvrtcGetErrorString)(NvrtcResult) = nullptr;
  NvrtcResult (*nvrtcVersion)(int*, int*) = nullptr;
  NvrtcResult (*nvrtcGetNumSupportedArchs)(int*) = nullptr;
  NvrtcResult (*nvrtcGetSupportedArchs)(int*) = nullptr;
  NvrtcResult (*nvrtcCreateProgram)(NvrtcProgram*, const char*, const char*, int, const char* const*,
                                    const char* const*) = nullptr;
  NvrtcResult (*nvrtcDestroyProgram)(NvrtcProgram*) = nullptr;
  NvrtcResult (*nvrtcCompileProgram)(NvrtcProgram, int, const char* const*) = nullptr;
  NvrtcResult (*nvrtcGetPTXSize)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*nvrtcGetPTX)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*nvrtcGetCUBINSize)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*nvrtcGetCUBIN)(NvrtcProgram, char*) = nullptr;
  NvrtcResult (*nvrtcGetProgramLogSize)(NvrtcProgram, size_t*) = nullptr;
  NvrtcResult (*nvrtcGetProgramLog)(NvrtcProgram, char*) = nullptr;
};

struct LoadedNvrtc {
  NvrtcApi api;
  NvrtcInfo info;
  bool ok = false;
  std::string why_not;
};

template <typename Function>
bool resolve(void* library, const char* name, Function& slot, std::string& why_not) {
  slot = reinterpret_cast<Function>(dlsym(library, name));
  if (slot == nullptr) why_not = str_cat("the NVRTC library has no entry point ", name, " (NVRTC 11.2 or later is needed)");
  return slot != nullptr;
}

LoadedNvrtc load() {
  LoadedNvrtc loaded;
  const char* chosen = std::getenv("KILN_NVRTC_LIBRARY");
  bool explicit_choice = chosen != nullptr && *chosen != '\0';
  std::vector<std::string> names = explicit_choice ? std::vector<std::string>{chosen}
                                                   : std::vector<std::string>{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"};
  void* library = nullptr;
  std::string errors;
  for (const std::string& name : names) {
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      loaded.info.library = name;
      break;
    }
    const char* error = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(error != nullptr ? error : name + ": not found");
  }
  if (library == nullptr) {
    loaded.why_not = "cannot load NVRTC (" + errors + "); install the CUDA toolkit's NVRTC or set KILN_NVRTC_LIBRARY";
    return loaded;
  }
  NvrtcApi& a = loaded.api;
  std::string& why = loaded.why_not;
  bool all = resolve(library, "nvrtcGetErrorString", a.nvrtcGetErrorString, why) &&
             resolve(library, "nvrtcVersion", a.nvrtcVersion, why) &&
             resolve(library, "nvrtcGetNumSupportedArchs", a.nvrtcGetNumSupportedArchs, why) &&
             resolve(library, "nvrtcGetSupportedArchs", a.nvrtcGetSupportedArchs, why) &&
             resolve(library, "nvrtcCreateProgram", a.nvrtcCreateProgram, why) &&
             resolve(library, "nvrtcDestroyProgram", a.nvrtcDestroyProgram, why) &&
             resolve(library, "nvrtcCompileProgram", a.nvrtcCompileProgram, why) &&
             resolve(library, "nvrtcGetPTXSize", a.nvrtcGetPTXSize, why) &&
             resolve(library, "nvrtcGetPTX", a.nvrtcGetPTX, why) &&
             resolve(library, "nvrtcGetCUBINSize", a.nvrtcGetCUBINSize, why) &&
             resolve(library, "nvrtcGetCUBIN", a.nvrtcGetCUBIN, why) &&
             resolve(library, "nvrtcGetProgramLogSize", a.nvrtcGetProgramLogSize, why) &&
             resolve(library, "nvrtcGetProgramLog", a.nvrtcGetProgramLog, why);
  if (!all) return loaded;
  if (a.nvrtcVersion(&loaded.info.major, &loaded.info.minor) != 0) {
    why = "nvrtcVersion failed";
    return loaded;
  }
  int count = 0;
  if (a.nvrtcGetNumSupportedArchs(&count) == 0 && count > 0) {
    loaded.info.architectures.resize(static_cast<size_t>(count));
    if (a.nvrtcGetSupportedArchs(loaded.info.architectures.data()) != 0) loaded.info.architectures.clear();
  }
  loaded.ok = true;  // the library stays loaded for the life of the process
  return loaded;
}

const LoadedNvrtc& loaded_nvrtc() {
  static const LoadedNvrtc loaded = load();
  return loaded;
}

// Destroys the program however compile_cuda leaves.
struct ProgramGuard {
  const NvrtcApi& api;
  NvrtcProgram program = nullptr;
  ~ProgramGuard() {
    if (program != nullptr) api.nvrtcDestroyProgram(&program);
  }
};

}  // namespace

const NvrtcInfo* nvrtc_info(std::string* why_not) {
  const LoadedNvrtc& loaded = loaded_nvrtc();
  if (!loaded.ok) {
    if (why_not != nullptr) *why_not = loaded.why_not;
    return nullptr;
  }
  return &loaded.info;
}

CudaBinary compile_cuda(const std::string& source, const std::string& name, int architecture) {
  const LoadedNvrtc& loaded = loaded_nvrtc();
  if (!loaded.ok) throw UserError("unsupported: CUDA code needs NVRTC: " + loaded.why_not);
  const NvrtcApi& api = loaded.api;
  const std::vector<int>& known = loaded.info.architectures;
  if (!known.empty() && std::find(known.begin(), known.end(), architecture) == known.end()) {
    std::string list;
    for (int arch : known) list += (list.empty() ? "" : ", ") + std::to_string(arch);
    throw UserError(str_cat("unsupported: CUDA architecture sm_", architecture, ": NVRTC ", loaded.info.major, ".",
                            loaded.info.minor, " compiles for ", list));
  }
  auto check = [&](NvrtcResult result, const char* step) {
    if (result != 0) throw UserError(str_cat("NVRTC ", step, " failed for '", name, "': ", api.nvrtcGetErrorString(result)));
  };
  ProgramGuard guard{api};
  check(api.nvrtcCreateProgram(&guard.program, source.c_str(), name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::string arch_option = str_cat("--gpu-architecture=sm_", architecture);
  const char* options[] = {arch_option.c_str(), "--fmad=false", "--prec-div=true", "--prec-sqrt=true",
                           "--ftz=false", "--std=c++17"};
  NvrtcResult compiled = api.nvrtcCompileProgram(guard.program, static_cast<int>(std::size(options)), options);
  CudaBinary binary;
  size_t log_size = 0;
  if (api.nvrtcGetProgramLogSize(guard.program, &log_size) == 0 && log_size > 1) {
    binary.log.resize(log_size);
    if (api.nvrtcGetProgramLog(guard.program, binary.log.data()) != 0) binary.log.clear();
    while (!binary.log.empty() && (binary.log.back() == '\0' || binary.log.back() == '\n')) binary.log.pop_back();
  }
  if (compiled != 0)
    throw UserError(str_cat("CUDA C of '", name, "' does not compile (", api.nvrtcGetErrorString(compiled), ", sm_",
                            architecture, "):\n", binary.log));
  size_t size = 0;
  check(api.nvrtcGetPTXSize(guard.program, &size), "nvrtcGetPTXSize");
  binary.ptx.resize(size);
  check(api.nvrtcGetPTX(guard.program, binary.ptx.data()), "nvrtcGetPTX");
  if (!binary.ptx.empty() && binary.ptx.back() == '\0') binary.ptx.pop_back();
  check(api.nvrtcGetCUBINSize(guard.program, &size), "nvrtcGetCUBINSize");
  binary.cubin.resize(size);
  check(api.nvrtcGetCUBIN(guard.program, binary.cubin.data()), "nvrtcGetCUBIN");
  return binary;
}

}  // namespace kiln
