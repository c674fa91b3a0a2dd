// The front door of OpenCL code generation: kernel AST → OpenCL C source, through the same lowering
// (transcendental polynomials, unroll expansion, simplification) and linearisation as the CPU, so
// both backends compute the same ops in the same order. KILN_DEBUG prints the linear UOps (6) and the
// source (4), as for the CPU.
#pragma once

#include "codegen/c_style/c_renderer.h"
#include "codegen/target.h"
#include "ir/uop.h"

namespace kiln {

// What the optimisation layer may do for OpenCL kernels today: nothing CPU-specific. No thread split
// (work-items are the parallelism: one per index of axis 0), and no vector or unroll opts
// (supports_vector_ops = false, so the heuristics leave kernels as the scheduler made them): the CPU
// heuristics size tiles for a CPU's vector registers and caches, which says nothing about a GPU, and
// PoCL vectorises across work-items itself. GPU heuristics (local sizes, grouped reductions) come
// with the GPU phase of issue 15.
const TargetCaps& opencl_target_caps();

// Lowers and renders one kernel AST (docs/kernel-ast.md) for a device with `features`.
RenderedKernel opencl_render_kernel(const UOpPtr& kernel_ast, const CDeviceFeatures& features);

}  // namespace kiln
