// The tree ensembles of ai.onnx.ml as plain arrays: TreeEnsembleClassifier / TreeEnsembleRegressor
// (opsets 1 and 3: nodes named by (tree id, node id) pairs, weights attached to leaf nodes) and
// TreeEnsemble (opset 5: nodes and leaves in separate arrays, indexed by position) both become one
// table of nodes at global indices, branches and leaves together, with every reference resolved
// and checked. After reading, every child index is in range, every branch's feature is >= 0, every
// weight names a leaf and a target in range, the node graph has no cycle, and `depth` is the most
// branch steps any root needs to reach a leaf: evaluating `depth` steps from every root lands on
// a leaf. Anything else is a UserError naming the node, op and opset (hostile models included).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "op_registry.h"

namespace kiln::onnx_import {

// The comparison of a branch (true branch taken when it holds for x[feature] against the
// threshold), or a leaf. Member: x[feature] is one of the node's set of values (opset 5).
enum class TreeNodeMode : int64_t { Leq = 0, Lt = 1, Gte = 2, Gt = 3, Eq = 4, Neq = 5, Member = 6, Leaf = 7 };

struct TreeEnsembleArrays {
  // Per node (global index). Leaves have feature 0, threshold 0 and themselves as both children,
  // so that extra steps past a leaf stay on it.
  std::vector<TreeNodeMode> mode;
  std::vector<int64_t> feature;
  std::vector<double> threshold;
  std::vector<std::vector<double>> members;  // Member branches: the set; empty elsewhere
  std::vector<int64_t> true_child, false_child;
  std::vector<bool> missing_goes_true;  // a NaN feature takes the true branch
  // Per leaf node: its (target or class, weight) entries; empty for branches.
  std::vector<std::vector<std::pair<int64_t, double>>> weights;
  std::vector<int64_t> roots;  // one per tree
  int64_t targets = 0;         // targets or classes
  int64_t depth = 0;
  // The class ids and signs the weights use (the classifier's binary rules depend on them).
  int64_t distinct_weight_targets = 0;
  bool weights_all_non_negative = true;
};

// TreeEnsembleClassifier / TreeEnsembleRegressor (opsets 1, 3). `weight_prefix` is "class_" or
// "target_"; `targets` the number of classes or targets the weights may name.
TreeEnsembleArrays read_tree_ensemble_by_ids(const OnnxNode& node, const std::string& weight_prefix, int64_t targets);

// TreeEnsemble (opset 5); `targets` is n_targets.
TreeEnsembleArrays read_tree_ensemble_by_position(const OnnxNode& node, int64_t targets);

// A float list that opset 3 may give as a tensor attribute `<name>_as_tensor` instead (double
// precision); empty when neither is present.
std::vector<double> floats_or_tensor_attribute(const OnnxNode& node, const std::string& name);

}  // namespace kiln::onnx_import
