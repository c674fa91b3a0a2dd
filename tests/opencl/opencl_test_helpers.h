// Helpers for the OpenCL tests: running one hand-built kernel AST on the OpenCL device with host
// buffers (codegen_test_helpers.h's TestBuffer), and which dtypes the device can hold.
#pragma once

#include <vector>

#include "codegen/c_style/opencl_codegen.h"
#include "codegen/codegen_test_helpers.h"
#include "runtime/opencl/opencl_device.h"

namespace kiln::testing {

inline CDeviceFeatures opencl_features() {
  OpenCLDevice& device = OpenCLDevice::instance();
  return CDeviceFeatures{device.name(), device.has_f16(), device.has_f64()};
}

// The data scalars an OpenCL kernel on this device can hold (f64 needs an extension; f16 is stored
// as bits, so every device holds it).
inline std::vector<DType> opencl_dtypes() {
  std::vector<DType> result;
  CDeviceFeatures features = opencl_features();
  for (DType dtype : dtypes::all_data_scalars) {
    if (dtype.scalar() == ScalarType::Float64 && !features.f64) continue;
    result.push_back(dtype);
  }
  return result;
}

// Renders, builds and runs `ast` with buffers[slot] bound to DEFINE_GLOBAL slot, one work-item per
// index of axis 0 (`extent` of them), and copies every buffer back.
inline void run_opencl_kernel(const UOpPtr& ast, const std::vector<TestBuffer*>& buffers, int64_t extent) {
  OpenCLDevice& device = OpenCLDevice::instance();
  RenderedKernel rendered = opencl_render_kernel(ast, opencl_features());
  std::unique_ptr<DeviceKernel> kernel = device.build_kernel(rendered.source, rendered.name);
  std::vector<DeviceMemory> memory;
  for (int slot = 0; slot < rendered.buffer_count; ++slot) {
    TestBuffer& buffer = *buffers.at(static_cast<size_t>(slot));
    size_t bytes = static_cast<size_t>(buffer.count() * buffer.dtype().scalar_bytes());
    memory.push_back(device.allocate(bytes));
    device.copy_to_device(memory.back(), buffer.data(), bytes);
  }
  LaunchDims dims;
  dims.global[0] = static_cast<size_t>(extent);
  device.launch(*kernel, memory, dims);
  for (int slot = 0; slot < rendered.buffer_count; ++slot) {
    TestBuffer& buffer = *buffers.at(static_cast<size_t>(slot));
    device.copy_to_host(buffer.data(), memory[static_cast<size_t>(slot)],
                        static_cast<size_t>(buffer.count() * buffer.dtype().scalar_bytes()));
    device.free(memory[static_cast<size_t>(slot)]);
  }
}

}  // namespace kiln::testing
