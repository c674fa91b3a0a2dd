// Strided gathers: a VECTORIZE whose lanes load base+c, base+c+s, base+c+2s, ... (s a small
// constant) from one buffer. The CPU renderer reads them with one masked contiguous load of the
// lanes*s elements and a shuffle that keeps every s-th: a stride-2 pool or conv window then costs two
// vector loads and a shuffle per vector instead of one branch and one scalar load per lane (AVX2's
// gather instruction is slower than that on the CPUs we target, and the elements between the lanes
// are read by the next window anyway).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/uop.h"

namespace kiln {

// Lane k's valid is `term + offsets[k] < bound`, with `bound` computed from a size variable: the
// lanes of a block of an image row of any width, valid while inside the row. Rendered as one
// vector compare; lane by lane, each lane's compare was a scalar compare and a mask-register insert
// every time round the loop (DeepLabV3's stride-2 depthwise conv over an image of any size ran 2.7x
// slower than its fixed twin, whose bound is a constant that LLVM folds).
struct LaneBoundCompare {
  UOpPtr term;
  std::vector<int64_t> offsets;
  UOpPtr bound;
};

struct StridedGather {
  const UOp* loads_from;          // the buffer (the INDEX's pointer source), the same for every lane
  UOpPtr base;                    // lane k reads element base + first + k * stride
  int64_t first = 0;
  int64_t stride = 0;
  std::vector<const UOp*> loads;  // one scalar LOAD per lane, in lane order
  std::optional<LaneBoundCompare> valids;  // the lanes' valids as one compare, where they are one
};

// The widest stride read this way: wider ones would load more unused elements than they save.
constexpr int64_t max_gather_stride = 4;

// The gather `vectorize` performs, if it is one: every source a scalar 4- or 8-byte LOAD of global
// memory through INDEX(pointer, index[, scalar valid]), one pointer for all lanes, indices
// base + constant with the constants in arithmetic progression of step 2..max_gather_stride.
std::optional<StridedGather> match_strided_gather(const UOp& vectorize);

}  // namespace kiln
