// Shared pieces of the ai.onnx.ml op families (see ml_support.h).
#include "ml_support.h"

#include <cmath>

namespace kiln::onnx_import {

Tensor feature_rows(const OnnxNode& node, const Tensor& x, ScalarType type) {
  if (x.dtype() == ScalarType::Bool) node.fail("input X must be numeric, not bool");
  if (x.ndim() == 1) return x.reshape({1, x.dim(0)}).cast(type);
  if (x.ndim() != 2) node.fail("input X must be 1-D (one row) or 2-D (N, C), not of rank " + std::to_string(x.ndim()));
  return x.cast(type);
}

PostTransform post_transform_from_name(const OnnxNode& node, const std::string& name) {
  if (name == "NONE") return PostTransform::None;
  if (name == "LOGISTIC") return PostTransform::Logistic;
  if (name == "SOFTMAX") return PostTransform::Softmax;
  if (name == "SOFTMAX_ZERO") return PostTransform::SoftmaxZero;
  if (name == "PROBIT") return PostTransform::Probit;
  node.fail("post_transform '" + name + "' is not one of NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT");
}

PostTransform post_transform_from_code(const OnnxNode& node, int64_t code) {
  switch (code) {
    case 0: return PostTransform::None;
    case 1: return PostTransform::Softmax;
    case 2: return PostTransform::Logistic;
    case 3: return PostTransform::SoftmaxZero;
    case 4: return PostTransform::Probit;
    default: node.fail("post_transform " + std::to_string(code) + " is not one of 0 (NONE) … 4 (PROBIT)");
  }
}

Tensor logistic(const Tensor& x) { return x.sigmoid(); }

Tensor probit(const Tensor& x) {
  // erf⁻¹(y) ≈ sign(y) · √(√(v² - ln(1-y²)/a) - v), v = 2/(πa) + ln(1-y²)/2, a = 0.147.
  constexpr double a = 0.147;
  Tensor y = x * 2.0 - 1.0;
  Tensor log_term = ((1.0 - y) * (1.0 + y)).log();
  Tensor v = log_term * 0.5 + 2.0 / (M_PI * a);
  Tensor root = ((v * v - log_term * (1.0 / a)).sqrt() - v).sqrt();
  Tensor sign = y.lt(scalar_like(y, 0.0)).where(scalar_like(y, -1.0), scalar_like(y, 1.0));
  return sign * root * std::sqrt(2.0);
}

namespace {

// Softmax over the scores that are not (nearly) zero; the zeros stay zero: exp(x - max) for
// |x| > 1e-7, x · exp(-max) (that is, 0) otherwise, all divided by the sum of the first kind.
Tensor softmax_zero(const Tensor& scores) {
  Tensor largest = scores.max({-1}, true);
  Tensor nonzero = scores.abs().gt(scalar_like(scores, 1e-7));
  Tensor exponentials = nonzero.where((scores - largest).exp(), scores * (-largest).exp());
  Tensor total = nonzero.where(exponentials, scalar_like(scores, 0.0)).sum({-1}, true);
  return exponentials / total;
}

}  // namespace

Tensor transform_score_rows(const Tensor& scores, PostTransform transform) {
  switch (transform) {
    case PostTransform::None: return scores;
    case PostTransform::Logistic: return logistic(scores);
    case PostTransform::Softmax: return scores.softmax(-1);
    case PostTransform::SoftmaxZero: return softmax_zero(scores);
    case PostTransform::Probit: return probit(scores);
  }
  return scores;
}

}  // namespace kiln::onnx_import
