// CUDA code generation; see cuda_codegen.h.
#include "codegen/c_style/cuda_codegen.h"

#include "codegen/c_style/gpu_target_caps.h"
#include "codegen/linearize.h"
#include "passes/pipeline.h"
#include "support/debug.h"

namespace kiln {

namespace {

TargetCaps make_cuda_target_caps(bool ampere) {
  TargetCaps c = gpu_target_caps_base("cuda");
  c.group_size = 256;  // eight warps: each warp's butterfly leaves 8 partials in shared memory
  c.warp_size = 32;
  c.tensor_cores = env_integer("KILN_GPU_TENSOR_CORES", 1) != 0;
  c.bf16_tensor_cores = c.tensor_cores && ampere;  // mma.sync with .bf16 operands needs sm_80
  return c;
}

}  // namespace

const TargetCaps& cuda_target_caps(int architecture) {
  static const TargetCaps turing = make_cuda_target_caps(false);
  static const TargetCaps ampere = make_cuda_target_caps(true);
  return architecture >= 80 ? ampere : turing;
}

CDeviceFeatures cuda_device_features(int architecture) {
  CDeviceFeatures features;
  features.device_name = str_cat("cuda:sm_", architecture);
  features.f64 = true;
  features.f16 = architecture >= 53;
  features.cuda_architecture = architecture;
  return features;
}

RenderedKernel cuda_render_kernel(const UOpPtr& kernel_ast, const CDeviceFeatures& features) {
  LinearProgram program = linearize(lower_kernel(kernel_ast));
  if (debug_level() >= 6) debug_print("linearised " + print_linear(program));
  RenderedKernel rendered = render_c(program, cuda_dialect(), features);
  if (debug_level() >= 4) debug_print("CUDA C of " + program.name + "\n" + rendered.source);
  return rendered;
}

}  // namespace kiln
