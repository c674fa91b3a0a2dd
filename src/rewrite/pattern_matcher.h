// Rule tables: lists of rewrite rules, indexed by the op at the root of each rule's pattern.
//
// A rule reads like a line of algebra:
//
//   Rule(x * 1, [](auto& m) { return m["x"]; }, "x*1 → x"),
//   Rule((x / c1) / c2, when(val("c1") > 0 && val("c2") > 0),
//        [](auto& m) { return m["x"] / (m["c1"] * m["c2"]); }, "(x/c1)/c2 → x/(c1*c2)"),
//
// Write `Rule(...)` rather than a bare `{...}`: GCC records the source location of a bare braced
// element at the end of the whole table, and each rule should report its own line.
// The rewrite function builds the replacement from the bindings; it returns nullptr to decline.
// Rewrite functions build with the UOp builders and leave arithmetic on constants to the constant
// folding rules, so that the same function works on symbolic bindings (this is what lets the Z3
// verifier prove rules). Rules whose rewrite must inspect values say so with `Rule::opaque`.
#pragma once

#include <array>
#include <source_location>
#include <string>
#include <vector>

#include "rewrite/guard.h"
#include "rewrite/upat.h"

namespace kiln {

using RewriteFunction = UOpPtr (*)(const Match&);

struct Rule {
  Rule(UPat pattern, RewriteFunction rewrite, std::string doc,
       std::source_location location = std::source_location::current())
      : pattern(std::move(pattern)), rewrite(rewrite), doc(std::move(doc)), location(location) {}
  Rule(UPat pattern, Guard guard, RewriteFunction rewrite, std::string doc,
       std::source_location location = std::source_location::current())
      : pattern(std::move(pattern)), guard(std::move(guard)), rewrite(rewrite), doc(std::move(doc)), location(location) {}

  // Marks a rule whose rewrite function looks at values or structure beyond its pattern (for
  // example folding a whole sum), so it cannot be instantiated symbolically; `why` says what it
  // inspects. Such rules are checked by the randomized oracle tests instead of by Z3.
  Rule opaque(std::string why) && {
    opaque_reason = std::move(why);
    return std::move(*this);
  }

  UPat pattern;
  Guard guard;
  RewriteFunction rewrite;
  std::string doc;  // the algebra, e.g. "x*1 → x"
  std::source_location location;
  std::string opaque_reason;  // empty for rules that can be instantiated symbolically
};

class PatternMatcher {
 public:
  PatternMatcher(std::string name, std::vector<Rule> rules);

  const std::string& name() const { return name_; }
  const std::vector<Rule>& rules() const { return rules_; }

  // Applies the first rule (in table order) whose pattern matches, whose guard holds and whose
  // rewrite returns a different node. Returns nullptr when no rule applies. `fired` receives the
  // rule that applied.
  UOpPtr rewrite(const UOp& node, void* context = nullptr, const Rule** fired = nullptr) const;

  // A table with the rules of `first` followed by those of `second`.
  friend PatternMatcher operator+(const PatternMatcher& first, const PatternMatcher& second);

 private:
  void build_index();
  std::string name_;
  std::vector<Rule> rules_;
  std::array<std::vector<uint32_t>, op_count> rules_by_op_;
};

// "file.cpp:123" for a rule, used in error messages and rule listings.
std::string rule_location(const Rule& rule);

}  // namespace kiln
