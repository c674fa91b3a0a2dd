// CUDA code generation: kernel AST → CUDA C, through the same lowering and linearisation as the CPU
// and OpenCL (so every backend computes the same ops in the same order), then NVRTC
// (codegen/cuda/nvrtc_compiler.h) → PTX and cubin. KILN_DEBUG=4 prints the source.
#pragma once

#include "codegen/c_style/c_renderer.h"
#include "codegen/target.h"
#include "ir/uop.h"

namespace kiln {

// What the optimisation layer may do for CUDA kernels today: as for OpenCL, nothing CPU-specific
// (no thread split, no vector or unroll opts). One thread per index of axis 0; GPU heuristics
// (block sizes, grouped reductions through shared memory, tensor cores) are later work of issue 15.
const TargetCaps& cuda_target_caps();

// The features of a device of compute capability `architecture` (90 = sm_90): f64 everywhere, f16
// from 5.3.
CDeviceFeatures cuda_device_features(int architecture);

// Threads per block of a launch: the grid is ceil(parallel extent / this) blocks.
constexpr int kCudaBlockSize = 128;

// Lowers and renders one kernel AST (docs/kernel-ast.md) as CUDA C.
RenderedKernel cuda_render_kernel(const UOpPtr& kernel_ast, const CDeviceFeatures& features);

}  // namespace kiln
