// Without an OpenCL library (KILN_OPENCL_LIBRARY names one that does not exist, set before anything
// loads OpenCL) kiln still runs on the CPU, and asking for the OpenCL device is a UserError naming
// the missing library and what to install. Runs on every machine: it needs no OpenCL.
#include <doctest/doctest.h>

#include <cstdlib>

#include "driver/run_on_device.h"
#include "kiln/kiln.h"
#include "kiln/kiln.hpp"
#include "plan/plan_writer.h"
#include "tensor/tensor_internal.h"
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

TEST_CASE("an OpenCL plan without libOpenCL fails to load with KILN_ERROR_UNSUPPORTED_TARGET naming the library") {
  setenv("KILN_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1", 1);  // before libkiln loads OpenCL
  Tensor x = graph_input("x", {4}, ScalarType::Float32);
  PlanWriteOptions options;
  options.device = "opencl";
  std::string bytes = write_plan({{"x", x}}, {{"y", x * 2.0f}}, options);  // writing needs no device
  kiln_plan* plan = nullptr;
  CHECK(kiln_plan_load_buffer(bytes.data(), bytes.size(), &plan) == KILN_ERROR_UNSUPPORTED_TARGET);
  CHECK(plan == nullptr);
  std::string message = kiln_error_message();
  CHECK(message.find("the plan is for OpenCL: unsupported target: OpenCL: cannot load the OpenCL library "
                     "(/nonexistent/libOpenCL.so.1") == 0);
  // The CPU plan of the same graph loads and runs.
  std::string cpu_bytes = write_plan({{"x", x}}, {{"y", x * 2.0f}});
  REQUIRE(kiln_plan_load_buffer(cpu_bytes.data(), cpu_bytes.size(), &plan) == KILN_OK);
  float in[4] = {1, 2, 3, 4}, out[4] = {};
  int64_t shape[] = {4};
  kiln_tensor input{"x", KILN_DTYPE_FLOAT32, 1, shape, in, sizeof in}, output{"y", KILN_DTYPE_FLOAT32, 1, shape, out, sizeof out};
  CHECK(kiln_plan_run(plan, &input, 1, &output, 1) == KILN_OK);
  CHECK(out[3] == 8.0f);
  kiln_plan_free(plan);
}

TEST_CASE("KILN_DEVICE names the device; an unknown name is a UserError listing the choices") {
  setenv("KILN_DEVICE", "tpu", 1);
  CHECK_THROWS_WITH_AS(realize_device(), "KILN_DEVICE='tpu' names no device kiln can run on (cpu, opencl, cuda)", UserError);
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
