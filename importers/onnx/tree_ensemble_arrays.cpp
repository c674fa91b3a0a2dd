// Reading and checking the tree ensembles' attributes (see tree_ensemble_arrays.h).
#include "tree_ensemble_arrays.h"

#include <cmath>
#include <map>
#include <set>

namespace kiln::onnx_import {
namespace {

std::string count_text(size_t count) { return std::to_string(count); }

// Every list in `lists` must have `expected` entries (or be absent, when `optional`).
void check_length(const OnnxNode& node, const std::string& name, size_t length, size_t expected, bool optional) {
  if (optional && length == 0) return;
  if (length != expected)
    node.fail("attribute '" + name + "' has " + count_text(length) + " entries but there are " + count_text(expected) +
              " nodes");
}

TreeNodeMode mode_from_name(const OnnxNode& node, const std::string& name, size_t index) {
  if (name == "BRANCH_LEQ") return TreeNodeMode::Leq;
  if (name == "BRANCH_LT") return TreeNodeMode::Lt;
  if (name == "BRANCH_GTE") return TreeNodeMode::Gte;
  if (name == "BRANCH_GT") return TreeNodeMode::Gt;
  if (name == "BRANCH_EQ") return TreeNodeMode::Eq;
  if (name == "BRANCH_NEQ") return TreeNodeMode::Neq;
  if (name == "LEAF") return TreeNodeMode::Leaf;
  node.fail("nodes_modes[" + std::to_string(index) + "] is '" + name +
            "', not one of BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ, LEAF");
}

// Depth of every node (branch steps to a leaf), failing on a cycle. Iterative, so that a hostile
// chain of a million nodes cannot exhaust the stack. `label` names a node in errors.
template <class Label>
int64_t longest_path(const OnnxNode& node, const TreeEnsembleArrays& trees, const Label& label) {
  const size_t count = trees.mode.size();
  enum State : uint8_t { Unvisited, OnPath, Done };
  std::vector<State> state(count, Unvisited);
  std::vector<int64_t> depth(count, 0);
  int64_t deepest = 0;
  for (size_t start = 0; start < count; ++start) {
    if (state[start] != Unvisited) continue;
    // Each stack entry is a node and how many of its children have been pushed (0, 1, 2).
    std::vector<std::pair<size_t, int>> stack{{start, 0}};
    state[start] = OnPath;
    while (!stack.empty()) {
      auto& [index, next_child] = stack.back();
      if (trees.mode[index] == TreeNodeMode::Leaf || next_child == 2) {
        if (trees.mode[index] != TreeNodeMode::Leaf) {
          auto t = static_cast<size_t>(trees.true_child[index]), f = static_cast<size_t>(trees.false_child[index]);
          depth[index] = 1 + std::max(depth[t], depth[f]);
        }
        state[index] = Done;
        stack.pop_back();
        continue;
      }
      auto child = static_cast<size_t>(next_child == 0 ? trees.true_child[index] : trees.false_child[index]);
      ++next_child;
      if (state[child] == OnPath)
        node.fail("the trees have a cycle: " + label(child) + " is reached again from " + label(index) +
                  ", so no leaf is ever reached");
      if (state[child] == Unvisited) {
        state[child] = OnPath;
        stack.emplace_back(child, 0);
      }
    }
  }
  for (int64_t root : trees.roots) deepest = std::max(deepest, depth[static_cast<size_t>(root)]);
  return deepest;
}

void summarise_weights(TreeEnsembleArrays& trees) {
  std::set<int64_t> ids;
  for (const auto& entries : trees.weights)
    for (const auto& [target, weight] : entries) {
      ids.insert(target);
      if (weight < 0) trees.weights_all_non_negative = false;
    }
  trees.distinct_weight_targets = static_cast<int64_t>(ids.size());
}

}  // namespace

std::vector<double> floats_or_tensor_attribute(const OnnxNode& node, const std::string& name) {
  if (node.has_attribute(name + "_as_tensor")) {
    if (node.has_attribute(name)) node.fail("attributes '" + name + "' and '" + name + "_as_tensor' are both given");
    return node.attr_tensor(name + "_as_tensor").to_vector<double>();
  }
  return node.attr_floats(name, std::vector<double>{});
}

TreeEnsembleArrays read_tree_ensemble_by_ids(const OnnxNode& node, const std::string& weight_prefix, int64_t targets) {
  std::vector<int64_t> tree_ids = node.attr_ints("nodes_treeids");
  std::vector<int64_t> node_ids = node.attr_ints("nodes_nodeids");
  std::vector<std::string> modes = node.attr_strings("nodes_modes");
  std::vector<int64_t> features = node.attr_ints("nodes_featureids", std::vector<int64_t>{});
  std::vector<double> values = floats_or_tensor_attribute(node, "nodes_values");
  std::vector<int64_t> true_ids = node.attr_ints("nodes_truenodeids", std::vector<int64_t>{});
  std::vector<int64_t> false_ids = node.attr_ints("nodes_falsenodeids", std::vector<int64_t>{});
  std::vector<int64_t> missing = node.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>{});
  const size_t count = tree_ids.size();
  if (count == 0) node.fail("the ensemble has no nodes (nodes_treeids is empty)");
  check_length(node, "nodes_nodeids", node_ids.size(), count, false);
  check_length(node, "nodes_modes", modes.size(), count, false);
  check_length(node, "nodes_featureids", features.size(), count, true);
  check_length(node, "nodes_values", values.size(), count, true);
  check_length(node, "nodes_truenodeids", true_ids.size(), count, true);
  check_length(node, "nodes_falsenodeids", false_ids.size(), count, true);
  check_length(node, "nodes_missing_value_tracks_true", missing.size(), count, true);

