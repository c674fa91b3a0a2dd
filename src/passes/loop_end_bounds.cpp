// See loop_end_bounds.h.
#include "passes/loop_end_bounds.h"

#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/build.h"
#include "passes/linear_terms.h"

namespace kiln {
namespace {

// Σ coefficient·base + constant, like terms combined (nodes are hash-consed, so equal bases are
// one node).
struct Affine {
  std::unordered_map<const UOp*, LinearTerm> terms;
  int128 constant = 0;
};

void add_scaled(Affine& into, const UOpPtr& node, int128 scale) {
  LinearSum sum = canonical_sum(node);
  into.constant += scale * sum.constant;
  for (const LinearTerm& term : sum.terms) {
    LinearTerm& entry = into.terms[term.base.get()];
    if (!entry.base) entry.base = term.base;
    entry.coefficient += scale * term.coefficient;
  }
}

bool is_loop_of_symbolic_end(const UOp& node) { return node.op() == Ops::RANGE && !node.src(0)->is_const(); }

int128 constant_divisor(const UOp& node) {
  bool divides = node.op() == Ops::IDIV && node.src(1)->is_const() && node.src(1)->const_int() > 0 &&
                 node.src(0)->vmin() >= 0;
  return divides ? node.src(1)->const_int() : 0;
}

// A term k·(y/c) whose k the divisor does not divide, next to a term of y/d with d dividing c (the
// lengths of two stacked strided convs: n/10 and n/5), is rewritten k·((y/d)/(c/d)), exact for
// y >= 0, and queued for expansion when c/d divides k: 2·(n/10) becomes n/5 - (n/5)%2, which
// cancels against the other term.
void regroup_divisions(Affine& sum, std::vector<LinearTerm>& to_expand) {
  std::vector<std::pair<const UOp*, LinearTerm>> regrouped;
  for (const auto& [base, term] : sum.terms) {
    int128 divisor = constant_divisor(*base);
    if (divisor == 0 || term.coefficient % divisor == 0) continue;
    for (const auto& [other, unused] : sum.terms) {
      int128 inner = constant_divisor(*other);
      if (other == base || inner == 0 || other->src(0) != base->src(0) || divisor % inner != 0) continue;
      int128 outer = divisor / inner;
      if (term.coefficient % outer != 0) continue;
      UOpPtr nested = other->self() / const_int(dtypes::index, static_cast<int64_t>(outer));
      // A term of that very node is already in the sum (and may be queued): leave this one, so
      // that no term is expanded twice.
      if (sum.terms.count(nested.get())) continue;
      regrouped.push_back({base, LinearTerm{nested, term.coefficient}});
      break;
    }
  }
  for (const auto& [old_base, term] : regrouped) {
    if (sum.terms.count(term.base.get())) continue;  // two terms regrouped into one node: keep the first
    sum.terms.erase(old_base);
    sum.terms[term.base.get()] = term;
    to_expand.push_back(term);
  }
}

// The largest value of `sum`: loop variables counted at their ends less one, divisions by a
// constant that divides their coefficient rewritten as above when `expand_divisions` (which helps
// when the dividend's terms cancel others, and loosens the bound by up to the remainder when not,
// so the caller tries both), every other term at its interval's end.
int128 upper_bound(Affine sum, bool expand_divisions) {
  std::unordered_set<const UOp*> loops_expanded;
  constexpr int kMaxRounds = 8;  // ends and dividends may hold further loops and divisions
  for (int round = 0; round < kMaxRounds; ++round) {
    std::vector<LinearTerm> to_expand;
    for (const auto& [base, term] : sum.terms) {
      if (term.coefficient > 0 && is_loop_of_symbolic_end(*base) && !loops_expanded.count(base))
        to_expand.push_back(term);
      int128 divisor = constant_divisor(*base);
      if (expand_divisions && divisor != 0 && term.coefficient != 0 && term.coefficient % divisor == 0)
        to_expand.push_back(term);
    }
    if (expand_divisions) regroup_divisions(sum, to_expand);
    if (to_expand.empty()) break;
    for (const LinearTerm& term : to_expand) {
      sum.terms.erase(term.base.get());
      if (term.base->op() == Ops::RANGE) {
        // r <= E - 1, and k > 0.
        loops_expanded.insert(term.base.get());
        add_scaled(sum, term.base->src(0), term.coefficient);
        sum.constant -= term.coefficient;
      } else {
        // k·(y/c) = (k/c)·y - (k/c)·(y%c), with 0 <= y%c < c for y >= 0.
        int128 divisor = term.base->src(1)->const_int();
        int128 scale = term.coefficient / divisor;
        add_scaled(sum, term.base->src(0), scale);
        if (scale < 0) sum.constant += -scale * (divisor - 1);
      }
    }
  }
  int128 bound = sum.constant;
  for (const auto& [base, term] : sum.terms)
    bound += term.coefficient > 0 ? term.coefficient * base->vmax() : term.coefficient * base->vmin();
  return bound;
}

int128 tightest_upper_bound(const Affine& sum) {
  return std::min(upper_bound(sum, false), upper_bound(sum, true));
}

}  // namespace

std::optional<bool> compare_over_loop_ends(const UOpPtr& left, const UOpPtr& right) {
  Affine difference;  // left - right
  add_scaled(difference, left, 1);
  add_scaled(difference, right, -1);
  bool involves_symbolic_loop = false;
  for (const auto& [base, term] : difference.terms)
    involves_symbolic_loop = involves_symbolic_loop || (term.coefficient != 0 && is_loop_of_symbolic_end(*base));
  if (!involves_symbolic_loop) return std::nullopt;
  if (tightest_upper_bound(difference) < 0) return true;
  Affine negated;
  negated.constant = -difference.constant;
  for (const auto& [base, term] : difference.terms) negated.terms[base] = {term.base, -term.coefficient};
  if (tightest_upper_bound(negated) <= 0) return false;  // left - right >= 0 everywhere
  return std::nullopt;
}

}  // namespace kiln
