// Reduced-precision matmuls; see matmul_precision.h.
#include "tensor/matmul_precision.h"

#include <vector>

#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "tensor/bf16_operands.h"
#include "tensor/tensor_internal.h"

namespace kiln {

using namespace bf16_operands;

namespace {

thread_local MatmulPrecision scoped_precision = MatmulPrecision::kFloat32;

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
  Tensor widened_left = widened(contiguous(bf16_bits(padded_a)));
  Tensor widened_right = widened(bf16_pair_panels(b, depth));
  // (…, M, 1, K) · (N, K) summed over K, as Tensor::matmul's product is.
  return widened_left.unsqueeze(-2).mul(widened_right.transpose(0, 1)).sum({-1});
}

}  // namespace

MatmulPrecision matmul_precision() { return scoped_precision; }

ScopedMatmulPrecision::ScopedMatmulPrecision(MatmulPrecision precision) : previous_(scoped_precision) {
  scoped_precision = precision;
}

ScopedMatmulPrecision::~ScopedMatmulPrecision() { scoped_precision = previous_; }

// Only where the target multiplies bf16 tiles: elsewhere the widened operands would cost an f32
// product its speed and buy nothing (OpenVINO's bf16 hint falls back to f32 the same way).
bool bf16_products() { return scoped_precision == MatmulPrecision::kBFloat16 && graph_target_caps().amx_bf16; }

Tensor bf16_weight_matmul(const Tensor& a, const Tensor& b) {
  if (!bf16_products()) return Tensor();
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