  std::map<std::pair<int64_t, int64_t>, size_t> index_of;
  for (size_t i = 0; i < count; ++i)
    if (!index_of.emplace(std::make_pair(tree_ids[i], node_ids[i]), i).second)
      node.fail("tree " + std::to_string(tree_ids[i]) + " has node id " + std::to_string(node_ids[i]) + " twice");
  auto label = [&](size_t i) {
    return "node " + std::to_string(node_ids[i]) + " of tree " + std::to_string(tree_ids[i]);
  };
  auto resolve = [&](size_t i, int64_t child, const char* which) {
    auto found = index_of.find({tree_ids[i], child});
    if (found == index_of.end())
      node.fail(label(i) + ": its " + which + " child, node " + std::to_string(child) + ", is not in tree " +
                std::to_string(tree_ids[i]));
    return static_cast<int64_t>(found->second);
  };

  TreeEnsembleArrays trees;
  trees.targets = targets;
  trees.mode.resize(count);
  trees.feature.assign(count, 0);
  trees.threshold.assign(count, 0.0);
  trees.members.resize(count);
  trees.true_child.resize(count);
  trees.false_child.resize(count);
  trees.missing_goes_true.assign(count, false);
  trees.weights.resize(count);
  std::vector<bool> has_parent(count, false);
  for (size_t i = 0; i < count; ++i) {
    trees.mode[i] = mode_from_name(node, modes[i], i);
    if (trees.mode[i] == TreeNodeMode::Leaf) {
      trees.true_child[i] = trees.false_child[i] = static_cast<int64_t>(i);
      continue;
    }
    if (features.empty() || true_ids.empty() || false_ids.empty())
      node.fail(label(i) + " is a branch but nodes_featureids, nodes_truenodeids or nodes_falsenodeids is missing");
    if (features[i] < 0) node.fail(label(i) + " compares feature " + std::to_string(features[i]));
    trees.feature[i] = features[i];
    trees.threshold[i] = values.empty() ? 0.0 : values[i];
    trees.missing_goes_true[i] = !missing.empty() && missing[i] != 0;
    trees.true_child[i] = resolve(i, true_ids[i], "true");
    trees.false_child[i] = resolve(i, false_ids[i], "false");
    has_parent[static_cast<size_t>(trees.true_child[i])] = true;
    has_parent[static_cast<size_t>(trees.false_child[i])] = true;
  }
  // A root is a node no branch points at (onnxruntime's rule); each is one tree.
  for (size_t i = 0; i < count; ++i)
    if (!has_parent[i]) trees.roots.push_back(static_cast<int64_t>(i));

