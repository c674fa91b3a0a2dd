// run_tasks_in_parallel and compile_thread_count; see parallel_tasks.h.
#include "support/parallel_tasks.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "support/debug.h"
#include "support/large_stack.h"

namespace kiln {

unsigned compile_thread_count() {
  long setting = env_integer("KILN_COMPILE_THREADS", 0);
  if (setting > 0) return static_cast<unsigned>(std::min<long>(setting, 1024));
  return std::clamp(std::thread::hardware_concurrency(), 1U, kMaxCompileThreads);
}

void run_tasks_in_parallel(size_t count, unsigned threads, FunctionRef<void(size_t)> task) {
  size_t workers = std::min<size_t>(threads, count);
  if (workers <= 1) {
    for (size_t i = 0; i < count; ++i) task(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex failure_mutex;
  size_t failed_index = count;
  std::exception_ptr failure;
  auto work = [&] {
    while (!failed.load(std::memory_order_acquire)) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= count) return;
      try {
        task(i);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (i < failed_index) {
          failed_index = i;
          failure = std::current_exception();
        }
        failed.store(true, std::memory_order_release);
      }
    }
  };
  std::vector<pthread_t> started;
  started.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    pthread_t thread;
    if (!start_large_stack_thread(&thread, work)) break;  // thread limits: fewer workers
    started.push_back(thread);
  }
  // Without any worker the caller does the work itself; with some, the remaining indices wait
  // for them.
  if (started.empty()) run_on_large_stack(work);
  for (pthread_t thread : started) pthread_join(thread, nullptr);
  if (failure) std::rethrow_exception(failure);
}

}  // namespace kiln
