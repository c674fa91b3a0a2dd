// Unit tests of graph_rewrite: bottom-up and top-down order, memoisation of shared subgraphs,
// rewriting to a fixed point, the context handed to rules, provenance of rewritten nodes, stats,
// and very deep graphs.
#include <doctest/doctest.h>

#include <string>
#include <unordered_map>

#include "ir/build.h"
#include "rewrite/graph_rewrite.h"
#include "support/ir_test_helpers.h"

namespace kiln {
namespace {

const UPat x = UPat::var("x"), y = UPat::var("y");

// Interned graphs are equal exactly when they are the same node; on a failure, both are printed.
#define CHECK_SAME(actual, expected)                                                          \
  do {                                                                                        \
    UOpPtr kiln_actual_ = (actual), kiln_expected_ = (expected);                              \
    INFO("actual:\n", print_graph(kiln_actual_), "expected:\n", print_graph(kiln_expected_)); \
    CHECK(kiln_actual_ == kiln_expected_);                                                    \
  } while (0)

// Counts rewrite-function calls; handed to rules through RewriteOptions::context.
struct Counter {
  int calls = 0;
};

// Two overlapping rules whose result depends on the order: "(a*b)*c → 2" sees the whole product
// only if the inner product has not been rewritten first by "a*b → 1".
const PatternMatcher& order_sensitive_rules() {
  static const PatternMatcher table("order_sensitive", {
      {UPat(Ops::MUL, {UPat(Ops::MUL), y}), [](const Match& m) { return const_like(m["y"], 2); }, "(a*b)*c → 2"},
      {UPat(Ops::MUL), [](const Match& m) { return const_like(m.root(), 1); }, "a*b → 1"},
  });
  return table;
}

TEST_CASE("bottom-up rewrites sources first, top-down tries the node first") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9), c = variable("c", 0, 9);
  UOpPtr product = (a * b) * c;
  UOpPtr bottom_up = graph_rewrite(product, order_sensitive_rules());
  UOpPtr top_down = graph_rewrite(product, order_sensitive_rules(), {.order = RewriteOrder::TopDown});
  CHECK_EXPR(bottom_up, "1");  // a*b → 1 first, then 1*c → 1
  CHECK_EXPR(top_down, "2");   // (a*b)*c → 2 at the root before its sources are looked at
  // Bottom-up is the default.
  CHECK_SAME(graph_rewrite(product, order_sensitive_rules(), {.order = RewriteOrder::BottomUp}), bottom_up);
}

TEST_CASE("top-down rewrites the sources of a node that no rule changes") {
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9), c = variable("c", 0, 9);
  UOpPtr root = sink({(a * b) * c, a + (b * c)});
  UOpPtr top_down = graph_rewrite(root, order_sensitive_rules(), {.order = RewriteOrder::TopDown});
  CHECK_SAME(top_down, sink({const_int(dtypes::index, 2), a + const_int(dtypes::index, 1)}));
}

TEST_CASE("a shared subgraph is rewritten once") {
  PatternMatcher counting("counting", {
      {x + 0,
       [](const Match& m) {
         ++m.context<Counter>().calls;
         return m["x"];
       },
       "x+0 → x (counted)"},
  });
  UOpPtr a = variable("a", 0, 9);
  UOpPtr shared = a + 0;
  UOpPtr root = sink({shared * 2, shared * 3, shared - a, shared});
  Counter counter;
  RewriteStats stats;
  UOpPtr result = graph_rewrite(root, counting, {.context = &counter, .stats = &stats});
  CHECK_SAME(result, sink({a * 2, a * 3, a - a, a}));
  CHECK(counter.calls == 1);
  CHECK(stats.rules_fired == 1);
  // a, 0, a+0, 2, *2, 3, *3, -a, sink: nine distinct nodes, each processed once.
  CHECK(stats.nodes_visited == 9);
}

