// Unit tests of the IR printers: the exact SSA listing of print_graph (each shared node once, in
// dependency order) and the infix form of render_expr (precedence, associativity, calls, casts,
// float constants).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "ir/build.h"
#include "ir/printer.h"
#include "support/ir_test_helpers.h"

namespace kiln {
namespace {

TEST_CASE("print_graph lists a DAG in dependency order, shared nodes once") {
  UOpPtr x = variable("x", 0, 9);
  UOpPtr scaled = x * 4;
  UOpPtr root = scaled + (scaled - x);
  // Exact text, whitespace included: tests elsewhere compare listings, so the format is a contract.
  CHECK(print_graph(root) ==
        "%0 = DEFINE_VAR index {x:0..9}\n"
        "%1 = CONST index {4}\n"
        "%2 = MUL index (%0, %1)\n"
        "%3 = SUB index (%2, %0)\n"
        "%4 = ADD index (%2, %3)\n");
}

TEST_CASE("print_graph shows dtypes, argument kinds and void nodes") {
  UOpPtr x = variable("n", 1, 16, dtypes::i32);
  UOpPtr root = sink({cast(x, dtypes::f32) * const_float(dtypes::f32, 0.5), lt(x, const_int(dtypes::i32, 3)),
                      range(8, 2)});
  CHECK_GRAPH(root, R"(
      %0 = DEFINE_VAR i32 {n:1..16}
      %1 = CAST f32 (%0)
      %2 = CONST f32 {0.5}
      %3 = MUL f32 (%1, %2)
      %4 = CONST i32 {3}
      %5 = CMPLT bool (%0, %4)
      %6 = CONST index {8}
      %7 = RANGE index (%6) {2}
      %8 = SINK void (%3, %5, %7)
  )");
  UOpPtr buffer = UOp::make(Ops::DEFINE_GLOBAL, dtypes::f16.ptr(AddrSpace::Local, 64), {}, int64_t{1});
  CHECK(print_graph(buffer) == "%0 = DEFINE_GLOBAL f16*local[64] {1}\n");
  CHECK(print_graph(UOp::make(Ops::RESHAPE, dtypes::f32, {const_float(dtypes::f32, 1.0)},
                              std::vector<int64_t>{2, 3})) ==
        "%0 = CONST f32 {1.0}\n%1 = RESHAPE f32 (%0) {[2, 3]}\n");
  CHECK(print_graph(UOp::make(Ops::REDUCE, dtypes::f32, {const_float(dtypes::f32, 1.0)}, Ops::ADD)) ==
        "%0 = CONST f32 {1.0}\n%1 = REDUCE f32 (%0) {ADD}\n");
  CHECK(print_graph(UOp::make(Ops::DEVICE, dtypes::void_, {}, std::string("CPU"))) == "%0 = DEVICE void {\"CPU\"}\n");
  CHECK(print_graph(const_bool(true)) == "%0 = CONST bool {true}\n");
}

TEST_CASE("render_expr: precedence and left associativity") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9), c = variable("c", 0, 9);
  CHECK(render_expr(a + b + c) == "a+b+c");
  CHECK(render_expr(a + (b + c)) == "a+(b+c)");
  CHECK(render_expr(a - b - c) == "a-b-c");
  CHECK(render_expr(a - (b - c)) == "a-(b-c)");
  CHECK(render_expr(a - (b + c)) == "a-(b+c)");
  CHECK(render_expr((a + b) * c) == "(a+b)*c");
  CHECK(render_expr(a * b + c) == "a*b+c");
  CHECK(render_expr(a + b * c) == "a+b*c");
  CHECK(render_expr(a * (b / c)) == "a*(b/c)");  // integer division does not associate with *
  CHECK(render_expr(a * b / c) == "a*b/c");
  CHECK(render_expr((a + b) % c) == "(a+b)%c");
  CHECK(render_expr(a * 4 + b) == "a*4+b");
  // A negative operand after a minus is parenthesised, so it cannot read as "--".
  CHECK(render_expr(a - -3) == "a-(-3)");
  CHECK(render_expr(-(-a)) == "-(-a)");
  CHECK(render_expr(a + -3) == "a+-3");
  CHECK(render_expr(lt(a + 1, b)) == "a+1<b");
  CHECK(render_expr(lt(a, b) & lt(b, c)) == "a<b&b<c");
  CHECK(render_expr(eq(lt(a, b), lt(b, c))) == "a<b==b<c");
  CHECK(render_expr(a << (b + c)) == "a<<b+c");
  CHECK(render_expr((a << b) + c) == "(a<<b)+c");
  CHECK(render_expr((a | b) & c) == "(a|b)&c");
  CHECK(render_expr(a | (b & c)) == "a|b&c");
  CHECK(render_expr(a ^ (b | c)) == "a^(b|c)");
  CHECK(render_expr(-a) == "-a");
  CHECK(render_expr(-(a + b)) == "-(a+b)");
  CHECK(render_expr(-a * b) == "-a*b");
  CHECK(render_expr(logical_not(lt(a, b))) == "!(a<b)");
  CHECK(render_expr(range(8, 3) * 2) == "r3*2");
}

