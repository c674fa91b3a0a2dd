// Intel AMX's bf16 tile product as kiln writes it: the one description that the transform
// (amx_tiles.h, which builds the node) and the CPU renderer (which emits the tile instructions)
// share, as dot_product_layout.h is for vpdpbusd.
//
// STORE(INDEX(block, 0), WMMA(a, b, VECTORIZE(a_stride, b_stride, depth, e_0, c_0, e_1, c_1, …)))
// with arg kAmxBlock: the f32 × kAmxBlockElements value of the WMMA is the 32 × 32 block of sums
//     block[32·i + j] = Σ k<depth  bf16(a[i·a_stride + offset(k)]) · bf16(b[(k / 2)·b_stride + 2·j + k % 2])
//     offset(k) = Σ_s ((k / (e_s+1 · e_s+2 · …)) % e_s) · c_s
// where `a` and `b` are INDEX nodes (element pointers into buffers of bf16 values, or of u16 or i16
// holding their bits) at the block's first row and first column, the strides are constants in
// elements, and depth a constant multiple of kAmxDepth. The (extent, coefficient) pairs (AmxStep)
// split the reduction's step into parts, outermost first, their extents multiplying to depth: one
// pair (depth, 1) for a matmul's row-major a, (taps…, channels) for a convolution's windows, where
// a tap moves the start of a's rows. The innermost pair's coefficient is 1 and its extent a
// multiple of kAmxDepth, so the 32 steps of a tile row are contiguous in a. `b` is in pair panels:
// row p holds steps 2p and 2p + 1 of each column side by side. `block` is the kernel's own DEFINE_LOCAL of
// kAmxBlockElements f32 values, which the kernel reads AFTER a BARRIER on the store.
//
// The renderer computes the block as 2 × 2 tiles of 16 × 16 f32 accumulators (tdpbf16ps: exact
// products of bf16 pairs added in f32, denormal inputs and results flushed to zero, the pair's two
// products added one after the other), one step of kAmxDepth along the reduction at a time, and
// stores them into the block; the WMMA is never a value of its own.
#pragma once

#include <cstdint>

namespace kiln {

inline constexpr const char* kAmxBlock = "amx.tdpbf16ps.32x32";
inline constexpr int64_t kAmxBlockRows = 32;
inline constexpr int64_t kAmxBlockColumns = 32;
inline constexpr int64_t kAmxBlockElements = kAmxBlockRows * kAmxBlockColumns;
inline constexpr int64_t kAmxDepth = 32;  // bf16 steps of one tile product (a tile row: 64 bytes)

// One part of the reduction's step in a's index (above).
struct AmxStep {
  int64_t extent = 0;
  int64_t coefficient = 0;
};

}  // namespace kiln
