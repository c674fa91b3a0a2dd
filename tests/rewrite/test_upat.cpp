// Unit tests of UPat, the left-hand side of rewrite rules: op sets, dtype filters, arguments,
// named bindings, commutative matching with backtracking, all_sources, constant literals, and the
// printed description of a pattern.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ir/build.h"
#include "ir/printer.h"
#include "rewrite/upat.h"
#include "support/error.h"

namespace kiln {
namespace {

bool matches(const UPat& pattern, const UOpPtr& node) {
  Match match;
  match.start(node.get(), nullptr);
  return pattern.matches(node.get(), match);
}

// Matches and returns the bindings as "name=render" pairs, or "no match".
std::string bindings(const UPat& pattern, const UOpPtr& node) {
  Match match;
  match.start(node.get(), nullptr);
  if (!pattern.matches(node.get(), match)) return "no match";
  std::string text;
  for (size_t i = 0; i < match.size(); ++i)
    text += (i ? " " : "") + std::string(match.name_at(i)) + "=" + render_expr(match.node_at(i)->self());
  return text;
}

const UPat x = UPat::var("x"), y = UPat::var("y"), z = UPat::var("z");

TEST_CASE("op sets") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  CHECK(matches(UPat(Ops::ADD), a + b));
  CHECK_FALSE(matches(UPat(Ops::ADD), a * b));
  CHECK(matches(UPat::ops({Ops::ADD, Ops::MUL}), a * b));
  CHECK(matches(UPat::ops({Ops::ADD, Ops::MUL}), a + b));
  CHECK_FALSE(matches(UPat::ops({Ops::ADD, Ops::MUL}), a - b));
  CHECK(matches(UPat::ops(OpSet::group(OpGroup::Binary)), a - b));
  CHECK_FALSE(matches(UPat::ops(OpSet::group(OpGroup::Binary)), -a));
  CHECK(matches(UPat(), a));
  CHECK(matches(UPat(), a + b));
  CHECK(UPat().root_ops().size() == static_cast<size_t>(op_count));
  CHECK((x + 1).root_ops().size() == 1);
  CHECK((x + 1).root_ops().contains(Ops::ADD));
  CHECK(UPat::ops({Ops::ADD, Ops::MUL}).root_ops().size() == 2);
}

TEST_CASE("dtype filters") {
  struct Row {
    DType dtype;
    bool ints, index, fixed_ints, floats, bools;
  };
  const Row rows[] = {
      {dtypes::i8, true, false, true, false, false},     {dtypes::u32, true, false, true, false, false},
      {dtypes::i64, true, false, true, false, false},    {dtypes::index, true, true, false, false, false},
      {dtypes::f16, false, false, false, true, false},   {dtypes::bf16, false, false, false, true, false},
      {dtypes::f32, false, false, false, true, false},   {dtypes::bool_, false, false, false, false, true},
      {dtypes::i32.vec(4), true, false, true, false, false}, {dtypes::f32.vec(2), false, false, false, true, false},
      {dtypes::f32.ptr(), false, false, false, false, false}, {dtypes::void_, false, false, false, false, false},
  };
  for (const Row& row : rows) {
    INFO(row.dtype.name());
    UOpPtr node = UOp::make(Ops::NOOP, row.dtype, {});
    CHECK(matches(x.ints(), node) == row.ints);
    CHECK(matches(x.index(), node) == row.index);
    CHECK(matches(x.fixed_ints(), node) == row.fixed_ints);
    CHECK(matches(x.floats(), node) == row.floats);
    CHECK(matches(x.bools(), node) == row.bools);
    // Classes combine as a union.
    CHECK(matches(x.floats().bools(), node) == (row.floats || row.bools));
    CHECK(matches(x, node));
  }
  UOpPtr i32 = UOp::make(Ops::NOOP, dtypes::i32, {}), f32 = UOp::make(Ops::NOOP, dtypes::f32, {});
  UOpPtr i64 = UOp::make(Ops::NOOP, dtypes::i64, {});
  CHECK(matches(x.dtype({dtypes::i32, dtypes::f32}), i32));
  CHECK(matches(x.dtype({dtypes::i32, dtypes::f32}), f32));
  CHECK_FALSE(matches(x.dtype({dtypes::i32, dtypes::f32}), i64));
  // Exact lists compare the whole dtype: a vector of i32 is not i32, but a listed pointer matches.
  CHECK_FALSE(matches(x.dtype({dtypes::i32}), UOp::make(Ops::NOOP, dtypes::i32.vec(4), {})));
  CHECK(matches(x.dtype({dtypes::f32.ptr()}), UOp::make(Ops::NOOP, dtypes::f32.ptr(), {})));
  // A list and a class together accept either.
  CHECK(matches(x.dtype({dtypes::f32}).bools(), const_bool(true)));
  CHECK(matches(x.dtype({dtypes::f32}).bools(), f32));
  CHECK_FALSE(matches(x.dtype({dtypes::f32}).bools(), i32));
  // Filters apply to sources too.
  UOpPtr a = variable("a", 0, 9), fa = cast(a, dtypes::f32);
  CHECK(matches(x.ints() * 2, a * 2));
  CHECK_FALSE(matches(x.floats() * 2, a * 2));
  CHECK(matches(x.floats() * UPat::cvar("c"), fa * const_float(dtypes::f32, 2.0)));
}

TEST_CASE("argument matching") {
  CHECK(matches(UPat(Ops::RANGE).arg(int64_t{3}), range(8, 3)));
  CHECK_FALSE(matches(UPat(Ops::RANGE).arg(int64_t{2}), range(8, 3)));
  CHECK(matches(UPat(Ops::REDUCE).arg(Ops::ADD), UOp::make(Ops::REDUCE, dtypes::f32, {}, Ops::ADD)));
  CHECK_FALSE(matches(UPat(Ops::REDUCE).arg(Ops::MAX), UOp::make(Ops::REDUCE, dtypes::f32, {}, Ops::ADD)));
  CHECK(matches(UPat(Ops::DEFINE_VAR).arg(VariableSpec{"n", 1, 8}), variable("n", 1, 8)));
  CHECK_FALSE(matches(UPat(Ops::DEFINE_VAR).arg(VariableSpec{"n", 1, 8}), variable("n", 1, 9)));
  // .arg compares the argument exactly, alternative included (unlike UPat::constant).
  CHECK_FALSE(matches(UPat(Ops::CONST).arg(int64_t{1}), const_float(dtypes::f32, 1.0)));
  CHECK(matches(UPat(Ops::CONST).arg(int64_t{1}), const_int(dtypes::i32, 1)));
}

TEST_CASE("a name bound twice must bind the same node") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  UPat difference = UPat(Ops::SUB, {x, x});
  CHECK(matches(difference, a - a));
  CHECK_FALSE(matches(difference, a - b));
  CHECK(bindings(difference, a - a) == "x=a");
  // Structurally equal subtrees are the same node, so they bind consistently.
  CHECK(matches(difference, (a * 2 + b) - (a * 2 + b)));
  CHECK_FALSE(matches(difference, (a * 2 + b) - (b + a * 2)));
  // Across levels: x*y + x.
  CHECK(bindings(x * y + x, a * b + a) == "x=a y=b");
  CHECK(bindings(x * y + x, b + a * b) == "x=b y=a");
  CHECK(bindings(x * y + x, a * b + b) == "x=b y=a");
  CHECK_FALSE(matches(x * y + x, a * b + variable("c", 0, 9)));
}

