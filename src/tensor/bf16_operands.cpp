// bf16 operands for AMX tiles; see bf16_operands.h.
#include "tensor/bf16_operands.h"

#include "tensor/tensor_internal.h"

namespace kiln::bf16_operands {

Tensor bf16_bits(const Tensor& t) { return t.cast(ScalarType::BFloat16).bitcast(ScalarType::UInt16); }

Tensor widened(const Tensor& bits) { return bits.bitcast(ScalarType::BFloat16).cast(ScalarType::Float32); }

Tensor bf16_pair_panels(const Tensor& b, int64_t depth) {
  const int64_t k = b.dim(0), n = b.dim(1), columns = round_up(n, kPanelColumns);
  Tensor padded = (depth != k || columns != n) ? b.pad({0, depth - k, 0, columns - n}) : b;
  // (depth/2, 2, panels, 32) → (panels, depth/2, 32, 2)
  Tensor panels = contiguous(
      bf16_bits(padded).reshape({depth / 2, 2, columns / kPanelColumns, kPanelColumns}).permute({2, 0, 3, 1}));
  Tensor viewed = panels.permute({1, 3, 0, 2}).reshape({depth, columns});
  return columns == n ? viewed : viewed.slice(-1, 0, n);
}

}  // namespace kiln::bf16_operands
