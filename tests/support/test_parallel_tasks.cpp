// run_tasks_in_parallel (src/support/parallel_tasks.h): every index once, the failure a loop in
// index order would have reported, large stacks for the workers.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/large_stack.h"
#include "support/parallel_tasks.h"

using namespace kiln;

TEST_SUITE("support") {

TEST_CASE("every index runs exactly once, on several threads") {
  constexpr size_t kTasks = 200;
  std::vector<std::atomic<int>> runs(kTasks);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  run_tasks_in_parallel(kTasks, 4, [&](size_t i) {
    runs[i].fetch_add(1);
    std::lock_guard lock(mutex);
    threads.insert(std::this_thread::get_id());
  });
  for (size_t i = 0; i < kTasks; ++i) CHECK(runs[i].load() == 1);
  // The caller only waits: the tasks ran on workers (at most four of them).
  CHECK(threads.count(std::this_thread::get_id()) == 0);
  CHECK(threads.size() <= 4);
}

TEST_CASE("one thread runs the tasks in order on the calling thread") {
  std::vector<size_t> order;
  std::thread::id caller = std::this_thread::get_id();
  bool all_on_caller = true;
  run_tasks_in_parallel(5, 1, [&](size_t i) {
    all_on_caller = all_on_caller && std::this_thread::get_id() == caller;
    order.push_back(i);
  });
  CHECK(all_on_caller);
  CHECK(order == std::vector<size_t>{0, 1, 2, 3, 4});
  run_tasks_in_parallel(0, 8, [&](size_t) { FAIL("no task to run"); });
}

TEST_CASE("of several failures, the lowest index's exception is rethrown") {
  // Task 3 fails late and task 7 at once: a loop in index order reports 3, and so must this,
  // although 7's exception is caught first.
  std::atomic<bool> seven_failed{false};
  auto task = [&](size_t i) {
    if (i == 7) {
      seven_failed = true;
      throw std::runtime_error("task 7");
    }
    if (i == 3) {
      // (Bounded, so that a machine that starts one worker only fails the check, not the run.)
      auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!seven_failed && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
      throw std::runtime_error("task 3");
    }
  };
  try {
    run_tasks_in_parallel(20, 8, task);
    FAIL("no exception");
  } catch (const std::runtime_error& error) {
    CHECK(std::string(error.what()) == "task 3");
  }
}

TEST_CASE("after a failure no further index starts") {
  std::atomic<size_t> started{0};
  CHECK_THROWS_AS(run_tasks_in_parallel(100000, 2,
                                        [&](size_t i) {
                                          started.fetch_add(1);
                                          if (i == 10) throw std::invalid_argument("stop");
                                        }),
                  std::invalid_argument);
  // Both workers stop at their next index; a handful may have started meanwhile.
  CHECK(started.load() < 1000);
}

TEST_CASE("workers have large stacks: a nested run_on_large_stack runs in place") {
  std::atomic<int> nested_on_same_thread{0};
  run_tasks_in_parallel(4, 2, [&](size_t) {
    std::thread::id worker = std::this_thread::get_id();
    run_on_large_stack([&] {
      if (std::this_thread::get_id() == worker) nested_on_same_thread.fetch_add(1);
    });
    // A deep recursion that an 8 MiB stack would not hold (64 MiB of frames).
    volatile char sink = 0;
    auto deep = [&](auto& self, int depth) -> void {
      volatile char frame[4096];
      frame[0] = static_cast<char>(depth);
      if (depth > 0) self(self, depth - 1);
      sink = sink + frame[0];
    };
    deep(deep, 16384);
  });
  CHECK(nested_on_same_thread.load() == 4);
}

TEST_CASE("KILN_COMPILE_THREADS sets the compile's threads") {
  setenv("KILN_COMPILE_THREADS", "3", 1);
  CHECK(compile_thread_count() == 3);
  setenv("KILN_COMPILE_THREADS", "0", 1);  // not positive: the machine's threads, at most 16
  unsigned threads = compile_thread_count();
  CHECK(threads >= 1);
  CHECK(threads <= kMaxCompileThreads);
  unsetenv("KILN_COMPILE_THREADS");
}

}  // TEST_SUITE
