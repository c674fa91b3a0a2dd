// The capability object (codegen/target.h) of a CPU, from the LLVM feature names it has: what the
// host detection (llvm_target.cpp) and the cross targets (cross_target.cpp) share, so that a plan
// cross-compiled for a CPU is tiled exactly as one compiled on that CPU would be (except for the
// cache sizes, which only the host can measure).
#pragma once

#include <set>
#include <string>

#include "codegen/target.h"

namespace kiln {

// AVX-512: 64-byte vectors and 32 registers; AVX/AVX2: 32 bytes and 16; else SSE's 16 and 16.
TargetCaps x86_64_target_caps(const std::set<std::string>& features);

// NEON: 16-byte vectors (4 f32 lanes) and 32 registers on every AArch64 CPU (aarch64_caps.cpp).
TargetCaps aarch64_target_caps(const std::set<std::string>& features);

}  // namespace kiln
