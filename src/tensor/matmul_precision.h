// Reduced-precision products for f32 models (`kiln compile --precision bf16`): inside a
// ScopedMatmulPrecision(kBFloat16), Tensor::matmul of two f32 operands by a weight (a right operand
// that reads no graph input), or of two activations with the same batch axes (attention's), rounds
// both operands to bf16 (to nearest, ties to even) and sums their
// exact products in f32, as the bf16 instructions of CPUs (AMX's tdpbf16ps) and GPUs do. The result
// stays f32 and so does every other op: only the matmuls' inputs lose bits (8 of mantissa, about 3
// significant digits), which is what a model run in bf16 loses there.
//
// Both operands are stored as the bits of their bf16 values, u16: a computed left operand in its
// own buffer (one rounding, where the product's kernel would otherwise round each element once per
// output column), the weight folded into pair panels, (K/2, N, 2), the layout AMX's tiles load
// (opt/amx_tiles.h). Only targets with AMX bf16 tiles (TargetCaps::amx_bf16) take the scope's
// precision: elsewhere a product widening bf16 operands runs no faster than the f32 one (BERT-base:
// 844 against 181 ms), so the matmuls stay f32, as OpenVINO's bf16 hint falls back on such CPUs.
#pragma once

namespace kiln {

class Tensor;
struct ConvOptions;

enum class MatmulPrecision { kFloat32, kBFloat16 };

// The precision of the innermost ScopedMatmulPrecision of this thread; kFloat32 outside any.
MatmulPrecision matmul_precision();

class ScopedMatmulPrecision {
 public:
  explicit ScopedMatmulPrecision(MatmulPrecision precision);
  ~ScopedMatmulPrecision();
  ScopedMatmulPrecision(const ScopedMatmulPrecision&) = delete;
  ScopedMatmulPrecision& operator=(const ScopedMatmulPrecision&) = delete;

 private:
  MatmulPrecision previous_;
};

// a · b with both rounded to bf16 and the products summed in f32 (above), when the scope asks for
// it, the graph's target has AMX bf16 tiles, and the product qualifies: f32 operands of known
// shapes, a of 2 or more axes and at least 32 rows in all, b a 2-D weight with K of at least 16
// (padded with zero steps to a multiple of 32) and N of at least 32. An undefined Tensor otherwise
// (the caller computes in f32).
Tensor bf16_weight_matmul(const Tensor& a, const Tensor& b);

// a · b of two activations with the same batch axes (…, M, K) · (…, K, N) (attention's scores and
// context, per head), both rounded to bf16 and summed in f32 on AMX tiles, b copied into pair
// panels at run time, when the scope asks for it, the target has the tiles, the shapes are known and
// M ≥ 32, N ≥ 16, K ≥ 16; an undefined Tensor otherwise.
Tensor bf16_batched_matmul(const Tensor& a, const Tensor& b);

// Whether products by weights are computed in bf16 here: the scope asks for it and the graph's
// target has AMX bf16 tiles.
bool bf16_products();

// x ⊛ weight (+ bias) with both rounded to bf16 and the products summed in f32, where
// bf16_products() holds and the convolution qualifies (tensor_conv_bf16.cpp: 2-D, one group, f32
// of known shapes, a weight of at least 32 filters, channels that pad to whole tile steps with at
// most a quarter of zeros); an undefined Tensor otherwise (Tensor::conv computes in f32).
Tensor bf16_weight_conv(const Tensor& x, const Tensor& weight, const Tensor& bias, const ConvOptions& options);

}  // namespace kiln
