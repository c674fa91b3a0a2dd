// Benchmark of the rewrite machinery: graph_rewrite throughput of the symbolic simplifier on a large
// random index-arithmetic graph, interning throughput (new nodes and hits, one and two threads), and
// the peak number of live nodes. Prints a table; run with KILN_VERIFY=0 (bench/meson.build sets it).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "ir/build.h"
#include "passes/symbolic.h"
#include "rewrite/graph_rewrite.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Polls UOp::live_count() in the background and keeps the largest value seen.
class PeakSampler {
 public:
  PeakSampler() : thread_([this] {
    while (!stop_.load(std::memory_order_relaxed)) {
      sample();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }) {}
  ~PeakSampler() {
    stop_ = true;
    thread_.join();
  }
  void sample() {
    size_t now = UOp::live_count();
    size_t seen = peak_.load(std::memory_order_relaxed);
    while (now > seen && !peak_.compare_exchange_weak(seen, now)) {
    }
  }
  size_t peak() const { return peak_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<size_t> peak_{0};
  std::thread thread_;
};

// A random DAG of index arithmetic of the kind rangeify and the optimiser produce: sums of scaled
// loop indices and variables, divisions and remainders by constants, max and where. Operands come
// mostly from the recently built nodes, so expressions are deep and share subexpressions.
UOpPtr random_index_graph(size_t target_nodes, uint64_t seed) {
  std::mt19937_64 random(seed);
  auto pick = [&](size_t bound) { return static_cast<size_t>(random() % bound); };
  auto constant = [&](int64_t low, int64_t high) {
    return const_int(dtypes::index, low + static_cast<int64_t>(random() % static_cast<uint64_t>(high - low + 1)));
  };
  std::vector<UOpPtr> leaves;
  for (int i = 0; i < 8; ++i) leaves.push_back(variable("v" + std::to_string(i), 0, int64_t{16} << i));
  for (int i = 0; i < 6; ++i) leaves.push_back(range(int64_t{4} << i, i));
  std::vector<UOpPtr> nodes = leaves;
  size_t baseline = UOp::live_count();
  while (UOp::live_count() - baseline < target_nodes) {
    auto operand = [&]() -> const UOpPtr& {
      if (random() % 8 == 0) return leaves[pick(leaves.size())];
      size_t window = std::min<size_t>(nodes.size(), 256);
      return nodes[nodes.size() - 1 - pick(window)];
    };
    const UOpPtr& a = operand();
    const UOpPtr& b = operand();
    switch (random() % 10) {
      case 0: nodes.push_back(a + b); break;
      case 1: nodes.push_back(a * constant(2, 16)); break;
      case 2: nodes.push_back(a / constant(2, 16)); break;
      case 3: nodes.push_back(a % constant(2, 16)); break;
      case 4: nodes.push_back(a - b); break;
      case 5: nodes.push_back(a + constant(-8, 8)); break;
      case 6: nodes.push_back(maximum(a, b)); break;
      case 7: nodes.push_back(where(lt(a, constant(1, 64)), a, b)); break;
      case 8: nodes.push_back(a * constant(1, 8) + b); break;
      default: nodes.push_back((a + b * constant(2, 4)) % constant(4, 32)); break;
    }
  }
  return sink(std::move(nodes));
}

struct RewriteResult {
  double seconds = 0;
  RewriteStats stats;
  size_t result_nodes = 0;
};

RewriteResult run_symbolic(const UOpPtr& graph) {
  RewriteResult result;
  auto start = Clock::now();
  UOpPtr simplified = graph_rewrite(graph, symbolic(), {.pass_name = "bench", .stats = &result.stats});
  result.seconds = seconds_since(start);
  result.result_nodes = toposort(simplified).size();
  return result;
}

struct InternResult {
  double new_per_second = 0;
  double hits_per_second = 0;
};

// Each thread makes `count` new ADD nodes over its own variable (all new), then makes the same
// structure again `rounds` times while holding it (all hits). With several threads, the hits are
// on structure every thread shares, so they contend on the same shards and reference counts.
InternResult intern_throughput(int threads, size_t count, int rounds) {
  std::vector<std::vector<UOpPtr>> constants(static_cast<size_t>(threads));
  std::vector<UOpPtr> shared_constants;
  for (size_t i = 0; i < count; ++i) shared_constants.push_back(const_int(dtypes::index, static_cast<int64_t>(i)));
  UOpPtr shared_variable = variable("shared", 0, 1000);
  std::vector<std::vector<UOpPtr>> kept(static_cast<size_t>(threads));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};

  auto barrier_run = [&](auto work) {
    std::vector<std::thread> pool;
    ready = 0;
    go = false;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) std::this_thread::yield();
        work(t);
      });
    while (ready.load() < threads) std::this_thread::yield();
    auto start = Clock::now();
    go = true;
    for (std::thread& thread : pool) thread.join();
    return seconds_since(start);
  };

  InternResult result;
  double new_seconds = barrier_run([&](int t) {
    UOpPtr own = variable("own" + std::to_string(t), 0, 1000);
    std::vector<UOpPtr>& mine = kept[static_cast<size_t>(t)];
    mine.reserve(count);
    for (size_t i = 0; i < count; ++i) mine.push_back(UOp::make(Ops::ADD, dtypes::index, {own, shared_constants[i]}));
  });
  result.new_per_second = static_cast<double>(count) * threads / new_seconds;
  // The structure every thread re-interns: built once, held, then looked up again and again.
  std::vector<UOpPtr> shared;
  for (size_t i = 0; i < count; ++i)
    shared.push_back(UOp::make(Ops::MUL, dtypes::index, {shared_variable, shared_constants[i]}));
  double hit_seconds = barrier_run([&](int) {
    for (int round = 0; round < rounds; ++round)
      for (size_t i = 0; i < count; ++i) {
        UOpPtr again = UOp::make(Ops::MUL, dtypes::index, {shared_variable, shared_constants[i]});
        if (again != shared[i]) std::abort();  // interning is broken: the benchmark would be meaningless
      }
  });
  result.hits_per_second = static_cast<double>(count) * rounds * threads / hit_seconds;
  return result;
}

}  // namespace
}  // namespace kiln

