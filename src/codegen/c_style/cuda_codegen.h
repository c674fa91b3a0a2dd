// CUDA code generation: kernel AST → CUDA C, through the same lowering and linearisation as the CPU
// and OpenCL (so every backend computes the same ops in the same order), then NVRTC
// (codegen/cuda/nvrtc_compiler.h) → PTX and cubin. KILN_DEBUG=4 prints the source.
#pragma once

#include "codegen/c_style/c_renderer.h"
#include "codegen/target.h"
#include "ir/uop.h"

namespace kiln {

// What the optimisation layer may do for CUDA kernels of compute capability `architecture` (the
// PTX's: 75 = sm_75): as for OpenCL, nothing CPU-specific (no thread split, no vector or unroll
// opts); the output grid, grouped reductions through warps and shared memory, register tiles and
// tensor cores (bf16 ones from sm_80).
const TargetCaps& cuda_target_caps(int architecture);

// The features of a device of compute capability `architecture` (90 = sm_90): f64 everywhere, f16
// from 5.3.
CDeviceFeatures cuda_device_features(int architecture);

// Threads per block of a launch: the grid is ceil(parallel extent / this) blocks.
constexpr int kCudaBlockSize = 128;

// Lowers and renders one kernel AST (docs/kernel-ast.md) as CUDA C.
RenderedKernel cuda_render_kernel(const UOpPtr& kernel_ast, const CDeviceFeatures& features);

}  // namespace kiln
