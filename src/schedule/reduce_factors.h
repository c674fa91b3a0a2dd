// Factors of a sum that do not change along its loops, taken out of it:
//
//   REDUCE(ADD, a·c, r)  →  REDUCE(ADD, a, r)·c     (c independent of every reduced loop r)
//
// Attention's scores are Σ_d (q_d·s)·k_d with s a scale the exporter stores as a one-element
// tensor (torch's scaled dot product multiplies the queries by it): inside the sum, every step of
// the register tile multiplied each row's query value by s before broadcasting it, three more
// instructions per FMA, and the legacy BERT's scores ran at half the speed of the int8 BERT's,
// whose scale is applied elsewhere (128 tokens, one thread: 0.38 against 0.18 ms in fixed plans).
// Outside the sum s costs one multiply per output. Exact for integers; for floats the rounding
// of the product moves by an ulp or so, as any reassociation of the sum does.
#pragma once

#include <vector>

#include "ir/uop.h"

namespace kiln {

// The sum over `ranges` of `body` (a REDUCE of ADD, dtype `dtype`) with the factors of `body`'s
// product that depend on none of `ranges` multiplied in after it; nullptr when `body` is not a
// product with such a factor and another that varies.
UOpPtr sum_with_invariant_factors_out(DType dtype, const UOpPtr& body, const std::vector<UOpPtr>& ranges);

}  // namespace kiln
