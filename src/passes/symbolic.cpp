// The rule tables of the symbolic simplifier; see symbolic.h. One rule per line, with its algebra.
// Names: x, y, z match any node; c, c1, c2 match constants; `.ints()` etc. restrict the dtype.
#include "passes/symbolic.h"

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/substitute.h"
#include "passes/linear_terms.h"
#include "passes/loop_end_bounds.h"
#include "rewrite/graph_rewrite.h"

namespace kiln {
namespace {

const UPat x = UPat::var("x"), y = UPat::var("y");
const UPat xi = x.ints(), yi = y.ints();              // integers (fixed width or index)
const UPat xb = x.bools();                            // bool
const UPat xn = x.index(), yn = y.index();            // index only: no overflow
const UPat c = UPat::cvar("c"), c1 = UPat::cvar("c1"), c2 = UPat::cvar("c2");

OpSet alu_and_cast() { return OpSet::group(OpGroup::Unary) | OpSet::group(OpGroup::Binary) |
                              OpSet::group(OpGroup::Ternary) | OpSet{Ops::CAST}; }

// Folds an ALU op whose sources are all scalar constants (fold_alu declines undefined results).
UOpPtr fold_constants(const Match& m) {
  const UOp& node = *m.get("alu");
  if (node.dtype().count() != 1) return nullptr;
  std::vector<ScalarValue> values;
  for (const UOpPtr& source : node.srcs()) {
    if (source->dtype().count() != 1) return nullptr;
    values.push_back(constant_value(*source));
  }
  std::optional<ScalarValue> result = fold_alu(node.op(), node.dtype(), values);
  if (!result) return nullptr;
  // An index result is exact, but a CONST holds an int64: one beyond that range is left unfolded
  // (rules such as (x+c1)+c2 → x+(c1+c2) can combine constants past it while x+c1+c2 still fits).
  if (result->dtype.is_index() && (result->integer < INT64_MIN || result->integer > INT64_MAX)) return nullptr;
  return make_constant(*result);
}

// A node whose range is a single value is that value.
UOpPtr fold_singleton_range(const Match& m) {
  const UOp& node = *m.get("x");
  return integer_constant(node.dtype(), node.vmin());
}

UOpPtr same_type_cast(const Match& m) {
  const UOp& node = *m.get("cast");
  return node.dtype() == node.src(0)->dtype() ? node.src(0) : nullptr;
}

// Rebuilds an integer sum in canonical form (nullptr when it already is).
UOpPtr canonicalize_sum(const Match& m) {
  UOpPtr node = m["sum"];
  UOpPtr result = build_sum(canonical_sum(node), node->dtype());
  return result == node ? nullptr : result;
}

}  // namespace

const PatternMatcher& constant_folding_rules() {
  static const PatternMatcher table("constant_folding", {
      Rule(UPat::ops(alu_and_cast()).all_sources(UPat(Ops::CONST)).named("alu"), fold_constants,
           "op(c1, c2, …) → c").opaque("evaluates the op with fold_alu; tested per op against Z3 semantics"),
      Rule(where(c, x, y), when(val("c") != 0), [](auto& m) { return m["x"]; }, "where(true, x, y) → x"),
      Rule(where(c, x, y), when(val("c") == 0), [](auto& m) { return m["y"]; }, "where(false, x, y) → y"),
  });
  return table;
}

const PatternMatcher& identity_rules() {
  static const PatternMatcher table("identities", {
      Rule(xi + 0, [](auto& m) { return m["x"]; }, "x+0 → x (integers; for floats -0+0 is +0)"),
      Rule(x + UPat::constant_float(-0.0), [](auto& m) { return m["x"]; }, "x+(-0.0) → x"),
      Rule(UPat(Ops::SUB, {xi, UPat::constant(0)}), [](auto& m) { return m["x"]; }, "x-0 → x (integers)"),
      Rule(UPat(Ops::SUB, {x.floats(), UPat::constant_float(0.0)}), [](auto& m) { return m["x"]; },
           "x-0.0 → x (floats; not x-(-0.0), which turns -0.0 into +0.0)"),
      Rule(x * 1, [](auto& m) { return m["x"]; }, "x*1 → x"),
      Rule(xi * 0, [](auto& m) { return const_like(m["x"], 0); }, "x*0 → 0 (integers)"),
      Rule(UPat(Ops::IDIV, {x, UPat::constant(1)}), [](auto& m) { return m["x"]; }, "x/1 → x"),
      Rule(UPat(Ops::FDIV, {x, UPat::constant_float(1.0)}), [](auto& m) { return m["x"]; }, "x/1.0 → x"),
      Rule(UPat(Ops::MOD, {xi, UPat::constant(1)}), [](auto& m) { return const_like(m["x"], 0); }, "x%1 → 0"),
      Rule(UPat(Ops::SUB, {xi, xi}), [](auto& m) { return const_like(m["x"], 0); }, "x-x → 0 (integers)"),
      Rule(UPat(Ops::IDIV, {xi, xi}), when(vmin("x") > 0 || vmax("x") < 0),
       [](auto& m) { return const_like(m["x"], 1); }, "x/x → 1 when x is never 0"),
      Rule(-(-x), [](auto& m) { return m["x"]; }, "-(-x) → x"),
      Rule(logical_not(logical_not(x)), [](auto& m) { return m["x"]; }, "!!x → x"),
      Rule(maximum(x, x), [](auto& m) { return m["x"]; }, "max(x, x) → x"),
      Rule(lt(x, x), [](auto&) { return const_bool(false); }, "x<x → false"),
      Rule(ne(xi, xi), [](auto&) { return const_bool(false); }, "x!=x → false (integers)"),
      Rule(eq(xi, xi), [](auto&) { return const_bool(true); }, "x==x → true (integers)"),
      Rule(where(UPat::var("c"), y, y), [](auto& m) { return m["y"]; }, "where(c, y, y) → y"),
      Rule(x & x, [](auto& m) { return m["x"]; }, "x&x → x"),
      Rule(x | x, [](auto& m) { return m["x"]; }, "x|x → x"),
      Rule(xi ^ xi, [](auto& m) { return const_like(m["x"], 0); }, "x^x → 0"),
      Rule(xb ^ xb, [](auto& m) { return const_like(m["x"], 0); }, "x^x → false"),
      Rule(xi | 0, [](auto& m) { return m["x"]; }, "x|0 → x"),
      Rule(xi ^ 0, [](auto& m) { return m["x"]; }, "x^0 → x"),
      Rule(xi & 0, [](auto& m) { return const_like(m["x"], 0); }, "x&0 → 0"),
      Rule(xb & 1, [](auto& m) { return m["x"]; }, "x&true → x"),
      Rule(xb & 0, [](auto& m) { return const_like(m["x"], 0); }, "x&false → false"),
      Rule(xb | 1, [](auto& m) { return const_like(m["x"], 1); }, "x|true → true"),
      Rule(xb | 0, [](auto& m) { return m["x"]; }, "x|false → x"),
      Rule(xb ^ 0, [](auto& m) { return m["x"]; }, "x^false → x"),
      Rule(xb ^ 1, [](auto& m) { return logical_not(m["x"]); }, "x^true → !x"),
      Rule(UPat(Ops::CAST, {x}).named("cast"), same_type_cast, "cast(x) to x's own dtype → x"),
  });
  return table;
}

const PatternMatcher& range_rules() {
  static const UPat folded = UPat::ops(alu_and_cast() | OpSet{Ops::DEFINE_VAR, Ops::RANGE, Ops::SPECIAL});
  static const PatternMatcher table("range", {
      Rule(folded.ints().named("x"), when(vmin("x") == vmax("x")), fold_singleton_range,
           "x → c when vmin(x) == vmax(x) == c").opaque("builds the constant from the range of x"),
      Rule(folded.bools().named("x"), when(vmin("x") == vmax("x")), fold_singleton_range,
           "b → true/false when its range is one value").opaque("builds the constant from the range of x"),
      Rule(xi % c, when(val("c") > 0 && vmin("x") >= 0 && vmax("x") < val("c")), [](auto& m) { return m["x"]; },
       "x%c → x when 0 <= x < c"),
      Rule(xi % c, when(val("c") < 0 && vmin("x") >= 0 && vmax("x") < -val("c")), [](auto& m) { return m["x"]; },
       "x%c → x when 0 <= x < -c"),
      Rule(maximum(xi, yi), when(vmin("x") >= vmax("y")), [](auto& m) { return m["x"]; }, "max(x, y) → x when x >= y"),
  });
  return table;
}

const PatternMatcher& canonical_rules() {
  static const PatternMatcher table("canonical", {
      Rule(UPat(Ops::SUB, {xi, yi}), [](auto& m) { return m["x"] + m["y"] * -1; }, "x-y → x+y*-1 (integers)"),
      Rule(-xi, [](auto& m) { return m["x"] * -1; }, "-x → x*-1 (integers)"),
      // Not when x is a constant too: c1*c2 is left unfolded when it leaves int64 (index), and
      // swapping it would loop.
      Rule(UPat(Ops::MUL, {c, xi}), [](auto& m) { return m.get("x")->is_const() ? nullptr : m["x"] * m["c"]; },
       "c*x → x*c"),
      Rule((xi * c1) * c2, [](auto& m) { return m["x"] * (m["c1"] * m["c2"]); }, "(x*c1)*c2 → x*(c1*c2)"),
      Rule((xi + yi) * c, [](auto& m) { return m["x"] * m["c"] + m["y"] * m["c"]; }, "(x+y)*c → x*c+y*c"),
      Rule((xi + c1) + c2, [](auto& m) { return m["x"] + (m["c1"] + m["c2"]); }, "(x+c1)+c2 → x+(c1+c2)"),
      Rule(UPat(Ops::ADD).ints().named("sum"), canonicalize_sum,
           "Σ terms → sorted Σ with like terms combined, constant last")
          .opaque("reorders a whole sum; checked by the randomized oracle test"),
  });
  return table;
}

const PatternMatcher& comparison_rules() {
  static const PatternMatcher table("comparison", {
      Rule(lt(xn + c1, c2), [](auto& m) { return lt(m["x"], m["c2"] - m["c1"]); }, "x+c1 < c2 → x < c2-c1"),
      Rule(lt(c1, xn + c2), [](auto& m) { return lt(m["c1"] - m["c2"], m["x"]); }, "c1 < x+c2 → c1-c2 < x"),
      Rule(lt(xn * c1, c2), when(val("c1") > 0 && val("c2") > 0),
       [](auto& m) { return lt(m["x"], (m["c2"] + m["c1"] - 1) / m["c1"]); }, "x*c1 < c2 → x < ceil(c2/c1)"),
      Rule(lt(c1, xn * c2), when(val("c2") > 0 && val("c1") >= 0),
       [](auto& m) { return lt(m["c1"] / m["c2"], m["x"]); }, "c1 < x*c2 → c1/c2 < x"),
      Rule(lt(xn / c1, c2), when(val("c1") > 0 && vmin("x") >= 0),
       [](auto& m) { return lt(m["x"], m["c2"] * m["c1"]); }, "x/c1 < c2 → x < c2*c1 when x >= 0"),
      Rule(lt(xi, c1) & lt(xi, c2), when(val("c1") <= val("c2")), [](auto& m) { return lt(m["x"], m["c1"]); },
       "(x<c1) & (x<c2) → x<c1 when c1 <= c2"),
      Rule(lt(c1, xi) & lt(c2, xi), when(val("c1") >= val("c2")), [](auto& m) { return lt(m["c1"], m["x"]); },
       "(c1<x) & (c2<x) → c1<x when c1 >= c2"),
      Rule(lt(xi, c1) & lt(c2, xi), when(val("c2") >= val("c1") - 1), [](auto&) { return const_bool(false); },
       "(x<c1) & (c2<x) → false when c2 >= c1-1"),
      Rule(logical_not(lt(xn, yn)), [](auto& m) { return lt(m["y"] + -1, m["x"]); }, "!(x<y) → y-1 < x (index)"),
      Rule(lt(xn, yn),
           [](auto& m) -> UOpPtr {
             std::optional<bool> decided = compare_over_loop_ends(m["x"], m["y"]);
             return decided ? const_bool(*decided) : nullptr;
           },
           "x < y → true/false when decided with each loop variable below its symbolic end")
          .opaque("uses that a RANGE is below its end, which no formula of its operands states; "
                  "tests/passes/test_symbolic_rules.cpp"),
  });
  return table;
}

const PatternMatcher& symbolic() {
  static const PatternMatcher table = constant_folding_rules() + identity_rules() + range_rules() +
                                      canonical_rules() + divmod_rules() + comparison_rules() + valid_rules();
  return table;
}

std::vector<const PatternMatcher*> algebraic_rule_tables() {
  return {&constant_folding_rules(), &identity_rules(), &range_rules(), &canonical_rules(),
          &divmod_rules(), &comparison_rules(), &valid_rules()};
}

namespace {
// A raw pointer (trivially destroyed), so thread exit never runs a destructor that releases nodes.
thread_local SimplifyMemo* active_memo = nullptr;
}  // namespace

SimplifyMemo::SimplifyMemo() : outer_(active_memo) { active_memo = this; }

SimplifyMemo::~SimplifyMemo() { active_memo = outer_; }

SimplifyMemo* SimplifyMemo::active() { return active_memo; }

UOpPtr SimplifyMemo::find(const UOp* node) const {
  auto found = results_.find(node);
  return found == results_.end() ? nullptr : found->second.second;
}

void SimplifyMemo::remember(const UOpPtr& node, const UOpPtr& result) {
  if (results_.size() >= kMaxEntries) results_.clear();
  results_.emplace(node.get(), std::make_pair(node, result));
}

UOpPtr simplify(const UOpPtr& node) {
  SimplifyMemo* memo = SimplifyMemo::active();
  if (memo != nullptr)
    if (UOpPtr known = memo->find(node.get())) return known;
  UOpPtr result = graph_rewrite(node, symbolic(), {.pass_name = "simplify", .spec = &ir_spec()});
  if (memo != nullptr) memo->remember(node, result);
  return result;
}

std::optional<int64_t> constant_step(const UOpPtr& expression, const UOp* range) {
  UOpPtr step = simplify(substitute(expression, {{range, range->self() + 1}}) - expression);
  if (!step->is_const()) return std::nullopt;
  return static_cast<int64_t>(step->const_int());
}

}  // namespace kiln