TEST_CASE("commutative patterns match both source orders") {
  UOpPtr a = variable("a", 0, 9);
  UOpPtr one = const_int(dtypes::index, 1);
  CHECK(bindings(x + 1, a + one) == "x=a");
  CHECK(bindings(x + 1, one + a) == "x=a");
  CHECK(bindings(x * 1, one * a) == "x=a");
  CHECK(bindings(maximum(x, UPat::cvar("c")), maximum(one, a)) == "x=a c=1");
  CHECK(bindings(eq(x, 1), eq(one, a)) == "x=a");
  CHECK(bindings(ne(x, 1), ne(one, a)) == "x=a");
  CHECK(bindings(x & 1, one & a) == "x=a");
  CHECK(bindings(x | 1, one | a) == "x=a");
  CHECK(bindings(x ^ 1, one ^ a) == "x=a");
  // Non-commutative ops keep their order.
  CHECK(matches(x - 1, a - one));
  CHECK_FALSE(matches(x - 1, one - a));
  CHECK_FALSE(matches(lt(x, 1), lt(one, a)));
  CHECK_FALSE(matches(x / 1, one / a));
  // A pattern built from the constructor is ordered unless asked otherwise.
  UPat ordered(Ops::ADD, {x, UPat::cvar("c")});
  CHECK_FALSE(matches(ordered, one + a));
  CHECK(matches(ordered.commutative(), one + a));
}

