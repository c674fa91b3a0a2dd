// graph_rewrite: applies a rule table to a whole graph until no rule applies anywhere.
//
// Bottom-up (the default) rewrites every node's sources before the node itself; top-down tries the
// rules on a node before descending into its sources. Either way, each rule's result is itself
// rewritten to a fixed point, and results are memoised, so shared subgraphs are rewritten once.
// The traversal is iterative, so very deep graphs do not overflow the stack.
//
// Rewrites must terminate. A rule table that rewrites in a cycle (a → b → a), or that keeps
// producing new nodes for one position (x → x+0 → x+0+0 …), stops with an InternalError that
// names the table, the pass and the rule that fired last.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "ir/verifier.h"
#include "rewrite/pattern_matcher.h"

namespace kiln {

enum class RewriteOrder { BottomUp, TopDown };

struct RewriteStats {
  uint64_t nodes_visited = 0;  // distinct nodes the traversal processed (including rewrite results)
  uint64_t rules_fired = 0;
  // How often each rule fired; filled only when RewriteOptions::count_rules is set.
  std::unordered_map<const Rule*, uint64_t> fired_by_rule;
};

struct RewriteOptions {
  RewriteOrder order = RewriteOrder::BottomUp;
  void* context = nullptr;          // handed to rules as Match::context<T>()
  std::string_view pass_name = {};  // for errors and KILN_DEBUG output
  RewriteStats* stats = nullptr;    // filled in when given (added to, so one can span many rewrites)
  bool count_rules = false;         // fill RewriteStats::fired_by_rule
  // Checked on the result when verification is on (debug builds, or KILN_VERIFY=1).
  const Spec* spec = nullptr;
  // Longest chain of successive rewrites of one position before the rewrite counts as divergent.
  uint32_t max_rewrite_chain = 10000;
};

// Whether graph_rewrite verifies its results: true in builds without NDEBUG and when the
// environment sets KILN_VERIFY=1 (KILN_VERIFY=0 turns it off).
bool verification_enabled();

UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& rules, const RewriteOptions& options = {});

}  // namespace kiln
