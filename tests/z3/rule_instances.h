// Instantiation of a rule's pattern as concrete UOp graphs for the Z3 verifier: one graph per dtype
// (and per op of an op set, per matching literal), whose leaves are fresh DEFINE_VARs standing for
// every value the pattern could bind, and the Match the rule's rewrite function would be given.
#pragma once

#include <string>
#include <vector>

#include "rewrite/upat.h"

namespace kiln::z3check {

// One way the pattern can match: the matched graph and its bindings.
struct PatternInstance {
  std::string label;  // "i8", "f32 [literal -0.0]", "index [MOD]", "f32 [sources swapped]"
  UOpPtr root;
  // (name, node) in the order the matcher binds them; the names point into the pattern.
  std::vector<std::pair<std::string_view, UOpPtr>> bindings;
  // Names bound to constants: `cvar` leaves (symbolic constants) and named literals.
  std::vector<std::string> constant_names;
  bool is_constant(std::string_view name) const;
  // Fills `match` with the bindings, as the matcher would for `root`.
  void fill(Match& match) const;
};

struct InstanceSet {
  std::vector<PatternInstance> instances;
  // Non-empty when the pattern's shape cannot be instantiated at all (then `instances` is empty).
  std::string untranslatable;
  // Dtype choices that give no valid instance, with the reason (IR spec, literal never matches).
  std::vector<std::string> skipped;
};

// Why the IR spec rejects `root` ("IDIV(f32, f32) -> f32"), ignoring the leaves that stand for
// inputs (the spec allows DEFINE_VAR only for integers, but here it also stands for float and bool
// values). Empty when the graph is valid.
std::string invalid_node(const UOpPtr& root);

// Every scalar dtype a rule is checked at.
const std::vector<DType>& verified_dtypes();

// The instances of `pattern`: each leaf (`var`) and each `cvar` becomes a DEFINE_VAR of the
// instance's dtype, so that it stands for any value (a symbolic constant for a `cvar`); literals
// become the CONSTs the real matcher accepts for them (both zeros where the pattern compares with
// ==). Comparisons produce bool and WHERE takes a bool condition; everything else has the dtype
// chosen for the instance. Instances that the IR spec rejects (IDIV on floats, …) are skipped.
// With `narrow_leaves` the DEFINE_VARs claim the range [1, 1] instead of their type's range: the
// verifier compares the rewrite's results on both to catch rewrites that read ranges (which would
// make a symbolic proof meaningless) although the rule is not marked opaque.
InstanceSet instantiate(const UPat& pattern, bool narrow_leaves = false);

}  // namespace kiln::z3check
