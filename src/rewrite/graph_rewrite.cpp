// The rewrite driver; see graph_rewrite.h.
//
// The traversal keeps an explicit stack of (node, stage) entries:
//   Visit    first sight of a node: (top-down: try the rules,) then schedule its sources
//   Rebuild  its sources are done: rebuild it from their results, (bottom-up: try the rules)
//   Forward  a rule replaced it: its result is the result of the replacement
// A node stays "in progress" from Visit until its result is known. Reaching an in-progress node
// again can only happen when a rule produced a graph containing a node whose own rewrite depends
// on that result: a cycle, reported as such.
#include "rewrite/graph_rewrite.h"

#include <chrono>

#include "ir/printer.h"
#include "support/debug.h"
#include "support/error.h"
#include "support/pointer_map.h"

namespace kiln {
namespace {

enum class Stage : uint8_t { Visit, Rebuild, Forward };

struct Entry {
  UOpPtr node;
  Stage stage;
  UOpPtr replacement;         // Forward: the node whose result this node takes
  const Rule* rule = nullptr;  // Forward: the rule that produced the replacement
  UOpPtr rebuilt = nullptr;   // Forward: a rebuilt form of `node` that takes the same result
};

// What the traversal knows about a node. The map is keyed by raw pointers, so the state holds a
// reference to its node: no key can be freed and its address reused during the rewrite.
struct NodeState {
  UOpPtr node;
  UOpPtr result;             // null until the node's result is known
  bool in_progress = false;  // between Visit and the result
};

class Rewriter {
 public:
  Rewriter(const PatternMatcher& rules, const RewriteOptions& options) : rules_(rules), options_(options) {}

  UOpPtr run(const UOpPtr& root) {
    stack_.push_back({root, Stage::Visit, nullptr});
    while (!stack_.empty()) {
      Entry entry = std::move(stack_.back());
      stack_.pop_back();
      switch (entry.stage) {
        case Stage::Visit: visit(entry.node); break;
        case Stage::Rebuild: rebuild(entry.node); break;
        case Stage::Forward: forward(entry); break;
      }
    }
    return result_of(root);
  }

 private:
  NodeState& state(const UOpPtr& node) {
    NodeState& entry = states_[node.get()];
    if (!entry.node) entry.node = node;
    return entry;
  }
  bool done(const UOpPtr& node) const {
    const NodeState* entry = states_.find(node.get());
    return entry != nullptr && entry->result;
  }
  // A copy: references into the map do not survive its growth.
  UOpPtr result_of(const UOpPtr& node) const {
    const NodeState* entry = states_.find(node.get());
    KILN_ASSERT(entry != nullptr && entry->result, "graph_rewrite: no result for ", op_name(node->op()));
    return entry->result;
  }
  void mark_in_progress(const UOpPtr& node) {
    NodeState& entry = state(node);
    if (entry.in_progress) report_cycle(node);
    entry.in_progress = true;
  }

  void visit(const UOpPtr& node) {
    if (done(node)) return;
    mark_in_progress(node);
    ++stats_.nodes_visited;
    if (options_.order == RewriteOrder::TopDown && try_rules(node)) return;
    stack_.push_back({node, Stage::Rebuild, nullptr});
    const auto& sources = node->srcs();
    for (auto it = sources.rbegin(); it != sources.rend(); ++it)
      if (!done(*it)) stack_.push_back({*it, Stage::Visit, nullptr});
  }

  void rebuild(const UOpPtr& node) {
    std::vector<UOpPtr> sources;
    sources.reserve(node->src_count());
    for (const UOpPtr& source : node->srcs()) sources.push_back(result_of(source));
    UOpPtr rebuilt = node->with_srcs(std::move(sources));
    if (rebuilt != node) {
      if (options_.order == RewriteOrder::TopDown) {
        // The rebuilt node is new to the rules: give them a chance from the top again.
        schedule_forward(node, rebuilt, nullptr);
        return;
      }
      // Bottom-up: the rebuilt node's sources are final already; only the node itself is new.
      if (done(rebuilt)) {
        finish(node, result_of(rebuilt));
        return;
      }
    }
    if (options_.order == RewriteOrder::BottomUp) {
      const Rule* fired = nullptr;
      if (UOpPtr replacement = rules_.rewrite(*rebuilt, options_.context, &fired)) {
        count(fired);
        // The rebuilt node gets the same result; until then it counts as in progress too.
        if (rebuilt != node) mark_in_progress(rebuilt);
        schedule_forward(node, replacement, fired, rebuilt != node ? rebuilt : nullptr);
        return;
      }
    }
    finish(node, rebuilt);
  }