TEST_CASE("backtracking across commutative choices") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9), c = variable("c", 0, 9), d = variable("d", 0, 9);
  UPat factorable = x * y + x * z;
  // The first choice (x=a from a*b) fails later; the matcher must come back and try x=b.
  CHECK(bindings(factorable, a * b + b * c) == "x=b y=a z=c");
  CHECK(bindings(factorable, b * c + a * b) == "x=b y=c z=a");
  CHECK(bindings(factorable, a * b + c * a) == "x=a y=b z=c");
  CHECK(bindings(factorable, b * a + c * a) == "x=a y=b z=c");
  CHECK_FALSE(matches(factorable, a * b + c * d));
  // A failed match leaves no bindings behind.
  Match match;
  match.start((a * b + c * d).get(), nullptr);
  CHECK_FALSE(factorable.matches((a * b + c * d).get(), match));
  CHECK(match.size() == 0);
}

TEST_CASE("the accepting form offers every way a pattern matches") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  UOpPtr sum = a + b;
  Match match;
  match.start(sum.get(), nullptr);
  std::vector<std::string> offered;
  bool accepted = (x + y).matches(sum.get(), match, [&] {
    offered.push_back(render_expr(match["x"]) + "," + render_expr(match["y"]));
    return false;  // reject every binding: the matcher must offer the next one
  });
  CHECK_FALSE(accepted);
  CHECK(offered == std::vector<std::string>{"a,b", "b,a"});
  CHECK(match.size() == 0);
  // A guard that accepts only x=b gets it, with consistent bindings.
  match.start(sum.get(), nullptr);
  accepted = (x + y).matches(sum.get(), match, [&] { return match.get("x") == b.get(); });
  CHECK(accepted);
  CHECK(match["x"] == b);
  CHECK(match["y"] == a);
  CHECK(match.root() == sum);
}

TEST_CASE("all_sources") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  UOpPtr one = const_int(dtypes::index, 1), two = const_int(dtypes::index, 2);
  UPat all_constants = UPat(Ops::SINK).all_sources(UPat(Ops::CONST));
  CHECK(matches(all_constants, sink({one, two, one})));
  CHECK_FALSE(matches(all_constants, sink({one, a, two})));
  CHECK(matches(all_constants, sink({})));  // vacuously
  CHECK(matches(UPat::ops(OpSet::group(OpGroup::Binary)).all_sources(UPat(Ops::CONST)), one + two));
  // A name in the repeated pattern must bind the same node each time.
  UPat all_same = UPat(Ops::SINK).all_sources(x);
  CHECK(matches(all_same, sink({a, a, a})));
  CHECK_FALSE(matches(all_same, sink({a, a, b})));
  // Exact source lists need the same count.
  CHECK_FALSE(matches(UPat(Ops::SINK, {x, y}), sink({a, b, a})));
  CHECK(bindings(UPat(Ops::SINK, {x, y, z, UPat::cvar("c")}), sink({a, b, a + b, two})) == "x=a y=b z=a+b c=2");
  CHECK(bindings(where(UPat::var("c"), x, y), where(lt(a, b), a, b)) == "c=a<b x=a y=b");
}

