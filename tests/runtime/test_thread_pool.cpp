// Tests of ThreadPool::parallel_for: exact coverage of [0, count), chunk sizes, exceptions,
// concurrent callers, nested calls, and the thread-count configuration.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/thread_pool.h"
#include "support/error.h"

namespace kiln {
namespace {

// Runs parallel_for and checks that every index was visited exactly once and every chunk respected
// min_chunk (a chunk may be shorter only when count itself is).
void check_exact_cover(ThreadPool& pool, int64_t count, int64_t min_chunk) {
  std::vector<std::atomic<int>> visits(static_cast<size_t>(count));
  std::atomic<int64_t> short_chunks{0};
  std::atomic<int64_t> bad_ranges{0};
  pool.parallel_for(
      count,
      [&](int64_t begin, int64_t end) {
        if (begin < 0 || end > count || begin >= end) {
          bad_ranges.fetch_add(1);
          return;
        }
        if (end - begin < std::min(min_chunk, count)) short_chunks.fetch_add(1);
        for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
      },
      min_chunk);
  INFO("count ", count, " min_chunk ", min_chunk, " threads ", pool.thread_count());
  CHECK(bad_ranges.load() == 0);
  CHECK(short_chunks.load() == 0);
  int64_t wrong = 0;
  for (auto& visit : visits) wrong += visit.load() != 1;
  CHECK(wrong == 0);
}

TEST_SUITE("runtime") {
  TEST_CASE("parallel_for covers every index exactly once") {
    for (int threads : {1, 2, 3, 4, 8}) {
      ThreadPool pool(threads);
      CHECK(pool.thread_count() == threads);
      for (int64_t count : {1, 2, 3, 5, 7, 8, 31, 64, 100, 1000, 4097, 100003}) {
        for (int64_t min_chunk : {1, 2, 3, 16, 1000, 1 << 20}) check_exact_cover(pool, count, min_chunk);
      }
    }
  }

  TEST_CASE("parallel_for with max_chunks: an odd count limited to 2 threads still splits in two") {
    // A run limited to T threads used to ask for min_chunk = ceil(count / T): 49 iterations at T = 2
    // became one chunk of 49 (no chunk may be shorter than 25), and ran on one thread.
    ThreadPool pool(4);
    for (int64_t count : {3, 49, 101, 4097}) {
      for (int64_t limit : {2, 3}) {
        std::atomic<int64_t> chunks{0}, covered{0}, shortest{count};
        pool.parallel_for(
            count,
            [&](int64_t begin, int64_t end) {
              chunks.fetch_add(1);
              covered.fetch_add(end - begin);
              int64_t seen = shortest.load();
              while (end - begin < seen && !shortest.compare_exchange_weak(seen, end - begin)) {
              }
            },
            1, limit);
        INFO("count ", count, " max_chunks ", limit);
        CHECK(chunks.load() == std::min(count, limit));
        CHECK(covered.load() == count);
        CHECK(shortest.load() >= count / limit);  // as even as the count allows
      }
    }
    // min_chunk still holds under the cap: 10 iterations, chunks of at least 4, at most 3 chunks.
    check_exact_cover(pool, 10, 4);
    std::atomic<int64_t> chunks{0};
    pool.parallel_for(10, [&](int64_t, int64_t) { chunks.fetch_add(1); }, 4, 3);
    CHECK(chunks.load() == 2);
  }

  TEST_CASE("one chunk per thread, the first on the caller: every call splits the same way") {
    // Thread i computes the i-th part of each kernel's parallel axis, so a kernel split like the one
    // before it reads what the same core wrote (thread_pool.cpp). Before, threads claimed up to four
    // chunks each from a shared counter, in whatever order they got there.
    ThreadPool pool(4);
    std::thread::id caller = std::this_thread::get_id();
    for (int call = 0; call < 3; ++call) {
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> chunks;
      bool first_on_caller = false;
      pool.parallel_for(1002, [&](int64_t begin, int64_t end) {
        std::lock_guard lock(mutex);
        chunks.emplace_back(begin, end);
        if (begin == 0) first_on_caller = std::this_thread::get_id() == caller;
      });
      std::sort(chunks.begin(), chunks.end());
      std::vector<std::pair<int64_t, int64_t>> expected{{0, 251}, {251, 502}, {502, 752}, {752, 1002}};
      CHECK(chunks == expected);
      CHECK(first_on_caller);
    }
  }

  TEST_CASE("parallel_for with count <= 0 calls nothing") {
    ThreadPool pool(4);
    int calls = 0;
    pool.parallel_for(0, [&](int64_t, int64_t) { ++calls; });
    pool.parallel_for(-5, [&](int64_t, int64_t) { ++calls; });
    CHECK(calls == 0);
  }

  TEST_CASE("parallel_for with a non-positive min_chunk behaves as min_chunk 1") {
    ThreadPool pool(3);
    check_exact_cover(pool, 50, 0);
    check_exact_cover(pool, 50, -7);
  }

  TEST_CASE("small counts and one-thread pools run inline on the caller") {
    ThreadPool pool(4);
    std::thread::id caller = std::this_thread::get_id();
    std::thread::id ran_on;
    int calls = 0;
    pool.parallel_for(10, [&](int64_t begin, int64_t end) {
      ++calls;
      ran_on = std::this_thread::get_id();
      CHECK(begin == 0);
      CHECK(end == 10);
    }, /*min_chunk=*/10);
    CHECK(calls == 1);
    CHECK(ran_on == caller);

    ThreadPool single(1);
    calls = 0;
    single.parallel_for(1000000, [&](int64_t begin, int64_t end) {
      ++calls;
      CHECK(begin == 0);
      CHECK(end == 1000000);
      CHECK(std::this_thread::get_id() == caller);
    });
    CHECK(calls == 1);
  }

  TEST_CASE("work is spread over the workers") {
    // Each chunk waits until two different threads have started one, which needs a worker to take
    // part (the wait is bounded so that a failure does not hang the suite).
    ThreadPool pool(2);
    std::atomic<int> started{0};
    std::vector<std::thread::id> ids(8);
    pool.parallel_for(8, [&](int64_t begin, int64_t end) {
      started.fetch_add(1);
      for (int64_t i = begin; i < end; ++i) ids[static_cast<size_t>(i)] = std::this_thread::get_id();
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    });
    bool two_threads = false;
    for (auto& id : ids) two_threads |= id != ids[0];
    CHECK(two_threads);
  }

  TEST_CASE("the first exception reaches the caller and the pool stays usable") {
    ThreadPool pool(4);
    for (int round = 0; round < 50; ++round) {
      std::atomic<int> ran{0};
      CHECK_THROWS_WITH_AS(pool.parallel_for(1000, [&](int64_t begin, int64_t) {
        ran.fetch_add(1);
        if (begin == 0) throw std::runtime_error("chunk zero failed");
      }), "chunk zero failed", std::runtime_error);
      CHECK(ran.load() >= 1);
    }
    // Every chunk throws: exactly one exception comes out.
    CHECK_THROWS_AS(pool.parallel_for(1000, [](int64_t, int64_t) { throw std::logic_error("all"); }),
                    std::logic_error);
    check_exact_cover(pool, 12345, 1);
  }

  TEST_CASE("an exception from an inline run propagates too") {
    ThreadPool pool(1);
    CHECK_THROWS_AS(pool.parallel_for(10, [](int64_t, int64_t) { throw std::out_of_range("x"); }),
                    std::out_of_range);
  }

  TEST_CASE("several threads may call parallel_for on one pool at once") {
    ThreadPool pool(4);
    constexpr int kCallers = 4;
    constexpr int kRounds = 200;
    std::atomic<int64_t> failures{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::vector<int> visits;
        for (int round = 0; round < kRounds; ++round) {
          int64_t count = 1 + (round * 37 + c * 11) % 3000;
          visits.assign(static_cast<size_t>(count), 0);
          // Chunks are disjoint, so plain ints suffice; the pool's synchronisation publishes them.
          pool.parallel_for(count, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) ++visits[static_cast<size_t>(i)];
          });
          for (int v : visits) failures.fetch_add(v != 1);
        }
      });
    }
    for (auto& caller : callers) caller.join();
    CHECK(failures.load() == 0);
  }

  TEST_CASE("nested parallel_for calls run inline and do not deadlock") {
    ThreadPool pool(4);
    ThreadPool other(3);
    constexpr int64_t kOuter = 64;
    constexpr int64_t kInner = 100;
    std::vector<std::atomic<int>> visits(kOuter * kInner);
    std::atomic<int> not_inline{0};
    CHECK_FALSE(ThreadPool::inside_parallel_for());
    pool.parallel_for(kOuter, [&](int64_t begin, int64_t end) {
      CHECK(ThreadPool::inside_parallel_for());
      for (int64_t outer = begin; outer < end; ++outer) {
        std::thread::id here = std::this_thread::get_id();
        // Alternate between the same pool and another one: neither may wait for workers.
        ThreadPool& inner_pool = outer % 2 == 0 ? pool : other;
        inner_pool.parallel_for(kInner, [&](int64_t inner_begin, int64_t inner_end) {
          if (std::this_thread::get_id() != here) not_inline.fetch_add(1);
          for (int64_t i = inner_begin; i < inner_end; ++i)
            visits[static_cast<size_t>(outer * kInner + i)].fetch_add(1);
        });
      }
    });
    CHECK_FALSE(ThreadPool::inside_parallel_for());
    CHECK(not_inline.load() == 0);
    int wrong = 0;
    for (auto& v : visits) wrong += v.load() != 1;
    CHECK(wrong == 0);
  }

  TEST_CASE("many short calls in a row (workers spinning and sleeping)") {
    ThreadPool pool(3);
    int64_t total = 0;
    std::vector<int64_t> partial(64);
    for (int round = 0; round < 20000; ++round) {
      std::fill(partial.begin(), partial.end(), 0);
      pool.parallel_for(64, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) partial[static_cast<size_t>(i)] = i;
      });
      for (int64_t v : partial) total += v;
      // Now and then let the workers fall asleep so that both wake-up paths are exercised.
      if (round % 2000 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    CHECK(total == int64_t{20000} * (63 * 64 / 2));
  }

  TEST_CASE("a pool created before fork() runs inline in the child") {
    ThreadPool pool(4);
    check_exact_cover(pool, 1000, 1);  // the workers are up and have run a job
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child has no workers: waiting for them would hang, so every call must run inline.
      int calls = 0;
      int64_t covered = 0;
      pool.parallel_for(1000, [&](int64_t begin, int64_t end) {
        ++calls;
        covered += end - begin;
      });
      ::_exit(calls == 1 && covered == 1000 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    check_exact_cover(pool, 1000, 1);  // and the parent's pool is unaffected
  }

  TEST_CASE("thread counts: explicit, KILN_THREADS, hardware") {
    CHECK_THROWS_AS(ThreadPool(-1), UserError);
    const char* saved = std::getenv("KILN_THREADS");
    std::string saved_value = saved ? saved : "";
    setenv("KILN_THREADS", "3", 1);
    CHECK(ThreadPool::default_thread_count() == 3);
    {
      ThreadPool pool;
      CHECK(pool.thread_count() == 3);
    }
    setenv("KILN_THREADS", "not a number", 1);
    unsigned hardware = std::thread::hardware_concurrency();
    CHECK(ThreadPool::default_thread_count() == (hardware == 0 ? 1 : static_cast<int>(hardware)));
    setenv("KILN_THREADS", "0", 1);
    CHECK(ThreadPool::default_thread_count() >= 1);
    if (saved) setenv("KILN_THREADS", saved_value.c_str(), 1); else unsetenv("KILN_THREADS");

    ThreadPool& first = default_thread_pool();
    CHECK(&first == &default_thread_pool());
    CHECK(first.thread_count() >= 1);
    check_exact_cover(first, 9999, 7);
  }
}

}  // namespace
}  // namespace kiln
