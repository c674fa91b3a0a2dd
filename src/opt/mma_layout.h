// The warp-level tensor-core operation kiln emits, and which matrix elements each lane of the warp
// holds: the one description that the tensor-core transform (gpu_tensor_cores.h, which loads and
// stores the elements) and the renderers (the CUDA instruction, and the OpenCL emulation the parity
// test runs on PoCL) share.
//
// The operation is PTX's mma.sync m16n8k16 with f16 (or bf16) operands and f32 accumulators: D (16×8) =
// A (16×16) · B (16×8) + C over the 32 lanes of a warp. Each lane holds 8 elements of A, 4 of B and
// 4 of C/D; with g = lane / 4 ("groupID") and t = lane % 4 ("threadID_in_group"), the PTX ISA
// ("Matrix Fragments for mma.m16n8k16 with floating point type") places them at
//   A element i: row g + 8·((i / 2) % 2),   column 2t + i % 2 + 8·(i / 4)
//   B element i: row 2t + i % 2 + 8·(i / 2), column g
//   C element i: row g + 8·(i / 2),         column 2t + i % 2
// Elements 0-3 of A and 0-1 of B are exactly the fragments of m16n8k8 for k < 8 and elements 4-7
// and 2-3 those for k ≥ 8, so sm_75 (which lacks m16n8k16) runs the operation as two m16n8k8.
// bf16 operands have the same fragments (the PTX ISA gives one table for .f16 and .bf16); their
// instructions need sm_80.
//
// The functions take the lane as an int64_t (tables, tests) or as a UOpPtr (index expressions).
#pragma once

#include <cstdint>

namespace kiln::mma {

constexpr int64_t kRows = 16;     // M
constexpr int64_t kColumns = 8;   // N
constexpr int64_t kDepth = 16;    // K
constexpr int64_t kLanes = 32;
constexpr int kAElements = 8;
constexpr int kBElements = 4;
constexpr int kCElements = 4;
// The WMMA node's arg: names the operation, by its operand type, for printing and for the renderers.
inline constexpr const char* kNameF16 = "m16n8k16.f16.f32";
inline constexpr const char* kNameBF16 = "m16n8k16.bf16.f32";

template <typename Lane> Lane a_row(const Lane& lane, int i) { return lane / 4 + 8 * ((i / 2) % 2); }
template <typename Lane> Lane a_column(const Lane& lane, int i) { return lane % 4 * 2 + (i % 2 + 8 * (i / 4)); }
template <typename Lane> Lane b_row(const Lane& lane, int i) { return lane % 4 * 2 + (i % 2 + 8 * (i / 2)); }
template <typename Lane> Lane b_column(const Lane& lane, int /*i*/) { return lane / 4; }
template <typename Lane> Lane c_row(const Lane& lane, int i) { return lane / 4 + 8 * (i / 2); }
template <typename Lane> Lane c_column(const Lane& lane, int i) { return lane % 4 * 2 + i % 2; }

}  // namespace kiln::mma
