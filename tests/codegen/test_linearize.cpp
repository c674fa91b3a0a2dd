// Linearisation: loop order, hoisting, REDUCE lowering and contract errors, checked on the printed
// linear program and on the positions of ops in it.
#include <algorithm>

#include "codegen/linearize.h"
#include "codegen_test_helpers.h"
#include "support/ir_test_helpers.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::testing;

namespace {

// Position of the first op in the program matching `predicate`, or -1.
template <class Predicate>
int position(const LinearProgram& program, Predicate predicate) {
  auto found = std::find_if(program.ops.begin(), program.ops.end(), [&](const UOpPtr& node) { return predicate(*node); });
  return found == program.ops.end() ? -1 : static_cast<int>(found - program.ops.begin());
}
int position_of(const LinearProgram& program, const UOpPtr& node) {
  return position(program, [&](const UOp& op) { return &op == node.get(); });
}
int range_position(const LinearProgram& program, int64_t axis) {
  return position(program, [&](const UOp& op) { return op.op() == Ops::RANGE && op.arg_int() == axis; });
}
int end_position(const LinearProgram& program, int64_t axis) {
  return position(program, [&](const UOp& op) {
    return op.op() == Ops::END && op.src(1)->arg_int() == axis;
  });
}

std::string error_of(const UOpPtr& ast) {
  try {
    linearize(ast);
  } catch (const InternalError& error) {
    return error.what();
  }
  return "no error";
}

}  // namespace

