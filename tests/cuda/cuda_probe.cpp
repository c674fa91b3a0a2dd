// Exits 0 when NVRTC can be loaded, else prints why and exits 77 (Meson's "skipped"): the scripted
// CUDA tests call it first.
#include <cstdio>
#include <string>

#include "codegen/cuda/nvrtc_compiler.h"

int main() {
  std::string why_not;
  const kiln::NvrtcInfo* info = kiln::nvrtc_info(&why_not);
  if (info == nullptr) {
    std::printf("skip: no NVRTC: %s\n", why_not.c_str());
    return 77;
  }
  std::printf("NVRTC %d.%d (%s)\n", info->major, info->minor, info->library.c_str());
  return 0;
}
