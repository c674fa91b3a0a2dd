// The CPU's 8-bit dot-product operation as kiln writes it: the one description that the transform
// (dot_products.h, which builds the operands) and the CPU renderer (which emits the instruction)
// share, as mma_layout.h is for the GPU's tensor cores.
//
// WMMA(u, s, c) with arg kDotProduct: u is 4·W unsigned bytes, s 4·W signed bytes, c and the result
// W lanes of i32; result lane j = c[j] + Σ t<4 u[4j + t] · s[4j + t] (vpdpbusd: W = 16 with
// AVX-512 VNNI, 8 or 4 with AVX-VNNI or AVX-512 VNNI and VL). Exact, wrapping like i32 addition.
#pragma once

namespace kiln {

inline constexpr const char* kDotProduct = "vpdpbusd";

}  // namespace kiln
