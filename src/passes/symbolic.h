// The symbolic simplifier for index arithmetic (and the integer and float identities that are
// exact). Each table below is a named rule table; `symbolic()` is their union in the order the
// simplifier applies them, and `simplify()` runs it over a graph to a fixed point.
//
// Semantics (ops.def): `index` is the mathematical integers, so every identity of the integers
// holds for it. Fixed-width integers wrap, so only ring identities (reordering, combining terms,
// distributing constants) and range facts apply to them. Float rules are exact under IEEE 754,
// including signed zeros and NaN: `x*1 → x` is a rule, `x+0 → x` is not (it changes -0).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rewrite/pattern_matcher.h"

namespace kiln {

const PatternMatcher& constant_folding_rules();    // ALU ops on constants → the constant
const PatternMatcher& identity_rules();            // x*1 → x, x-x → 0, where(c, x, x) → x, …
const PatternMatcher& range_rules();               // facts from vmin/vmax: x%c → x when 0 <= x < c, …
const PatternMatcher& canonical_rules();           // constants last, sums sorted with like terms combined
const PatternMatcher& divmod_rules();              // (x/c1)/c2 → x/(c1*c2), (x*c+y)%c → y%c, …
const PatternMatcher& comparison_rules();          // x+c1 < c2 → x < c2-c1, (x<c1)&(x<c2) → x<min, …
const PatternMatcher& valid_rules();               // simplify a value under the condition that guards it

// All of the above, in that order.
const PatternMatcher& symbolic();

// Every algebraic rule table of the compiler, each once: what the rule-coverage tests and the Z3
// verifier enumerate. A pass that adds an algebraic table lists it here.
std::vector<const PatternMatcher*> algebraic_rule_tables();

// graph_rewrite(node, symbolic()); memoised while a SimplifyMemo lives on the calling thread.
UOpPtr simplify(const UOpPtr& node);

// While one lives, simplify() on its thread remembers its results: the heuristics try several
// opts on a kernel and the lowering passes re-derive strides and steps, simplifying the same
// expressions again and again (in densenet121's compile 53 % of the calls were repeats). A node is
// hash-consed and the rule tables read nothing but the node, so a repeat's result is the first
// one. Scoped to one kernel's work (optimize_schedule, compile_cpu_kernel_object, the device
// renderers), so that memory is bounded and freed with the kernel; at most kMaxEntries results are
// held (then it starts over). Scopes nest: the innermost one is used.
class SimplifyMemo {
 public:
  static constexpr size_t kMaxEntries = 4096;
  SimplifyMemo();
  ~SimplifyMemo();
  SimplifyMemo(const SimplifyMemo&) = delete;
  SimplifyMemo& operator=(const SimplifyMemo&) = delete;

  // The result remembered for `node`, or null.
  UOpPtr find(const UOp* node) const;
  void remember(const UOpPtr& node, const UOpPtr& result);
  size_t size() const { return results_.size(); }
  // The memo of the calling thread's innermost scope, or null.
  static SimplifyMemo* active();

 private:
  // Each entry holds its key alive, so that no other node can take its address meanwhile.
  std::unordered_map<const UOp*, std::pair<UOpPtr, UOpPtr>> results_;
  SimplifyMemo* outer_;
};

// The constant by which `expression` changes when `range` grows by one (0 when it does not depend
// on it), if the simplifier proves one: an index's step along a loop.
std::optional<int64_t> constant_step(const UOpPtr& expression, const UOp* range);

}  // namespace kiln
