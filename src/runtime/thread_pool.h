// The CPU thread pool that runs a kernel's parallel axis: parallel_for splits [0, count) into
// contiguous chunks, hands them to the workers and the calling thread, and returns when all are done.
// CPU kernels are called as fn(buffers, begin, end) over one chunk each.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "support/function_ref.h"

namespace kiln {

class ThreadPool {
 public:
  // `threads` counts every thread that runs chunks, the caller included (so 1 means no workers).
  // 0 means default_thread_count().
  explicit ThreadPool(int threads = 0);
  // Stops and joins the workers. No parallel_for may be running on this pool.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // KILN_THREADS when it is set to a positive number, otherwise std::thread::hardware_concurrency()
  // (at least 1).
  static int default_thread_count();

  // The number of threads that run chunks, the caller included.
  int thread_count() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls body(begin, end) on disjoint contiguous chunks that together cover [0, count) exactly once,
  // each chunk at least `min_chunk` long (except when count itself is shorter), and returns when all
  // calls have returned. The first exception thrown by a body is rethrown here, after every chunk
  // already started has finished; chunks not yet started are then skipped.
  // Runs body(0, count) inline when there is only one chunk, when the pool has one thread, when it is
  // called from inside a body (of any pool: nested calls never wait for workers, so they cannot
  // deadlock) and in a child process after fork() (the child has no workers).
  // Safe to call from several threads at once: the calls take turns on the workers, each using all
  // of them, rather than oversubscribing the cores. Allocates nothing unless a body throws.
  void parallel_for(int64_t count, FunctionRef<void(int64_t begin, int64_t end)> body,
                    int64_t min_chunk = 1);

  // True while the current thread runs a parallel_for body (of any pool).
  static bool inside_parallel_for();

 private:
  struct Job;
  void worker_main(uint32_t start_epoch);
  void help_current_job();

  std::vector<std::thread> workers_;
  // Callers take turns: one job runs on the workers at a time.
  std::mutex submit_mutex_;
  // The job that workers may join; null between jobs. Lives on the submitting caller's stack.
  std::atomic<Job*> current_job_{nullptr};
  // Bumped for every new job (and on shutdown); sleeping workers wait for it to change.
  std::atomic<uint32_t> epoch_{0};
  // Workers between "announce" and "done" in help_current_job; the caller waits for zero before
  // its Job leaves scope, so no worker can touch a dead Job.
  std::atomic<int> workers_inside_{0};
  std::atomic<bool> stopping_{false};
  // The fork() generation the workers were started in; in a later one they do not exist.
  uint32_t created_in_fork_generation_;
};

// The process-wide pool used by the CPU runtime, created on first use with default_thread_count().
ThreadPool& default_thread_pool();

}  // namespace kiln
