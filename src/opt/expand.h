// The expander: after the Opt actions, UNROLL and UPCAST ranges stop being ranges.
//
//  - expand_unrolls: each UNROLL range of extent k becomes k copies of the code that depends on it,
//    with the range replaced by 0 … k-1. An output axis's copies are k STOREs (whose REDUCEs the
//    linearizer runs in one shared loop: a register tile); a reduce axis's copies are combined by
//    the REDUCE's own op inside one REDUCE (an unrolled reduction).
//  - vectorize_upcast: the UPCAST range u of extent W becomes the lanes of W-wide vector values.
//    A value that does not depend on u stays scalar (and is broadcast where a vector needs it).
//    A load or store whose element index is idx(u=0) + lane in every lane is one contiguous vector
//    access (masked per lane when its valid differs between lanes); any other dependent access is
//    done lane by lane (a gather or scatter). Index arithmetic stays scalar, one copy per lane,
//    simplified with the lane's value of u — so the contiguity test is exact symbolic arithmetic.
//    Ops on index values, and casts to bf16 from integers wider than 16 bits, are also done lane
//    by lane; f16 and bf16 ops are vectors (widened to f32 vectors and rounded back by the
//    renderer). When u is (part of) a reduce axis, each REDUCE over it becomes a vector REDUCE over
//    its other ranges, whose lanes are then combined by its op in a balanced tree: each lane
//    reduces every W-th step.
// Both run on a lowered kernel (transcendentals decomposed) and leave no UNROLL/UPCAST RANGE.
#pragma once

#include "ir/uop.h"

namespace kiln {

UOpPtr expand_unrolls(const UOpPtr& kernel);
UOpPtr vectorize_upcast(const UOpPtr& kernel);

// True for dtypes whose values the CPU renderer computes as LLVM vectors (not index; f16 and bf16
// vectors are widened to f32 vectors for every op and rounded back).
bool vectorizable_dtype(DType dtype);

}  // namespace kiln
