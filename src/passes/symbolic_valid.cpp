// Simplification under a guarding condition: in `where(valid, a, b)` the value `a` is only used
// when `valid` holds, so `a` may be simplified assuming it. Clauses of the form `v < c` and `c < v`
// (joined by &) narrow the range of a variable-like node v (DEFINE_VAR, RANGE, SPECIAL), and so do
// clauses on an index sum (`r1 + r3 < 33`), by interval propagation through the other terms; `a`
// is simplified with v replaced by a variable of the narrower range, then v is put back.
// INDEX nodes with a valid mask (src[2]) get the same treatment for their offset.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ir/build.h"
#include "ir/substitute.h"
#include "passes/linear_terms.h"
#include "passes/symbolic.h"
#include "support/error.h"

namespace kiln {
namespace {

bool is_variable_like(const UOp& node) {
  return node.op() == Ops::DEFINE_VAR || node.op() == Ops::RANGE || node.op() == Ops::SPECIAL;
}

constexpr size_t max_guarded_value_nodes = 256;

// The nodes of `root`'s graph, but stops once it has found more than `limit` (so the caller can
// tell a large graph without walking all of it).
std::vector<const UOp*> nodes_up_to(const UOpPtr& root, size_t limit) {
  std::vector<const UOp*> found{root.get()};
  std::unordered_set<const UOp*> seen{root.get()};
  for (size_t next = 0; next < found.size() && found.size() <= limit; ++next)
    for (const UOpPtr& source : found[next]->srcs())
      if (seen.insert(source.get()).second) found.push_back(source.get());
  return found;
}

struct Narrowed {
  int128 min, max;
};

// A clause on a sum of several terms (`r1 + r1001 < 57`, from a padded conv window) bounds the sum
// as a whole more tightly than interval propagation bounds each term. Such a sum, without its
// constant, is remembered with its range, so that offsets holding a multiple of it can be
// simplified with the sum replaced by one variable of that range.
struct SumFact {
  std::vector<LinearTerm> terms;  // canonical order; the constant is left out
  Narrowed range;
};

struct Bounds {
  std::unordered_map<const UOp*, Narrowed> variables;
  std::vector<SumFact> sums;
  bool contradiction = false;  // a clause is the constant false (left by an inner simplification)
};

bool same_terms(const std::vector<LinearTerm>& a, const std::vector<LinearTerm>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].base != b[i].base || a[i].coefficient != b[i].coefficient) return false;
  return true;
}

void narrow_sum(Bounds& bounds, const std::vector<LinearTerm>& terms, Narrowed natural, int128 min, int128 max) {
  auto found = std::find_if(bounds.sums.begin(), bounds.sums.end(),
                            [&](const SumFact& fact) { return same_terms(fact.terms, terms); });
  if (found == bounds.sums.end()) {
    bounds.sums.push_back({terms, natural});
    found = bounds.sums.end() - 1;
  }
  found->range.min = std::max(found->range.min, min);
  found->range.max = std::min(found->range.max, max);
}

void narrow(std::unordered_map<const UOp*, Narrowed>& bounds, const UOp& variable, int128 min, int128 max) {
  auto [entry, inserted] = bounds.try_emplace(&variable, Narrowed{variable.vmin(), variable.vmax()});
  entry->second.min = std::max(entry->second.min, min);
  entry->second.max = std::min(entry->second.max, max);
}

int128 floor_divide(int128 a, int128 b) {
  int128 quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}
int128 ceil_divide(int128 a, int128 b) { return -floor_divide(-a, b); }

