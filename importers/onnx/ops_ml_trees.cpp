// The tree ensembles of ai.onnx.ml: TreeEnsembleClassifier, TreeEnsembleRegressor (opsets 1, 3)
// and TreeEnsemble (opset 5) — what skl2onnx writes for decision trees, random forests and
// gradient boosting.
//
// Evaluation is a fixed number of steps for all trees and samples at once: the current node of
// every (sample, tree) pair starts at the tree's root, and each step replaces it by
//     node = where(x[n, feature[node]] <mode> threshold[node], true_child[node], false_child[node])
// with the node tables as constant tensors (gathers that the compiler turns into indexed loads).
// Leaves point at themselves, so after `depth` steps (the deepest root-to-leaf path, known when the
// model is read) every pair sits on its leaf; the leaves' weights are then gathered per target and
// aggregated over the trees. The aggregation and the classifier's label and score rules follow
// onnxruntime exactly, including its binary-classifier rules (which classes the leaves carry
// weights for, whether all weights are >= 0, how many base_values there are).
#include <algorithm>
#include <limits>
#include <string>

#include "ml_support.h"
#include "op_helpers.h"
#include "op_registry.h"
#include "support/limits.h"
#include "tree_ensemble_arrays.h"

namespace kiln::onnx_import {
namespace {

using Outputs = std::vector<Tensor>;

enum class Aggregate { Average, Sum, Min, Max };

Aggregate aggregate_from_name(const OnnxNode& node, const std::string& name) {
  if (name == "AVERAGE") return Aggregate::Average;
  if (name == "SUM") return Aggregate::Sum;
  if (name == "MIN") return Aggregate::Min;
  if (name == "MAX") return Aggregate::Max;
  node.fail("aggregate_function '" + name + "' is not one of AVERAGE, SUM, MIN, MAX");
}

Aggregate aggregate_from_code(const OnnxNode& node, int64_t code) {
  if (code < 0 || code > 3) node.fail("aggregate_function " + std::to_string(code) + " is not one of 0 (AVERAGE) … 3 (MAX)");
  return static_cast<Aggregate>(code);
}

Tensor int64_table(const std::vector<int64_t>& values) { return int64_vector(values); }

Tensor value_table(const std::vector<double>& values, Shape shape, ScalarType type) {
  return Tensor::from_vector(values, std::move(shape)).cast(type);
}

// What the trees give per sample and target before base values and post_transform: the aggregated
// leaf weights (0 where no reached leaf has a weight for the target) and whether any reached leaf
// had one.
struct TreeVotes {
  Tensor scores;  // (N, K) of the accumulation type
  Tensor scored;  // (N, K) bool
};

// Whether the branch at `node` (N, T) sends x (N, T) to its true child.
Tensor branch_condition(const TreeEnsembleArrays& trees, const Tensor& node, const Tensor& x, ScalarType compare_type) {
  std::vector<TreeNodeMode> used;
  for (TreeNodeMode mode : trees.mode)
    if (mode != TreeNodeMode::Leaf && std::find(used.begin(), used.end(), mode) == used.end()) used.push_back(mode);
  auto compare = [&](TreeNodeMode mode) -> Tensor {
    if (mode == TreeNodeMode::Member) {
      size_t widest = 1;
      for (const auto& set : trees.members) widest = std::max(widest, set.size());
      // Each node's set padded with NaN, which equals nothing.
      std::vector<double> padded(trees.members.size() * widest, std::numeric_limits<double>::quiet_NaN());
      for (size_t i = 0; i < trees.members.size(); ++i)
        std::copy(trees.members[i].begin(), trees.members[i].end(), padded.begin() + static_cast<ptrdiff_t>(i * widest));
      Tensor sets = value_table(padded, {static_cast<int64_t>(trees.members.size()), static_cast<int64_t>(widest)},
                                compare_type);
      return x.unsqueeze(-1).eq(sets.take(node, 0)).max({-1});
    }
    Tensor threshold = value_table(trees.threshold, {static_cast<int64_t>(trees.threshold.size())}, compare_type).take(node, 0);
    switch (mode) {
      case TreeNodeMode::Leq: return x.le(threshold);
      case TreeNodeMode::Lt: return x.lt(threshold);
      case TreeNodeMode::Gte: return x.ge(threshold);
      case TreeNodeMode::Gt: return x.gt(threshold);
      case TreeNodeMode::Eq: return x.eq(threshold);
      default: return x.ne(threshold);
    }
  };
  Tensor condition;
  if (used.size() <= 1) {
    // The common case (every split BRANCH_LEQ): one comparison, no mode table.
    condition = compare(used.empty() ? TreeNodeMode::Leq : used.front());
  } else {
    std::vector<int64_t> codes;
    for (TreeNodeMode mode : trees.mode) codes.push_back(static_cast<int64_t>(mode));
    Tensor mode_of_node = int64_table(codes).take(node, 0);
    condition = compare(used.front());
    for (size_t i = 1; i < used.size(); ++i)
      condition = mode_of_node.eq(Tensor::scalar(static_cast<double>(used[i]), ScalarType::Int64))
                      .where(compare(used[i]), condition);
  }
  if (std::find(trees.missing_goes_true.begin(), trees.missing_goes_true.end(), true) != trees.missing_goes_true.end()) {
    std::vector<int64_t> flags(trees.missing_goes_true.begin(), trees.missing_goes_true.end());
    Tensor missing_true = int64_table(flags).take(node, 0).ne(Tensor::scalar(0.0, ScalarType::Int64));
    condition = condition.logical_or(x.isnan().logical_and(missing_true));
  }
  return condition;
}

// Runs every tree on the (N, C) rows and aggregates the reached leaves' weights per target.
TreeVotes run_trees(const OnnxNode& node, const TreeEnsembleArrays& trees, const Tensor& rows, Aggregate aggregate,
                    ScalarType accumulate_type) {
  const int64_t samples = rows.dim(0), features = rows.dim(1);
  const auto tree_count = static_cast<int64_t>(trees.roots.size());
  const auto node_count = static_cast<int64_t>(trees.mode.size());
  const int64_t targets = trees.targets;
  constexpr int64_t deepest_supported = limits::kMaxTreeDepth;
  if (trees.depth > deepest_supported)
    node.fail("unsupported: a tree " + std::to_string(trees.depth) + " levels deep (kiln evaluates up to " +
              std::to_string(deepest_supported) + " levels; docs/limits.md)");
  for (size_t i = 0; i < trees.feature.size(); ++i)
    if (trees.mode[i] != TreeNodeMode::Leaf && trees.feature[i] >= features)
      node.fail("a branch compares feature " + std::to_string(trees.feature[i]) + " but X has " +
                std::to_string(features) + " features");

  Tensor current = int64_table(trees.roots).reshape({1, tree_count}).expand({samples, tree_count});
  Tensor feature_of = int64_table(trees.feature), true_of = int64_table(trees.true_child);
  Tensor false_of = int64_table(trees.false_child);
  for (int64_t step = 0; step < trees.depth; ++step) {
    Tensor x = rows.gather(1, feature_of.take(current, 0));
    Tensor condition = branch_condition(trees, current, x, rows.dtype());
    current = condition.where(true_of.take(current, 0), false_of.take(current, 0));
  }

  // Per node and target: the leaf's weights for it (several entries for one target combine by the
  // aggregate function) and whether it has any.
  const double identity = aggregate == Aggregate::Min ? std::numeric_limits<double>::infinity()
                          : aggregate == Aggregate::Max ? -std::numeric_limits<double>::infinity()
                                                        : 0.0;
  std::vector<double> leaf_values(static_cast<size_t>(node_count * targets), identity);
  std::vector<int64_t> leaf_has(static_cast<size_t>(node_count * targets), 0);
  for (size_t i = 0; i < trees.weights.size(); ++i)
    for (const auto& [target, weight] : trees.weights[i]) {
      size_t at = i * static_cast<size_t>(targets) + static_cast<size_t>(target);
      double& value = leaf_values[at];
      value = aggregate == Aggregate::Min ? std::min(value, weight)
              : aggregate == Aggregate::Max ? std::max(value, weight)
                                            : value + weight;
      leaf_has[at] = 1;
    }
  Tensor values = value_table(leaf_values, {node_count, targets}, accumulate_type).take(current, 0);  // (N, T, K)
  Tensor has = Tensor::from_vector(leaf_has, {node_count, targets}).take(current, 0).ne(Tensor::scalar(0.0, ScalarType::Int64));
  TreeVotes votes;
  votes.scored = has.max({1});
  Tensor zero = Tensor::scalar(0.0, accumulate_type);
  switch (aggregate) {
    case Aggregate::Min: votes.scores = has.where(values, Tensor::scalar(identity, accumulate_type)).min({1}); break;
    case Aggregate::Max: votes.scores = has.where(values, Tensor::scalar(identity, accumulate_type)).max({1}); break;
    default: votes.scores = has.where(values, zero).sum({1}); break;
  }
  // A target no reached leaf scored is 0 (the extremes' identities must not leak out).
  votes.scores = votes.scored.where(votes.scores, zero);
  return votes;
}

// Regressor scores from the votes: onnxruntime's rules. One target: + base_values[0] when there
// is exactly one base value, and only PROBIT acts; several: + base_values when there is one per
// target, unscored targets 0, then the post_transform on each row. AVERAGE divides the sums by the
// number of trees.
Tensor regression_output(const TreeVotes& votes, const TreeEnsembleArrays& trees, Aggregate aggregate,
                         const std::vector<double>& base_values, PostTransform transform) {
  ScalarType type = votes.scores.dtype();
  Tensor scores = votes.scores;
  if (aggregate == Aggregate::Average) scores = scores / static_cast<double>(trees.roots.size());
  const auto targets = static_cast<size_t>(trees.targets);
  if (targets == 1) {
    if (base_values.size() == 1) scores = scores + Tensor::scalar(base_values[0], type);
    return transform == PostTransform::Probit ? probit(scores) : scores;
  }
  if (base_values.size() == targets) scores = scores + value_table(base_values, {trees.targets}, type);
  // A target no reached leaf scored is written as 0, base value or not (onnxruntime).
  return transform_score_rows(votes.scored.where(scores, Tensor::scalar(0.0, type)), transform);
}

// ---------------------------------------------------------------------------------------------
// TreeEnsembleClassifier

struct ClassifierOutputs {
  Tensor label, probabilities;
};

// Two classes: onnxruntime's binary rules, as selections per sample. Which column scores exist
// depends on the sample (a leaf may carry a weight for class 1 or not), so both shapes of the
// result are computed and chosen between.
ClassifierOutputs binary_classification(const TreeVotes& votes, const TreeEnsembleArrays& trees,
                                        const std::vector<int64_t>& labels, const std::vector<double>& base_values,
                                        PostTransform transform) {
  ScalarType type = votes.scores.dtype();
  const int64_t samples = votes.scores.dim(0);
  Tensor s0 = votes.scores.slice(1, 0, 1).reshape({samples}), s1 = votes.scores.slice(1, 1, 2).reshape({samples});
  Tensor has0 = votes.scored.slice(1, 0, 1).reshape({samples}), has1 = votes.scored.slice(1, 1, 2).reshape({samples});
  Tensor yes = Tensor::scalar(1.0, ScalarType::Bool);
  auto constant = [&](double value) { return Tensor::scalar(value, type); };

  Tensor keeps_two = yes.expand({samples});  // whether the class-1 score stays (else one score)
  bool mixed_signs_rule = false;             // onnxruntime's "add_second_class = 3" without a binary case
  if (base_values.size() == 2) {
    // With a class-1 score, class 1 becomes base[1] + s0 and class 0 its negation; without, each
    // class adds its base value.
    Tensor with_one = constant(base_values[1]) + s0;
    Tensor new_s0 = has1.where(-with_one, s0 + base_values[0]);
    s1 = has1.where(with_one, s1 + base_values[1]);
    s0 = new_s0;
  } else if (base_values.size() == 1) {
    s0 = s0 + base_values[0];
    keeps_two = has1;
  } else if (base_values.empty()) {
    keeps_two = has1;
    mixed_signs_rule = true;
  }
  // The label's score: class 1's when a leaf scored it, else class 0's (if scored).
  Tensor positive_weight = has1.where(s1, has0.where(s0, constant(0.0)));

  // Labels: a binary case (the leaves carry weights for one class only) thresholds at 0.5 when all
  // weights are >= 0 and at 0 otherwise, naming the classes by classlabels; otherwise the label is
  // literally 1 or 0 by the sign (onnxruntime).
  bool binary_case = trees.distinct_weight_targets == 1;
  auto pick = [&](const Tensor& condition, int64_t if_true, int64_t if_false) {
    return condition.where(Tensor::scalar(static_cast<double>(if_true), ScalarType::Int64),
                           Tensor::scalar(static_cast<double>(if_false), ScalarType::Int64));
  };
  Tensor label;
  if (binary_case && trees.weights_all_non_negative) label = pick(positive_weight.gt(constant(0.5)), labels[1], labels[0]);
  else if (binary_case) label = pick(positive_weight.gt(constant(0.0)), labels[1], labels[0]);
  else label = pick(positive_weight.gt(constant(0.0)), 1, 0);

  // onnxruntime writes a class no reached leaf scored as 0 whatever its sum holds (base values
  // included), before any transform. Scores with both columns: the post_transform on the row. With
  // one: (1 - s, s) for a binary case with weights >= 0; (σ(-s), σ(s)) or (-s, s) with mixed
  // weights (LOGISTIC or not); PROBIT gives (probit(s), 0); anything else leaves the second column 0.
  Tensor zero = constant(0.0);
  s0 = has0.where(s0, zero);
  s1 = has1.where(s1, zero);
  Tensor two = transform_score_rows(Tensor::stack({s0, s1}, 1), transform);
  Tensor one;
  if (transform == PostTransform::Probit) {
    one = Tensor::stack({probit(s0), zero.expand({samples})}, 1);
  } else if (binary_case && trees.weights_all_non_negative) {
    one = Tensor::stack({1.0 - s0, s0}, 1);
  } else if (binary_case || mixed_signs_rule) {
    one = transform == PostTransform::Logistic ? Tensor::stack({logistic(-s0), logistic(s0)}, 1)
                                               : Tensor::stack({-s0, s0}, 1);
  } else {
    one = Tensor::stack({s0, zero.expand({samples})}, 1);
  }
  return {label, keeps_two.reshape({samples, 1}).where(two, one)};
}

Outputs tree_ensemble_classifier(const OnnxNode& node) {
  if (node.has_attribute("classlabels_strings"))
    node.fail("unsupported: string class labels (classlabels_strings): kiln has no string dtype; train the model on "
              "integer labels so that the converter writes classlabels_int64s");
  std::vector<int64_t> labels = node.attr_ints("classlabels_int64s", std::vector<int64_t>{});
  if (labels.size() < 2)
    node.fail("unsupported: a classifier with " + std::to_string(labels.size()) +
              " class labels (classlabels_int64s needs two or more)");
  const auto classes = static_cast<int64_t>(labels.size());
  TreeEnsembleArrays trees = read_tree_ensemble_by_ids(node, "class_", classes);
  PostTransform transform = post_transform_from_name(node, node.attr_string("post_transform", "NONE"));
  std::vector<double> base_values = floats_or_tensor_attribute(node, "base_values");
  Tensor rows = feature_rows(node, node.input(0),
                             node.input(0).dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32);
  TreeVotes votes = run_trees(node, trees, rows, Aggregate::Sum, ScalarType::Float32);

  if (classes == 2) {
    ClassifierOutputs out = binary_classification(votes, trees, labels, base_values, transform);
    return declared_outputs(node, {out.label, out.probabilities});
  }
  // Several classes: base values are added (and make their class scored); the label is the first
  // scored class of highest score.
  if (!base_values.empty() && base_values.size() != labels.size())
    node.fail("base_values has " + std::to_string(base_values.size()) + " values but there are " +
              std::to_string(classes) + " classes");
  Tensor scores = votes.scores, scored = votes.scored;
  if (!base_values.empty()) {
    scores = scores + value_table(base_values, {classes}, ScalarType::Float32);
    scored = Tensor::ones(scored.shape(), ScalarType::Bool);
  }
  Tensor ranked = scored.where(scores, Tensor::scalar(-std::numeric_limits<double>::infinity(), ScalarType::Float32));
  Tensor label = int64_table(labels).take(ranked.argmax(1), 0);
  // Unscored classes are written as 0 (onnxruntime).
  Tensor written = scored.where(scores, Tensor::scalar(0.0, ScalarType::Float32));
  return declared_outputs(node, {label, transform_score_rows(written, transform)});
}

Outputs tree_ensemble_regressor(const OnnxNode& node) {
  int64_t targets = node.attr_int("n_targets", 1);
  if (targets <= 0) node.fail("n_targets must be positive, not " + std::to_string(targets));
  TreeEnsembleArrays trees = read_tree_ensemble_by_ids(node, "target_", targets);
  Aggregate aggregate = aggregate_from_name(node, node.attr_string("aggregate_function", "SUM"));
  PostTransform transform = post_transform_from_name(node, node.attr_string("post_transform", "NONE"));
  std::vector<double> base_values = floats_or_tensor_attribute(node, "base_values");
  Tensor rows = feature_rows(node, node.input(0),
                             node.input(0).dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32);
  TreeVotes votes = run_trees(node, trees, rows, aggregate, ScalarType::Float32);
  return {regression_output(votes, trees, aggregate, base_values, transform)};
}

// TreeEnsemble (opset 5): the regressor's rules; Y has X's type (float, double or float16, the last
// computed in f32).
Outputs tree_ensemble(const OnnxNode& node) {
  const Tensor& x = node.input(0);
  if (!is_floating(x.dtype())) node.fail("input X must be a floating-point tensor");
  int64_t targets = node.attr_int("n_targets", 1);
  if (targets <= 0) node.fail("n_targets must be positive, not " + std::to_string(targets));
  TreeEnsembleArrays trees = read_tree_ensemble_by_position(node, targets);
  Aggregate aggregate = aggregate_from_code(node, node.attr_int("aggregate_function", 1));
  PostTransform transform = post_transform_from_code(node, node.attr_int("post_transform", 0));
  ScalarType compute = x.dtype() == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32;
  TreeVotes votes = run_trees(node, trees, feature_rows(node, x, compute), aggregate, compute);
  return {regression_output(votes, trees, aggregate, {}, transform).cast(x.dtype())};
}

}  // namespace

void register_ml_tree_ops(OpRegistry& registry) {
  const std::string ml = "ai.onnx.ml";
  registry.add("TreeEnsembleClassifier", tree_ensemble_classifier, 1, ml);
  registry.add("TreeEnsembleRegressor", tree_ensemble_regressor, 1, ml);
  registry.add("TreeEnsemble", tree_ensemble, 5, ml);
}

}  // namespace kiln::onnx_import
