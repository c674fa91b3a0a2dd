// The C text of a WMMA (opt/mma_layout.h), for the C-style renderer: CUDA's mma.sync instructions
// as a helper function, and the local-memory emulation OpenCL runs it with (for the parity test).
#pragma once

#include <string>

#include "codegen/c_style/c_dialect.h"

namespace kiln {

// CUDA: a helper `name(d0, d1, d2, d3, a01, a23, a45, a67, b01, b23, c0, c1, c2, c3)` that sets
// the four f32 results from A and B packed as f16 (or, with `bf16`, bf16) pairs (element 2j in the
// low half) and C. From sm_80 one m16n8k16 instruction; f16 on sm_75 two m16n8k8 (A's and B's
// first halves of K, then their second halves); bf16 needs sm_80 (the caller checks). Returns the
// definition; `name` receives the function's name.
std::string cuda_mma_helper(int architecture, bool bf16, const CDialect& dialect, std::string& name);

// The emulation's shared tiles: A as kRows × kDepth f32, B as kDepth × kColumns, one per work-group
// (the emulation runs with one warp per group).
inline constexpr const char* kEmulatedMmaA = "kiln_mma_a";
inline constexpr const char* kEmulatedMmaB = "kiln_mma_b";

// The emulation's helper `name(a, b, row, column)`: row · column of the shared tiles.
std::string emulated_mma_dot_helper(const CDialect& dialect, std::string& name);

// Where element `i` of lane `lane` (a C expression) lies in the shared tile: row · width + column.
std::string emulated_a_position(const std::string& lane, int i);
std::string emulated_b_position(const std::string& lane, int i);
// The row and column of accumulator element `i`.
std::string emulated_c_row(const std::string& lane, int i);
std::string emulated_c_column(const std::string& lane, int i);

}  // namespace kiln
