// The runner of the OpenCL test executables: exit code 77 (Meson's "skipped") with the reason when
// this machine has no OpenCL device, so that a machine without PoCL or a GPU skips instead of failing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>

#include "runtime/opencl/opencl_device.h"

int main(int argc, char** argv) {
  std::string why_not;
  if (!kiln::OpenCLDevice::available(&why_not)) {
    std::printf("skip: no OpenCL device: %s\n", why_not.c_str());
    return 77;
  }
  kiln::OpenCLDevice& device = kiln::OpenCLDevice::instance();
  std::printf("OpenCL device: %s (%s; f16 %s, f64 %s)\n", device.name().c_str(), device.version().c_str(),
              device.has_f16() ? "yes" : "no", device.has_f64() ? "yes" : "no");
  doctest::Context context(argc, argv);
  return context.run();
}
