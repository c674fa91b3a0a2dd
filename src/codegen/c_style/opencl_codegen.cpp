// OpenCL code generation, end to end; see opencl_codegen.h.
#include "codegen/c_style/opencl_codegen.h"

#include "codegen/c_style/gpu_target_caps.h"
#include "codegen/linearize.h"
#include "passes/pipeline.h"
#include "support/debug.h"

namespace kiln {

const TargetCaps& opencl_target_caps() {
  static const TargetCaps caps = [] {
    TargetCaps c = gpu_target_caps_base("opencl");
    c.group_size = 64;  // a multiple of NVIDIA's warps and AMD's wavefronts; every OpenCL GPU and PoCL run it
    // OpenCL has no tensor cores: KILN_GPU_TENSOR_CORES=1 runs CUDA's tensor-core kernels through the
    // renderer's local-memory emulation, slower than without, to check the transform on whole
    // models on PoCL (docs/backends.md, "Tensor cores").
    c.tensor_cores = env_integer("KILN_GPU_TENSOR_CORES", 0) != 0;
    c.bf16_tensor_cores = c.tensor_cores;
    return c;
  }();
  return caps;
}

RenderedKernel opencl_render_kernel(const UOpPtr& kernel_ast, const CDeviceFeatures& features) {
  LinearProgram program = linearize(lower_kernel(kernel_ast));
  if (debug_level() >= 6) debug_print("linearised " + print_linear(program));
  RenderedKernel rendered = render_c(program, opencl_dialect(), features);
  if (debug_level() >= 4) debug_print("OpenCL C of " + program.name + "\n" + rendered.source);
  return rendered;
}

}  // namespace kiln
