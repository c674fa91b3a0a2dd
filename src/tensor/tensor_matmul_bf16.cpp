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

// a (…, M, K) · b (K, N) or (…, K, N) (the same batch axes), both rounded to bf16, summed in f32:
// a's bits row-major in a buffer of their own (rounded once, not once per output column), b's in
// pair panels, K padded with zero steps to whole tile products (0 · 0 adds nothing).
Tensor bf16_product(const Tensor& a, const Tensor& b) {
  const int64_t k = b.dim(-2);
  const int64_t depth = round_up(k, kDepthStep);
  Tensor padded_a = a;
  if (depth != k) {
    std::vector<int64_t> pads(2 * static_cast<size_t>(a.ndim()), 0);
    pads.back() = depth - k;
    padded_a = a.pad(pads);
  }
  Tensor widened_left = widened(contiguous(bf16_bits(padded_a)));
  Tensor widened_right = widened(bf16_pair_panels(b, depth));
  // (…, M, 1, K) · (…, 1, N, K) summed over K, as Tensor::matmul's product is (b 2-D: (N, K)).
  Tensor right = widened_right.transpose(-2, -1);
  if (b.ndim() > 2) right = right.unsqueeze(-3);
  return widened_left.unsqueeze(-2).mul(right).sum({-1});
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
  const int64_t rows = a.numel() / k;
  if (rows >= kPanelColumns) return bf16_product(a, b);
  // Fewer rows than a tile block (a classifier's one): the rows are padded with zero rows to one
  // block and the product stored whole, where the weight is large enough that reading it in half
  // the bytes pays for the padded block and a kernel more (ResNet-50's 2048x1000 classifier at
  // batch 1: 0.65 ms in f32, 0.40 in bf16). Smaller weights stay f32: a product that widens bf16
  // operands outside a tile block is slower than the f32 one (opt/amx_tiles.h).
  constexpr int64_t kLeastPaddedWeight = 256 * 1024;  // elements: 1 MiB in f32
  if (k * n < kLeastPaddedWeight) return Tensor();
  Tensor block = a.reshape({rows, k}).pad({0, kPanelColumns - rows, 0, 0});
  Tensor product = contiguous(bf16_product(block, b)).slice(0, 0, rows);
  Shape shape = a.shape();
  shape.back() = n;
  return product.reshape(shape);
}

Tensor bf16_batched_matmul(const Tensor& a, const Tensor& b) {
  if (!bf16_products()) return Tensor();
  if (a.dtype() != ScalarType::Float32 || b.dtype() != ScalarType::Float32 || a.ndim() < 3 || b.ndim() != a.ndim())
    return Tensor();
  if (has_symbolic_shape(a) || has_symbolic_shape(b)) return Tensor();
  for (int64_t axis = 0; axis < a.ndim() - 2; ++axis)
    if (a.dim(axis) != b.dim(axis)) return Tensor();  // (a broadcast batch stays f32)
  const int64_t m = a.dim(-2), k = b.dim(-2), n = b.dim(-1);
  // A tile block's rows, half its columns, half a tile product's steps (amx_tiles.h).
  if (m < kPanelColumns || 2 * n < kPanelColumns || 2 * k < kDepthStep || a.dim(-1) != k) return Tensor();
  // Stored as it is, batch axes outermost: the tiles take a kernel whose output axes each belong to
  // a, to b, or to both (the batch). Read through the heads' merge into rows (BERT's context,
  // reshaped to (sequence, heads · 64) for the output projection), its one merged axis belonged to
  // both, and the product ran as a plain loop: 9.5 of 52 ms.
  return contiguous(bf16_product(a, b));
}

}  // namespace kiln
