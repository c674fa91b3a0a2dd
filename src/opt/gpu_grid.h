// The launch grid of a GPU kernel: every output index its own thread.
//
// The CPU splits a kernel's axis 0 across a handful of threads and loops over the other output
// axes inside each; a GPU needs tens of thousands of threads to fill its multiprocessors, and a
// kernel whose axis 0 is 64 filters would run on 64 of them (ResNet-50 took 1.8 s on an H200 so).
// For a target with TargetCaps::output_grid, every output axis of a kernel becomes one axis 0 of
// E0·E1·…·En indices, each old axis recovered as (g / inner) % extent. The fastest-varying axis is
// the one whose warps touch the fewest memory sectors (a reduction's loads counted once per step,
// a value shared by the warp as one sector, contiguous ones as one per 8 threads), the others
// follow the stored index's strides. Reduction axes stay loops inside the thread, except that on
// a target with warps (TargetCaps::warp_size) a kernel with few outputs gives each output a whole
// warp: its long f32 sums and maxima are split across the lanes and combined by warp shuffles. On a
// target with local memory (TargetCaps::group_size) a kernel with fewer outputs still, or any target
// without shuffles, may give each output a whole work-group instead: the lanes' partials meet in
// local memory behind a barrier, so the kernel must be launched with exactly that work-group size.
#pragma once

#include "ir/uop.h"

namespace kiln {

struct GridKernel {
  UOpPtr ast;
  // Threads per work-group the kernel's code assumes (a group per output); 0: any size.
  int64_t group_size = 0;
};

// `kernel` (a SINK of stores, unoptimised) with its output axes merged into axis 0, ordered as
// above (a warp per output where `warp_size` > 1, a work-group of `group_size` threads where that is
// > 1, each where the kernel qualifies); unchanged when it has fewer than two output axes and no
// such reduction, or a symbolic extent. `innermost_axis` (an axis id, or -1) names an output axis
// that must vary fastest whatever the memory traffic says, and whose kernel shares nothing across
// warps or groups: a tensor-core kernel's lane axis (gpu_tensor_cores.h).
//
// With `split_reductions` (and local memory), a kernel with more outputs than a group per output
// allows (over 16,384) but too few to fill a large GPU (at most 65,536), whose long reductions (at
// least 512 steps) run in no other loop, gives each output P threads (2 to 8) of one work-group: a
// group of G = `group_size` threads serves G / P consecutive outputs, its thread w taking output
// w % (G / P) and slice w / (G / P), so a warp's lanes still read neighbouring outputs, and each
// slice reduces every P-th step. The partials meet in local memory (G floats per reduction) behind
// a barrier, and every thread sums its output's P partials and stores the result.
GridKernel merge_output_axes_into_grid(const UOpPtr& kernel, int warp_size = 0, int group_size = 0,
                                       int64_t innermost_axis = -1, bool split_reductions = false);

}  // namespace kiln
