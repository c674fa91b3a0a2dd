// Unit tests for the rule tables of the symbolic simplifier (src/passes/symbolic*.cpp): for every
// rule an input graph and its printed result, for guarded rules a graph that the guard must keep
// as it is, and a coverage check that every rule of every algebraic table fires in some case.
#include <doctest/doctest.h>

#include <cmath>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "ir/verifier.h"
#include "passes/symbolic.h"
#include "rewrite/graph_rewrite.h"
#include "support/ir_test_helpers.h"

namespace kiln {
namespace {

// ---------------------------------------------------------------------------------------------
// Running a case and tracing the rules that fired
// ---------------------------------------------------------------------------------------------

// What a case runs under: the table of its rule alone, or with the folding table in front (as in
// symbolic()), since many rules leave arithmetic on constants to folding (they build `x*(c1*c2)`).
// The interplay of the tables is tested through simplify() further down.
enum class Under { Table, TableAndFolding };

// A table a case runs under, and the tables it is made of in order. Composing tables with `+`
// copies their rules, so a fired rule is traced back to the original by its position.
struct RunTable {
  const PatternMatcher* table;
  std::vector<const PatternMatcher*> parts;
};

// The seven tables of the symbolic simplifier, in the order symbolic() applies them.
std::vector<const PatternMatcher*> symbolic_parts() {
  return {&constant_folding_rules(), &identity_rules(), &range_rules(), &canonical_rules(),
          &divmod_rules(), &comparison_rules(), &valid_rules()};
}

// Every table a case may run under: each algebraic table alone and behind the folding table. They
// live as long as the program, so the rule pointers in a RewriteStats stay meaningful across cases.
const std::vector<RunTable>& run_tables() {
  static std::deque<PatternMatcher> composed;  // a deque keeps their addresses stable
  static const std::vector<RunTable> tables = [] {
    std::vector<RunTable> result;
    for (const PatternMatcher* table : algebraic_rule_tables()) {
      result.push_back({table, {table}});
      if (table == &constant_folding_rules()) continue;
      composed.push_back(constant_folding_rules() + *table);
      result.push_back({&composed.back(), {&constant_folding_rules(), table}});
    }
    return result;
  }();
  return tables;
}

const PatternMatcher& table_for(const PatternMatcher& table, Under under) {
  size_t part_count = under == Under::Table ? 1 : 2;
  for (const RunTable& run : run_tables())
    if (run.parts.size() == part_count && run.parts.back() == &table) return *run.table;
  FAIL("no run table for '", table.name(), "'");
  return table;
}

// The rule of one of the original tables that `fired` (a rule of a run table) is a copy of.
const Rule* original_rule(const Rule* fired) {
  std::less<const Rule*> before;
  for (const RunTable& run : run_tables()) {
    const std::vector<Rule>& rules = run.table->rules();
    if (before(fired, rules.data()) || !before(fired, rules.data() + rules.size())) continue;
    size_t position = static_cast<size_t>(fired - rules.data());
    for (const PatternMatcher* part : run.parts) {
      if (position < part->rules().size()) return &part->rules()[position];
      position -= part->rules().size();
    }
  }
  return nullptr;
}

// How often each original rule fired.
std::unordered_map<const Rule*, uint64_t> fired_originals(const RewriteStats& stats) {
  std::unordered_map<const Rule*, uint64_t> fired;
  for (const auto& [rule, times] : stats.fired_by_rule) {
    const Rule* original = original_rule(rule);
    REQUIRE_MESSAGE(original != nullptr, "a fired rule belongs to no known table");
    fired[original] += times;
  }
  return fired;
}

// Runs a rewrite; an exception (a rewrite loop, a failed verification) becomes a failed check and
// a null result, so that one broken case does not hide the ones after it.
UOpPtr run_checked(const std::function<UOpPtr()>& rewrite) {
  try {
    return rewrite();
  } catch (const std::exception& error) {
    FAIL_CHECK("the rewrite threw: ", error.what());
    return nullptr;
  }
}

UOpPtr rewrite_under(const UOpPtr& node, const PatternMatcher& table, Under under, RewriteStats& stats) {
  return run_checked([&] {
    return graph_rewrite(node, table_for(table, under),
                         {.pass_name = "test_symbolic_rules", .stats = &stats, .count_rules = true, .spec = &ir_spec()});
  });
}

// The rule of `table` whose doc is `doc` (the cases name their rule by its algebra).
const Rule* rule_by_doc(const PatternMatcher& table, std::string_view doc) {
  const Rule* found = nullptr;
  for (const Rule& rule : table.rules()) {
    if (rule.doc != doc) continue;
    if (found != nullptr) FAIL("two rules of '", table.name(), "' have the doc '", doc, "'");
    found = &rule;
  }
  return found;
}

// ---------------------------------------------------------------------------------------------
// Value check: a rewrite must not change the value anywhere in the variables' ranges
// ---------------------------------------------------------------------------------------------

bool same_value(const ScalarValue& a, const ScalarValue& b) {
  if (a.dtype != b.dtype) return false;
  if (!a.dtype.is_float()) return a.integer == b.integer;
  if (a.real != a.real) return b.real != b.real;  // NaN
  return a.real == b.real && std::signbit(a.real) == std::signbit(b.real);
}

std::string render_value(const ScalarValue& value) {
  if (value.dtype.is_float()) return std::to_string(value.real);
  return std::to_string(static_cast<int64_t>(value.integer));
}

// Evaluates `before` and `after` at every point of the (small) box of their DEFINE_VARs and checks
// that they agree wherever `before` is defined. Graphs with other leaves (RANGE, INDEX) cannot be
// evaluated and are skipped. The float leaves of the cases are small integers, so the float rules
// (signed zeros, NaN) are checked by their expected output instead.
void check_same_values(const UOpPtr& before, const UOpPtr& after) {
  std::vector<const UOp*> variables;
  std::unordered_map<std::string, const UOp*> by_name;
  for (const UOp* node : toposort(before)) {
    if (node->op() != Ops::DEFINE_VAR) continue;
    // Values are given by name: two variables with one name would be one value.
    auto [entry, inserted] = by_name.emplace(node->arg_variable().name, node);
    if (!inserted) {
      FAIL_CHECK("two variables named '", node->arg_variable().name, "' in one case");
      return;
    }
    variables.push_back(node);
  }
  int128 points = 1;
  for (const UOp* v : variables) points *= v->arg_variable().max - v->arg_variable().min + 1;
  if (points > 20000) return;
  std::unordered_map<std::string, int128> values;
  for (const UOp* v : variables) values[v->arg_variable().name] = v->arg_variable().min;
  for (int128 point = 0; point < points; ++point) {
    std::optional<ScalarValue> expected = evaluate(before, values);
    std::optional<ScalarValue> actual = expected ? evaluate(after, values) : std::nullopt;
    if (expected && (!actual || !same_value(*expected, *actual))) {
      // Report the first point that differs only; the rest of the case's checks still run.
      std::string point_text;
      for (const auto& [name, value] : values)
        point_text += name + "=" + std::to_string(static_cast<int64_t>(value)) + " ";
      FAIL_CHECK("the rewrite changed the value at ", point_text, "from ", render_value(*expected), " to ",
                 actual ? render_value(*actual) : "undefined", " (", render_expr(before), " became ",
                 render_expr(after), ")");
      return;
    }
    // Next point: count through the box like an odometer.
    for (const UOp* v : variables) {
      int128& value = values[v->arg_variable().name];
      if (value < v->arg_variable().max) {
        ++value;
        break;
      }
      value = v->arg_variable().min;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

struct RuleCase {
  std::string name;                     // what the case shows
  const PatternMatcher& (*table)();     // the table that holds the rule
  std::string rule;                     // the rule's doc
  Under under;
  std::function<UOpPtr()> build;
  std::string expected;                 // render_expr of the result
  bool fires = true;                    // false: the rule must not fire (a guard or a dtype blocks it)
};

// Leaves used throughout, named after what they print so that a case reads like its expectation:
// index variables print as their names, floats as a cast of an i32 variable ("(f32)a"), bools as a
// comparison of two index variables ("p<q").
UOpPtr i() { return variable("i", 0, 9); }
UOpPtr j() { return variable("j", 0, 9); }
UOpPtr j4() { return variable("j", 0, 3); }   // j < 4: a remainder-sized term
UOpPtr s() { return variable("s", -9, 9); }   // may be negative
UOpPtr n() { return variable("n", 1, 9); }    // never zero
UOpPtr a32() { return variable("a", -100, 100, dtypes::i32); }
UOpPtr b32() { return variable("b", -100, 100, dtypes::i32); }
UOpPtr u8v() { return variable("u", 0, 255, dtypes::u8); }
UOpPtr v8v() { return variable("v", 0, 255, dtypes::u8); }
UOpPtr f() { return cast(variable("a", -3, 3, dtypes::i32), dtypes::f32); }
UOpPtr g() { return cast(variable("b", -3, 3, dtypes::i32), dtypes::f32); }
UOpPtr fc(double value) { return const_float(dtypes::f32, value); }
UOpPtr ic(int64_t value) { return const_int(dtypes::index, value); }
// A signal of any length from 10 to 3199 and the loop over the windows of a 3-tap stride-2 conv.
UOpPtr signal() { return variable("n", 10, 3199); }
UOpPtr signal_window() { return range((signal() + 1) / 2 + -1, 0); }
UOpPtr i32c(int64_t value) { return const_int(dtypes::i32, value); }
UOpPtr pq() { return lt(variable("p", 0, 9), variable("q", 0, 9)); }

using TableGetter = const PatternMatcher& (*)();
constexpr TableGetter folding = constant_folding_rules, identities = identity_rules, ranges = range_rules,
            canonical = canonical_rules, divmod = divmod_rules, comparisons = comparison_rules, valid = valid_rules;
constexpr Under table_only = Under::Table, with_folding = Under::TableAndFolding;

std::vector<RuleCase> constant_folding_cases() {
  const std::string fold = "op(c1, c2, …) → c";
  return {
      {"index arithmetic", folding, fold, table_only, [] { return ic(3) * ic(4) + ic(5); }, "17"},
      {"i32 wraps on overflow", folding, fold, table_only, [] { return i32c(2147483647) + 1; }, "-2147483648"},
      {"u8 wraps", folding, fold, table_only, [] { return const_int(dtypes::u8, 200) + const_int(dtypes::u8, 100); }, "44"},
      {"division truncates toward zero", folding, fold, table_only, [] { return i32c(-7) / 2; }, "-3"},
      {"remainder takes the dividend's sign", folding, fold, table_only, [] { return i32c(-7) % 2; }, "-1"},
      {"f32 product", folding, fold, table_only, [] { return fc(1.5) * fc(2.0); }, "3.0"},
      {"f32 sum rounds to f32", folding, fold, table_only, [] { return fc(0.1) + fc(0.2); }, "0.30000001192092896"},
      {"-0.0 + 0.0 is +0.0", folding, fold, table_only, [] { return fc(-0.0) + fc(0.0); }, "0.0"},
      {"float to int cast truncates", folding, fold, table_only, [] { return cast(fc(-2.75), dtypes::i32); }, "-2"},
      {"int to u8 cast wraps", folding, fold, table_only, [] { return cast(i32c(300), dtypes::u8); }, "44"},
      {"comparison of constants", folding, fold, table_only, [] { return lt(ic(3), ic(4)); }, "true"},
      {"bool ops", folding, fold, table_only, [] { return logical_not(const_bool(true)) | const_bool(false); }, "false"},
      {"where on constants", folding, fold, table_only, [] { return where(const_bool(false), ic(1), ic(2)); }, "2"},
      // Undefined or backend-defined results stay in the graph.
      {"division by zero is not folded", folding, fold, table_only, [] { return i32c(1) / 0; }, "1/0", false},
      {"remainder by zero is not folded", folding, fold, table_only, [] { return ic(1) % 0; }, "1%0", false},
      {"float max is not folded (NaN is the backend's)", folding, fold, table_only,
       [] { return maximum(fc(1.0), fc(2.0)); }, "max(1.0, 2.0)", false},
      {"transcendentals are not folded", folding, fold, table_only,
       [] { return alu(Ops::EXP2, fc(1.0)); }, "exp2(1.0)", false},
      {"out-of-range float to int cast is not folded", folding, fold, table_only,
       [] { return cast(fc(1e10), dtypes::i32); }, "(i32)10000000000.0", false},

      {"where(true, …) picks the first branch", folding, "where(true, x, y) → x", table_only,
       [] { return where(const_bool(true), i(), j()); }, "i"},
      {"where(false, …) picks the second branch", folding, "where(false, x, y) → y", table_only,
       [] { return where(const_bool(false), i(), j()); }, "j"},
      {"a non-constant condition stays", folding, "where(false, x, y) → y", table_only,
       [] { return where(pq(), i(), j()); }, "p<q ? i : j", false},
  };
}

std::vector<RuleCase> identity_cases() {
  return {
      {"index", identities, "x+0 → x (integers; for floats -0+0 is +0)", table_only, [] { return i() + 0; }, "i"},
      {"i32, zero first", identities, "x+0 → x (integers; for floats -0+0 is +0)", table_only,
       [] { return 0 + a32(); }, "a"},
      {"u8", identities, "x+0 → x (integers; for floats -0+0 is +0)", table_only, [] { return u8v() + 0; }, "u"},
      {"f32 x+0 stays: -0.0+0.0 is +0.0 (regression)", identities, "x+0 → x (integers; for floats -0+0 is +0)", table_only,
       [] { return f() + 0; }, "(f32)a+0.0", false},

      {"f32", identities, "x+(-0.0) → x", table_only, [] { return f() + fc(-0.0); }, "(f32)a"},
      {"f32, -0.0 first", identities, "x+(-0.0) → x", table_only, [] { return fc(-0.0) + f(); }, "(f32)a"},
      {"f32 x+(+0.0) is not x+(-0.0) (regression: the pattern's == took +0.0)", identities, "x+(-0.0) → x", table_only,
       [] { return f() + fc(0.0); }, "(f32)a+0.0", false},

      {"index", identities, "x-0 → x (integers)", table_only, [] { return i() - 0; }, "i"},
      {"f32: x-(+0.0) is x, also for x = -0.0", identities, "x-0.0 → x (floats; not x-(-0.0), which turns -0.0 into +0.0)", table_only, [] { return f() - fc(0.0); }, "(f32)a"},
      {"f32 x-(-0.0) stays: -0.0-(-0.0) is +0.0 (regression: constant(0) took -0.0)", identities, "x-0.0 → x (floats; not x-(-0.0), which turns -0.0 into +0.0)", table_only,
       [] { return f() - fc(-0.0); }, "(f32)a-(-0.0)", false},

      {"index", identities, "x*1 → x", table_only, [] { return i() * 1; }, "i"},
      {"one first", identities, "x*1 → x", table_only, [] { return 1 * a32(); }, "a"},
      {"f32 (exact under IEEE)", identities, "x*1 → x", table_only, [] { return f() * fc(1.0); }, "(f32)a"},

      {"index", identities, "x*0 → 0 (integers)", table_only, [] { return i() * 0; }, "0"},
      {"i32", identities, "x*0 → 0 (integers)", table_only, [] { return 0 * a32(); }, "0"},
      {"f32 stays: NaN*0 is NaN and -1*0 is -0", identities, "x*0 → 0 (integers)", table_only,
       [] { return f() * 0; }, "(f32)a*0.0", false},

      {"index", identities, "x/1 → x", table_only, [] { return s() / 1; }, "s"},
      {"f32", identities, "x/1.0 → x", table_only, [] { return f() / 1; }, "(f32)a"},

      {"index", identities, "x%1 → 0", table_only, [] { return i() % 1; }, "0"},
      {"i32, negative values too", identities, "x%1 → 0", table_only, [] { return a32() % 1; }, "0"},

      {"index", identities, "x-x → 0 (integers)", table_only, [] { return i() - i(); }, "0"},
      {"u8", identities, "x-x → 0 (integers)", table_only, [] { return u8v() - u8v(); }, "0"},
      {"f32 stays: inf-inf is NaN", identities, "x-x → 0 (integers)", table_only,
       [] { return f() - f(); }, "(f32)a-(f32)a", false},

      {"positive divisor", identities, "x/x → 1 when x is never 0", table_only, [] { return n() / n(); }, "1"},
      {"negative divisor", identities, "x/x → 1 when x is never 0", table_only,
       [] { return variable("m", -9, -1) / variable("m", -9, -1); }, "1"},
      {"x may be 0: stays", identities, "x/x → 1 when x is never 0", table_only, [] { return i() / i(); }, "i/i",
       false},

      {"f32", identities, "-(-x) → x", table_only, [] { return -(-f()); }, "(f32)a"},
      {"i32 (wraps back)", identities, "-(-x) → x", table_only, [] { return -(-a32()); }, "a"},
      {"bool", identities, "!!x → x", table_only, [] { return logical_not(logical_not(pq())); }, "p<q"},
      {"i32 bitwise not", identities, "!!x → x", table_only, [] { return logical_not(logical_not(a32())); }, "a"},
      {"index", identities, "max(x, x) → x", table_only, [] { return maximum(i(), i()); }, "i"},
      {"f32", identities, "max(x, x) → x", table_only, [] { return maximum(f(), f()); }, "(f32)a"},
      {"index", identities, "x<x → false", table_only, [] { return lt(i(), i()); }, "false"},
      {"f32 (NaN<NaN is false too)", identities, "x<x → false", table_only, [] { return lt(f(), f()); }, "false"},
      {"index", identities, "x!=x → false (integers)", table_only, [] { return ne(i(), i()); }, "false"},
      {"f32 stays: NaN!=NaN is true", identities, "x!=x → false (integers)", table_only,
       [] { return ne(f(), f()); }, "(f32)a!=(f32)a", false},
      {"i32", identities, "x==x → true (integers)", table_only, [] { return eq(a32(), a32()); }, "true"},
      {"f32 stays: NaN==NaN is false", identities, "x==x → true (integers)", table_only,
       [] { return eq(f(), f()); }, "(f32)a==(f32)a", false},
      {"index", identities, "where(c, y, y) → y", table_only, [] { return where(pq(), i(), i()); }, "i"},
      {"f32", identities, "where(c, y, y) → y", table_only, [] { return where(pq(), f(), f()); }, "(f32)a"},

      {"i32", identities, "x&x → x", table_only, [] { return a32() & a32(); }, "a"},
      {"bool", identities, "x&x → x", table_only, [] { return pq() & pq(); }, "p<q"},
      {"i32", identities, "x|x → x", table_only, [] { return a32() | a32(); }, "a"},
      {"bool", identities, "x|x → x", table_only, [] { return pq() | pq(); }, "p<q"},
      {"i32", identities, "x^x → 0", table_only, [] { return a32() ^ a32(); }, "0"},
      {"bool", identities, "x^x → false", table_only, [] { return pq() ^ pq(); }, "false"},
      {"i32", identities, "x|0 → x", table_only, [] { return a32() | 0; }, "a"},
      {"u8, zero first", identities, "x|0 → x", table_only, [] { return 0 | u8v(); }, "u"},
      {"i32", identities, "x^0 → x", table_only, [] { return a32() ^ 0; }, "a"},
      {"i32", identities, "x&0 → 0", table_only, [] { return a32() & 0; }, "0"},
      {"bool", identities, "x&true → x", table_only, [] { return pq() & 1; }, "p<q"},
      {"bool", identities, "x&false → false", table_only, [] { return pq() & 0; }, "false"},
      {"bool", identities, "x|true → true", table_only, [] { return pq() | 1; }, "true"},
      {"bool", identities, "x|false → x", table_only, [] { return const_bool(false) | pq(); }, "p<q"},
      {"bool", identities, "x^false → x", table_only, [] { return pq() ^ 0; }, "p<q"},
      {"bool", identities, "x^true → !x", table_only, [] { return pq() ^ 1; }, "!(p<q)"},
      {"i32 ^ -1 is not a bool rule", identities, "x^true → !x", table_only, [] { return a32() ^ -1; }, "a^-1",
       false},

      {"i32 to i32", identities, "cast(x) to x's own dtype → x", table_only, [] { return cast(a32(), dtypes::i32); },
       "a"},
      {"a widening cast stays", identities, "cast(x) to x's own dtype → x", table_only,
       [] { return cast(a32(), dtypes::i64); }, "(i64)a", false},
  };
}

std::vector<RuleCase> range_cases() {
  const std::string single = "x → c when vmin(x) == vmax(x) == c";
  const std::string single_bool = "b → true/false when its range is one value";
  return {
      {"a variable with one value", ranges, single, table_only, [] { return variable("k", 5, 5); }, "5"},
      {"i/10 for i in [0, 9]", ranges, single, table_only, [] { return i() / 10; }, "0"},
      {"a loop of one iteration", ranges, single, table_only, [] { return range(1, 0); }, "0"},
      {"i32 product with one value", ranges, single, table_only,
       [] { return variable("k", 3, 3, dtypes::i32) * 2; }, "6"},
      {"i in [0, 9] stays", ranges, single, table_only, [] { return i() + 1; }, "i+1", false},

      {"i < 10 for i in [0, 9]", ranges, single_bool, table_only, [] { return lt(i(), 10); }, "true"},
      {"i < 0 for i in [0, 9]", ranges, single_bool, table_only, [] { return lt(i(), 0); }, "false"},
      {"disjoint ranges are unequal", ranges, single_bool, table_only,
       [] { return ne(i(), variable("h", 10, 20)); }, "true"},
      {"i < 5 stays", ranges, single_bool, table_only, [] { return lt(i(), 5); }, "i<5", false},

      {"i%10 for i in [0, 9]", ranges, "x%c → x when 0 <= x < c", table_only, [] { return i() % 10; }, "i"},
      {"i32", ranges, "x%c → x when 0 <= x < c", table_only,
       [] { return variable("k", 0, 15, dtypes::i32) % 16; }, "k"},
      {"i%9 stays: i may be 9", ranges, "x%c → x when 0 <= x < c", table_only, [] { return i() % 9; }, "i%9", false},
      {"s%10 stays: s may be negative", ranges, "x%c → x when 0 <= x < c", table_only,
       [] { return s() % 10; }, "s%10", false},

      {"i%-10", ranges, "x%c → x when 0 <= x < -c", table_only, [] { return i() % -10; }, "i"},
      {"i%-9 stays: i may be 9", ranges, "x%c → x when 0 <= x < -c", table_only, [] { return i() % -9; }, "i%-9",
       false},

      {"index", ranges, "max(x, y) → x when x >= y", table_only,
       [] { return maximum(variable("h", 5, 9), variable("l", 0, 5)); }, "h"},
      {"i32, smaller one first", ranges, "max(x, y) → x when x >= y", table_only,
       [] { return maximum(variable("l", 0, 5, dtypes::i32), variable("h", 5, 9, dtypes::i32)); }, "h"},
      {"overlapping ranges stay", ranges, "max(x, y) → x when x >= y", table_only,
       [] { return maximum(i(), variable("l", 0, 5)); }, "max(i, l)", false},
  };
}

std::vector<RuleCase> canonical_cases() {
  const std::string sum = "Σ terms → sorted Σ with like terms combined, constant last";
  return {
      {"index", canonical, "x-y → x+y*-1 (integers)", with_folding, [] { return i() - j(); }, "i+j*-1"},
      // u8 has no -1: the coefficient is its wrapped value.
      {"u8", canonical, "x-y → x+y*-1 (integers)", with_folding, [] { return u8v() - v8v(); }, "u+v*255"},
      {"f32 stays", canonical, "x-y → x+y*-1 (integers)", with_folding, [] { return f() - g(); }, "(f32)a-(f32)b",
       false},
      {"index", canonical, "-x → x*-1 (integers)", with_folding, [] { return -i(); }, "i*-1"},
      {"f32 stays", canonical, "-x → x*-1 (integers)", with_folding, [] { return -f(); }, "-(f32)a", false},
      {"index", canonical, "c*x → x*c", with_folding, [] { return 3 * i(); }, "i*3"},
      {"i32", canonical, "c*x → x*c", with_folding, [] { return 3 * a32(); }, "a*3"},
      {"index", canonical, "(x*c1)*c2 → x*(c1*c2)", with_folding, [] { return (i() * 3) * 4; }, "i*12"},
      {"i32 wraps", canonical, "(x*c1)*c2 → x*(c1*c2)", with_folding, [] { return (a32() * 65536) * 65536; }, "a*0"},
      {"index", canonical, "(x+y)*c → x*c+y*c", with_folding, [] { return (i() + j()) * 3; }, "i*3+j*3"},
      {"index", canonical, "(x+c1)+c2 → x+(c1+c2)", with_folding, [] { return (i() + 3) + 4; }, "i+7"},
      {"i32 wraps", canonical, "(x+c1)+c2 → x+(c1+c2)", with_folding, [] { return (a32() + 2147483647) + 1; },
       "a+-2147483648"},
      {"terms sorted", canonical, sum, with_folding, [] { return j() + i(); }, "i+j"},
      {"constant last", canonical, sum, with_folding, [] { return (i() + 2) + j(); }, "i+j+2"},
      {"like terms combined", canonical, sum, with_folding, [] { return (i() * 2 + j()) + i() * 3; }, "i*5+j"},
      {"cancelled terms dropped", canonical, sum, with_folding, [] { return (i() + j()) + i() * -1; }, "j"},
      {"i32 coefficients wrap", canonical, sum, with_folding, [] { return a32() * 2147483647 + a32(); },
       "a*-2147483648"},
      {"u8 coefficients wrap", canonical, sum, with_folding, [] { return u8v() * 200 + u8v() * 100; }, "u*44"},
      {"(x/c)*c + x%c is x, any sign", canonical, sum, with_folding, [] { return (s() / 4) * 4 + s() % 4; }, "s"},
      {"(x/c)*k + x%c with k ≠ c keeps both terms", canonical, sum, with_folding,
       [] { return (s() / 4) * 5 + s() % 4; }, "s/4*5+s%4", false},
      // A divisor that is not a constant (a MERGE of an image's rows and columns of any width).
      {"(x/d)*d + x%d is x, d a variable", canonical, sum, with_folding, [] { return (s() / n()) * n() + s() % n(); }, "s"},
      {"d*(x/d) + x%d is x", canonical, sum, with_folding, [] { return n() * (s() / n()) + s() % n() + j(); }, "j+s"},
      {"(x/d)*d + x%e with e ≠ d keeps both terms", canonical, sum, with_folding,
       [] { return (s() / n()) * n() + s() % (n() + 1); }, "s/n*n+s%(n+1)", false},
      {"f32 sums keep their order", canonical, sum, with_folding, [] { return g() + f(); }, "(f32)b+(f32)a", false},
  };
}

std::vector<RuleCase> divmod_cases() {
  const std::string fold_sum = "(Σ a_i·t_i + k) / d and % d: common factors out, multiples of d split off";
  return {
      {"index", divmod, "(x/c1)/c2 → x/(c1*c2)", with_folding, [] { return (i() / 2) / 3; }, "i/6"},
      {"negative x too", divmod, "(x/c1)/c2 → x/(c1*c2)", with_folding, [] { return (s() / 2) / 3; }, "s/6"},
      {"i32 stays (index only)", divmod, "(x/c1)/c2 → x/(c1*c2)", with_folding, [] { return (a32() / 2) / 3; },
       "a/2/3", false},

      {"index", divmod, "(x*c)/c → x", with_folding, [] { return (i() * 4) / 4; }, "i"},
      {"negative c", divmod, "(x*c)/c → x", with_folding, [] { return (s() * -3) / -3; }, "s"},

      {"index", divmod, "(x*c1)/c2 → x*(c1/c2) when c2 divides c1", with_folding, [] { return (s() * 6) / 3; }, "s*2"},
      {"3 does not divide 4: the common factor 2 comes out", divmod, "(x*c1)/c2 → x*(c1/c2) when c2 divides c1",
       with_folding, [] { return (i() * 6) / 4; }, "i*3/2", false},

      {"index", divmod, "(x*c1)/c2 → x/(c2/c1) when c1 divides c2", with_folding, [] { return (s() * 2) / 6; }, "s/3"},
      {"2 does not divide 7: stays", divmod, "(x*c1)/c2 → x/(c2/c1) when c1 divides c2", with_folding,
       [] { return (i() * 2) / 7; }, "i*2/7", false},

      {"index", divmod, "(x*c1)%c2 → 0 when c2 divides c1", with_folding, [] { return (s() * 6) % 3; }, "0"},
      {"4 does not divide 6: the common factor 2 comes out", divmod, "(x*c1)%c2 → 0 when c2 divides c1",
       with_folding, [] { return (i() * 6) % 4; }, "i%2*2", false},

      {"index", divmod, "(x%c1)%c2 → x%c2 when c2 divides c1", with_folding, [] { return (s() % 6) % 3; }, "s%3"},
      {"4 does not divide 6: stays", divmod, "(x%c1)%c2 → x%c2 when c2 divides c1", with_folding,
       [] { return (s() % 6) % 4; }, "s%6%4", false},

      {"index", divmod, "(x+y*c)%c → x%c when x, y >= 0", with_folding, [] { return (i() + j() * 4) % 4; }, "i%4"},
      {"x may be negative: stays", divmod, "(x+y*c)%c → x%c when x, y >= 0", with_folding,
       [] { return (s() + j() * 4) % 4; }, "(s+j*4)%4", false},
      {"index", divmod, "(x+y*c)/c → x/c+y when x, y >= 0", with_folding, [] { return (i() + j() * 4) / 4; },
       "i/4+j"},
      {"y may be negative: stays", divmod, "(x+y*c)/c → x/c+y when x, y >= 0", with_folding,
       [] { return (i() + s() * 4) / 4; }, "(i+s*4)/4", false},

      {"index", divmod, "(x+y*s)/s → x/s+y when s > 0 and x, y >= 0", with_folding, [] { return (i() + j() * n()) / n(); },
       "i/n+j"},
      {"s may be negative: stays", divmod, "(x+y*s)/s → x/s+y when s > 0 and x, y >= 0", with_folding,
       [] { return (i() + j() * s()) / s(); }, "(i+j*s)/s", false},
      {"index", divmod, "(x+y*s)%s → x%s when s > 0 and x, y >= 0", with_folding, [] { return (i() + j() * n()) % n(); },
       "i%n"},
      {"x may be negative: stays", divmod, "(x+y*s)%s → x%s when s > 0 and x, y >= 0", with_folding,
       [] { return (s() + j() * n()) % n(); }, "(s+j*n)%n", false},
      {"index", divmod, "(x/s)*s+x%s → x when s > 0", with_folding, [] { return (s() / n()) * n() + s() % n(); }, "s"},
      {"s may be negative: stays", divmod, "(x/s)*s+x%s → x when s > 0", with_folding,
       [] { return (j() / s()) * s() + j() % s(); }, "j/s*s+j%s", false},
      {"index", divmod, "(y*s)/s → y when s > 0", with_folding, [] { return (j() * n()) / n(); }, "j"},
      {"index", divmod, "(y*s)%s → 0 when s > 0", with_folding, [] { return (s() * n()) % n(); }, "0"},
      {"a loop over [0, n)", divmod, "r/s → 0 for r a loop over [0, s)", with_folding, [] { return range(n(), 0) / n(); }, "0"},
      {"a loop over [0, n+1) stays", divmod, "r/s → 0 for r a loop over [0, s)", with_folding,
       [] { return range(n() + 1, 0) / n(); }, "r0/n", false},
      {"a loop over [0, n)", divmod, "r%s → r for r a loop over [0, s)", with_folding, [] { return range(n(), 0) % n(); }, "r0"},
      {"index", divmod, "x%c → x%(-c) when c < 0", with_folding, [] { return s() % -4; }, "s%4"},
      {"positive c stays", divmod, "x%c → x%(-c) when c < 0", with_folding, [] { return s() % 4; }, "s%4", false},
      {"index", divmod, "x/c → -(x/(-c)) when c < 0", with_folding, [] { return s() / -4; }, "-(s/4)"},
      {"positive c stays", divmod, "x/c → -(x/(-c)) when c < 0", with_folding, [] { return s() / 4; }, "s/4", false},

      {"common factor out of a quotient", divmod, fold_sum, with_folding, [] { return (i() * 6 + 4) / 2; }, "i*3+2"},
      {"common factor out of a remainder, any sign", divmod, fold_sum, with_folding,
       [] { return (s() * 6 + 2) % 4; }, "(s*3+1)%2*2"},
      {"remainder term below the divisor vanishes from the quotient", divmod, fold_sum, with_folding,
       [] { return (i() * 8 + j4()) / 4; }, "i*2"},
      {"…and is the remainder", divmod, fold_sum, with_folding, [] { return (i() * 8 + j4()) % 4; }, "j"},
      {"a wide remainder term is split off", divmod, fold_sum, with_folding, [] { return (i() * 8 + j()) / 4; },
       "i*2+j/4"},
      {"a wide remainder term keeps its %", divmod, fold_sum, with_folding, [] { return (i() * 8 + j()) % 4; },
       "j%4"},
      {"the constant's multiple of d moves to the quotient", divmod, fold_sum, with_folding,
       [] { return (variable("k", 0, 2) + 5) / 4; }, "1"},
      {"the constant's rest stays in the remainder", divmod, fold_sum, with_folding,
       [] { return (variable("k", 0, 2) + 5) % 4; }, "k+1"},
      // i*4 - j is never negative, but its part that 4 does not divide is: floor and truncation
      // differ there ((4-1)/4 is 0, not 1 + (-1)/4 = 1).
      {"a negative remainder part stays", divmod, fold_sum, with_folding,
       [] { return (variable("i", 1, 9) * 4 + j4() * -1) / 4; }, "(i*4+j*-1)/4", false},
      // Under % the coefficients are taken modulo d instead: -1 ≡ 3, and j*3 is never negative.
      {"a negative coefficient is taken modulo d under %", divmod, fold_sum, with_folding,
       [] { return (variable("i", 1, 9) * 4 + j4() * -1) % 4; }, "j*3%4"},
      // A convolution's window index: (r + 11k) % 10 with r < 8, k < 3 is r + k.
      {"coefficients modulo d, then one bucket", divmod, fold_sum, with_folding,
       [] { return (variable("r", 0, 7) + variable("k", 0, 2) * 11) % 10; }, "k+r"},
      {"a possibly negative numerator stays", divmod, fold_sum, with_folding, [] { return (s() * 8 + j4()) / 4; },
       "(s*8+j)/4", false},
      // Attention heads read through (h, s, d) → (s, h·d): (j·128 + r) / 8192 with r < 128 is j/64.
      {"a remainder term below a common factor of d: the quotient", divmod, fold_sum, with_folding,
       [] { return (variable("j", 0, 767) * 128 + variable("r", 0, 127)) / 8192; }, "j/64"},
      {"…and the remainder", divmod, fold_sum, with_folding,
       [] { return (variable("j", 0, 767) * 128 + variable("r", 0, 127)) % 8192; }, "j%64*128+r"},
      {"a remainder term reaching the common factor stays", divmod, fold_sum, with_folding,
       [] { return (variable("j", 0, 767) * 128 + variable("r", 0, 128)) / 8192; }, "(j*128+r)/8192", false},
      {"nothing to split: stays", divmod, fold_sum, with_folding, [] { return (i() + j()) / 4; }, "(i+j)/4", false},
  };
}

std::vector<RuleCase> comparison_cases() {
  return {
      {"index", comparisons, "x+c1 < c2 → x < c2-c1", with_folding, [] { return lt(s() + 3, 5); }, "s<2"},
      {"i32 stays: x+c may wrap", comparisons, "x+c1 < c2 → x < c2-c1", with_folding, [] { return lt(a32() + 3, 5); },
       "a+3<5", false},
      {"index", comparisons, "c1 < x+c2 → c1-c2 < x", with_folding, [] { return lt(ic(5), s() + 3); }, "2<s"},
      {"i32 stays: x+c may wrap", comparisons, "c1 < x+c2 → c1-c2 < x", with_folding,
       [] { return lt(i32c(5), a32() + 3); }, "5<a+3", false},
      {"index", comparisons, "x*c1 < c2 → x < ceil(c2/c1)", with_folding, [] { return lt(s() * 4, 10); }, "s<3"},
      {"c2 <= 0 stays", comparisons, "x*c1 < c2 → x < ceil(c2/c1)", with_folding, [] { return lt(s() * 4, -10); },
       "s*4<-10", false},
      {"index", comparisons, "c1 < x*c2 → c1/c2 < x", with_folding, [] { return lt(ic(10), s() * 4); }, "2<s"},
      {"c1 < 0 stays", comparisons, "c1 < x*c2 → c1/c2 < x", with_folding, [] { return lt(ic(-10), s() * 4); },
       "-10<s*4", false},
      {"index", comparisons, "x/c1 < c2 → x < c2*c1 when x >= 0", with_folding, [] { return lt(i() / 4, 2); }, "i<8"},
      // s = -1: s/4 = 0 is not < 0 but s < 0 is.
      {"x may be negative: stays", comparisons, "x/c1 < c2 → x < c2*c1 when x >= 0", with_folding,
       [] { return lt(s() / 4, 0); }, "s/4<0", false},
      {"index", comparisons, "(x<c1) & (x<c2) → x<c1 when c1 <= c2", with_folding,
       [] { return lt(i(), 3) & lt(i(), 5); }, "i<3"},
      {"i32, the tighter bound second", comparisons, "(x<c1) & (x<c2) → x<c1 when c1 <= c2", with_folding,
       [] { return lt(a32(), 5) & lt(a32(), 3); }, "a<3"},
      {"different variables stay", comparisons, "(x<c1) & (x<c2) → x<c1 when c1 <= c2", with_folding,
       [] { return lt(i(), 3) & lt(j(), 5); }, "i<3&j<5", false},
      {"index", comparisons, "(c1<x) & (c2<x) → c1<x when c1 >= c2", with_folding,
       [] { return lt(ic(2), i()) & lt(ic(4), i()); }, "4<i"},
      {"index", comparisons, "(x<c1) & (c2<x) → false when c2 >= c1-1", with_folding,
       [] { return lt(i(), 3) & lt(ic(2), i()); }, "false"},
      {"i = 2 satisfies both: stays", comparisons, "(x<c1) & (c2<x) → false when c2 >= c1-1", with_folding,
       [] { return lt(i(), 3) & lt(ic(1), i()); }, "i<3&1<i", false},
      {"index", comparisons, "!(x<y) → y-1 < x (index)", with_folding, [] { return logical_not(lt(i(), j())); },
       "j+-1<i"},
      {"i32 stays: y-1 may wrap", comparisons, "!(x<y) → y-1 < x (index)", with_folding,
       [] { return logical_not(lt(a32(), b32())); }, "!(a<b)", false},
      // A strided conv over a signal of any length n: o < (n+1)/2 - 1 windows, t < 3 taps, every
      // read 2·o + t lies inside n; one more and an odd n reads past it.
      {"a window's read is inside the signal", comparisons,
       "x < y → true/false when decided with each loop variable below its symbolic end", with_folding,
       [] { return lt(signal_window() * 2 + range(3, 1), signal()); }, "true"},
      {"o + n < n is false for a loop variable o", comparisons,
       "x < y → true/false when decided with each loop variable below its symbolic end", with_folding,
       [] { return lt(signal_window() + signal(), signal()); }, "false"},
      // The second of two stacked strided convs: its input has n/5 - 1 samples, its windows n/10 - 1.
      {"a window's read is inside the first conv's output", comparisons,
       "x < y → true/false when decided with each loop variable below its symbolic end", with_folding,
       [] { return lt(range(signal() / 10 + -1, 0) * 2 + range(3, 1), signal() / 5 + -1); }, "true"},
      {"one past the window may read past the signal: stays", comparisons,
       "x < y → true/false when decided with each loop variable below its symbolic end", with_folding,
       [] { return lt(signal_window() * 2 + range(3, 1) + 1, signal()); }, "r0*2+r1+1<n", false},
  };
}

// An INDEX into a float buffer with a valid mask.
UOpPtr index_node(const UOpPtr& offset, const UOpPtr& valid) {
  UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(), {}, int64_t{0});
  return UOp::make(Ops::INDEX, dtypes::f32.ptr(), {buffer, offset, valid});
}

std::vector<RuleCase> valid_cases() {
  const std::string where_rule = "where(valid, x, y) → where(valid, x simplified assuming valid, y)";
  const std::string index_rule = "index(buffer, offset, valid) → offset simplified assuming valid";
  return {
      {"x < c bounds x from above", valid, where_rule, table_only, [] { return where(lt(i(), 4), i() % 4, ic(0)); },
       "i<4 ? i : 0"},
      {"c < x bounds x from below", valid, where_rule, table_only, [] { return where(lt(ic(5), i()), i() / 6, ic(7)); },
       "5<i ? 1 : 7"},
      {"clauses joined by & narrow together", valid, where_rule, table_only,
       [] { return where(lt(ic(3), s()) & lt(s(), 8), s() / 4, ic(0)); }, "3<s&s<8 ? 1 : 0"},
      {"a condition that never holds picks the other branch", valid, where_rule, table_only,
       [] { return where(lt(i(), 2) & lt(ic(5), i()), i(), j()); }, "j"},
      {"a bound on an index sum bounds its variable: i+1 < 4 gives i <= 2", valid, where_rule, table_only,
       [] { return where(lt(i() + 1, 4), i() % 4, ic(0)); }, "i+1<4 ? i : 0"},
      {"a lower bound on a sum with a negative coefficient bounds from above: 3 < -i+10 gives i <= 6", valid,
       where_rule, table_only, [] { return where(lt(ic(3), i() * -1 + 10), i() % 7, ic(0)); }, "3<i*-1+10 ? i : 0"},
      {"a bound on a sum of a non-variable term stays", valid, where_rule, table_only,
       [] { return where(lt(i() * i() + 1, 4), i() % 4, ic(0)); }, "i*i+1<4 ? i%4 : 0", false},
      {"a bound the range implies already stays", valid, where_rule, table_only,
       [] { return where(lt(i(), 12), i() % 4, ic(0)); }, "i<12 ? i%4 : 0", false},
      // Regressions: the stand-in for a narrowed node sorts elsewhere than the node (another name,
      // DEFINE_VAR instead of RANGE), so the restored sum came back out of canonical order and the
      // simplifier rewrote it back and forth until the loop guard stopped it.
      {"a narrowed RANGE keeps the sum in canonical order", valid, where_rule, table_only,
       [] { return where(lt(range(4, 1), 2), range(8, 0) * 2 + range(4, 1) % 2, ic(-1)); }, "r1<2 ? r0*2+r1 : -1"},
      {"two narrowed variables keep their order", valid, where_rule, table_only,
       [] { return where(lt(s(), 3) & lt(variable("t", -7, 7), 0), (s() + variable("t", -7, 7)) / 8, ic(0)); },
       "s<3&t<0 ? (s+t)/8 : 0", false},
      {"…with the clauses the other way round", valid, where_rule, table_only,
       [] { return where(lt(variable("t", -7, 7), 0) & lt(s(), 3), (s() + variable("t", -7, 7)) / 8, ic(0)); },
       "t<0&s<3 ? (s+t)/8 : 0", false},
      // Regression: nested guards that narrow two variables to the same range must not make them
      // one variable (i-j would become 0).
      {"nested guards keep their variables apart", valid, where_rule, table_only,
       [] { return where(lt(i(), 6), where(lt(j(), 6), i() - j(), ic(100)), ic(100)); },
       "i<6 ? (j<6 ? i+j*-1 : 100) : 100"},
      {"an offset with a narrowed RANGE stays canonical", valid, index_rule, table_only,
       [] { return index_node(range(8, 0) * 2 + range(4, 1) % 2, lt(range(4, 1), 2)); },
       "index(define_global(0), r0*2+r1, r1<2)"},
      {"offset under its mask", valid, index_rule, table_only,
       [] { return index_node(i() % 4 + j() / 10, lt(i(), 4)); }, "index(define_global(0), i, i<4)"},
      {"offset under a mask that bounds nothing stays", valid, index_rule, table_only,
       [] { return index_node(i() % 4, lt(j(), 4)); }, "index(define_global(0), i%4, j<4)", false},
  };
}

const std::vector<RuleCase>& all_cases() {
  static const std::vector<RuleCase> cases = [] {
    std::vector<RuleCase> result;
    for (auto list : {constant_folding_cases(), identity_cases(), range_cases(), canonical_cases(), divmod_cases(),
                      comparison_cases(), valid_cases()})
      result.insert(result.end(), list.begin(), list.end());
    return result;
  }();
  return cases;
}

// Runs one case: the printed result, whether its rule fired as the case says, and (for graphs
// of small variables) that the rewrite kept the value.
void check_case(const RuleCase& c) {
  const PatternMatcher& table = c.table();
  INFO("table '", table.name(), "', rule '", c.rule, "': ", c.name);
  const Rule* rule = rule_by_doc(table, c.rule);
  if (rule == nullptr) {
    FAIL_CHECK("the table has no rule with this doc");
    return;
  }
  UOpPtr input = c.build();
  INFO("input: ", render_expr(input));
  RewriteStats own;
  UOpPtr result = rewrite_under(input, table, c.under, own);
  if (!result) return;
  CHECK_EXPR(result, c.expected);
  auto fired = fired_originals(own);
  if (c.fires) CHECK_MESSAGE(fired.count(rule) != 0, "the rule did not fire");
  else CHECK_MESSAGE(fired.count(rule) == 0, "the rule fired although it must not");
  check_same_values(input, result);
}

void check_table_cases(const PatternMatcher& table) {
  size_t count = 0;
  for (const RuleCase& c : all_cases()) {
    if (&c.table() != &table) continue;
    check_case(c);
    ++count;
  }
  CHECK(count > 0);
}

TEST_CASE("constant folding rules") { check_table_cases(constant_folding_rules()); }
TEST_CASE("identity rules") { check_table_cases(identity_rules()); }
TEST_CASE("range rules") { check_table_cases(range_rules()); }
TEST_CASE("canonical rules") { check_table_cases(canonical_rules()); }
TEST_CASE("divmod rules") { check_table_cases(divmod_rules()); }
TEST_CASE("comparison rules") { check_table_cases(comparison_rules()); }
TEST_CASE("valid rules") { check_table_cases(valid_rules()); }

TEST_CASE("valid rules leave a guarded value of more than 256 nodes alone, and simplify a smaller one") {
  // Simplifying under a mask re-simplifies the whole guarded value; past a size limit the rule
  // declines (always correct) so that nested masks in large graphs cannot compound the cost.
  auto guarded_with_terms = [](int terms) {
    UOpPtr value = i() % 4;
    for (int k = 0; k < terms; ++k) value = value + variable("t" + std::to_string(k), 0, 3) * (k + 2);
    return where(lt(i(), 4), value, ic(0));
  };
  UOpPtr large = guarded_with_terms(150);  // about 450 nodes
  CHECK(graph_rewrite(large, valid_rules()) == large);
  UOpPtr small = guarded_with_terms(3);
  UOpPtr simplified = graph_rewrite(small, valid_rules());
  REQUIRE(simplified != small);
  CHECK(render_expr(simplified).find("i%4") == std::string::npos);  // i < 4 made i%4 into i
}

TEST_CASE("symbolic() is the seven tables in order") {
  // symbolic.h promises this order, the simplifier's results depend on it (the first rule that
  // applies wins), and the cases test each table on its own: check the composition rule by rule.
  std::vector<const Rule*> expected;
  for (const PatternMatcher* table : symbolic_parts())
    for (const Rule& rule : table->rules()) expected.push_back(&rule);
  const std::vector<Rule>& composed = symbolic().rules();
  REQUIRE(composed.size() == expected.size());
  for (size_t k = 0; k < composed.size(); ++k) {
    CHECK(composed[k].doc == expected[k]->doc);
    CHECK(rule_location(composed[k]) == rule_location(*expected[k]));
  }
}

TEST_CASE("every rule of every algebraic table fires in some case") {
  RewriteStats stats;
  for (const RuleCase& c : all_cases())
    if (c.fires) rewrite_under(c.build(), c.table(), c.under, stats);
  auto fired = fired_originals(stats);
  size_t rules = 0;
  for (const PatternMatcher* table : algebraic_rule_tables()) {
    for (const Rule& rule : table->rules()) {
      ++rules;
      CHECK_MESSAGE(fired.count(&rule) != 0, "never fired: '", rule.doc, "' (", rule_location(rule), ") in table '",
                    table->name(), "'");
    }
  }
  CHECK(rules > 0);
}

// ---------------------------------------------------------------------------------------------
// Canonical forms that later stages rely on, through the whole simplifier
// ---------------------------------------------------------------------------------------------

struct FormCase {
  std::string name;
  std::function<UOpPtr()> build;
  std::string expected;
};

std::vector<FormCase> canonical_form_cases() {
  return {
      // Flattened index of a [10, 4] view: row and column come back.
      {"(i*4+j)/4 is the row", [] { return (i() * 4 + j4()) / 4; }, "i"},
      {"(i*4+j)%4 is the column", [] { return (i() * 4 + j4()) % 4; }, "j"},
      {"with the terms the other way round", [] { return (j4() + 4 * i()) / 4; }, "i"},
      {"row and column of a loop index", [] { return (range(10, 0) * 4 + range(4, 1)) / 4; }, "r0"},
      {"(x/c)*c + x%c is x", [] { return ((i() * 3 + j()) / 5) * 5 + (i() * 3 + j()) % 5; }, "i*3+j"},
      {"x%c + (x/c)*c in either order", [] { return s() % 4 + (s() / 4) * 4; }, "s"},
      {"a flattened 3-level index recombines", [] {
         UOpPtr t = variable("t", -50, 50);
         return (t / 12) * 12 + ((t / 3) % 4) * 3 + t % 3;
       }, "t"},
      {"sums sorted, constants last", [] { return ic(3) + j() + i() * 2 + 1; }, "i*2+j+4"},
      {"like terms combined", [] { return i() + j() + i() + i(); }, "i*3+j"},
      {"x - x inside a sum", [] { return i() + j() - i(); }, "j"},
      {"a difference of sums", [] { return (i() * 2 + j() + 3) - (i() + j() + 1); }, "i+2"},
      {"a nested product of sums", [] { return ((i() + 1) * 2 + j()) * 3; }, "i*6+j*3+6"},
      {"divisions of the same variable share a term", [] { return i() / 4 + i() / 4; }, "i/4*2"},
      {"a quotient and remainder of a 3-level index", [] {
         UOpPtr flat = i() * 12 + variable("k", 0, 2) * 4 + j4();
         return (flat / 4) % 3;
       }, "k"},
      {"the outer index of a 3-level index", [] {
         return (i() * 12 + variable("k", 0, 2) * 4 + j4()) / 12;
       }, "i"},
      {"a mask that a loop bound implies folds", [] { return lt(range(4, 0), 4); }, "true"},
      {"a mask under its own where", [] { return where(lt(i(), 4), (i() * 4 + j4()) / 16, ic(-1)); },
       "i<4 ? 0 : -1"},
      {"a guard on a loop index simplifies its arm", [] {
         return where(lt(range(4, 1), 2), range(8, 0) * 2 + range(4, 1) % 2, ic(-1));
       }, "r1<2 ? r0*2+r1 : -1"},
      {"f32: x*1 and -(-x) go, x+0.0 stays", [] { return -(-(f() * 1)) + 0; }, "(f32)a+0.0"},
      {"i32 sum with wrapping constants", [] { return a32() + 2147483647 + 1; }, "a+-2147483648"},
      // min is built as -max(-a, -b); the canonical form turns each negation into *-1.
      {"min of two index values", [] { return minimum(i(), j()); }, "max(i*-1, j*-1)*-1"},
      {"!(i<j) on index", [] { return logical_not(lt(i(), j())); }, "j+-1<i"},
  };
}

TEST_CASE("canonical forms through simplify") {
  for (const FormCase& c : canonical_form_cases()) {
    INFO("case: ", c.name);
    UOpPtr input = c.build();
    UOpPtr result = run_checked([&] { return simplify(input); });
    if (!result) continue;
    CHECK_EXPR(result, c.expected);
    check_same_values(input, result);
  }
}

TEST_CASE("simplify is idempotent: the result of simplify is its own fixed point") {
  std::vector<UOpPtr> inputs;
  for (const RuleCase& c : all_cases()) inputs.push_back(c.build());
  for (const FormCase& c : canonical_form_cases()) inputs.push_back(c.build());
  for (const UOpPtr& input : inputs) {
    UOpPtr once = run_checked([&] { return simplify(input); });
    if (!once) continue;
    UOpPtr twice = run_checked([&] { return simplify(once); });
    INFO("input: ", render_expr(input), "  once: ", render_expr(once), "  twice: ", render_expr(twice));
    CHECK(twice == once);
  }
}

TEST_CASE("a SimplifyMemo returns the simplifier's own results, each computed once, within bounds") {
  std::vector<UOpPtr> inputs;
  for (const FormCase& c : canonical_form_cases()) inputs.push_back(c.build());
  std::vector<UOpPtr> plain;
  for (const UOpPtr& input : inputs) plain.push_back(simplify(input));
  CHECK(SimplifyMemo::active() == nullptr);
  {
    SimplifyMemo memo;
    REQUIRE(SimplifyMemo::active() == &memo);
    for (size_t k = 0; k < inputs.size(); ++k) CHECK(simplify(inputs[k]) == plain[k]);
    size_t remembered = memo.size();
    CHECK(remembered >= inputs.size() / 2);  // distinct inputs (some cases share one)
    // Again: every result comes from the memo, so nothing new is remembered.
    for (size_t k = 0; k < inputs.size(); ++k) CHECK(simplify(inputs[k]) == plain[k]);
    CHECK(memo.size() == remembered);
    CHECK(memo.find(inputs[0].get()) == plain[0]);
    {
      SimplifyMemo inner;  // the innermost scope is used, and the outer one again after it
      CHECK(SimplifyMemo::active() == &inner);
      CHECK(simplify(inputs[0]) == plain[0]);
      CHECK(inner.size() == 1);
    }
    CHECK(SimplifyMemo::active() == &memo);
    // Past kMaxEntries it starts over instead of growing.
    for (int64_t k = 0; k < static_cast<int64_t>(SimplifyMemo::kMaxEntries) + 10; ++k) simplify(i() + ic(k));
    CHECK(memo.size() <= SimplifyMemo::kMaxEntries);
    CHECK(memo.size() > 0);
  }
  CHECK(SimplifyMemo::active() == nullptr);
}

}  // namespace
}  // namespace kiln
