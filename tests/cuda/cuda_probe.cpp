// Exits 0 when NVRTC can be loaded (with --device: when a CUDA device can be opened too), else prints
// why and exits 77 (Meson's "skipped"): the scripted CUDA tests call it first.
#include <cstdio>
#include <cstring>
#include <string>

#include "codegen/cuda/nvrtc_compiler.h"
#include "runtime/cuda/cuda_device.h"

int main(int argc, char** argv) {
  std::string why_not;
  const kiln::NvrtcInfo* info = kiln::nvrtc_info(&why_not);
  if (info == nullptr) {
    std::printf("skip: no NVRTC: %s\n", why_not.c_str());
    return 77;
  }
  std::printf("NVRTC %d.%d (%s)\n", info->major, info->minor, info->library.c_str());
  if (argc > 1 && std::strcmp(argv[1], "--device") == 0) {
    if (!kiln::CudaDevice::available(&why_not)) {
      std::printf("skip: no CUDA device: %s\n", why_not.c_str());
      return 77;
    }
    std::printf("CUDA device: %s\n", kiln::CudaDevice::instance().name().c_str());
  }
  return 0;
}
