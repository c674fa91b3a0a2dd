// bf16 operands for AMX tiles; see bf16_operands.h.
#include "tensor/bf16_operands.h"

#include "tensor/tensor_internal.h"

namespace kiln::bf16_operands {

Tensor bf16_bits(const Tensor& t) { return t.cast(ScalarType::BFloat16).bitcast(ScalarType::UInt16); }

Tensor widened(const Tensor& bits) { return bits.bitcast(ScalarType::BFloat16).cast(ScalarType::Float32); }

Tensor bf16_pair_panels(const Tensor& b, int64_t depth) {
  const int64_t lead = b.ndim() - 2;  // batch axes, kept in front
  const int64_t k = b.dim(-2), n = b.dim(-1), columns = round_up(n, kPanelColumns);
  std::vector<int64_t> pads(2 * static_cast<size_t>(b.ndim()), 0);
  pads[pads.size() - 3] = depth - k;
  pads.back() = columns - n;
  Tensor padded = (depth != k || columns != n) ? b.pad(pads) : b;
  // (…, depth/2, 2, panels, 32) → (…, panels, depth/2, 32, 2)
  Shape split(b.shape().begin(), b.shape().begin() + lead);
  std::vector<int64_t> to_panels, to_rows;
  for (int64_t i = 0; i < lead; ++i) {
    to_panels.push_back(i);
    to_rows.push_back(i);
  }
  for (int64_t i : {2, 0, 3, 1}) to_panels.push_back(lead + i);
  for (int64_t i : {1, 3, 0, 2}) to_rows.push_back(lead + i);
  split.insert(split.end(), {depth / 2, 2, columns / kPanelColumns, kPanelColumns});
  Tensor panels = contiguous(bf16_bits(padded).reshape(split).permute(to_panels));
  Shape rows(b.shape().begin(), b.shape().begin() + lead);
  rows.insert(rows.end(), {depth, columns});
  Tensor viewed = panels.permute(to_rows).reshape(rows);
  return columns == n ? viewed : viewed.slice(-1, 0, n);
}

}  // namespace kiln::bf16_operands
