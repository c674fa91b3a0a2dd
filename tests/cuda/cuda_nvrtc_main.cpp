// The runner of the NVRTC tests: exit code 77 (Meson's "skipped") with the reason when NVRTC cannot be
// loaded, so that a machine without the CUDA toolkit skips instead of failing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "codegen/cuda/nvrtc_compiler.h"

int main(int argc, char** argv) {
  std::string why_not;
  const kiln::NvrtcInfo* info = kiln::nvrtc_info(&why_not);
  if (info == nullptr) {
    std::printf("skip: no NVRTC: %s\n", why_not.c_str());
    return 77;
  }
  std::string architectures;
  for (int architecture : info->architectures) architectures += " sm_" + std::to_string(architecture);
  std::printf("NVRTC %d.%d (%s); architectures:%s\n", info->major, info->minor, info->library.c_str(),
              architectures.c_str());
  doctest::Context context(argc, argv);
  return context.run();
}
