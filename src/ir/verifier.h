// The IR verifier: a table of spec rules, each a pattern plus a check, written like the rewrite
// tables. A node is valid when some spec rule for its op matches it and its check passes.
// `ir_spec()` holds the invariants every stage keeps (types of ALU sources, constant arguments,
// variable ranges). `+` joins specs as a union — a node is valid when a rule of either accepts it —
// so it can only admit more; a stage that needs stricter checks of an op writes its own rule for
// that op in a spec of its own rather than adding to one that already accepts it.
#pragma once

#include <string>
#include <vector>

#include "rewrite/upat.h"

namespace kiln {

struct SpecRule {
  UPat pattern;
  bool (*check)(const Match&);
  std::string doc;
};

class Spec {
 public:
  Spec(std::string name, std::vector<SpecRule> rules);
  const std::string& name() const { return name_; }
  const std::vector<SpecRule>& rules() const { return rules_; }
  // The first node that no rule accepts, or null when the whole graph is valid.
  const UOp* first_invalid(const UOpPtr& root) const;
  friend Spec operator+(const Spec& first, const Spec& second);

 private:
  std::string name_;
  std::vector<SpecRule> rules_;
};

const Spec& ir_spec();

// Throws an InternalError naming the pass, the spec and the invalid node, with a dump of the graph.
void verify(const UOpPtr& root, const Spec& spec, std::string_view after_pass);

}  // namespace kiln
