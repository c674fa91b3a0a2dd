// The CPU thread pool that runs a kernel's parallel axis: parallel_for splits [0, count) into one
// contiguous chunk per thread, chunk i to thread i (the caller is thread 0), and returns when all
// are done.
// CPU kernels are called as fn(buffers, begin, end) over one chunk each.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
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
  // each chunk at least `min_chunk` long (except when count itself is shorter), at most one per
  // thread and in order (chunk i on thread i unless the caller takes it over from a worker that has
  // not started), and returns when all calls have returned. The first exception thrown by a body is
  // rethrown here, after every chunk already started has finished; chunks not yet started are then
  // skipped.
  // Runs body(0, count) inline when there is only one chunk, when the pool has one thread, when it is
  // called from inside a body (of any pool: nested calls never wait for workers, so they cannot
  // deadlock) and in a child process after fork() (the child has no workers).
  // Safe to call from several threads at once: the calls take turns on the workers, each using all
  // of them, rather than oversubscribing the cores. Allocates nothing unless a body throws.
  // `max_chunks` > 0 caps the chunks (a run limited to that many threads); the chunks are as even
  // as count allows, so a limit of 2 splits 49 iterations 24 + 25. (Expressing that cap as a
  // min_chunk of ceil(count / T) gave one chunk of 49: no chunk may be shorter than min_chunk.)
  void parallel_for(int64_t count, FunctionRef<void(int64_t begin, int64_t end)> body,
                    int64_t min_chunk = 1, int64_t max_chunks = 0);

  // True while the current thread runs a parallel_for body (of any pool).
  static bool inside_parallel_for();

 private:
  struct WorkerSlot;
  void worker_main(size_t index, uint64_t start_word);
  // Runs chunk `chunk` of the current job, recording the first exception instead of throwing.
  void run_chunk(uint32_t chunk);

  std::vector<std::thread> workers_;
  std::unique_ptr<WorkerSlot[]> slots_;  // one per worker: slots_[i] belongs to workers_[i]
  // Callers take turns: one job runs on the workers at a time.
  std::mutex submit_mutex_;

  // The current job, written by its caller before it publishes job_word_ and read by workers
  // after they see that word. One cache line, so a worker gets the whole announcement at once.
  struct alignas(64) Announcement {
    // (generation << 16) | chunk count. The generation counts jobs (and the shutdown); workers
    // wait for this word to change.
    std::atomic<uint64_t> job_word{0};
    const FunctionRef<void(int64_t, int64_t)>* body = nullptr;
    int64_t count = 0;
    uint32_t chunk_count = 0;
  } announcement_;
  // Workers about to block, or blocked, on job_word: the caller wakes them only when there are any.
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  // The first failure of the current job; chunks not yet started are skipped after it.
  alignas(64) std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  // The fork() generation the workers were started in; in a later one they do not exist.
  uint32_t created_in_fork_generation_;
};

ThreadPool& default_thread_pool();

}  // namespace kiln
