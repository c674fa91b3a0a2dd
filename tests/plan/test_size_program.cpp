// Size programs (src/plan/size_program.h): the checks an untrusted program must pass, C's division
// and overflow in the evaluator, and the writer against the IR evaluator on random expressions.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "ir/build.h"
#include "ir/evaluate.h"
#include "plan/size_program.h"
#include "plan/size_program_writer.h"
#include "support/error.h"

using namespace kiln;
using namespace kiln::plan;

namespace {

constexpr int64_t op(SizeOp code) { return static_cast<int64_t>(code); }

std::string check(const std::vector<int64_t>& program, size_t variables) { return check_size_program(program, variables); }

// A random index expression over n and m (in [1, 64]) and small constants, `depth` levels deep.
UOpPtr random_expression(std::mt19937_64& random, const UOpPtr& n, const UOpPtr& m, int depth) {
  std::uniform_int_distribution<int> pick(0, depth <= 0 ? 2 : 9);
  switch (pick(random)) {
    case 0: return n;
    case 1: return m;
    case 2: return const_int(dtypes::index, std::uniform_int_distribution<int64_t>(-9, 9)(random));
    default: break;
  }
  UOpPtr a = random_expression(random, n, m, depth - 1), b = random_expression(random, n, m, depth - 1);
  switch (std::uniform_int_distribution<int>(0, 6)(random)) {
    case 0: return UOp::make(Ops::ADD, dtypes::index, {a, b});
    case 1: return UOp::make(Ops::SUB, dtypes::index, {a, b});
    case 2: return UOp::make(Ops::MUL, dtypes::index, {a, b});
    case 3: return UOp::make(Ops::IDIV, dtypes::index, {a, b});
    case 4: return UOp::make(Ops::MOD, dtypes::index, {a, b});
    case 5: return UOp::make(Ops::MAX, dtypes::index, {a, b});
    default: return UOp::make(Ops::NEG, dtypes::index, {a});
  }
}

}  // namespace

TEST_CASE("check_size_program refuses what an untrusted plan might hold") {
  const int64_t push = op(SizeOp::kPush), var = op(SizeOp::kVariable), add = op(SizeOp::kAdd);
  CHECK(check({push, 3, var, 0, add, 0}, 1).empty());
  CHECK(check({push, 3, push}, 1) == "a size program of odd length");
  CHECK(check({}, 1) == "an empty size program");
  CHECK(check({99, 0}, 1) == "size program instruction 0: unknown opcode 99");
  CHECK(check({var, 1}, 1) == "size program instruction 0: variable 1 of 1");
  CHECK(check({var, -1}, 1) == "size program instruction 0: variable -1 of 1");
  CHECK(check({push, 1, add, 0}, 1) == "size program instruction 1: a binary op with fewer than two values on the stack");
  CHECK(check({push, 1, push, 2, add, 5}, 1) == "size program instruction 2: a binary op with a non-zero operand");
  CHECK(check({push, 1, push, 2}, 1) == "a size program that leaves 2 values, not one");
  std::vector<int64_t> long_program;
  for (size_t i = 0; i <= kMaxSizeProgramLength; ++i) long_program.insert(long_program.end(), {push, 1});
  CHECK(check(long_program, 0).find("instructions (at most 4096)") != std::string::npos);
  std::vector<int64_t> deep_program;  // pushes one value more than the evaluator's stack holds
  for (size_t i = 0; i <= kMaxSizeProgramDepth; ++i) deep_program.insert(deep_program.end(), {push, 1});
  CHECK(check(deep_program, 0) == "size program instruction 256: more than 256 values on the stack");
}

TEST_CASE("evaluate_size_program: C's division, and nothing on overflow or a zero divisor") {
  const int64_t push = op(SizeOp::kPush), var = op(SizeOp::kVariable);
  auto run = [](std::vector<int64_t> program, std::vector<int64_t> variables = {}) {
    return evaluate_size_program(program, variables);
  };
  CHECK(run({push, -7, push, 2, op(SizeOp::kDiv), 0}) == -3);
  CHECK(run({push, -7, push, 2, op(SizeOp::kMod), 0}) == -1);
  CHECK(run({push, 7, push, -2, op(SizeOp::kMod), 0}) == 1);
  CHECK(run({var, 0, var, 1, op(SizeOp::kMin), 0}, {4, 9}) == 4);
  CHECK(run({var, 0, push, 3, op(SizeOp::kMul), 0, push, 1, op(SizeOp::kSub), 0}, {512}) == 1535);
  CHECK(!run({push, 1, push, 0, op(SizeOp::kDiv), 0}));
  CHECK(!run({push, INT64_MIN, push, -1, op(SizeOp::kDiv), 0}));
  CHECK(!run({push, INT64_MAX, push, 1, op(SizeOp::kAdd), 0}));
  CHECK(!run({push, INT64_MAX / 2 + 1, push, 2, op(SizeOp::kMul), 0}));
  // Unchecked input is still safe: a missing variable or an underflowing stack gives nothing.
  CHECK(!run({var, 3}, {1}));
  CHECK(!run({op(SizeOp::kAdd), 0}));
}

