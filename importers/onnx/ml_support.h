// What the ai.onnx.ml op families share: the (N, C) feature-row view of their input, and the score
// post-processing of the classifiers and regressors (LinearClassifier, LinearRegressor, the tree
// ensembles): the post_transform names and codes, and the transforms applied to a row of scores. The behaviour follows onnxruntime, which is what converters such as
// skl2onnx are checked against: PROBIT uses the same closed-form erf⁻¹ approximation (Winitzki,
// a = 0.147), and SOFTMAX_ZERO leaves exact zeros (|x| <= 1e-7) out of the softmax.
#pragma once

#include <string>

#include "op_registry.h"

namespace kiln::onnx_import {

// X as (N, C) rows: a 1-D input is one row, a 2-D one is kept; other ranks fail. The values are
// cast to `type` (the ML ops compute in float whatever numeric type comes in).
Tensor feature_rows(const OnnxNode& node, const Tensor& x, ScalarType type);

enum class PostTransform { None, Logistic, Softmax, SoftmaxZero, Probit };

// The string attribute of the opset-1..3 ops ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO",
// "PROBIT"), or node.fail naming the unknown value.
PostTransform post_transform_from_name(const OnnxNode& node, const std::string& name);
// The integer attribute of TreeEnsemble (ai.onnx.ml opset 5): 0 NONE, 1 SOFTMAX, 2 LOGISTIC,
// 3 SOFTMAX_ZERO, 4 PROBIT.
PostTransform post_transform_from_code(const OnnxNode& node, int64_t code);

// 1 / (1 + exp(-x)).
Tensor logistic(const Tensor& x);
// √2 · erf⁻¹(2x - 1) with onnxruntime's approximation of erf⁻¹.
Tensor probit(const Tensor& x);
// The transform applied to each row of (N, K) scores, K >= 2 (every transform acts).
Tensor transform_score_rows(const Tensor& scores, PostTransform transform);

}  // namespace kiln::onnx_import
