// ThreadPool: chunks are claimed dynamically from an atomic counter, so the caller starts at once and
// takes over the chunks of workers that are still waking up; workers spin briefly between jobs (a
// kernel launch list runs many short parallel_for calls back to back) and then sleep on a futex.
#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

// Chunks per participating thread: enough that a slow or late thread costs little, few enough that
// the per-chunk call overhead stays negligible next to a kernel's inner loops.
constexpr int64_t kChunksPerThread = 4;

// How long a waiting thread spins before it blocks. Long enough to cover the gap between two kernels
// of one plan, short enough not to burn a core when the pool goes idle.
constexpr auto kSpinTime = std::chrono::microseconds(100);

// KILN_THREADS above this is treated as a mistake rather than honoured.
constexpr long kMaxThreads = 1024;

// Depth of parallel_for bodies running on this thread (any pool). Non-zero means a nested call.
thread_local int body_depth = 0;

// Incremented in the child after fork(): the child inherits none of the workers, so a pool created
// before the fork must not wait for them.
std::atomic<uint32_t> fork_generation{0};

void register_fork_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, [] { fork_generation.fetch_add(1, std::memory_order_relaxed); });
  });
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `ready()` or until kSpinTime has passed; returns whether `ready()` became true.
template <class Ready>
bool spin_until(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (uint32_t iteration = 1;; ++iteration) {
    if (ready()) return true;
    cpu_relax();
    // Reading the clock costs more than a pause; do it rarely.
    if (iteration % 64 == 0 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

struct BodyScope {
  BodyScope() { ++body_depth; }
  ~BodyScope() { --body_depth; }
  BodyScope(const BodyScope&) = delete;
  BodyScope& operator=(const BodyScope&) = delete;
};

}  // namespace

struct ThreadPool::Job {
  Job(FunctionRef<void(int64_t, int64_t)> body, int64_t count, uint32_t chunk_count)
      : body(body), count(count), chunk_count(chunk_count) {}

  // Balanced split: chunk i starts at i*base + min(i, remainder), so sizes differ by at most one
  // and no product can overflow.
  int64_t chunk_begin(int64_t chunk) const {
    int64_t base = count / chunk_count;
    int64_t remainder = count % chunk_count;
    return chunk * base + std::min(chunk, remainder);
  }

  // Claims and runs chunks until none is left. Every claimed chunk is counted as finished, run or
  // skipped (after a failure), so that the caller's wait for chunk_count always ends.
  void run_chunks() {
    BodyScope scope;
    for (;;) {
      uint32_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunk_count) return;
      if (!failed.load(std::memory_order_relaxed)) {
        try {
          body(chunk_begin(chunk), chunk_begin(int64_t{chunk} + 1));
        } catch (...) {
          // Only the first failure is kept; its writer publishes it through finished_chunks.
          if (!failed.exchange(true, std::memory_order_relaxed)) error = std::current_exception();
        }
      }
      // Release: the body's writes (and `error`) become visible to the caller that sees the count.
      if (finished_chunks.fetch_add(1, std::memory_order_acq_rel) + 1 == chunk_count)
        finished_chunks.notify_one();
    }
  }

  FunctionRef<void(int64_t, int64_t)> body;
  const int64_t count;
  const uint32_t chunk_count;
  std::atomic<uint32_t> next_chunk{0};
  std::atomic<uint32_t> finished_chunks{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
};

int ThreadPool::default_thread_count() {
  long requested = env_integer("KILN_THREADS", 0);
  if (requested > 0) return static_cast<int>(std::min(requested, kMaxThreads));
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(std::min<long>(hardware, kMaxThreads));
}

ThreadPool::ThreadPool(int threads) : created_in_fork_generation_(0) {
  if (threads < 0) throw UserError(str_cat("ThreadPool: thread count must be >= 0, got ", threads));
  if (threads == 0) threads = default_thread_count();
  register_fork_handler();
  created_in_fork_generation_ = fork_generation.load(std::memory_order_relaxed);
  workers_.reserve(static_cast<size_t>(threads - 1));
  // The workers start from the epoch read here, not one they read themselves: a worker that starts
  // late must still notice the jobs (and the shutdown) announced before it ran.
  uint32_t start_epoch = epoch_.load(std::memory_order_relaxed);
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, start_epoch] { worker_main(start_epoch); });
}

ThreadPool::~ThreadPool() {
  if (fork_generation.load(std::memory_order_relaxed) != created_in_fork_generation_) {
    // In a forked child the std::thread objects name threads that do not exist here: joining would
    // hang and destroying them joinable would terminate, so they are deliberately leaked.
    new std::vector<std::thread>(std::move(workers_));
    return;
  }
  stopping_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  epoch_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

bool ThreadPool::inside_parallel_for() { return body_depth > 0; }

void ThreadPool::worker_main(uint32_t seen) {
  for (;;) {
    if (!spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; }))
      epoch_.wait(seen, std::memory_order_acquire);
    seen = epoch_.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    help_current_job();
  }
}

void ThreadPool::help_current_job() {
  // Announce first, then look: with both seq_cst, a caller that has seen workers_inside_ == 0 after
  // clearing current_job_ cannot be followed by a worker that still sees its job (see parallel_for).
  workers_inside_.fetch_add(1, std::memory_order_seq_cst);
  if (Job* job = current_job_.load(std::memory_order_seq_cst)) job->run_chunks();
  workers_inside_.fetch_sub(1, std::memory_order_release);
}

void ThreadPool::parallel_for(int64_t count, FunctionRef<void(int64_t, int64_t)> body,
                              int64_t min_chunk) {
  if (count <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  int64_t chunk_count = std::min(count / min_chunk, thread_count() * kChunksPerThread);
  bool nested = body_depth > 0;
  bool forked = fork_generation.load(std::memory_order_relaxed) != created_in_fork_generation_;
  if (chunk_count <= 1 || workers_.empty() || nested || forked) {
    body(0, count);
    return;
  }

  std::lock_guard turn(submit_mutex_);
  Job job(body, count, static_cast<uint32_t>(chunk_count));
  current_job_.store(&job, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  // Wake only as many sleepers as there are chunks for; spinning workers see the epoch themselves.
  if (chunk_count - 1 >= static_cast<int64_t>(workers_.size())) {
    epoch_.notify_all();
  } else {
    for (int64_t i = 1; i < chunk_count; ++i) epoch_.notify_one();
  }

  job.run_chunks();

  auto all_finished = [&] {
    return job.finished_chunks.load(std::memory_order_acquire) == job.chunk_count;
  };
  while (!spin_until(all_finished)) {
    uint32_t finished = job.finished_chunks.load(std::memory_order_acquire);
    if (finished == job.chunk_count) break;
    job.finished_chunks.wait(finished, std::memory_order_acquire);
  }

  // Retire the job, then wait out the workers that may still hold a pointer to it. They have no
  // chunk left to run, so this is short; yield in case one was preempted.
  current_job_.store(nullptr, std::memory_order_seq_cst);
  while (workers_inside_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();

  if (job.error) std::rethrow_exception(job.error);
}

ThreadPool& default_thread_pool() {
  // Never destroyed: kernels may still run from other static destructors or detached threads at
  // exit, and the process takes the idle workers down with it.
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

}  // namespace kiln
