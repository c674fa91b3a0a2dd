// What the CUDA and OpenCL targets share in their TargetCaps: a thread per output and no CPU
// opts (no thread split, no vector or unroll actions), work-group memory, fma, and register tiles
// as KILN_GPU_REGISTER_TILES sets them (4 by default). Each target then sets its group size, warp
// and tensor cores.
#pragma once

#include <string>

#include "codegen/target.h"

namespace kiln {

TargetCaps gpu_target_caps_base(const std::string& name);

}  // namespace kiln
