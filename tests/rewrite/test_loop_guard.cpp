// The loop guard of graph_rewrite (STYLE.md habit 7): a rule table that rewrites in a cycle, or that
// keeps producing new nodes, stops with an InternalError naming the table, the pass and the rule —
// never a hang. Tables that merely take many steps still converge.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "ir/build.h"
#include "rewrite/graph_rewrite.h"
#include "support/error.h"

namespace kiln {
namespace {

const UPat x = UPat::var("x"), y = UPat::var("y");

// The message of the InternalError that `rewrite` throws, or "" if it returns.
template <class Rewrite>
std::string error_of(Rewrite rewrite) {
  try {
    rewrite();
  } catch (const InternalError& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// x+y → y+x with no canonical order: a → b → a.
const PatternMatcher& swap_rules() {
  static const PatternMatcher table("swap", {
      {x + y, [](const Match& m) { return m["y"] + m["x"]; }, "x+y → y+x"},
  });
  return table;
}

// Two rules that undo each other: -x → !x and !x → -x.
const PatternMatcher& ping_pong_rules() {
  static const PatternMatcher table("ping_pong", {
      {-x.ints(), [](const Match& m) { return logical_not(m["x"]); }, "-x → !x"},
      {logical_not(x.ints()), [](const Match& m) { return -m["x"]; }, "!x → -x"},
  });
  return table;
}

// c → c+1 on index constants: every step is a node never seen before.
const PatternMatcher& count_up_rules() {
  static const PatternMatcher table("count_up", {
      {UPat::cvar("c").index(),
       [](const Match& m) { return const_like(m["c"], static_cast<int64_t>(m.get("c")->const_int()) + 1); },
       "c → c+1"},
  });
  return table;
}

TEST_CASE("a two-step cycle stops with the loop error naming table, pass and rule") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  const Rule& rule = swap_rules().rules()[0];
  std::string expected = "rewrite loop in rule table 'swap' (pass 'canonicalise'): rule 'x+y → y+x' (" +
                         rule_location(rule) +
                         ") produced a graph that contains a node already being rewritten (ADD: a+b)";
  CHECK_THROWS_WITH_AS(graph_rewrite(a + b, swap_rules(), {.pass_name = "canonicalise"}),
                       doctest::Contains(expected.c_str()), InternalError);
  CHECK(contains(rule_location(rule), "test_loop_guard.cpp:"));
  // The same in top-down order.
  CHECK_THROWS_WITH_AS(
      graph_rewrite(a + b, swap_rules(), {.order = RewriteOrder::TopDown, .pass_name = "canonicalise"}),
      doctest::Contains(expected.c_str()), InternalError);
}

TEST_CASE("the loop error names the rule that closed the cycle and carries the IR") {
  UOpPtr a = variable("a", 0, 9);
  std::string message;
  try {
    graph_rewrite(sink({a * 2, -a + 1}), ping_pong_rules(), {.pass_name = "negation"});
    FAIL("the ping-pong table converged");
  } catch (const InternalError& error) {
    message = error.what();
    // The dump shows the node where the cycle closed.
    CHECK(contains(error.ir_dump(), "NEG index"));
  }
  CHECK(contains(message, "rewrite loop in rule table 'ping_pong' (pass 'negation'): rule '!x → -x' (" +
                              rule_location(ping_pong_rules().rules()[1]) + ")"));
  CHECK(contains(message, "(NEG: -a)"));
  // The first rule alone converges: the cycle needs both.
  PatternMatcher first_only("first_only", {ping_pong_rules().rules()[0]});
  CHECK(graph_rewrite(-a, first_only) == logical_not(a));
}

TEST_CASE("the pass name appears only when given") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  std::string with_pass = error_of([&] { graph_rewrite(a + b, swap_rules(), {.pass_name = "my_pass"}); });
  std::string without_pass = error_of([&] { graph_rewrite(a + b, swap_rules()); });
  CHECK(contains(with_pass, "rule table 'swap' (pass 'my_pass'): "));
  CHECK(contains(without_pass, "rewrite loop in rule table 'swap': rule 'x+y → y+x'"));
  CHECK_FALSE(contains(without_pass, "(pass"));
}

TEST_CASE("a rule that wraps its own input (x → x+0 → x+0+0 …) is stopped") {
  PatternMatcher grow("wrap", {
      {UPat(Ops::DEFINE_VAR).named("v"), [](const Match& m) { return m["v"] + 0; }, "v → v+0"},
  });
  UOpPtr a = variable("a", 0, 9);
  std::string message = error_of([&] { graph_rewrite(a * 3, grow, {.pass_name = "grow"}); });
  CHECK(contains(message, "in rule table 'wrap' (pass 'grow'): rule 'v → v+0' ("));
}

TEST_CASE("a table that keeps producing new nodes stops with the divergence error") {
  auto start = std::chrono::steady_clock::now();
  const Rule& rule = count_up_rules().rules()[0];
  std::string expected = "rewrite did not converge in rule table 'count_up' (pass 'counting'): more than 10000 "
                         "successive rewrites; last rule rule 'c → c+1' (" +
                         rule_location(rule) + ") at CONST";
  UOpPtr root = sink({const_int(dtypes::index, 0)});
  CHECK_THROWS_WITH_AS(graph_rewrite(root, count_up_rules(), {.pass_name = "counting"}),
                       doctest::Contains(expected.c_str()), InternalError);
  CHECK_THROWS_WITH_AS(graph_rewrite(root, count_up_rules(), {.order = RewriteOrder::TopDown, .pass_name = "counting"}),
                       doctest::Contains(expected.c_str()), InternalError);
  // It stops promptly: the guard is a bound on work, not a timeout.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("a growing graph hits the configured chain limit") {
  // SINK(s...) → SINK(s..., n): every step a bigger node that does not contain the last one.
  PatternMatcher grow("grow_sink", {
      {UPat(Ops::SINK).named("s"),
       [](const Match& m) {
         std::vector<UOpPtr> sources = m.get("s")->srcs();
         sources.push_back(const_int(dtypes::index, static_cast<int64_t>(sources.size())));
         return sink(std::move(sources));
       },
       "sink(s...) → sink(s..., n)"},
  });
  std::string message = error_of([&] { graph_rewrite(sink({}), grow, {.max_rewrite_chain = 200}); });
  CHECK(contains(message, "rewrite did not converge in rule table 'grow_sink': more than 200 successive rewrites; "
                          "last rule rule 'sink(s...) → sink(s..., n)' ("));
  CHECK(contains(message, ") at SINK"));
}

TEST_CASE("long chains below the limit converge") {
  PatternMatcher count_to("count_to_5000", {
      {UPat::cvar("c").index(), when(val("c") < 5000),
       [](const Match& m) { return const_like(m["c"], static_cast<int64_t>(m.get("c")->const_int()) + 1); },
       "c → c+1 while c < 5000"},
  });
  RewriteStats stats;
  UOpPtr result = graph_rewrite(sink({const_int(dtypes::index, 0)}), count_to, {.stats = &stats});
  CHECK(result == sink({const_int(dtypes::index, 5000)}));
  CHECK(stats.rules_fired == 5000);
  // The same chain with a lower limit is reported.
  CHECK_THROWS_WITH_AS(graph_rewrite(sink({const_int(dtypes::index, 0)}), count_to, {.max_rewrite_chain = 4999}),
                       doctest::Contains("more than 4999 successive rewrites"), InternalError);
}

}  // namespace
}  // namespace kiln