TEST_CASE("constant literals") {
  // UPat::constant(0) is the number zero in any scalar type.
  CHECK(matches(UPat::constant(0), const_int(dtypes::i32, 0)));
  CHECK(matches(UPat::constant(0), const_int(dtypes::index, 0)));
  CHECK(matches(UPat::constant(0), const_float(dtypes::f32, 0.0)));
  CHECK(matches(UPat::constant(0), const_bool(false)));
  CHECK_FALSE(matches(UPat::constant(0), const_bool(true)));
  CHECK_FALSE(matches(UPat::constant(0), const_int(dtypes::i32, 1)));
  CHECK_FALSE(matches(UPat::constant(0), variable("zero", 0, 0)));
  CHECK(matches(UPat::constant(1), const_bool(true)));
  CHECK(matches(UPat::constant(-3), const_float(dtypes::f64, -3.0)));
  CHECK_FALSE(matches(UPat::constant(1), const_float(dtypes::f32, 1.5)));
  // u64 constants are stored as their bit pattern: the all-ones u64 is not -1.
  CHECK_FALSE(matches(UPat::constant(-1), UOp::make(Ops::CONST, dtypes::u64, {}, int64_t{-1})));
  CHECK(matches(UPat::constant(-1), const_int(dtypes::i64, -1)));
  // Float literals: equal values, and the sign of zero counts.
  CHECK(matches(UPat::constant_float(-0.0), const_float(dtypes::f32, -0.0)));
  CHECK_FALSE(matches(UPat::constant_float(-0.0), const_float(dtypes::f32, 0.0)));
  CHECK_FALSE(matches(UPat::constant_float(0.0), const_float(dtypes::f32, -0.0)));
  CHECK(matches(UPat::constant_float(0.0), const_float(dtypes::f16, 0.0)));
  CHECK(matches(UPat::constant_float(1.5), const_float(dtypes::f32, 1.5)));
  CHECK_FALSE(matches(UPat::constant_float(1.0), const_int(dtypes::i32, 1)));
  // NaN equals nothing, itself included.
  double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(matches(UPat::constant_float(nan), const_float(dtypes::f32, nan)));
  // cvar takes any constant, but nothing else.
  CHECK(bindings(UPat::cvar("c"), const_float(dtypes::f32, 2.0)) == "c=2.0");
  CHECK_FALSE(matches(UPat::cvar("c"), variable("v", 0, 1)));
  // As a rule would use it: x + (-0.0) must not fire on x + 0.0.
  UOpPtr f = cast(variable("f", 0, 9), dtypes::f32);
  CHECK(matches(x + UPat::constant_float(-0.0), f + const_float(dtypes::f32, -0.0)));
  CHECK_FALSE(matches(x + UPat::constant_float(-0.0), f + const_float(dtypes::f32, 0.0)));
}

TEST_CASE("Match: lookups, unbound names, the binding limit") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  Match match;
  match.start((a + b).get(), nullptr);
  REQUIRE((x + y).matches((a + b).get(), match));
  CHECK(match.has("x"));
  CHECK_FALSE(match.has("z"));
  CHECK(match.get("y") == b.get());
  CHECK_THROWS_AS(match["z"], InternalError);
  // Binding more than max_bindings names is a bug in the rule, reported as such.
  std::vector<UPat> many;
  std::vector<UOpPtr> nodes;
  for (size_t i = 0; i <= Match::max_bindings; ++i) {
    many.push_back(UPat::var("v" + std::to_string(i)));
    nodes.push_back(const_int(dtypes::index, static_cast<int64_t>(i)));
  }
  Match full;
  UOpPtr root = sink(nodes);
  full.start(root.get(), nullptr);
  CHECK_THROWS_AS(UPat(Ops::SINK, many).matches(root.get(), full), InternalError);
}

TEST_CASE("describe") {
  CHECK(UPat().describe() == "any");
  CHECK(x.describe() == "any:x");
  CHECK((x + 1).describe() == "ADD(any:x, CONST{1})");
  CHECK(UPat::cvar("c").describe() == "CONST:c");
  CHECK(UPat::constant_float(-0.0).describe() == "CONST{-0.0}");
  CHECK(((x / UPat::cvar("c1")) / UPat::cvar("c2")).describe() == "IDIV(IDIV(any:x, CONST:c1), CONST:c2)");
  CHECK(UPat::ops({Ops::ADD, Ops::MUL, Ops::MAX}).named("b").describe() == "{3 ops}:b");
  CHECK(UPat(Ops::SINK).all_sources(UPat(Ops::CONST)).describe() == "SINK(CONST...)");
  CHECK(UPat(Ops::RANGE).arg(int64_t{2}).describe() == "RANGE{2}");
  CHECK(where(x, y, z).describe() == "WHERE(any:x, any:y, any:z)");
}

}  // namespace
}  // namespace kiln
