// Rounding of double values to the narrower float formats, round-to-nearest-even, with subnormals
// and overflow to infinity. Used when kiln folds float constants, so folded values are exactly what
// the target type would hold.
#pragma once

namespace kiln {

double round_to_f16(double value);
double round_to_bf16(double value);
double round_to_f32(double value);

}  // namespace kiln
