// The AArch64 capability object: what the tile heuristics (src/opt/) see of an ARM64 CPU. The
// architecture fixes most of it (Arm ARM, A1.4: 32 SIMD&FP registers V0-V31 of 128 bits; FMLA in
// every AArch64 CPU), so only the name and the optional extensions depend on the CPU.
#include "codegen/llvm/cpu_caps.h"

namespace kiln {

TargetCaps aarch64_target_caps(const std::set<std::string>& features) {
  TargetCaps caps;
  // Kernels are rendered as fixed 128-bit vectors: NEON registers, which are also the low half of
  // every SVE register. Wider SVE implementations (Neoverse V1's 256 bits) would need the
  // vector-length-agnostic code kiln does not render, so SVE never widens the vectors here.
  caps.vector_bytes = 16;
  caps.vector_registers = 32;
  caps.has_fma = true;
  // As on x86: f16/bf16 intermediates live as f32 in memory; with +fullfp16 LLVM still uses the
  // native half-precision instructions wherever a kernel computes in f16.
  caps.narrow_floats_stored_wide = true;
  // SDOT/UDOT (+dotprod) and i8mm exist on many cores, but kiln's 8-bit dot-product rewrite
  // (opt/dot_products.h) renders x86's vpdpbusd, so AArch64 plans take the plain widening path: 0.
  caps.dot_product_bytes = 0;
  caps.name = "cpu-neon";
  if (features.count("sve")) caps.name += "-sve";
  if (features.count("dotprod")) caps.name += "-dotprod";
  if (features.count("i8mm")) caps.name += "-i8mm";
  if (features.count("fullfp16")) caps.name += "-fp16";
  // Neoverse N1/N2 and Cortex-A7x class cores: 64 KiB L1D, 512 KiB-1 MiB L2. They steer tiling only.
  caps.l1_bytes = 64 << 10;
  caps.l2_bytes = 1 << 20;
  return caps;
}

}  // namespace kiln