  std::vector<int64_t> weight_trees = node.attr_ints(weight_prefix + "treeids", std::vector<int64_t>{});
  std::vector<int64_t> weight_nodes = node.attr_ints(weight_prefix + "nodeids", std::vector<int64_t>{});
  std::vector<int64_t> weight_targets = node.attr_ints(weight_prefix + "ids", std::vector<int64_t>{});
  std::vector<double> weight_values = floats_or_tensor_attribute(node, weight_prefix + "weights");
  const size_t entries = weight_trees.size();
  if (weight_nodes.size() != entries || weight_targets.size() != entries || weight_values.size() != entries)
    node.fail("attributes " + weight_prefix + "treeids, " + weight_prefix + "nodeids, " + weight_prefix + "ids and " +
              weight_prefix + "weights must have the same length (they have " + count_text(entries) + ", " +
              count_text(weight_nodes.size()) + ", " + count_text(weight_targets.size()) + ", " +
              count_text(weight_values.size()) + ")");
  for (size_t j = 0; j < entries; ++j) {
    auto found = index_of.find({weight_trees[j], weight_nodes[j]});
    std::string entry = weight_prefix + "weights[" + std::to_string(j) + "]";
    if (found == index_of.end())
      node.fail(entry + " names node " + std::to_string(weight_nodes[j]) + " of tree " + std::to_string(weight_trees[j]) +
                ", which does not exist");
    if (trees.mode[found->second] != TreeNodeMode::Leaf)
      node.fail(entry + " is attached to " + label(found->second) + ", which is a branch, not a leaf");
    if (weight_targets[j] < 0 || weight_targets[j] >= targets)
      node.fail(entry + " is for " + (weight_prefix == "class_" ? "class " : "target ") +
                std::to_string(weight_targets[j]) + ", outside [0, " + std::to_string(targets) + ")");
    trees.weights[found->second].emplace_back(weight_targets[j], weight_values[j]);
  }
  summarise_weights(trees);
  trees.depth = longest_path(node, trees, label);
  return trees;
}

