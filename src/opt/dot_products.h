// 8-bit integer dot products on x86 CPUs: AVX-512 VNNI's and AVX-VNNI's vpdpbusd. In each 32-bit
// lane it multiplies 4 unsigned bytes of one operand by the 4 signed bytes of the other and adds
// the 4 products to the lane's i32 accumulator: 64 multiply-adds per 512-bit instruction, where
// i32 vector arithmetic does 16 (and needs each product widened first). The products are exact
// and the sum wraps like i32 addition, so the result is the IR's i32 sum bit for bit.
//
// An 8-bit integer matmul (onnx/ops_quant.cpp: MatMulInteger, QLinearMatMul) reaches the
// optimiser as a kernel whose reduction is an i32 sum of CAST(u8)·CAST(s8) products. Two steps:
//  1. Opts (heuristics.cpp): where the target has the instruction (TargetCaps::dot_product_bytes),
//     dot_product_tile's register tile, whose reduction steps are unrolled by 4.
//  2. Lowering (use_dot_products, CPU only): after expansion and vectorisation each accumulator
//     update that adds 4 lane-wise products of W lanes (the 4 unrolled steps) becomes one WMMA
//     node of arg kDotProduct: its operands are the 4·W unsigned and the 4·W signed bytes, lane j's
//     4 bytes side by side (step t at byte 4j + t). A factor that is the same in every lane (a
//     matmul's row value, broadcast) makes an operand that repeats one 4-byte group, which the
//     renderer loads as one 32-bit broadcast; a factor with a vector of lanes (a row of b) makes
//     an interleave of the 4 steps' vectors, a few shuffles that a register tile's rows share.
//     The renderer adds the WMMA to the accumulator in the instruction itself.
// Targets without the instruction get neither step; their kernels keep i32 vector arithmetic.
#pragma once

#include <optional>
#include <vector>

#include "codegen/target.h"
#include "ir/uop.h"
#include "opt/dot_product_layout.h"
#include "opt/opt.h"

namespace kiln {

// Step 1: the tile of an 8-bit integer matmul on a target with the instruction, when `kernel`
// (unoptimised) has one reduction, an i32 sum of products of an unsigned and a signed 8-bit load,
// stored contiguously along an output loop of whole vectors along which one operand is the same
// in every lane (a row's value) and the other 4 bytes apart with the reduction's steps consecutive
// (b in dot-product panels, tensor_matmul.cpp): that loop vectorised (and unrolled by 2 where it can
// be), the rows unrolled to share each load of b (a symbolic row loop first split in blocks of
// 8), the steps unrolled by 4. nullopt otherwise.
std::optional<std::vector<Opt>> dot_product_tile(const UOpPtr& kernel, const TargetCaps& caps);

// `lowered` (expanded and vectorised) with each accumulator update made of groups of 4 products of
// an unsigned and a signed 8-bit value, `lanes` i32 lanes wide, summed into dot-product WMMAs;
// unchanged where nothing qualifies.
UOpPtr use_dot_products(const UOpPtr& lowered, int lanes);

}  // namespace kiln