int main() {
  using namespace kiln;
  std::printf("kiln rewrite benchmark%s\n",
              verification_enabled() ? "  (WARNING: KILN_VERIFY is on; set KILN_VERIFY=0)" : "  (KILN_VERIFY=0)");
  size_t baseline = UOp::live_count();
  PeakSampler sampler;

  // (a) graph_rewrite of symbolic() over a large random graph.
  auto build_start = Clock::now();
  UOpPtr graph = random_index_graph(250'000, 42);
  double build_seconds = seconds_since(build_start);
  size_t graph_nodes = toposort(graph).size();
  size_t live_after_build = UOp::live_count() - baseline;
  RewriteResult first = run_symbolic(graph);
  sampler.sample();
  size_t peak_during_rewrite = sampler.peak() - baseline;
  // Again, now that the result's nodes exist: interning hits instead of new nodes.
  RewriteResult warm = run_symbolic(graph);
  RewriteResult warm2 = run_symbolic(graph);
  if (warm2.seconds < warm.seconds) warm = warm2;

  std::printf("\n(a) graph_rewrite(symbolic) on a random index graph of %zu nodes (built in %.2f s), "
              "result %zu nodes\n",
              graph_nodes, build_seconds, first.result_nodes);
  std::printf("  %-24s %10s %12s %14s %14s\n", "run", "seconds", "visited", "visited/s", "rules fired");
  for (const auto& [name, run] : {std::pair<const char*, const RewriteResult&>{"first (cold)", first},
                                  std::pair<const char*, const RewriteResult&>{"repeat (best of 2)", warm}})
    std::printf("  %-24s %10.3f %12llu %14.0f %14llu\n", name, run.seconds,
                static_cast<unsigned long long>(run.stats.nodes_visited),
                static_cast<double>(run.stats.nodes_visited) / run.seconds,
                static_cast<unsigned long long>(run.stats.rules_fired));
  std::printf("  rules fired per second (cold): %.0f\n", static_cast<double>(first.stats.rules_fired) / first.seconds);

  // (b) interning.
  std::printf("\n(b) interning (UOp::make)\n");
  std::printf("  %-10s %16s %16s\n", "threads", "new nodes/s", "hits/s");
  for (int threads : {1, 2}) {
    InternResult result = intern_throughput(threads, 200'000, 5);
    std::printf("  %-10d %16.0f %16.0f\n", threads, result.new_per_second, result.hits_per_second);
  }

  // (c) memory.
  sampler.sample();
  std::printf("\n(c) live nodes\n");
  std::printf("  after building the graph:        %zu\n", live_after_build);
  std::printf("  peak during the first rewrite:   %zu\n", peak_during_rewrite);
  std::printf("  peak over the whole benchmark:   %zu\n", sampler.peak() - baseline);
  graph = nullptr;
  std::printf("  after releasing everything:      %zu\n", UOp::live_count() - baseline);
  return 0;
}
