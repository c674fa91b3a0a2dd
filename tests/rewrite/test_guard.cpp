// Unit tests of rule guards: evaluation of val/vmin/vmax, arithmetic and comparisons over a match's
// bindings, short-circuiting of && and ||, undefined steps (division by zero, non-constant val)
// making the guard false, and the printed text that rule listings and the Z3 verifier show.
#include <doctest/doctest.h>

#include <string>

#include "ir/build.h"
#include "rewrite/guard.h"
#include "support/error.h"

namespace kiln {
namespace {

// The pattern outlives every match: a Match refers to the names inside its pattern.
const UPat sum_pattern = UPat::var("x") + UPat::var("c");

// A match of `x + c` against `node`, kept alive with the node for the guard to read.
struct Bound {
  UOpPtr node;
  Match match;
};

Bound bind_sum(const UOpPtr& node) {
  Bound bound{node, {}};
  bound.match.start(node.get(), nullptr);
  bool matched = sum_pattern.matches(node.get(), bound.match);
  REQUIRE(matched);
  return bound;
}

std::string value_of(const GuardTerm& term, const Match& match) {
  std::optional<int128> value = term.evaluate(match);
  return value ? to_string(*value) : "undefined";
}

TEST_CASE("leaves: val, vmin, vmax, literals") {
  Bound bound = bind_sum(variable("x", -3, 12) + const_int(dtypes::index, 7));
  CHECK(value_of(val("c"), bound.match) == "7");
  CHECK(value_of(vmin("x"), bound.match) == "-3");
  CHECK(value_of(vmax("x"), bound.match) == "12");
  CHECK(value_of(vmin("c"), bound.match) == "7");
  CHECK(value_of(GuardTerm(-42), bound.match) == "-42");
  // val of a node that is not an integer constant is undefined.
  CHECK(value_of(val("x"), bound.match) == "undefined");
  Bound with_float = bind_sum(cast(variable("x", 0, 3), dtypes::f32) + const_float(dtypes::f32, 2.0));
  CHECK(value_of(val("c"), with_float.match) == "undefined");
  // Booleans and u64 read as their integer values.
  Bound with_bool = bind_sum(lt(variable("x", 0, 3), 2) + const_bool(true));
  CHECK(value_of(val("c"), with_bool.match) == "1");
  Bound with_u64 = bind_sum(variable("x", 0, 3, dtypes::u64) + UOp::make(Ops::CONST, dtypes::u64, {}, int64_t{-1}));
  CHECK(value_of(val("c"), with_u64.match) == "18446744073709551615");
  // A name the pattern did not bind is a bug in the rule.
  CHECK_THROWS_AS(val("nope").evaluate(bound.match), InternalError);
}

TEST_CASE("arithmetic and comparisons") {
  Bound bound = bind_sum(variable("x", -3, 12) + const_int(dtypes::index, 7));
  const Match& m = bound.match;
  CHECK(value_of(val("c") + 3, m) == "10");
  CHECK(value_of(val("c") - vmax("x"), m) == "-5");
  CHECK(value_of(val("c") * vmin("x"), m) == "-21");
  CHECK(value_of(-val("c"), m) == "-7");
  // Division truncates toward zero and % has the dividend's sign, like the IR's IDIV/MOD.
  CHECK(value_of(vmin("x") / 2, m) == "-1");
  CHECK(value_of(vmin("x") % 2, m) == "-1");
  CHECK(value_of(val("c") / -2, m) == "-3");
  CHECK(value_of(val("c") % -2, m) == "1");
  CHECK(value_of(val("c") < 8, m) == "1");
  CHECK(value_of(val("c") < 7, m) == "0");
  CHECK(value_of(val("c") <= 7, m) == "1");
  CHECK(value_of(val("c") > 7, m) == "0");
  CHECK(value_of(val("c") >= 7, m) == "1");
  CHECK(value_of(val("c") == 7, m) == "1");
  CHECK(value_of(val("c") != 7, m) == "0");
  CHECK(value_of(!(val("c") == 7), m) == "0");
  CHECK(value_of(!GuardTerm(0), m) == "1");
  CHECK(value_of(vmin("x") >= 0 || vmax("x") < val("c"), m) == "0");
  CHECK(value_of(vmin("x") < 0 && vmax("x") > val("c"), m) == "1");
  // Logical results are 0 or 1 whatever the operands' values.
  CHECK(value_of(GuardTerm(5) && GuardTerm(9), m) == "1");
  CHECK(value_of(GuardTerm(0) || GuardTerm(-4), m) == "1");
  // int128 arithmetic: no overflow at the edges of int64.
  Bound wide = bind_sum(variable("x", -9223372036854775807LL - 1, 9223372036854775807LL) + const_int(dtypes::index, 2));
  CHECK(value_of(vmax("x") * val("c"), wide.match) == "18446744073709551614");
  CHECK(value_of(vmin("x") - 1, wide.match) == "-9223372036854775809");
}

TEST_CASE("Guard::holds") {
  Bound bound = bind_sum(variable("x", 0, 9) + const_int(dtypes::index, 10));
  CHECK(Guard().holds(bound.match));
  CHECK(Guard().always());
  CHECK(when(vmin("x") >= 0 && vmax("x") < val("c")).holds(bound.match));
  CHECK_FALSE(when(vmax("x") >= val("c")).holds(bound.match));
  CHECK_FALSE(when(vmax("x") >= val("c")).always());
  // Any non-zero value holds.
  CHECK(when(val("c") - 3).holds(bound.match));
  CHECK_FALSE(when(val("c") - 10).holds(bound.match));
}

TEST_CASE("&& and || short-circuit, so guards can protect a division") {
  Bound zero = bind_sum(variable("x", 0, 9) + const_int(dtypes::index, 0));
  Bound five = bind_sum(variable("x", 0, 9) + const_int(dtypes::index, 5));
  // c != 0 && 10 / c > 1: the division is never evaluated when c is 0, so the value is 0 (false),
  // not undefined.
  GuardTerm protected_division = val("c") != 0 && GuardTerm(10) / val("c") > 1;
  CHECK(value_of(protected_division, zero.match) == "0");
  CHECK(value_of(protected_division, five.match) == "1");
  // c == 0 || 10 / c > 1: true when c is 0 although 10/0 is undefined.
  GuardTerm protected_or = val("c") == 0 || GuardTerm(10) / val("c") > 1;
  CHECK(value_of(protected_or, zero.match) == "1");
  CHECK(when(protected_or).holds(zero.match));
  CHECK(when(protected_or).holds(five.match));
  // Short-circuit also skips a non-constant val: x is a variable here.
  CHECK(value_of(GuardTerm(0) && val("x") > 0, five.match) == "0");
  CHECK(value_of(GuardTerm(1) || val("x") > 0, five.match) == "1");
  // The right side is evaluated when the left does not decide.
  CHECK(value_of(GuardTerm(1) && val("x") > 0, five.match) == "undefined");
  CHECK(value_of(GuardTerm(0) || val("x") > 0, five.match) == "undefined");
}

TEST_CASE("an undefined step makes the guard false, even under negation") {
  Bound zero = bind_sum(variable("x", 0, 9) + const_int(dtypes::index, 0));
  GuardTerm quotient = GuardTerm(10) / val("c");
  CHECK(value_of(quotient, zero.match) == "undefined");
  CHECK(value_of(GuardTerm(10) % val("c"), zero.match) == "undefined");
  CHECK_FALSE(when(quotient > 0).holds(zero.match));
  CHECK_FALSE(when(quotient <= 0).holds(zero.match));
  CHECK_FALSE(when(!(quotient > 0)).holds(zero.match));
  CHECK_FALSE(when(-quotient).holds(zero.match));
  CHECK_FALSE(when(quotient + 1 != 0).holds(zero.match));
  // A guard on a non-constant val is false whatever it says.
  CHECK_FALSE(when(val("x") == val("x")).holds(zero.match));
  CHECK_FALSE(when(!(val("x") == 3)).holds(zero.match));
}

TEST_CASE("text") {
  CHECK(Guard().text() == "true");
  CHECK(when(vmin("x") >= 0 && vmax("x") < val("c")).text() == "((vmin(x) >= 0) && (vmax(x) < c))");
  CHECK((val("c1") * val("c2") + -1).text() == "((c1 * c2) + -1)");
  CHECK((val("c") / 2 - val("c") % 2).text() == "((c / 2) - (c % 2))");
  CHECK((!(val("c") == 0) || vmin("x") <= vmax("y")).text() == "(!((c == 0)) || (vmin(x) <= vmax(y)))");
  CHECK((-val("c") != 3).text() == "(-(c) != 3)");
  CHECK((val("a") > val("b")).text() == "(a > b)");
  CHECK(GuardTerm(7).text() == "7");
  // The tree is available to tools such as the Z3 verifier.
  GuardTerm term = val("c") < 4;
  CHECK(term.node().kind == GuardTerm::Kind::Binary);
  CHECK(term.node().op == GuardTerm::Operator::Lt);
  CHECK(term.node().left->kind == GuardTerm::Kind::ConstValue);
  CHECK(term.node().left->name == "c");
  CHECK(term.node().right->literal == 4);
}

}  // namespace
}  // namespace kiln