TEST_CASE("rules apply until nothing changes") {
  PatternMatcher rules("chain", {
      {x * 2, [](const Match& m) { return m["x"] + m["x"]; }, "x*2 → x+x"},
      {x + x, [](const Match& m) { return m["x"] << const_like(m["x"], 1); }, "x+x → x<<1"},
      {-(-x), [](const Match& m) { return m["x"]; }, "-(-x) → x"},
      {x + 0, [](const Match& m) { return m["x"]; }, "x+0 → x"},
      {UPat(Ops::SUB, {x, x}), [](const Match& m) { return const_like(m["x"], 0); }, "x-x → 0"},
  });
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  // A rule's result is rewritten again (x*2 → x+x → x<<1) ...
  CHECK_EXPR(graph_rewrite(a * 2, rules), "a<<1");
  // ... and so is a parent whose sources changed: (b-b) → 0 enables (a+0) → a, then -(-a) → a.
  CHECK_EXPR(graph_rewrite(-(-(a + (b - b))), rules), "a");
  CHECK_EXPR(graph_rewrite((a + (b - b)) * 2 + b, rules), "(a<<1)+b");
  // Both orders reach the same fixed point for this confluent table.
  UOpPtr mixed = sink({-(-(a + (b - b))) * 2, (b * 2) - (b + b)});
  UOpPtr bottom_up = graph_rewrite(mixed, rules);
  UOpPtr top_down = graph_rewrite(mixed, rules, {.order = RewriteOrder::TopDown});
  CHECK_SAME(bottom_up, top_down);
  CHECK_SAME(bottom_up, sink({a << const_int(dtypes::index, 1), const_int(dtypes::index, 0)}));
  // A graph that no rule touches comes back as the same node.
  UOpPtr untouched = a * 3 + b;
  CHECK_SAME(graph_rewrite(untouched, rules), untouched);
  CHECK_SAME(graph_rewrite(untouched, rules, {.order = RewriteOrder::TopDown}), untouched);
}

TEST_CASE("a rule that declines (returns null or its input) does not fire") {
  PatternMatcher declining("declining", {
      {x + y, [](const Match&) -> UOpPtr { return nullptr; }, "declines"},
      {x + y, [](const Match& m) { return m.root(); }, "returns its input"},
  });
  UOpPtr a = variable("a", 0, 9), b = variable("b", 0, 9);
  RewriteStats stats;
  CHECK_SAME(graph_rewrite(a + b, declining, {.stats = &stats}), a + b);
  CHECK(stats.rules_fired == 0);
  // A guard that fails is a rule that does not apply.
  PatternMatcher guarded("guarded", {
      {UPat(Ops::ADD, {x, y}), when(vmax("x") > vmax("y")), [](const Match& m) { return m["y"] + m["x"]; },
       "x+y → y+x when x is the larger"},
  });
  UOpPtr big = variable("big", 0, 99);
  CHECK_SAME(graph_rewrite(big + a, guarded), a + big);
  CHECK_SAME(graph_rewrite(a + big, guarded), a + big);
}

TEST_CASE("rules read the context") {
  // Substitutes variables by the values in a name → value table.
  using Values = std::unordered_map<std::string, int64_t>;
  PatternMatcher substitute("substitute", {
      {UPat(Ops::DEFINE_VAR).named("v"),
       [](const Match& m) -> UOpPtr {
         const Values& values = m.context<Values>();
         auto found = values.find(m.get("v")->arg_variable().name);
         if (found == values.end()) return nullptr;
         return const_like(m["v"], found->second);
       },
       "v → its value"},
  });
  UOpPtr i = variable("i", 0, 9), j = variable("j", 0, 9);
  Values values = {{"i", 4}};
  CHECK_EXPR(graph_rewrite(i * 3 + j, substitute, {.context = &values}), "4*3+j");
  values["j"] = 5;
  CHECK_EXPR(graph_rewrite(i * 3 + j, substitute, {.context = &values}), "4*3+5");
  // Without a context, Match::context is not consulted by rules that do not need it.
  CHECK_SAME(graph_rewrite(i, PatternMatcher("none", {})), i);
}

TEST_CASE("a replacement inherits the model-level provenance of the node it replaces") {
  PatternMatcher rules("double", {
      {x * 2, [](const Match& m) { return m["x"] + m["x"]; }, "x*2 → x+x"},
  });
  UOpPtr a = variable("prov_a", 0, 9), b = variable("prov_b", 0, 9);
  UOpPtr doubled, root;
  {
    ProvenanceScope scope("node 'mul0' (Mul, opset 13)");
    doubled = a * 2;
  }
  {
    ProvenanceScope scope("node 'add0' (Add, opset 13)");
    root = doubled + b;
  }
  UOpPtr result = graph_rewrite(root, rules);
  REQUIRE(result == (a + a) + b);
  REQUIRE(result->src(0)->provenance().tag != nullptr);
  CHECK(*result->src(0)->provenance().tag == "node 'mul0' (Mul, opset 13)");
  // The parent is rebuilt over the new source and stays the node it was.
  REQUIRE(result->provenance().tag != nullptr);
  CHECK(*result->provenance().tag == "node 'add0' (Add, opset 13)");
  // Rewriting outside any scope does not leak a tag to the thread.
  CHECK(const_int(dtypes::i32, 909090)->provenance().tag == nullptr);
}

