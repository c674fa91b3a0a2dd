// `kiln gpu-kernels`: builds every kernel of an ONNX model for a GPU target (CUDA C through NVRTC to
// PTX and a cubin) without running anything, so that GPU code generation is checked on machines
// with the CUDA toolkit but no GPU (the `cuda` test suite runs it on every shared model).
#pragma once

#include <string>
#include <vector>

namespace kiln::tools {

int gpu_kernels_command(const std::vector<std::string>& arguments);

}  // namespace kiln::tools