// A clause `sum < c` (upper) or `c < sum` (lower) on an index sum Σ k_i·v_i + K. For each
// variable-like v_i the other terms contribute at least (upper) or at most (lower) their range's
// end, which bounds k_i·v_i, and so v_i: interval propagation, exact for a single variable.
void narrow_by_linear_clause(const UOp& sum_node, int128 constant, bool is_upper_bound, Bounds& all_bounds) {
  auto& bounds = all_bounds.variables;
  if (!sum_node.dtype().is_index()) return;  // fixed-width sums may wrap, so their terms are not bounded
  LinearSum sum = canonical_sum(sum_node.self());
  // The extreme each term can contribute: [min, max] of k·v over v's range.
  std::vector<Narrowed> contribution;
  int128 total_min = sum.constant, total_max = sum.constant;
  for (const LinearTerm& term : sum.terms) {
    int128 a = term.coefficient * term.base->vmin(), b = term.coefficient * term.base->vmax();
    contribution.push_back({std::min(a, b), std::max(a, b)});
    total_min += contribution.back().min;
    total_max += contribution.back().max;
  }
  if (sum.terms.size() >= 2) {
    Narrowed natural{total_min - sum.constant, total_max - sum.constant};
    if (is_upper_bound) narrow_sum(all_bounds, sum.terms, natural, int128_min, constant - 1 - sum.constant);
    else narrow_sum(all_bounds, sum.terms, natural, constant + 1 - sum.constant, int128_max);
  }
  for (size_t i = 0; i < sum.terms.size(); ++i) {
    const LinearTerm& term = sum.terms[i];
    if (!is_variable_like(*term.base) || term.coefficient == 0) continue;
    int128 k = term.coefficient;
    if (is_upper_bound) {
      // k·v + rest < constant with rest >= its minimum:  k·v <= constant - 1 - rest_min.
      int128 limit = constant - 1 - (total_min - contribution[i].min);
      if (k > 0) narrow(bounds, *term.base, int128_min, floor_divide(limit, k));
      else narrow(bounds, *term.base, ceil_divide(limit, k), int128_max);
    } else {
      // constant < k·v + rest with rest <= its maximum:  k·v >= constant + 1 - rest_max.
      int128 limit = constant + 1 - (total_max - contribution[i].max);
      if (k > 0) narrow(bounds, *term.base, ceil_divide(limit, k), int128_max);
      else narrow(bounds, *term.base, int128_min, floor_divide(limit, k));
    }
  }
}

// Walks an & tree of clauses and records the bounds each clause puts on a variable-like node:
// `v < c` and `c < v` directly, and clauses on index sums by propagating through the other terms.
void collect_bounds(const UOp& clause, Bounds& all_bounds) {
  auto& bounds = all_bounds.variables;
  if (clause.op() == Ops::AND && clause.dtype() == dtypes::bool_) {
    collect_bounds(*clause.src(0), all_bounds);
    collect_bounds(*clause.src(1), all_bounds);
    return;
  }
  if (clause.op() == Ops::CONST && clause.dtype() == dtypes::bool_ && clause.const_int() == 0) {
    all_bounds.contradiction = true;
    return;
  }
  // Only integer comparisons bound integers (a float clause such as `x < 0.5` says nothing here).
  if (clause.op() != Ops::CMPLT || !clause.src(0)->dtype().is_int()) return;
  const UOp& left = *clause.src(0);
  const UOp& right = *clause.src(1);
  if (is_variable_like(left) && right.op() == Ops::CONST) narrow(bounds, left, int128_min, right.const_int() - 1);
  else if (is_variable_like(right) && left.op() == Ops::CONST) narrow(bounds, right, left.const_int() + 1, int128_max);
  else if (right.op() == Ops::CONST) narrow_by_linear_clause(left, right.const_int(), true, all_bounds);
  else if (left.op() == Ops::CONST) narrow_by_linear_clause(right, left.const_int(), false, all_bounds);
}

// WHERE computes both arms and INDEX its offset whatever `valid` is, so a form of `value` that is
// exact only under `valid` must stay defined where `valid` fails: `0<d ? a/max(d, 1) : 0` would
// become `0<d ? a/d : 0`, a division by zero at d = 0 (shift amounts likewise). A divisor or shift
// amount that is a constant or a variable-like node, with every value of its range allowed, keeps
// that under any narrowing; with any other the value is left alone. Values that load are never
// narrowed (see below).
bool stays_defined_when_narrowed(const std::vector<const UOp*>& value_nodes) {
  for (const UOp* node : value_nodes) {
    // A memory access runs whatever the condition: narrowing its index or its own valid mask
    // under the condition (a load's `r < 128` mask becoming `true` inside `r < 128 ? load : 0`)
    // would turn a guarded load into an out-of-bounds read where the condition fails.
    if (node->op() == Ops::INDEX) return false;
    bool is_division = node->op() == Ops::IDIV || node->op() == Ops::MOD;
    bool is_shift = node->op() == Ops::SHL || node->op() == Ops::SHR;
    if (!is_division && !is_shift) continue;
    const UOp& operand = *node->src(1);
    if (operand.op() != Ops::CONST && !is_variable_like(operand)) return false;
    if (is_division && operand.vmin() <= 0 && operand.vmax() >= 0) return false;
    if (is_shift && (operand.vmin() < 0 || operand.vmax() >= node->dtype().scalar_bytes() * 8)) return false;
  }
  return true;
}

