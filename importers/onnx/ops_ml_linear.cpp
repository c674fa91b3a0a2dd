// The linear models of ai.onnx.ml: LinearClassifier and LinearRegressor (what skl2onnx emits for
// LogisticRegression, LinearSVC, Ridge, LinearRegression…). Both are scores = X · coefficientsᵀ +
// intercepts, one matrix product with constant weights, followed by the op's label choice and
// post_transform. Where the ONNX text is silent the behaviour is onnxruntime's (the reference the
// converters are tested against): a one-score binary classifier labels by the sign of the score,
// and a single score is only ever post-transformed by PROBIT.
#include <string>

#include "ml_support.h"
#include "op_helpers.h"
#include "op_registry.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

// X (N, C) · W (K, C)ᵀ + b, in f32; W comes from a flat row-major attribute of K·C values.
Tensor linear_scores(const OnnxNode& node, const Tensor& rows, const std::vector<double>& coefficients,
                     std::vector<double> intercepts, int64_t score_count) {
  int64_t features = rows.dim(1);
  if (score_count <= 0) node.fail("the model has no scores (no intercepts and no coefficients)");
  if (static_cast<int64_t>(coefficients.size()) != score_count * features)
    node.fail("coefficients has " + std::to_string(coefficients.size()) + " values, but " + std::to_string(score_count) +
              " scores of " + std::to_string(features) + " features need " + std::to_string(score_count * features));
  std::vector<float> weights(coefficients.begin(), coefficients.end());
  Tensor matrix = Tensor::from_vector(weights, {score_count, features});
  Tensor scores = rows.matmul(matrix.transpose(0, 1));
  if (intercepts.empty()) return scores;
  std::vector<float> bias(intercepts.begin(), intercepts.end());
  return scores + Tensor::from_vector(bias, {score_count});
}

// The number of scores: one per intercept when there are intercepts, else one per row of
// coefficients.
int64_t score_count_of(const OnnxNode& node, const std::vector<double>& coefficients,
                       const std::vector<double>& intercepts, int64_t features) {
  if (!intercepts.empty()) return static_cast<int64_t>(intercepts.size());
  if (features == 0 || coefficients.size() % static_cast<size_t>(features) != 0)
    node.fail("without intercepts, coefficients (" + std::to_string(coefficients.size()) +
              " values) must be a whole number of rows of " + std::to_string(features) + " features");
  return static_cast<int64_t>(coefficients.size()) / features;
}

Outputs linear_classifier(const OnnxNode& node) {
  if (node.has_attribute("classlabels_strings"))
    node.fail("unsupported: string class labels (classlabels_strings): kiln has no string dtype; train the model on "
              "integer labels so that the converter writes classlabels_ints");
  Tensor rows = feature_rows(node, node.input(0), ScalarType::Float32);
  std::vector<double> coefficients = node.attr_floats("coefficients");
  std::vector<double> intercepts = node.attr_floats("intercepts", std::vector<double>{});
  std::vector<int64_t> labels = node.attr_ints("classlabels_ints", std::vector<int64_t>{});
  PostTransform transform = post_transform_from_name(node, node.attr_string("post_transform", "NONE"));
  int64_t classes = score_count_of(node, coefficients, intercepts, rows.dim(1));
  Tensor scores = linear_scores(node, rows, coefficients, intercepts, classes);

  if (classes >= 2) {
    if (static_cast<int64_t>(labels.size()) != classes)
      node.fail("classlabels_ints has " + std::to_string(labels.size()) + " labels but the model has " +
                std::to_string(classes) + " class scores");
    // The first class of highest score (ties go to the lower index, like onnxruntime).
    Tensor label = Tensor::from_vector(labels, {classes}).take(scores.argmax(1), 0);
    return declared_outputs(node, {label, transform_score_rows(scores, transform)});
  }

  // One score: the positive class when it is > 0. With two labels they name the classes, and Z
  // gets a second column: (1 - p, p) with p = σ(s) under LOGISTIC and the raw score otherwise
  // (onnxruntime; converters write two scores when they want probabilities).
  bool two_labels = labels.size() == 2;
  int64_t positive = two_labels ? labels[1] : 1, negative = two_labels ? labels[0] : 0;
  Tensor score = scores.reshape({scores.dim(0)});
  Tensor zero = scalar_like(score, 0.0);
  Tensor label = score.gt(zero).where(Tensor::scalar(static_cast<double>(positive), ScalarType::Int64),
                                      Tensor::scalar(static_cast<double>(negative), ScalarType::Int64));
  Tensor z;
  if (transform == PostTransform::Probit) {
    if (two_labels)
      node.fail("unsupported: post_transform PROBIT on a one-score classifier with two class labels (onnxruntime "
                "leaves the second column undefined)");
    z = probit(scores);
  } else if (two_labels) {
    Tensor p = transform == PostTransform::Logistic ? logistic(score) : score;
    z = Tensor::stack({1.0 - p, p}, 1);
  } else {
    z = scores;
  }
  return declared_outputs(node, {label, z});
}

Outputs linear_regressor(const OnnxNode& node) {
  Tensor rows = feature_rows(node, node.input(0), ScalarType::Float32);
  std::vector<double> coefficients = node.attr_floats("coefficients");
  std::vector<double> intercepts = node.attr_floats("intercepts", std::vector<double>{});
  int64_t targets = node.attr_int("targets", 1);
  if (targets <= 0) node.fail("targets must be positive, not " + std::to_string(targets));
  PostTransform transform = post_transform_from_name(node, node.attr_string("post_transform", "NONE"));
  // Intercepts of the wrong length are ignored (onnxruntime's rule), not broadcast.
  if (static_cast<int64_t>(intercepts.size()) != targets) intercepts.clear();
  Tensor scores = linear_scores(node, rows, coefficients, intercepts, targets);
  if (targets >= 2) return {transform_score_rows(scores, transform)};
  return {transform == PostTransform::Probit ? probit(scores) : scores};
}

}  // namespace

void register_ml_linear_ops(OpRegistry& registry) {
  const std::string ml = "ai.onnx.ml";
  registry.add("LinearClassifier", linear_classifier, 1, ml);
  registry.add("LinearRegressor", linear_regressor, 1, ml);
}

}  // namespace kiln::onnx_import