TEST_CASE("stats: nodes visited, rules fired, per-rule counts, accumulated across calls") {
  PatternMatcher rules("identities", {
      {x + 0, [](const Match& m) { return m["x"]; }, "x+0 → x"},
      {x * 1, [](const Match& m) { return m["x"]; }, "x*1 → x"},
  });
  UOpPtr a = variable("st_a", 0, 9), b = variable("st_b", 0, 9);
  UOpPtr root = sink({(a + 0) * 1, (b * 1) + 0, a * 1});
  RewriteStats stats;
  UOpPtr result = graph_rewrite(root, rules, {.stats = &stats, .count_rules = true});
  CHECK_SAME(result, sink({a, b, a}));
  CHECK(stats.rules_fired == 4);  // a+0, (a)*1, b*1, (b)+0; a*1 is the same node as the rewritten (a)*1
  REQUIRE(stats.fired_by_rule.size() == 2);
  CHECK(stats.fired_by_rule.at(&rules.rules()[0]) == 2);
  CHECK(stats.fired_by_rule.at(&rules.rules()[1]) == 2);
  // Every node but a*1, which the traversal reached as the rebuilt form of (a+0)*1 and so
  // rewrote there: memoised, it is not processed again.
  uint64_t visited = stats.nodes_visited;
  CHECK(visited == toposort(root).size() - 1);
  // Stats add up over several rewrites.
  graph_rewrite(root, rules, {.stats = &stats, .count_rules = true});
  CHECK(stats.rules_fired == 8);
  CHECK(stats.nodes_visited == 2 * visited);
  CHECK(stats.fired_by_rule.at(&rules.rules()[0]) == 4);
  // Per-rule counts only when asked for.
  RewriteStats plain;
  graph_rewrite(root, rules, {.stats = &plain});
  CHECK(plain.rules_fired == 4);
  CHECK(plain.fired_by_rule.empty());
}

TEST_CASE("deep chains are rewritten without overflowing the stack") {
  constexpr int depth = 200'000;
  size_t baseline = UOp::live_count();
  {
    PatternMatcher rules("negations", {{-(-x), [](const Match& m) { return m["x"]; }, "-(-x) → x"}});
    UOpPtr a = variable("deep_a", 0, 9);
    UOpPtr chain = a;
    for (int i = 0; i < depth; ++i) chain = -chain;
    RewriteStats stats;
    CHECK(graph_rewrite(chain, rules, {.stats = &stats}) == a);  // an even number of negations
    CHECK(graph_rewrite(-chain, rules) == -a);
    // -(-a) is rewritten once; every level above rebuilds into a node already rewritten.
    CHECK(stats.rules_fired == 1);
    CHECK(stats.nodes_visited == static_cast<uint64_t>(depth) + 1);

    // Top-down over the same depth: a substitution at the bottom rebuilds every level above.
    PatternMatcher substitute("substitute", {
        {UPat(Ops::DEFINE_VAR), [](const Match& m) { return const_like(m.root(), 3); }, "a → 3"},
    });
    UOpPtr sum = a;
    for (int i = 0; i < depth; ++i) sum = sum + 1;
    UOpPtr top_down = graph_rewrite(sum, substitute, {.order = RewriteOrder::TopDown});
    CHECK(top_down->op() == Ops::ADD);
    CHECK(toposort(top_down).front() == const_int(dtypes::index, 3).get());
    CHECK(toposort(top_down).size() == static_cast<size_t>(depth) + 2);  // 3, 1 and the additions
  }
  CHECK(UOp::live_count() == baseline);
}

TEST_CASE("graph_rewrite frees its intermediate nodes") {
  size_t baseline = UOp::live_count();
  {
    PatternMatcher rules("double", {{x * 2, [](const Match& m) { return m["x"] + m["x"]; }, "x*2 → x+x"}});
    UOpPtr a = variable("a", 0, 9);
    UOpPtr input = (a * 2) * 2;
    UOpPtr result = graph_rewrite(input, rules);
    CHECK_EXPR(result, "a+a+(a+a)");
    // Only the input's and the result's nodes stay: a, 2, a*2, (a*2)*2, a+a, (a+a)+(a+a); the
    // intermediate (a+a)*2 is gone.
    CHECK(UOp::live_count() == baseline + 6);
  }
  CHECK(UOp::live_count() == baseline);
}

}  // namespace
}  // namespace kiln