// `value` with every index sum that holds m·(fact's sum) for an integer m rewritten to use
// m·variable instead, the variable standing for the sum (sums inside divisions and modulos too).
UOpPtr replace_sum(const UOpPtr& value, const SumFact& fact, const UOpPtr& stand_in,
                   std::unordered_map<const UOp*, UOpPtr>& memo) {
  if (auto found = memo.find(value.get()); found != memo.end()) return found->second;
  UOpPtr result;
  bool is_sum = value->dtype().is_index() && (value->op() == Ops::ADD || value->op() == Ops::MUL);
  if (is_sum) {
    LinearSum sum = canonical_sum(value);
    // m from the first term, then every term of the fact must appear with m times its coefficient.
    std::optional<int128> multiple;
    std::vector<bool> used(sum.terms.size(), false);
    for (const LinearTerm& wanted : fact.terms) {
      auto at = std::find_if(sum.terms.begin(), sum.terms.end(), [&](const LinearTerm& t) { return t.base == wanted.base; });
      if (at == sum.terms.end() || at->coefficient % wanted.coefficient != 0) {
        multiple.reset();
        break;
      }
      int128 m = at->coefficient / wanted.coefficient;
      if (multiple && *multiple != m) {
        multiple.reset();
        break;
      }
      multiple = m;
      used[static_cast<size_t>(at - sum.terms.begin())] = true;
    }
    if (multiple && *multiple != 0) {
      LinearSum rest;
      rest.constant = sum.constant;
      for (size_t i = 0; i < sum.terms.size(); ++i)
        if (!used[i]) rest.terms.push_back({replace_sum(sum.terms[i].base, fact, stand_in, memo), sum.terms[i].coefficient});
      rest.terms.push_back({stand_in, *multiple});
      result = build_sum(rest, value->dtype());
    }
  }
  if (!result) {
    std::vector<UOpPtr> sources;
    bool changed = false;
    for (const UOpPtr& source : value->srcs()) {
      sources.push_back(replace_sum(source, fact, stand_in, memo));
      changed = changed || sources.back() != source;
    }
    result = changed ? UOp::make(value->op(), value->dtype(), std::move(sources), value->arg()) : value;
  }
  memo.emplace(value.get(), result);
  return result;
}

