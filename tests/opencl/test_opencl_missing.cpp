// Without an OpenCL library (KILN_OPENCL_LIBRARY names one that does not exist, set before anything
// loads OpenCL) kiln still runs on the CPU, and asking for the OpenCL device is a UserError naming
// the missing library and what to install. Runs on every machine: it needs no OpenCL.
#include <doctest/doctest.h>

#include <cstdlib>

#include "driver/run_on_device.h"
#include "kiln/kiln.hpp"
#include "runtime/opencl/opencl_device.h"
#include "support/error.h"

using namespace kiln;

TEST_SUITE("opencl") {

TEST_CASE("a missing libOpenCL is a UserError naming it; the CPU path still works") {
  setenv("KILN_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);
  std::string why_not;
  CHECK_FALSE(OpenCLDevice::available(&why_not));
  CHECK(why_not.find("unsupported target: OpenCL: cannot load the OpenCL library (/nonexistent/libOpenCL.so.1") == 0);
  CHECK(why_not.find("pocl-opencl-icd") != std::string::npos);
  CHECK_THROWS_WITH_AS(OpenCLDevice::instance(), doctest::Contains("cannot load the OpenCL library"), UserError);

  std::vector<float> values{1, 2, 3};
  {
    ScopedRealizeDevice opencl(ExecutionDevice::OpenCL);
    Tensor x = Tensor::from_vector(values, {3}).add(Tensor::scalar(1));
    CHECK_THROWS_WITH_AS(x.realize(), doctest::Contains("unsupported target: OpenCL"), kiln::Error);
  }
  Tensor y = Tensor::from_vector(values, {3}).add(Tensor::scalar(1));
  CHECK(y.to_vector<float>() == std::vector<float>{2, 3, 4});
}

TEST_CASE("KILN_DEVICE names the device; an unknown name is a UserError listing the choices") {
  setenv("KILN_DEVICE", "tpu", 1);
  CHECK_THROWS_WITH_AS(realize_device(), "KILN_DEVICE='tpu' names no device kiln can run on (cpu, opencl)", UserError);
  setenv("KILN_DEVICE", "opencl", 1);
  CHECK(realize_device() == ExecutionDevice::OpenCL);
  {
    ScopedRealizeDevice cpu(ExecutionDevice::Cpu);
    CHECK(realize_device() == ExecutionDevice::Cpu);
  }
  unsetenv("KILN_DEVICE");
  CHECK(realize_device() == ExecutionDevice::Cpu);
}

}  // TEST_SUITE