TreeEnsembleArrays read_tree_ensemble_by_position(const OnnxNode& node, int64_t targets) {
  std::vector<int64_t> features = node.attr_ints("nodes_featureids");
  std::vector<int64_t> modes = node.attr_tensor("nodes_modes").to_vector<int64_t>();
  std::vector<double> splits = node.attr_tensor("nodes_splits").to_vector<double>();
  std::vector<int64_t> true_ids = node.attr_ints("nodes_truenodeids");
  std::vector<int64_t> false_ids = node.attr_ints("nodes_falsenodeids");
  std::vector<int64_t> true_leafs = node.attr_ints("nodes_trueleafs");
  std::vector<int64_t> false_leafs = node.attr_ints("nodes_falseleafs");
  std::vector<int64_t> missing = node.attr_ints("nodes_missing_value_tracks_true", std::vector<int64_t>{});
  std::vector<int64_t> leaf_targets = node.attr_ints("leaf_targetids");
  std::vector<double> leaf_weights = node.attr_tensor("leaf_weights").to_vector<double>();
  std::vector<int64_t> tree_roots = node.attr_ints("tree_roots");
  std::vector<double> membership;
  if (node.has_attribute("membership_values")) membership = node.attr_tensor("membership_values").to_vector<double>();

  const size_t count = features.size();
  if (count == 0) node.fail("the ensemble has no nodes (nodes_featureids is empty)");
  check_length(node, "nodes_modes", modes.size(), count, false);
  check_length(node, "nodes_splits", splits.size(), count, false);
  check_length(node, "nodes_truenodeids", true_ids.size(), count, false);
  check_length(node, "nodes_falsenodeids", false_ids.size(), count, false);
  check_length(node, "nodes_trueleafs", true_leafs.size(), count, false);
  check_length(node, "nodes_falseleafs", false_leafs.size(), count, false);
  check_length(node, "nodes_missing_value_tracks_true", missing.size(), count, true);
  const size_t leaves = leaf_targets.size();
  if (leaf_weights.size() != leaves)
    node.fail("leaf_targetids has " + count_text(leaves) + " entries but leaf_weights has " +
              count_text(leaf_weights.size()));
  if (tree_roots.empty()) node.fail("tree_roots is empty");

  // Global indices: the branch nodes first, then the leaves.
  TreeEnsembleArrays trees;
  trees.targets = targets;
  const size_t total = count + leaves;
  trees.mode.assign(total, TreeNodeMode::Leaf);
  trees.feature.assign(total, 0);
  trees.threshold.assign(total, 0.0);
  trees.members.resize(total);
  trees.true_child.resize(total);
  trees.false_child.resize(total);
  trees.missing_goes_true.assign(total, false);
  trees.weights.resize(total);
  auto label = [&](size_t i) {
    return i < count ? "node " + std::to_string(i) : "leaf " + std::to_string(i - count);
  };
  auto resolve = [&](size_t i, int64_t child, int64_t is_leaf, const char* which) {
    size_t limit = is_leaf ? leaves : count;
    if (child < 0 || static_cast<size_t>(child) >= limit)
      node.fail("node " + std::to_string(i) + ": its " + which + " child " + (is_leaf ? "leaf " : "node ") +
                std::to_string(child) + " is outside [0, " + count_text(limit) + ")");
    return static_cast<int64_t>(is_leaf ? count + static_cast<size_t>(child) : static_cast<size_t>(child));
  };
  size_t next_member = 0;
  for (size_t i = 0; i < count; ++i) {
    if (modes[i] < 0 || modes[i] > static_cast<int64_t>(TreeNodeMode::Member))
      node.fail("nodes_modes[" + std::to_string(i) + "] is " + std::to_string(modes[i]) + ", not one of 0 (BRANCH_LEQ) … 6 (BRANCH_MEMBER)");
    trees.mode[i] = static_cast<TreeNodeMode>(modes[i]);
    if (features[i] < 0) node.fail("node " + std::to_string(i) + " compares feature " + std::to_string(features[i]));
    trees.feature[i] = features[i];
    trees.threshold[i] = splits[i];
    trees.missing_goes_true[i] = !missing.empty() && missing[i] != 0;
    trees.true_child[i] = resolve(i, true_ids[i], true_leafs[i], "true");
    trees.false_child[i] = resolve(i, false_ids[i], false_leafs[i], "false");
    if (trees.mode[i] == TreeNodeMode::Member) {
      // This node's set: the next run of values up to a NaN (or the end).
      if (next_member >= membership.size() && membership.empty())
        node.fail("node " + std::to_string(i) + " is BRANCH_MEMBER but membership_values is missing");
      while (next_member < membership.size() && !std::isnan(membership[next_member]))
        trees.members[i].push_back(membership[next_member++]);
      ++next_member;  // the NaN that ends the set
    }
  }
  for (size_t j = 0; j < leaves; ++j) {
    if (leaf_targets[j] < 0 || leaf_targets[j] >= targets)
      node.fail("leaf_targetids[" + std::to_string(j) + "] is " + std::to_string(leaf_targets[j]) + ", outside [0, " +
                std::to_string(targets) + ") (n_targets)");
    size_t index = count + j;
    trees.true_child[index] = trees.false_child[index] = static_cast<int64_t>(index);
    trees.weights[index].emplace_back(leaf_targets[j], leaf_weights[j]);
  }
  for (size_t t = 0; t < tree_roots.size(); ++t) {
    int64_t root = tree_roots[t];
    if (root < 0 || static_cast<size_t>(root) >= count)
      node.fail("tree_roots[" + std::to_string(t) + "] is " + std::to_string(root) + ", outside [0, " + count_text(count) + ")");
    auto r = static_cast<size_t>(root);
    // A tree that is a single leaf is written as a root whose two branches are that leaf.
    bool single_leaf = true_leafs[r] && false_leafs[r] && true_ids[r] == false_ids[r];
    trees.roots.push_back(single_leaf ? trees.true_child[r] : root);
  }
  summarise_weights(trees);
  trees.depth = longest_path(node, trees, label);
  return trees;
}

}  // namespace kiln::onnx_import
