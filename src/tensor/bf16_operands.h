// The operands of bf16 products as the tensor layer lays them out for AMX tiles (opt/amx_tiles.h,
// opt/amx_layout.h): values rounded to bf16 and held as their u16 bits, weights in pair panels.
// Shared by the matmul and the convolution of `--precision bf16` (matmul_precision.h).
#pragma once

#include <cstdint>

#include "kiln/kiln.hpp"

namespace kiln::bf16_operands {

inline constexpr int64_t kPanelColumns = 32;  // columns of one AMX block
inline constexpr int64_t kDepthStep = 32;     // reduction steps of one tile product

inline int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// t rounded to bf16 (to nearest, ties to even), as u16 bits.
Tensor bf16_bits(const Tensor& t);

// bits (u16 holding bf16 values) widened to f32, exactly.
Tensor widened(const Tensor& bits);

// b (…, K, N) rounded to bf16, as u16 bits in pair panels (each of the leading batch axes' matrices
// on its own): per 32 columns, (K/2, 32, 2), row p of a
// panel holding steps 2p and 2p + 1 of its columns side by side (a 32-bit pair a column), so that a
// block's panel is one contiguous stretch that the tile loads stream. K and N are padded with zeros
// to `depth` and to whole panels. Viewed again as (depth, N); a weight folds into the panels at
// compile time, a computed b is copied into them at run time.
Tensor bf16_pair_panels(const Tensor& b, int64_t depth);

}  // namespace kiln::bf16_operands
