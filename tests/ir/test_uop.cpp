// Unit tests of UOp: interning (equal structure is one object), freeing of unreferenced nodes,
// very deep graphs, concurrent construction from many threads, provenance, structural hashing and
// ordering, toposort and with_srcs.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/build.h"
#include "ir/uop.h"
#include "support/error.h"

namespace kiln {
namespace {

TEST_CASE("equal structure is the same node") {
  UOpPtr x = variable("intern_x", 0, 9), y = variable("intern_y", 0, 9);
  CHECK(const_int(dtypes::i32, 5) == const_int(dtypes::i32, 5));
  CHECK(variable("intern_x", 0, 9) == x);
  CHECK((x + y) == (x + y));
  CHECK(((x + y) * 3) == ((x + y) * 3));
  CHECK(UOp::make(Ops::ADD, dtypes::index, {x, y}).get() == (x + y).get());
  CHECK(const_float(dtypes::f32, 1.5) == const_float(dtypes::f32, 1.5));
  CHECK(sink({x, y}) == sink({x, y}));
}

TEST_CASE("any difference in op, dtype, argument or sources gives a different node") {
  UOpPtr x = variable("diff_x", 0, 9), y = variable("diff_y", 0, 9);
  CHECK(const_int(dtypes::i32, 5) != const_int(dtypes::i64, 5));
  CHECK(const_int(dtypes::i32, 5) != const_int(dtypes::i32, 6));
  CHECK((x + y) != (x * y));
  CHECK((x + y) != (y + x));  // source order is part of the structure
  CHECK((x + y) != (x + x));
  CHECK(variable("diff_x", 0, 9) != variable("diff_x", 0, 10));
  CHECK(variable("diff_x", 0, 9) != variable("diff_x", 0, 9, dtypes::i32));
  // Vector and pointer dtypes are distinct from their scalar.
  CHECK(UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(), {}, int64_t{0}) !=
        UOp::make(Ops::DEFINE_GLOBAL, dtypes::f32.ptr(AddrSpace::Local), {}, int64_t{0}));
  CHECK(UOp::make(Ops::VECTORIZE, dtypes::index.vec(2), {x, y}) !=
        UOp::make(Ops::VECTORIZE, dtypes::index.vec(2), {y, x}));
  // The argument's alternative matters, not only its numeric value.
  UOpPtr as_int = UOp::make(Ops::NOOP, dtypes::void_, {}, int64_t{0});
  UOpPtr as_bool = UOp::make(Ops::NOOP, dtypes::void_, {}, false);
  UOpPtr as_double = UOp::make(Ops::NOOP, dtypes::void_, {}, 0.0);
  UOpPtr as_none = UOp::make(Ops::NOOP, dtypes::void_, {});
  CHECK(as_int != as_bool);
  CHECK(as_int != as_double);
  CHECK(as_bool != as_double);
  CHECK(as_none != as_int);
}

TEST_CASE("float constants intern by their bits") {
  // 0.0 and -0.0 compare equal as numbers but are different constants (1/x differs).
  UOpPtr positive_zero = const_float(dtypes::f32, 0.0), negative_zero = const_float(dtypes::f32, -0.0);
  CHECK(positive_zero != negative_zero);
  CHECK(std::signbit(negative_zero->arg_float()));
  CHECK_FALSE(std::signbit(positive_zero->arg_float()));
  // A NaN constant is equal to itself, although NaN != NaN as a number.
  double nan = std::numeric_limits<double>::quiet_NaN();
  UOpPtr first_nan = const_float(dtypes::f32, nan), second_nan = const_float(dtypes::f32, nan);
  CHECK(first_nan == second_nan);
  // NaNs with other payloads are other constants.
  double other_nan = std::nan("7");
  uint64_t bits_a, bits_b;
  std::memcpy(&bits_a, &nan, 8);
  std::memcpy(&bits_b, &other_nan, 8);
  REQUIRE(bits_a != bits_b);
  CHECK(const_float(dtypes::f32, other_nan) != first_nan);
}

TEST_CASE("make checks the source count and null sources") {
  UOpPtr x = variable("arity_x", 0, 9);
  CHECK_THROWS_AS(UOp::make(Ops::ADD, dtypes::index, {x}), InternalError);
  CHECK_THROWS_AS(UOp::make(Ops::NEG, dtypes::index, {x, x}), InternalError);
  CHECK_THROWS_AS(UOp::make(Ops::CONST, dtypes::index, {x}, int64_t{1}), InternalError);
  CHECK_THROWS_AS(UOp::make(Ops::ADD, dtypes::index, {x, nullptr}), InternalError);
  // Variadic ops take any number.
  CHECK(UOp::make(Ops::SINK, dtypes::void_, {x, x, x})->src_count() == 3);
}

TEST_CASE("typed argument accessors") {
  CHECK(const_int(dtypes::i32, -3)->arg_int() == -3);
  CHECK(const_float(dtypes::f64, 2.5)->arg_float() == 2.5);
  CHECK(const_bool(true)->arg_bool());
  CHECK(variable("acc_v", -2, 7)->arg_variable() == VariableSpec{"acc_v", -2, 7});
  CHECK(range(8, 3)->arg_int() == 3);
  CHECK_THROWS_AS(const_float(dtypes::f32, 1.0)->arg_int(), InternalError);
  CHECK_THROWS_AS(const_int(dtypes::i32, 1)->arg_float(), InternalError);
  CHECK_THROWS_AS(const_int(dtypes::i32, 1)->arg_variable(), InternalError);
  // u64 constants store their bit pattern; const_int reads them back unsigned.
  UOpPtr big = UOp::make(Ops::CONST, dtypes::u64, {}, int64_t{-1});
  CHECK(big->const_int() == static_cast<int128>(std::numeric_limits<uint64_t>::max()));
  CHECK(const_int(dtypes::i64, -1)->const_int() == -1);
  CHECK(const_bool(true)->const_int() == 1);
  CHECK_THROWS_AS(variable("acc_w", 0, 1)->const_int(), InternalError);
}

TEST_CASE("nodes leave the table when the last reference goes") {
  size_t baseline = UOp::live_count();
  {
    UOpPtr x = variable("free_x", 0, 100);
    UOpPtr sum = x * 3 + x;  // free_x, 3, MUL, ADD
    CHECK(UOp::live_count() == baseline + 4);
    UOpPtr same = x * 3 + x;  // no new nodes
    CHECK(UOp::live_count() == baseline + 4);
    UOpPtr product = x * 3;
    sum = nullptr;
    same = nullptr;
    // Only the ADD is unreferenced now; the MUL and its sources stay.
    CHECK(UOp::live_count() == baseline + 3);
    CHECK(product->src(0) == x);
  }
  CHECK(UOp::live_count() == baseline);
}

TEST_CASE("a released node is created afresh, with the same structure and hash") {
  size_t baseline = UOp::live_count();
  UOpPtr x = variable("refresh_x", 0, 100);
  UOpPtr node = (x + 7) * x;
  uint64_t hash = node->hash();
  node = nullptr;
  x = nullptr;
  REQUIRE(UOp::live_count() == baseline);
  UOpPtr rebuilt = (variable("refresh_x", 0, 100) + 7) * variable("refresh_x", 0, 100);
  // The hash does not depend on the objects, only on the structure.
  CHECK(rebuilt->hash() == hash);
  CHECK(rebuilt->op() == Ops::MUL);
}

TEST_CASE("a chain of a million nodes is built, sorted and released without overflowing the stack") {
  size_t baseline = UOp::live_count();
  constexpr int depth = 1'000'000;
  {
    UOpPtr node = variable("deep_x", 0, 10);
    for (int i = 0; i < depth; ++i) node = -node;
    CHECK(UOp::live_count() == baseline + depth + 1);
    std::vector<const UOp*> order = toposort(node);
    CHECK(order.size() == static_cast<size_t>(depth) + 1);
    CHECK(order.front()->op() == Ops::DEFINE_VAR);
    CHECK(order.back() == node.get());
    // Releasing the root frees the whole chain: a recursive release would overflow the stack here.
  }
  CHECK(UOp::live_count() == baseline);
}

// A deterministic graph of a few dozen nodes over shared variables, chosen by `seed`.
UOpPtr build_graph(uint64_t seed) {
  std::mt19937_64 random(seed);
  std::vector<UOpPtr> pool = {variable("mt_a", 0, 15), variable("mt_b", -8, 8), variable("mt_c", 1, 64)};
  for (int i = 0; i < 24; ++i) {
    const UOpPtr& a = pool[random() % pool.size()];
    const UOpPtr& b = pool[random() % pool.size()];
    int64_t constant = static_cast<int64_t>(random() % 7) + 1;
    switch (random() % 5) {
      case 0: pool.push_back(a + b); break;
      case 1: pool.push_back(a * constant); break;
      case 2: pool.push_back(a % constant); break;
      case 3: pool.push_back(maximum(a, b)); break;
      default: pool.push_back(where(lt(a, b), a, b + constant)); break;
    }
  }
  return sink(pool);
}

TEST_CASE("concurrent construction: identical structure gives identical nodes across threads") {
  size_t baseline = UOp::live_count();
  constexpr int thread_count = 8, shared_graphs = 32, rounds = 600;
  std::vector<std::vector<UOpPtr>> kept(thread_count, std::vector<UOpPtr>(shared_graphs));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_count; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 order(static_cast<unsigned>(t));
      for (int round = 0; round < rounds; ++round) {
        // Churn: graphs that other threads build and drop at the same moment (the race between a
        // last release and a lookup), and graphs no other thread builds.
        UOpPtr shared = build_graph(static_cast<uint64_t>(round % 8));
        UOpPtr unique = build_graph(1'000'000 + static_cast<uint64_t>(t) * 10'000 + static_cast<uint64_t>(round));
        if (build_graph(static_cast<uint64_t>(round % 8)) != shared) failures.fetch_add(1);
        // Keep one of the shared graphs, in a different order on each thread.
        int k = static_cast<int>(order() % shared_graphs);
        UOpPtr kept_graph = build_graph(100 + static_cast<uint64_t>(k));
        if (kept[static_cast<size_t>(t)][static_cast<size_t>(k)] &&
            kept[static_cast<size_t>(t)][static_cast<size_t>(k)] != kept_graph)
          failures.fetch_add(1);
        kept[static_cast<size_t>(t)][static_cast<size_t>(k)] = kept_graph;
      }
      for (int k = 0; k < shared_graphs; ++k)
        if (!kept[static_cast<size_t>(t)][static_cast<size_t>(k)])
          kept[static_cast<size_t>(t)][static_cast<size_t>(k)] = build_graph(100 + static_cast<uint64_t>(k));
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(failures.load() == 0);
  for (int k = 0; k < shared_graphs; ++k) {
    UOpPtr reference = build_graph(100 + static_cast<uint64_t>(k));
    for (int t = 0; t < thread_count; ++t) {
      INFO("graph ", k, " of thread ", t);
      CHECK(kept[static_cast<size_t>(t)][static_cast<size_t>(k)] == reference);
    }
  }
  kept.clear();
  CHECK(UOp::live_count() == baseline);
}

TEST_CASE("concurrent release of shared subgraphs leaves nothing behind") {
  size_t baseline = UOp::live_count();
  UOpPtr x = variable("release_x", 0, 1000);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([x] {
      for (int round = 0; round < 3000; ++round) {
        // Every thread builds and drops the same small graph, so the last reference to a node is
        // often dropped by one thread while another looks it up.
        UOpPtr node = (x + round % 16) * 2 + x;
        node = nullptr;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  x = nullptr;
  CHECK(UOp::live_count() == baseline);
}

TEST_CASE("provenance: scope tag, call-site line, first creator wins") {
  UOpPtr tagged;
  {
    ProvenanceScope scope("node 'conv1' (Conv, opset 13)");
    tagged = const_int(dtypes::i32, 424242);
  }
  REQUIRE(tagged->provenance().tag != nullptr);
  CHECK(*tagged->provenance().tag == "node 'conv1' (Conv, opset 13)");

  // Outside any scope no tag is recorded.
  CHECK(const_int(dtypes::i32, 424243)->provenance().tag == nullptr);

  // Nested scopes: the inner tag applies inside, the outer one again afterwards.
  {
    ProvenanceScope outer("outer");
    UOpPtr in_outer = const_int(dtypes::i32, 424244);
    UOpPtr in_inner;
    {
      ProvenanceScope inner("inner");
      in_inner = const_int(dtypes::i32, 424245);
    }
    UOpPtr after_inner = const_int(dtypes::i32, 424246);
    CHECK(*in_outer->provenance().tag == "outer");
    CHECK(*in_inner->provenance().tag == "inner");
    CHECK(*after_inner->provenance().tag == "outer");
  }

  // A second builder of the same structure gets the existing node, with the first provenance.
  {
    ProvenanceScope scope("second builder");
    UOpPtr again = const_int(dtypes::i32, 424242);
    CHECK(again == tagged);
    CHECK(*again->provenance().tag == "node 'conv1' (Conv, opset 13)");
  }

  // UOp::make records the C++ call site that built the node.
  unsigned line = __LINE__ + 1;
  UOpPtr located = UOp::make(Ops::CONST, dtypes::i64, {}, int64_t{777001});
  CHECK(located->provenance().location.line() == line);
  CHECK(std::string(located->provenance().location.file_name()).find("test_uop.cpp") != std::string::npos);
}

TEST_CASE("with_srcs returns the same node when unchanged and keeps the provenance otherwise") {
  UOpPtr x = variable("with_x", 0, 9), y = variable("with_y", 0, 9), z = variable("with_z", 0, 9);
  UOpPtr sum;
  unsigned line = 0;
  {
    ProvenanceScope scope("node 'add0' (Add)");
    line = __LINE__ + 1;
    sum = UOp::make(Ops::ADD, dtypes::index, {x, y});
  }
  CHECK(sum->with_srcs({x, y}) == sum);
  CHECK(sum->with_srcs(sum->srcs()).get() == sum.get());
  UOpPtr changed = sum->with_srcs({x, z});
  CHECK(changed != sum);
  CHECK(changed == x + z);
  CHECK(changed->op() == Ops::ADD);
  CHECK(changed->dtype() == dtypes::index);
  // The rebuilt node is still the same model node: it keeps the tag and the original call site.
  REQUIRE(changed->provenance().tag != nullptr);
  CHECK(*changed->provenance().tag == "node 'add0' (Add)");
  CHECK(changed->provenance().location.line() == line);
}

TEST_CASE("toposort lists each reachable node once, after its sources") {
  UOpPtr x = variable("topo_x", 0, 9), y = variable("topo_y", 0, 9);
  UOpPtr shared = x * y;
  UOpPtr root = sink({shared + x, shared - y, where(lt(shared, 5), x, y)});
  std::vector<const UOp*> order = toposort(root);
  std::unordered_map<const UOp*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) {
    CHECK_MESSAGE(position.emplace(order[i], i).second, "node listed twice: ", op_name(order[i]->op()));
  }
  for (const UOp* node : order)
    for (const UOpPtr& source : node->srcs()) {
      REQUIRE(position.count(source.get()) == 1);
      CHECK(position[source.get()] < position[node]);
    }
  CHECK(order.back() == root.get());
  // x, y, x*y, +, -, 5, <, where, sink
  CHECK(order.size() == 9);
  CHECK(toposort(nullptr).empty());
  CHECK(toposort(x).size() == 1);
}

TEST_CASE("structural hash and structural_compare agree with structure") {
  UOpPtr x = variable("hash_x", 0, 9), y = variable("hash_y", 0, 9);
  // The same structure built twice: one node, one hash.
  UOpPtr first = (x + y) * 4, second = (x + y) * 4;
  CHECK(first->hash() == second->hash());
  CHECK(structural_compare(first.get(), second.get()) == 0);

  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<UOpPtr> nodes = {
      x, y, x + y, y + x, x * y, (x + y) * 4, (x + y) * 5, const_int(dtypes::i32, 1), const_int(dtypes::i64, 1),
      const_int(dtypes::index, -1), const_float(dtypes::f32, 0.0), const_float(dtypes::f32, -0.0),
      const_float(dtypes::f32, 1.0), const_float(dtypes::f32, nan), const_float(dtypes::f32, -2.0),
      const_float(dtypes::f64, 1.0), variable("hash_x", 0, 10), lt(x, y), cast(x, dtypes::f32), sink({x, y}),
  };
  for (const UOpPtr& a : nodes) {
    for (const UOpPtr& b : nodes) {
      INFO(op_name(a->op()), " ", a->dtype().name(), " vs ", op_name(b->op()), " ", b->dtype().name());
      int ab = structural_compare(a.get(), b.get()), ba = structural_compare(b.get(), a.get());
      // Distinct interned nodes are structurally different, so the order never calls them equal.
      CHECK((ab == 0) == (a == b));
      // Antisymmetric.
      CHECK(ab == -ba);
      CHECK((ab > 0) == (ba < 0));
      for (const UOpPtr& c : nodes) {
        // Transitive.
        if (ab < 0 && structural_compare(b.get(), c.get()) < 0) CHECK(structural_compare(a.get(), c.get()) < 0);
      }
    }
  }
  // The order does not depend on where nodes live: sorting gives the same sequence of hashes
  // whatever the initial order.
  std::vector<UOpPtr> forward = nodes, backward(nodes.rbegin(), nodes.rend());
  auto less = [](const UOpPtr& a, const UOpPtr& b) { return structural_compare(a.get(), b.get()) < 0; };
  std::sort(forward.begin(), forward.end(), less);
  std::sort(backward.begin(), backward.end(), less);
  CHECK(forward == backward);
}

TEST_CASE("structural hashes differ for different structure") {
  UOpPtr x = variable("hd_x", 0, 9), y = variable("hd_y", 0, 9);
  std::vector<UOpPtr> nodes = {x, y, x + y, y + x, x * y, x - y, (x + y) * 4, const_int(dtypes::i32, 1),
                               const_int(dtypes::i64, 1), const_int(dtypes::i32, 2), lt(x, y), sink({x, y})};
  std::unordered_set<uint64_t> hashes;
  for (const UOpPtr& node : nodes) hashes.insert(node->hash());
  CHECK(hashes.size() == nodes.size());
}

}  // namespace
}  // namespace kiln
