// The fields the GPU targets share; see gpu_target_caps.h.
#include "codegen/c_style/gpu_target_caps.h"

#include "support/debug.h"

namespace kiln {

TargetCaps gpu_target_caps_base(const std::string& name) {
  TargetCaps caps;
  caps.name = name;
  caps.vector_bytes = 16;
  caps.supports_vector_ops = false;
  caps.supports_threads = false;
  caps.output_grid = true;
  caps.supports_shared_memory = true;
  caps.register_tile = clamped_register_tile(env_integer("KILN_GPU_REGISTER_TILES", 4));
  caps.split_reductions = env_integer("KILN_GPU_SPLIT_REDUCTIONS", 1) != 0;
  caps.has_fma = true;  // fma() is a device function and an OpenCL builtin; kiln only emits it for MULACC
  return caps;
}

}  // namespace kiln
