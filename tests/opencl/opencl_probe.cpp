// Exits 0 when this machine has an OpenCL device, else prints why and exits 77 (Meson's "skipped"):
// the scripted OpenCL tests (the ONNX node sample) call it first.
#include <cstdio>
#include <string>

#include "runtime/opencl/opencl_device.h"

int main() {
  std::string why_not;
  if (!kiln::OpenCLDevice::available(&why_not)) {
    std::printf("skip: no OpenCL device: %s\n", why_not.c_str());
    return 77;
  }
  std::printf("OpenCL device: %s\n", kiln::OpenCLDevice::instance().name().c_str());
  return 0;
}
