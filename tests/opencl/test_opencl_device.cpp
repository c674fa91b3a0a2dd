// The OpenCL device through the Device interface: copies in every direction, a build error that
// carries the compiler's log, and the caching allocator over the real device.
#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "runtime/caching_allocator.h"
#include "runtime/opencl/opencl_device.h"
#include "support/error.h"

using namespace kiln;

TEST_SUITE("opencl") {

TEST_CASE("host → device → device → host copies keep every byte") {
  Device& device = OpenCLDevice::instance();
  std::vector<unsigned char> data(100000), back(100000, 0);
  std::iota(data.begin(), data.end(), 7);
  DeviceMemory a = device.allocate(data.size()), b = device.allocate(data.size());
  device.copy_to_device(a, data.data(), data.size());
  device.copy_on_device(b, a, data.size());
  device.copy_to_host(back.data(), b, back.size());
  device.synchronize();
  CHECK(back == data);
  device.free(a);
  device.free(b);
}

TEST_CASE("a kernel that does not build is an InternalError with the compiler's log") {
  Device& device = OpenCLDevice::instance();
  try {
    device.build_kernel("__kernel void broken(__global float* x) { x[0] = undeclared_name; }", "broken");
    FAIL("the build succeeded");
  } catch (const InternalError& error) {
    std::string message = error.what();
    CHECK(message.find("OpenCL could not build kernel 'broken'") != std::string::npos);
    CHECK(message.find("undeclared_name") != std::string::npos);  // from the build log
    CHECK(error.ir_dump().find("__kernel void broken") != std::string::npos);
  }
}

TEST_CASE("the caching allocator over the device hands a released buffer out again") {
  OpenCLDevice& device = OpenCLDevice::instance();
  CachingAllocator cache([&](size_t bytes) { return device.allocate(bytes); },
                         [&](DeviceMemory memory) { device.free(memory); }, 1 << 20);
  DeviceMemory first = cache.allocate(5000);
  std::vector<float> ones(1250, 1.0f), back(1250);
  device.copy_to_device(first, ones.data(), 5000);
  cache.release(first);
  DeviceMemory second = cache.allocate(4900);  // the same bucket
  CHECK(second.handle == first.handle);
  device.copy_to_host(back.data(), second, 5000);
  CHECK(back == ones);
  cache.release(second);
  CHECK(cache.stats().hits == 1);
}

}  // TEST_SUITE