TEST_CASE("write_size_program computes what the IR evaluator computes, on 2,000 random expressions") {
  UOpPtr n = variable("n", 1, 64), m = variable("m", 1, 64);
  const std::map<std::string, int64_t> numbers{{"m", 0}, {"n", 1}};
  std::mt19937_64 random(20261126);
  int compared = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    UOpPtr expression = random_expression(random, n, m, 4);
    std::vector<int64_t> program = write_size_program(expression, numbers);
    REQUIRE(check_size_program(program, 2).empty());
    for (int sample = 0; sample < 4; ++sample) {
      int64_t n_value = std::uniform_int_distribution<int64_t>(1, 64)(random);
      int64_t m_value = std::uniform_int_distribution<int64_t>(1, 64)(random);
      std::optional<ScalarValue> want = evaluate(expression, {{"n", n_value}, {"m", m_value}});
      std::vector<int64_t> values{m_value, n_value};
      std::optional<int64_t> got = evaluate_size_program(program, values);
      CAPTURE(trial);
      CAPTURE(n_value);
      CAPTURE(m_value);
      CHECK(want.has_value() == got.has_value());  // a zero divisor on both sides
      if (want && got) {
        CHECK(want->integer == got.value());
        ++compared;
      }
    }
  }
  CHECK(compared > 4000);  // most samples have no zero divisor
}

TEST_CASE("write_size_program names what it cannot write") {
  UOpPtr n = variable("n", 1, 8);
  const std::map<std::string, int64_t> numbers{{"n", 0}};
  UOpPtr select = UOp::make(Ops::WHERE, dtypes::index,
                            {UOp::make(Ops::CMPLT, dtypes::bool_, {n, const_int(dtypes::index, 4)}), n,
                             const_int(dtypes::index, 4)});
  CHECK_THROWS_WITH_AS(write_size_program(select, numbers), "unsupported: WHERE in a size expression", UserError);
  CHECK_THROWS_WITH_AS(write_size_program(variable("k", 1, 8), numbers),
                       "a size expression reads variable 'k', which the plan does not define", UserError);
}

TEST_CASE("size programs print as infix text with only the parentheses evaluation needs") {
  std::vector<std::string> names{"batch", "n"};
  auto text = [&](std::vector<int64_t> program) {
    REQUIRE(check(program, names.size()).empty());
    return size_program_text(program, names);
  };
  int64_t push = op(SizeOp::kPush), var = op(SizeOp::kVariable);
  CHECK(text({var, 1}) == "n");
  CHECK(text({push, 2, var, 1, op(SizeOp::kMul), 0}) == "2 * n");
  CHECK(text({var, 1, push, 1, op(SizeOp::kAdd), 0, push, 2, op(SizeOp::kDiv), 0}) == "(n + 1) // 2");
  // a - (b + c) and a * (b // c) keep their parentheses; a + (b - c) and a * (b * c) need none.
  CHECK(text({var, 0, var, 1, push, 1, op(SizeOp::kAdd), 0, op(SizeOp::kSub), 0}) == "batch - (n + 1)");
  CHECK(text({var, 0, var, 1, push, 2, op(SizeOp::kDiv), 0, op(SizeOp::kMul), 0}) == "batch * (n // 2)");
  CHECK(text({var, 0, var, 1, push, 1, op(SizeOp::kSub), 0, op(SizeOp::kAdd), 0}) == "batch + n - 1");
  CHECK(text({var, 0, var, 1, push, 3, op(SizeOp::kMul), 0, op(SizeOp::kMul), 0}) == "batch * n * 3");
  CHECK(text({var, 0, push, 4, op(SizeOp::kMod), 0, var, 1, op(SizeOp::kMax), 0}) == "max(batch % 4, n)");
  CHECK(text({push, -3, var, 0, op(SizeOp::kMin), 0}) == "min(-3, batch)");
}

TEST_CASE("a program is exactly one variable only when it is one kVariable instruction") {
  CHECK(size_program_variable(std::vector<int64_t>{op(SizeOp::kVariable), 3}) == 3);
  CHECK(size_program_variable(std::vector<int64_t>{op(SizeOp::kPush), 3}) == -1);
  CHECK(size_program_variable(std::vector<int64_t>{op(SizeOp::kVariable), 0, op(SizeOp::kPush), 1,
                                                   op(SizeOp::kMul), 0}) == -1);
}
