// Reduced-precision matmuls; see matmul_precision.h.
#include "tensor/matmul_precision.h"

#include <vector>

#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "tensor/tensor_internal.h"

namespace kiln {

namespace {

thread_local MatmulPrecision scoped_precision = MatmulPrecision::kFloat32;

constexpr int64_t kPanelColumns = 32;  // columns of one AMX block (opt/amx_layout.h)
constexpr int64_t kDepthStep = 32;     // reduction steps of one tile product

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

// b (K, N) rounded to bf16, as u16 bits in pair panels: per 32 columns, (K/2, 32, 2), row p of a
// panel holding steps 2p and 2p + 1 of its columns side by side (a 32-bit pair a column), so that a
// block's panel is one contiguous stretch that the tile loads stream. K and N are padded with zeros
// to `depth` and to whole panels. Viewed again as (depth, N); a weight folds into the panels at
// compile time.
Tensor bf16_pair_panels(const Tensor& b, int64_t depth) {
  const int64_t k = b.dim(0), n = b.dim(1), columns = round_up(n, kPanelColumns);
  Tensor padded = (depth != k || columns != n) ? b.pad({0, depth - k, 0, columns - n}) : b;
  Tensor bits = padded.cast(ScalarType::BFloat16).bitcast(ScalarType::UInt16);
  // (depth/2, 2, panels, 32) → (panels, depth/2, 32, 2)
  Tensor panels = contiguous(bits.reshape({depth / 2, 2, columns / kPanelColumns, kPanelColumns}).permute({2, 0, 3, 1}));
  Tensor viewed = panels.permute({1, 3, 0, 2}).reshape({depth, columns});
  return columns == n ? viewed : viewed.slice(-1, 0, n);
}

// a (…, M, K) · b (K, N), both rounded to bf16, summed in f32: a's bits row-major in a buffer of
// their own (rounded once, not once per output column), b's in pair panels, K padded with zero
// steps to whole tile products (0 · 0 adds nothing).
Tensor bf16_product(const Tensor& a, const Tensor& b) {
  const int64_t k = b.dim(0);
  const int64_t depth = round_up(k, kDepthStep);
  Tensor padded_a = a;
  if (depth != k) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(a.ndim()), 0);
    pads.back() = depth - k;
    padded_a = a.pad(pads);
  }
  Tensor left = contiguous(padded_a.cast(ScalarType::BFloat16).bitcast(ScalarType::UInt16));
  Tensor right = bf16_pair_panels(b, depth);
  Tensor widened_left = left.bitcast(ScalarType::BFloat16).cast(ScalarType::Float32);
  Tensor widened_right = right.bitcast(ScalarType::BFloat16).cast(ScalarType::Float32);
  // (…, M, 1, K) · (N, K) summed over K, as Tensor::matmul's product is.
  return widened_left.unsqueeze(-2).mul(widened_right.transpose(0, 1)).sum({-1});
}

}  // namespace

MatmulPrecision matmul_precision() { return scoped_precision; }

ScopedMatmulPrecision::ScopedMatmulPrecision(MatmulPrecision precision) : previous_(scoped_precision) {
  scoped_precision = precision;
}

ScopedMatmulPrecision::~ScopedMatmulPrecision() { scoped_precision = previous_; }

Tensor bf16_weight_matmul(const Tensor& a, const Tensor& b) {
  // Only where the target multiplies bf16 tiles: elsewhere the widened operands would cost an f32
  // product its speed and buy nothing (OpenVINO's bf16 hint falls back to f32 the same way).
  if (scoped_precision != MatmulPrecision::kBFloat16 || !graph_target_caps().amx_bf16) return Tensor();
  if (a.dtype() != ScalarType::Float32 || b.dtype() != ScalarType::Float32 || b.ndim() != 2 || a.ndim() < 2)
    return Tensor();
  if (has_symbolic_shape(a) || has_symbolic_shape(b) || reads_graph_input(b)) return Tensor();
  const int64_t k = b.dim(0), n = b.dim(1);
  if (k < kDepthStep / 2 || n < kPanelColumns || a.dim(-1) != k) return Tensor();
  // Fewer rows than a tile block (a classifier's one) or a symbolic count (a batch·sequence) would
  // widen the bf16 operands in an f32 kernel: slower than the f32 product (opt/amx_tiles.h).
  if (a.numel() / k < kPanelColumns) return Tensor();
  return bf16_product(a, b);
}

}  // namespace kiln