TEST_CASE("render_expr: where, casts and calls") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9), c = variable("c", 0, 9);
  CHECK_EXPR(where(lt(a, 5), a, b), "a<5 ? a : b");
  CHECK(render_expr(where(lt(a, 5), a, b)) == "a<5 ? a : b");
  // A WHERE inside arithmetic is parenthesised; one in the false branch chains without parentheses.
  CHECK(render_expr(where(lt(a, 5), a, b) + 1) == "(a<5 ? a : b)+1");
  CHECK(render_expr(where(lt(a, 5), a, where(lt(b, 5), b, c))) == "a<5 ? a : b<5 ? b : c");
  CHECK(render_expr(where(lt(a, 5), where(lt(b, 5), b, c), a)) == "a<5 ? (b<5 ? b : c) : a");
  CHECK(render_expr(cast(a, dtypes::f32)) == "(f32)a");
  CHECK(render_expr(cast(a + b, dtypes::i32)) == "(i32)(a+b)");
  CHECK(render_expr(cast(a, dtypes::f32) * const_float(dtypes::f32, 2.0)) == "(f32)a*2.0");
  CHECK(render_expr(maximum(a, b)) == "max(a, b)");
  CHECK(render_expr(maximum(a + 1, b) * 2) == "max(a+1, b)*2");
  UOpPtr x = const_float(dtypes::f32, 4.0);
  CHECK(render_expr(UOp::make(Ops::SQRT, dtypes::f32, {x})) == "sqrt(4.0)");
  CHECK(render_expr(UOp::make(Ops::MULACC, dtypes::f32, {x, x, x})) == "mulacc(4.0, 4.0, 4.0)");
  CHECK(render_expr(UOp::make(Ops::SPECIAL, dtypes::index, {const_int(dtypes::index, 64)}, std::string("gidx0")) + a) ==
        "gidx0+a");
  CHECK(render_expr(UOp::make(Ops::GEP, dtypes::index, {UOp::make(Ops::VECTORIZE, dtypes::index.vec(2), {a, b})},
                              std::vector<int64_t>{1})) == "gep(vectorize(a, b), [1])");
  CHECK(render_expr(nullptr) == "<null>");
}

TEST_CASE("render_expr: constants") {
  CHECK(render_expr(const_float(dtypes::f32, 1.0)) == "1.0");
  CHECK(render_expr(const_float(dtypes::f32, -0.0)) == "-0.0");
  CHECK(render_expr(const_float(dtypes::f32, 0.0)) == "0.0");
  CHECK(render_expr(const_float(dtypes::f32, 0.5)) == "0.5");
  CHECK(render_expr(const_float(dtypes::f32, -2.25)) == "-2.25");
  CHECK(render_expr(const_float(dtypes::f32, std::numeric_limits<double>::quiet_NaN())) == "nan");
  CHECK(render_expr(const_float(dtypes::f32, INFINITY)) == "inf");
  CHECK(render_expr(const_float(dtypes::f32, -INFINITY)) == "-inf");
  CHECK(render_expr(const_float(dtypes::f64, 1e20)) == "1e+20");
  // Enough digits to read the exact double back.
  CHECK(std::stod(render_expr(const_float(dtypes::f64, 0.1))) == 0.1);
  CHECK(render_expr(const_int(dtypes::i32, -7)) == "-7");
  CHECK(render_expr(const_bool(false)) == "false");
  CHECK(render_arg(VariableSpec{"i", -1, 8}) == "i:-1..8");
  CHECK(render_arg(std::vector<int64_t>{}) == "[]");
  CHECK(render_arg(Arg{}) == "");
}

}  // namespace
}  // namespace kiln