// `value` simplified under `condition`; null when nothing changes. Sets `impossible` when the
// condition can never hold.
UOpPtr simplify_given(const UOp& condition, const UOpPtr& value, bool& impossible) {
  Bounds all_bounds;
  collect_bounds(condition, all_bounds);
  const auto& bounds = all_bounds.variables;
  std::unordered_map<const UOp*, UOpPtr> to_narrow, to_restore;
  impossible = all_bounds.contradiction;
  if (impossible) return nullptr;
  for (const SumFact& fact : all_bounds.sums)
    if (fact.range.min > fact.range.max) {
      impossible = true;
      return nullptr;
    }
  for (const auto& [node, range] : bounds) {
    if (range.min > range.max) {
      impossible = true;
      return nullptr;
    }
    if (range.min == node->vmin() && range.max == node->vmax()) continue;
    // The name cannot clash with user variables: it contains a character names never have. It is
    // derived from the node it stands for, not from a counter, because guards nest: `value` may hold
    // the temporary of an enclosing guard, and one of this level with the same name and range would
    // be the same node, making two different variables equal.
    UOpPtr narrowed = variable(str_cat("\x01valid", node->hash()), static_cast<int64_t>(range.min),
                               static_cast<int64_t>(range.max), node->dtype());
    to_narrow[node] = narrowed;
    to_restore[narrowed.get()] = node->self();
  }
  // Sums whose clauses narrow them: replaced by a variable of the narrowed range (restored after).
  UOpPtr working = value;
  std::unordered_map<const UOp*, UOpPtr> sums_to_restore;
  for (const SumFact& fact : all_bounds.sums) {
    // The stand-in variable's range must be an int64 range.
    if (fact.range.min < INT64_MIN || fact.range.max > INT64_MAX) continue;
    LinearSum as_sum{fact.terms, 0};
    UOpPtr sum_node = build_sum(as_sum, dtypes::index);
    if (!sum_node || (fact.range.min <= sum_node->vmin() && fact.range.max >= sum_node->vmax())) continue;
    UOpPtr stand_in = variable(str_cat("\x01sum", sum_node->hash()), static_cast<int64_t>(fact.range.min),
                               static_cast<int64_t>(fact.range.max), dtypes::index);
    std::unordered_map<const UOp*, UOpPtr> memo;
    UOpPtr replaced = replace_sum(working, fact, stand_in, memo);
    if (replaced == working) continue;
    working = replaced;
    sums_to_restore[stand_in.get()] = sum_node;
  }
  if (to_narrow.empty() && sums_to_restore.empty()) return nullptr;
  // Simplifying under a mask re-simplifies the whole guarded value, and guarded values nest (an arm
  // may hold further WHEREs), so on large values the cost compounds. Kernel index expressions are
  // far below this size; a larger value is left as it is, which is always correct.
  std::vector<const UOp*> value_nodes = nodes_up_to(value, max_guarded_value_nodes);
  if (value_nodes.size() > max_guarded_value_nodes || !stays_defined_when_narrowed(value_nodes)) return nullptr;
  // The temporaries sort elsewhere than the nodes they stand for, so the restored form may be out of
  // canonical order; simplifying it again keeps the canonical rules from undoing this rewrite (a
  // rewrite loop) and lets "nothing changed" be seen.
  UOpPtr simplified = simplify(substitute(simplify(substitute(working, to_narrow)), to_restore));
  if (!sums_to_restore.empty()) simplified = simplify(substitute(simplified, sums_to_restore));
  return simplified == value ? nullptr : simplified;
}

UOpPtr simplify_where_branch(const Match& m) {
  bool impossible = false;
  UOpPtr simplified = simplify_given(*m.get("valid"), m["x"], impossible);
  if (impossible) return m["y"];
  return simplified ? where(m["valid"], simplified, m["y"]) : nullptr;
}

// In `valid & x`, x only matters where valid holds: a padding mask nested in another (a strided
// conv's window mask inside a pool's padding) simplifies under the outer one.
UOpPtr simplify_and_operand(const Match& m) {
  bool impossible = false;
  UOpPtr simplified = simplify_given(*m.get("valid"), m["x"], impossible);
  if (impossible) return const_bool(false);
  return simplified ? (m["valid"] & simplified) : nullptr;
}

UOpPtr simplify_index_offset(const Match& m) {
  const UOp& index = *m.get("index");
  bool impossible = false;
  UOpPtr simplified = simplify_given(*m.get("valid"), m["offset"], impossible);
  if (!simplified) return nullptr;
  return UOp::make(Ops::INDEX, index.dtype(), {index.src(0), simplified, m["valid"]}, index.arg());
}

}  // namespace

const PatternMatcher& valid_rules() {
  static const PatternMatcher table("valid", {
      Rule(where(UPat::var("valid").bools(), UPat::var("x"), UPat::var("y")), simplify_where_branch,
           "where(valid, x, y) → where(valid, x simplified assuming valid, y)")
          .opaque("simplifies a subgraph under assumptions; checked by the randomized oracle test"),
      Rule(UPat(Ops::AND, {UPat::var("valid").bools(), UPat::var("x").bools()}), simplify_and_operand,
           "valid & x → valid & (x simplified assuming valid)")
          .opaque("simplifies a subgraph under assumptions; checked by the randomized oracle test"),
      Rule(UPat(Ops::INDEX, {UPat(), UPat::var("offset"), UPat::var("valid")}).named("index"), simplify_index_offset,
           "index(buffer, offset, valid) → offset simplified assuming valid")
          .opaque("simplifies a subgraph under assumptions"),
  });
  return table;
}

}  // namespace kiln
