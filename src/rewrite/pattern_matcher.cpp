// Rule tables and the dispatch of one rewrite step; see pattern_matcher.h.
#include "rewrite/pattern_matcher.h"

#include <cstring>

#include "support/error.h"

namespace kiln {

PatternMatcher::PatternMatcher(std::string name, std::vector<Rule> rules)
    : name_(std::move(name)), rules_(std::move(rules)) {
  build_index();
}

void PatternMatcher::build_index() {
  for (auto& bucket : rules_by_op_) bucket.clear();
  for (uint32_t i = 0; i < rules_.size(); ++i)
    rules_[i].pattern.root_ops().for_each([&](Ops op) { rules_by_op_[static_cast<size_t>(op)].push_back(i); });
}

PatternMatcher operator+(const PatternMatcher& first, const PatternMatcher& second) {
  std::vector<Rule> rules = first.rules_;
  rules.insert(rules.end(), second.rules_.begin(), second.rules_.end());
  return PatternMatcher(first.name_ + "+" + second.name_, std::move(rules));
}


UOpPtr PatternMatcher::rewrite(const UOp& node, void* context, const Rule** fired) const {
  Match match;
  for (uint32_t index : rules_by_op_[static_cast<size_t>(node.op())]) {
    const Rule& rule = rules_[index];
    match.start(&node, context);
    UOpPtr result;
    bool applied = rule.pattern.matches(&node, match, [&] {
      if (!rule.guard.holds(match)) return false;
      // Replacement nodes inherit the model-level provenance of the node they replace.
      std::optional<ProvenanceScope> provenance;
      if (node.provenance().tag) provenance.emplace(node.provenance().tag);
      result = rule.rewrite(match);
      return result && result.get() != &node;
    });
    if (applied) {
      if (fired) *fired = &rule;
      return result;
    }
  }
  return nullptr;
}

std::string rule_location(const Rule& rule) {
  const char* file = rule.location.file_name();
  const char* last_slash = std::strrchr(file, '/');
  return str_cat(last_slash ? last_slash + 1 : file, ":", rule.location.line());
}

}  // namespace kiln
