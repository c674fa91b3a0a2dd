// What a code-generation target can do: the one object the optimisation layer (src/opt/) and the
// renderers consult, instead of asking for CPU names or features. The host CPU fills it in from
// LLVM's view of the processor (llvm/llvm_target.cpp); a GPU target will describe its threads,
// shared memory and warp width through the same fields.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "ir/dtype.h"

namespace kiln {

struct TargetCaps {
  std::string name;              // "cpu-avx512", "cpu-avx2", …: printed by KILN_DEBUG=3
  int vector_bytes = 16;         // width of a SIMD register
  int vector_registers = 16;     // how many of them the register allocator has
  bool has_fma = false;          // a fused multiply-add instruction exists
  bool supports_vector_ops = true;
  bool supports_threads = true;  // kernels split their axis 0 across a thread pool
  bool supports_shared_memory = false;
  // GPU: every output index is its own thread, all output axes merged into axis 0 (opt/gpu_grid.h).
  bool output_grid = false;
  // Intermediate f16 and bf16 buffers hold their values as f32 (exactly, rounded to their type
  // first), and kernels that widen them read the f32 (ScheduleOptions): the CPU's choice, where a
  // matmul converting its broadcast narrow operand on every step ran at a third of the f32 speed.
  // GPUs keep them narrow: half the bytes, and tensor cores take f16 operands.
  bool narrow_floats_stored_wide = false;
  // GPU: threads of a warp can exchange registers (SHUFFLE_XOR); 0 where they cannot. A kernel with
  // few outputs and a long reduction then gives each output a warp (opt/gpu_grid.h).
  int warp_size = 0;
  // GPU: threads of a work-group that share one output's long reduction through local memory (a
  // barrier, then every thread reads the partials), where few outputs would leave the device idle
  // (opt/gpu_grid.h); 0 where the target has no local memory.
  int group_size = 0;
  // GPU: register tiles (opt/gpu_tiles.h): up to this many outputs per thread along each of two
  // output axes that a reduction's loads share, where at least register_tile_threads threads remain;
  // 0: one output per thread. The GPU targets take 4 (KILN_GPU_REGISTER_TILES=N sets another, 0 none).
  int register_tile = 0;
  int64_t register_tile_threads = 32768;
  // GPU: split reductions (opt/gpu_grid.h): a kernel with more outputs than the group rule takes but
  // too few to fill the device, and a long reduction, gives each output several threads of one
  // work-group, each reducing a slice of the steps; their partials meet in local memory. Both GPU
  // targets (KILN_GPU_SPLIT_REDUCTIONS=0: off, for A/B runs).
  bool split_reductions = false;
  // GPU: f16 products summed in f32 (f16 MatMul, Gemm, Conv) run on tensor cores, a warp-wide
  // multiply-accumulate of 16×8 outputs (opt/gpu_tensor_cores.h). CUDA has them on every
  // architecture kiln compiles for (sm_75 and up); OpenCL renders the operation through local
  // memory, which only the backend-parity test asks for (to check the transform on PoCL).
  bool tensor_cores = false;
  // GPU: bf16 products too (with tensor_cores): CUDA from sm_80 (Ampere), and OpenCL's emulation.
  bool bf16_tensor_cores = false;
  // CPU: the register width in bytes of an 8-bit dot-product instruction (vpdpbusd: 64 with AVX-512
  // VNNI, 32 with AVX-VNNI), 0 without one. 8-bit integer matmuls use it (opt/dot_products.h).
  int dot_product_bytes = 0;
  // CPU: Intel AMX with bf16 tiles (tdpbf16ps), which the OS lets this process use: bf16 matmuls
  // run as 32 × 32 blocks of tile products (opt/amx_tiles.h).
  bool amx_bf16 = false;
  int64_t l1_bytes = 32 << 10;   // per core
  int64_t l2_bytes = 1 << 20;    // per core

  // Lanes of one register for `dtype` (1 for types the renderer keeps scalar).
  int vector_lanes(DType dtype) const {
    if (!supports_vector_ops || dtype.scalar_bytes() <= 0) return 1;
    return vector_bytes / dtype.scalar_bytes();
  }
  // The i32 lanes of the 8-bit dot products (opt/dot_products.h) over `columns` output columns:
  // whole vectors of the widest width, else of half of 16 lanes (the instruction's 256-bit form,
  // which every AVX-512 VNNI CPU has: a conv's 24, 40 or 88 filters); 0 when neither divides them
  // or the target has no such instruction. The panels b is stored in and the tile agree on it.
  int64_t dot_product_lanes(int64_t columns) const {
    const int64_t widest = dot_product_bytes / 4;
    if (widest == 0 || columns <= 0) return 0;
    if (columns % widest == 0) return widest;
    if (widest >= 16 && columns % (widest / 2) == 0) return widest / 2;
    return 0;
  }
};

// KILN_GPU_REGISTER_TILES as a GPU target takes it: at most 8 (8 × 8 outputs are 64 accumulators
// a thread; larger tiles unroll into more code than a GPU compiler should be given); below 2, none.
inline int clamped_register_tile(long requested) { return static_cast<int>(std::clamp(requested, 0L, 8L)); }

// The host CPU, detected once. KILN_CPU_TARGET=avx2 narrows it to AVX2 (256-bit vectors, no AVX-512
// instructions at all) on an AVX-512 machine, so both code paths can be tested on one host.
const TargetCaps& host_cpu_caps();

}  // namespace kiln
