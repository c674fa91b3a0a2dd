// Unit tests of the IR verifier: ir_spec() accepts well-formed graphs and rejects each kind of
// malformed node (built with raw UOp::make, since the builders refuse to build them), with an error
// that names the pass, the spec, the op and the types; graph_rewrite runs it on a table's output.
#include <doctest/doctest.h>

#include <string>

#include "ir/build.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "rewrite/graph_rewrite.h"
#include "support/error.h"

namespace kiln {
namespace {

// The message of the InternalError that verify() throws, or "" when the graph is valid.
std::string verify_error(const UOpPtr& root, std::string_view pass = "test-pass") {
  try {
    verify(root, ir_spec(), pass);
  } catch (const InternalError& error) {
    return error.what();
  }
  return "";
}

TEST_CASE("ir_spec accepts well-formed graphs") {
  UOpPtr i = variable("i", 0, 15), n = variable("n", 1, 64, dtypes::i32);
  UOpPtr loop = range(16, 0);
  UOpPtr index_math = where(lt(i, 8), i * 4 + loop, (i - 8) % 3);
  UOpPtr int_math = maximum(n * n, n / const_int(dtypes::i32, 2)) ^ (n << const_int(dtypes::u8, 1));
  UOpPtr float_math = cast(n, dtypes::f32) / const_float(dtypes::f32, 3.0) + -const_float(dtypes::f32, 1.0);
  UOpPtr logic = logical_not(lt(i, 3)) & ne(n, const_int(dtypes::i32, 5));
  UOpPtr vector = UOp::make(Ops::VECTORIZE, dtypes::f32.vec(2), {float_math, float_math});
  UOpPtr bits = UOp::make(Ops::BITCAST, dtypes::i32, {float_math});
  UOpPtr fused = UOp::make(Ops::MULACC, dtypes::f32, {float_math, float_math, float_math});
  UOpPtr root = sink({index_math, int_math, float_math, logic, vector, bits, fused, const_bool(true),
                      UOp::make(Ops::CONST, dtypes::u64, {}, int64_t{-1})});
  CHECK(ir_spec().first_invalid(root) == nullptr);
  CHECK(verify_error(root) == "");
  CHECK(ir_spec().name() == "ir");
}

TEST_CASE("ir_spec rejects malformed nodes, naming op, types and argument") {
  UOpPtr a32 = variable("a", 0, 9, dtypes::i32), b64 = variable("b", 0, 9, dtypes::i64);
  UOpPtr i = variable("i", 0, 9);
  struct Case {
    const char* what;
    UOpPtr node;
    const char* expected;  // the part of the message that describes the node
  };
  const Case cases[] = {
      {"ADD of mismatched source types", UOp::make(Ops::ADD, dtypes::i32, {a32, b64}),
       "ADD of type i32 with sources (i32, i64) and argument {} is not allowed"},
      {"ADD whose type is not its sources'", UOp::make(Ops::ADD, dtypes::i64, {a32, a32}),
       "ADD of type i64 with sources (i32, i32)"},
      {"WHERE on a non-bool condition", UOp::make(Ops::WHERE, dtypes::i32, {a32, a32, a32}),
       "WHERE of type i32 with sources (i32, i32, i32)"},
      {"WHERE with branches of two types", UOp::make(Ops::WHERE, dtypes::i32, {lt(a32, a32), a32, b64}),
       "WHERE of type i32 with sources (bool, i32, i64)"},
      {"CONST f32 holding an int64", UOp::make(Ops::CONST, dtypes::f32, {}, int64_t{1}),
       "CONST of type f32 with sources () and argument {1} is not allowed"},
      {"CONST i32 holding a double", UOp::make(Ops::CONST, dtypes::i32, {}, 1.0),
       "CONST of type i32 with sources () and argument {1.0}"},
      {"CONST bool holding an int64", UOp::make(Ops::CONST, dtypes::bool_, {}, int64_t{1}),
       "CONST of type bool with sources () and argument {1}"},
      {"comparison that does not return bool", UOp::make(Ops::CMPLT, dtypes::i32, {a32, a32}),
       "CMPLT of type i32 with sources (i32, i32)"},
      {"comparison of two types", UOp::make(Ops::CMPEQ, dtypes::bool_, {a32, b64}),
       "CMPEQ of type bool with sources (i32, i64)"},
      {"DEFINE_VAR with min > max", UOp::make(Ops::DEFINE_VAR, dtypes::index, {}, VariableSpec{"n", 5, 2}),
       "DEFINE_VAR of type index with sources () and argument {n:5..2} is not allowed"},
      {"DEFINE_VAR of a float type", UOp::make(Ops::DEFINE_VAR, dtypes::f32, {}, VariableSpec{"f", 0, 1}),
       "DEFINE_VAR of type f32 with sources () and argument {f:0..1}"},
      {"DEFINE_VAR without a name", UOp::make(Ops::DEFINE_VAR, dtypes::index, {}, VariableSpec{"", 0, 1}),
       "DEFINE_VAR of type index with sources () and argument {:0..1}"},
      {"RANGE whose end has another type", UOp::make(Ops::RANGE, dtypes::index, {a32}, int64_t{0}),
       "RANGE of type index with sources (i32) and argument {0}"},
      {"RANGE of a float type", UOp::make(Ops::RANGE, dtypes::f32, {const_float(dtypes::f32, 4.0)}, int64_t{0}),
       "RANGE of type f32 with sources (f32) and argument {0}"},
      {"IDIV on floats", UOp::make(Ops::IDIV, dtypes::f32, {cast(a32, dtypes::f32), cast(a32, dtypes::f32)}),
       "IDIV of type f32 with sources (f32, f32)"},
      {"FDIV on integers", UOp::make(Ops::FDIV, dtypes::i32, {a32, a32}), "FDIV of type i32 with sources (i32, i32)"},
      {"NOT on floats", UOp::make(Ops::NOT, dtypes::f32, {cast(a32, dtypes::f32)}),
       "NOT of type f32 with sources (f32)"},
      {"NEG changing the type", UOp::make(Ops::NEG, dtypes::i64, {a32}), "NEG of type i64 with sources (i32)"},
      {"shift by a float", UOp::make(Ops::SHL, dtypes::i32, {a32, cast(a32, dtypes::f32)}),
       "SHL of type i32 with sources (i32, f32)"},
      {"BITCAST changing the size", UOp::make(Ops::BITCAST, dtypes::i64, {a32}),
       "BITCAST of type i64 with sources (i32)"},
      {"SINK with a type", UOp::make(Ops::SINK, dtypes::i32, {a32}), "SINK of type i32 with sources (i32)"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.what));
    CHECK(ir_spec().first_invalid(c.node) == c.node.get());
    std::string message = verify_error(c.node);
    CHECK(message.find(c.expected) != std::string::npos);
    CHECK(message.find("IR verification failed after 'test-pass' (spec 'ir'): ") != std::string::npos);
    // A malformed node deep inside a valid graph is found too.
    UOpPtr root = sink({i + 1, UOp::make(Ops::NOOP, c.node->dtype(), {c.node}), i * 2});
    CHECK(ir_spec().first_invalid(root) == c.node.get());
  }
}

TEST_CASE("the verification error carries a dump of the graph") {
  UOpPtr bad = UOp::make(Ops::ADD, dtypes::i32, {variable("x", 0, 1, dtypes::i32), variable("y", 0, 1, dtypes::i64)});
  try {
    verify(sink({bad}), ir_spec(), "dump-pass");
    FAIL("verify accepted an ADD of i32 and i64");
  } catch (const InternalError& error) {
    CHECK(error.ir_dump() == print_graph(sink({bad})));
    CHECK(std::string(error.what()).find("%2 = ADD i32 (%0, %1)") != std::string::npos);
  }
}

TEST_CASE("graph_rewrite with a spec catches a rule that builds an invalid node") {
  REQUIRE_MESSAGE(verification_enabled(), "these checks need KILN_VERIFY=1 (the meson test environment sets it)");
  // "x*2 → x+x", written wrongly: the second operand is widened to i64.
  PatternMatcher bad_rules("bad_double", {
      {UPat::var("x").fixed_ints() * 2,
       [](const Match& m) { return UOp::make(Ops::ADD, m["x"]->dtype(), {m["x"], cast(m["x"], dtypes::i64)}); },
       "x*2 → x+x (wrongly typed)"},
  });
  UOpPtr x = variable("x", 0, 100, dtypes::i32);
  UOpPtr root = sink({x * const_int(dtypes::i32, 2)});
  CHECK_THROWS_WITH_AS(
      graph_rewrite(root, bad_rules, {.pass_name = "double-pass", .spec = &ir_spec()}),
      doctest::Contains("IR verification failed after 'double-pass' (spec 'ir'): ADD of type i32 with sources "
                        "(i32, i64) and argument {} is not allowed"),
      InternalError);
  // Without a spec the same rewrite goes through: the check is the spec's, not the builder's.
  CHECK(graph_rewrite(root, bad_rules)->src(0)->op() == Ops::ADD);
  // A correct rule passes the same check.
  PatternMatcher good_rules("good_double", {
      {UPat::var("x").fixed_ints() * 2, [](const Match& m) { return m["x"] + m["x"]; }, "x*2 → x+x"},
  });
  CHECK(graph_rewrite(root, good_rules, {.pass_name = "double-pass", .spec = &ir_spec()}) == sink({x + x}));
}

TEST_CASE("specs compose with +") {
  Spec extra("extra", {{UPat(Ops::LOAD), [](const Match&) { return true; }, "LOAD is fine"}});
  Spec combined = ir_spec() + extra;
  CHECK(combined.name() == "ir+extra");
  CHECK(combined.rules().size() == ir_spec().rules().size() + 1);
}

}  // namespace
}  // namespace kiln
