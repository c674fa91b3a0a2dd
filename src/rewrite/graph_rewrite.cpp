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
#include <unordered_map>
#include <unordered_set>

#include "ir/printer.h"
#include "support/debug.h"
#include "support/error.h"

namespace kiln {
namespace {

enum class Stage : uint8_t { Visit, Rebuild, Forward };

struct Entry {
  UOpPtr node;
  Stage stage;
  UOpPtr replacement;         // Forward: the node whose result this node takes
  const Rule* rule = nullptr;  // Forward: the rule that produced the replacement
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
    return results_.at(root.get());
  }

 private:
  void visit(const UOpPtr& node) {
    if (results_.count(node.get())) return;
    if (!in_progress_.insert(node.get()).second) report_cycle(node);
    ++stats_.nodes_visited;
    if (options_.order == RewriteOrder::TopDown && try_rules(node)) return;
    stack_.push_back({node, Stage::Rebuild, nullptr});
    const auto& sources = node->srcs();
    for (auto it = sources.rbegin(); it != sources.rend(); ++it)
      if (!results_.count(it->get())) stack_.push_back({*it, Stage::Visit, nullptr});
  }

  void rebuild(const UOpPtr& node) {
    std::vector<UOpPtr> sources;
    sources.reserve(node->src_count());
    for (const UOpPtr& source : node->srcs()) sources.push_back(results_.at(source.get()));
    UOpPtr rebuilt = node->with_srcs(std::move(sources));
    if (rebuilt != node) {
      if (options_.order == RewriteOrder::TopDown) {
        // The rebuilt node is new to the rules: give them a chance from the top again.
        schedule_forward(node, rebuilt, nullptr);
        return;
      }
      // Bottom-up: the rebuilt node's sources are final already; only the node itself is new.
      if (results_.count(rebuilt.get())) {
        finish(node, results_.at(rebuilt.get()));
        return;
      }
    }
    if (options_.order == RewriteOrder::BottomUp) {
      const Rule* fired = nullptr;
      if (UOpPtr replacement = rules_.rewrite(*rebuilt, options_.context, &fired)) {
        count(fired);
        if (rebuilt != node) {
          // The rebuilt node gets the same result; until then it counts as in progress too.
          in_progress_.insert(rebuilt.get());
          also_finish_[node.get()] = rebuilt;
        }
        schedule_forward(node, replacement, fired);
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

  void schedule_forward(const UOpPtr& node, const UOpPtr& replacement, const Rule* rule) {
    if (++chain_depth_ > options_.max_rewrite_chain) report_divergence(node, rule);
    stack_.push_back({node, Stage::Forward, replacement, rule});
    stack_.push_back({replacement, Stage::Visit, nullptr});
    last_rule_ = rule ? rule : last_rule_;
  }

  void forward(const Entry& entry) {
    --chain_depth_;
    UOpPtr result = results_.at(entry.replacement.get());
    auto also = also_finish_.find(entry.node.get());
    if (also != also_finish_.end()) {
      in_progress_.erase(also->second.get());
      results_[also->second.get()] = result;
      keep_alive_.push_back(also->second);
      also_finish_.erase(also);
    }
    finish(entry.node, result);
  }

  void finish(const UOpPtr& node, const UOpPtr& result) {
    in_progress_.erase(node.get());
    results_[node.get()] = result;
    // A result is final: rewriting it again yields itself.
    results_.emplace(result.get(), result);
    keep_alive_.push_back(node);
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
  std::unordered_map<const UOp*, UOpPtr> results_;
  std::unordered_set<const UOp*> in_progress_;
  std::unordered_map<const UOp*, UOpPtr> also_finish_;
  // Keys of results_ are raw pointers: keep every keyed node alive for the duration of the rewrite.
  std::vector<UOpPtr> keep_alive_;
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