  bool try_rules(const UOpPtr& node) {
    const Rule* fired = nullptr;
    UOpPtr replacement = rules_.rewrite(*node, options_.context, &fired);
    if (!replacement) return false;
    count(fired);
    schedule_forward(node, replacement, fired);
    return true;
  }

  void count(const Rule* fired) {
    ++stats_.rules_fired;
    if (options_.count_rules) ++stats_.fired_by_rule[fired];
  }

  void schedule_forward(const UOpPtr& node, const UOpPtr& replacement, const Rule* rule,
                        const UOpPtr& rebuilt = nullptr) {
    if (++chain_depth_ > options_.max_rewrite_chain) report_divergence(node, rule);
    stack_.push_back({node, Stage::Forward, replacement, rule, rebuilt});
    stack_.push_back({replacement, Stage::Visit, nullptr});
    last_rule_ = rule ? rule : last_rule_;
  }

  void forward(const Entry& entry) {
    --chain_depth_;
    UOpPtr result = result_of(entry.replacement);
    if (entry.rebuilt) set_result(entry.rebuilt, result);
    finish(entry.node, result);
  }

  void set_result(const UOpPtr& node, const UOpPtr& result) {
    NodeState& entry = state(node);
    entry.in_progress = false;
    entry.result = result;
  }

  void finish(const UOpPtr& node, const UOpPtr& result) {
    set_result(node, result);
    // A result is final: rewriting it again yields itself (unless it is still being rewritten).
    NodeState& final_state = state(result);
    if (!final_state.result && !final_state.in_progress) final_state.result = result;
  }

  [[noreturn]] void report_cycle(const UOpPtr& node) {
    const Rule* culprit = nullptr;
    for (auto it = stack_.rbegin(); it != stack_.rend() && !culprit; ++it)
      if (it->stage == Stage::Forward) culprit = it->rule;
    if (!culprit) culprit = last_rule_;
    throw InternalError(str_cat("rewrite loop in rule table '", rules_.name(), "'", pass_suffix(), ": ",
                                describe_rule(culprit), " produced a graph that contains a node already being "
                                "rewritten (", op_name(node->op()), ": ", render_expr(node), ")"),
                        std::source_location::current(), print_graph(node));
  }

  [[noreturn]] void report_divergence(const UOpPtr& node, const Rule* rule) {
    throw InternalError(str_cat("rewrite did not converge in rule table '", rules_.name(), "'", pass_suffix(),
                                ": more than ", options_.max_rewrite_chain, " successive rewrites; last rule ",
                                describe_rule(rule ? rule : last_rule_), " at ", op_name(node->op())),
                        std::source_location::current());
  }

  std::string pass_suffix() const {
    return options_.pass_name.empty() ? "" : str_cat(" (pass '", options_.pass_name, "')");
  }

  static std::string describe_rule(const Rule* rule) {
    if (!rule) return "a rebuild";
    return str_cat("rule '", rule->doc, "' (", rule_location(*rule), ")");
  }

 public:
  RewriteStats stats_;

 private:
  const PatternMatcher& rules_;
  const RewriteOptions& options_;
  std::vector<Entry> stack_;
  PointerMap<UOp, NodeState> states_;
  uint32_t chain_depth_ = 0;
  const Rule* last_rule_ = nullptr;
};

}  // namespace

bool verification_enabled() {
#ifdef NDEBUG
  static const bool enabled = env_integer("KILN_VERIFY", 0) != 0;
#else
  static const bool enabled = env_integer("KILN_VERIFY", 1) != 0;
#endif
  return enabled;
}

UOpPtr graph_rewrite(const UOpPtr& root, const PatternMatcher& rules, const RewriteOptions& options) {
  auto start = std::chrono::steady_clock::now();
  Rewriter rewriter(rules, options);
  UOpPtr result = rewriter.run(root);
  if (options.stats) {
    options.stats->nodes_visited += rewriter.stats_.nodes_visited;
    options.stats->rules_fired += rewriter.stats_.rules_fired;
    for (const auto& [rule, times] : rewriter.stats_.fired_by_rule) options.stats->fired_by_rule[rule] += times;
  }
  if (options.spec && verification_enabled()) verify(result, *options.spec, options.pass_name);
  int level = debug_level();
  if (level >= 5 && !options.pass_name.empty()) {
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    debug_print(str_cat("after ", options.pass_name, " (", rules.name(), ", ", rewriter.stats_.rules_fired,
                        " rewrites, ", ms, " ms):\n", print_graph(result)));
  }
  return result;
}

}  // namespace kiln