TEST_SUITE("codegen") {

TEST_CASE("a row sum becomes an accumulator loop inside the output loop, with i*4 hoisted out of it") {
  UOpPtr x = global(dtypes::f32, 12, 1), out = global(dtypes::f32, 3, 0);
  UOpPtr i = range(3, 0), j = range(4, 1);
  UOpPtr sum = reduce(Ops::ADD, load(index(x, i * 4 + j)), {j});
  LinearProgram program = linearize(kernel("r_3_4", {store(index(out, i), sum)}));
  CHECK(program.name == "r_3_4");
  std::string printed = print_linear(program);
  INFO(printed);
  CHECK(without_whitespace(printed) == without_whitespace(R"(kernel r_3_4
    %0 = CONST index {3}
    %1 = DEFINE_GLOBAL f32*[3] {0}
    %2 = DEFINE_REG f32*reg[1] {0}
    %3 = CONST index {0}
    %4 = CONST f32 {0.0}
    %5 = CONST index {4}
    %6 = DEFINE_GLOBAL f32*[12] {1}
    %7 = RANGE index (%0) {0}
      %8 = INDEX f32*[3] (%1, %7)
      %9 = INDEX f32*reg[1] (%2, %3)
      %10 = STORE void (%9, %4)
      %11 = MUL index (%7, %5)
      %12 = RANGE index (%5) {1}
        %13 = ADD index (%11, %12)
        %14 = INDEX f32*[12] (%6, %13)
        %15 = LOAD f32 (%14)
        %16 = AFTER f32*reg[1] (%2, %10, %12)
        %17 = INDEX f32*reg[1] (%16, %3)
        %18 = LOAD f32 (%17)
        %19 = ADD f32 (%18, %15)
        %20 = STORE void (%17, %19)
      %21 = END void (%20, %12)
      %22 = AFTER f32*reg[1] (%2, %21)
      %23 = INDEX f32*reg[1] (%22, %3)
      %24 = LOAD f32 (%23)
      %25 = STORE void (%8, %24)
    %26 = END void (%25, %7))"));
}

TEST_CASE("loops nest by ascending axis id and loop-invariant work sits in the outermost loop it needs") {
  UOpPtr x = global(dtypes::f32, 4, 1), y = global(dtypes::f32, 5, 2), out = global(dtypes::f32, 20, 0);
  UOpPtr i = range(4, 0), j = range(5, 1);
  UOpPtr scaled = load(index(x, i)) * const_float(dtypes::f32, 2.0);
  UOpPtr column = load(index(y, j));
  // Axis 1 is listed first in the index on purpose: nesting follows axis ids, not source order.
  LinearProgram program = linearize(kernel("E_4_5", {store(index(out, j + i * 5), scaled + column)}));
  INFO(print_linear(program));
  CHECK(range_position(program, 0) < range_position(program, 1));
  CHECK(end_position(program, 1) < end_position(program, 0));
  // x[i]*2 depends on i only: computed between the two RANGEs. y[j] inside the inner loop.
  CHECK(position_of(program, scaled) > range_position(program, 0));
  CHECK(position_of(program, scaled) < range_position(program, 1));
  CHECK(position_of(program, column) > range_position(program, 1));
  // Buffers and constants are outside every loop.
  CHECK(position_of(program, x) < range_position(program, 0));
  CHECK(position_of(program, y) < range_position(program, 0));
}

TEST_CASE("a REDUCE that depends only on an outer output range is evaluated before the inner loop") {
  // out[i, j] = x[i, j] - max_k x[i, k]: the max is computed once per row, not once per element.
  UOpPtr x = global(dtypes::f32, 12, 1), out = global(dtypes::f32, 12, 0);
  UOpPtr i = range(3, 0), j = range(4, 1), k = range(4, 2);
  UOpPtr row_max = reduce(Ops::MAX, load(index(x, i * 4 + k)), {k});
  LinearProgram program = linearize(kernel("row_max", {store(index(out, i * 4 + j), load(index(x, i * 4 + j)) - row_max)}));
  INFO(print_linear(program));
  CHECK(range_position(program, 0) < range_position(program, 2));
  CHECK(end_position(program, 2) < range_position(program, 1));
  // The accumulator starts at -inf (the identity of MAX).
  CHECK(position(program, [](const UOp& op) {
          return op.op() == Ops::CONST && op.dtype() == dtypes::f32 && std::isinf(op.arg_float()) && op.arg_float() < 0;
        }) >= 0);
}

TEST_CASE("a nested REDUCE runs inside the loop of the REDUCE that uses it") {
  // out[i] = sum_j max_k x[i, j, k]
  UOpPtr x = global(dtypes::f32, 24, 1), out = global(dtypes::f32, 2, 0);
  UOpPtr i = range(2, 0), j = range(3, 1), k = range(4, 2);
  UOpPtr inner = reduce(Ops::MAX, load(index(x, i * 12 + j * 4 + k)), {k});
  UOpPtr outer = reduce(Ops::ADD, inner, {j});
  LinearProgram program = linearize(kernel("nested", {store(index(out, i), outer)}));
  INFO(print_linear(program));
  CHECK(range_position(program, 1) < range_position(program, 2));
  CHECK(end_position(program, 2) < end_position(program, 1));
  int registers = static_cast<int>(std::count_if(program.ops.begin(), program.ops.end(),
                                                 [](const UOpPtr& op) { return op->op() == Ops::DEFINE_REG; }));
  CHECK(registers == 2);
}

TEST_CASE("two REDUCEs over the same RANGE share one loop (and the value they both read)") {
  UOpPtr x = global(dtypes::f32, 8, 1), out = global(dtypes::f32, 2, 0);
  UOpPtr i = range(2, 0), k = range(4, 1);
  UOpPtr value = load(index(x, i * 4 + k));
  UOpPtr both = reduce(Ops::ADD, value, {k}) + reduce(Ops::MAX, value, {k});
  LinearProgram program = linearize(kernel("two_reductions", {store(index(out, i), both)}));
  INFO(print_linear(program));
  auto loops = std::count_if(program.ops.begin(), program.ops.end(),
                             [](const UOpPtr& op) { return op->op() == Ops::RANGE && op->arg_int() == 1; });
  CHECK(loops == 1);
  // Both accumulators are updated in that loop from one load of x.
  CHECK(std::count(program.ops.begin(), program.ops.end(), value) == 1);
  int registers = static_cast<int>(std::count_if(program.ops.begin(), program.ops.end(),
                                                 [](const UOpPtr& op) { return op->op() == Ops::DEFINE_REG; }));
  CHECK(registers == 2);
}

TEST_CASE("kernel ASTs that break the contract are internal errors naming the problem") {
  UOpPtr x = global(dtypes::f32, 8, 1), out = global(dtypes::f32, 8, 0);
  UOpPtr i = range(8, 0), k = range(4, 1);
  SUBCASE("REDUCE over the parallel axis") {
    UOpPtr total = reduce(Ops::ADD, load(index(x, i)), {i});
    CHECK(error_of(kernel("bad", {store(index(out, idx(0)), total)})).find("axis 0") != std::string::npos);
  }
  SUBCASE("a reduced RANGE also used outside its REDUCE") {
    UOpPtr total = reduce(Ops::ADD, load(index(x, k)), {k});
    std::string message = error_of(kernel("bad", {store(index(out, k), total)}));
    CAPTURE(message);
    CHECK(message.find("reduced inside its own loop") != std::string::npos);
  }
  SUBCASE("no kernel name") {
    UOpPtr unnamed = UOp::make(Ops::SINK, dtypes::void_, {store(index(out, i), load(index(x, i)))});
    CHECK(error_of(unnamed).find("no name") != std::string::npos);
  }
  SUBCASE("something other than a STORE under the SINK") {
    CHECK(error_of(kernel("bad", {load(index(x, i))})).find("not a STORE") != std::string::npos);
  }
  SUBCASE("a bound variable (kernels read DEFINE_VARs; binding them is the caller's business)") {
    UOpPtr n = variable("n", 1, 8);
    UOpPtr bound = UOp::make(Ops::BIND, dtypes::index, {n, idx(3)});
    CHECK(error_of(kernel("bad", {store(index(out, bound), load(index(x, i)))})).find("BIND") != std::string::npos);
  }
  SUBCASE("two RANGEs with one axis id") {
    UOpPtr other = range(3, 0);
    CHECK(error_of(kernel("bad", {store(index(out, i + other), load(index(x, i)))})).find("axis id 0") !=
          std::string::npos);
  }
  SUBCASE("REDUCE with an op that is not a reduction") {
    UOpPtr bad = reduce(Ops::SUB, load(index(x, k)), {k});
    CHECK(error_of(kernel("bad", {store(index(out, i), bad)})).find("REDUCE with SUB") != std::string::npos);
  }
}

}  // TEST_SUITE
