// ThreadPool: a job is announced in one cache line; chunk i goes to thread i (the caller takes chunk
// 0), one chunk per thread; each worker reports on a cache line of its own, and the caller takes over
// the chunk of any worker that has not claimed it when the caller finishes its own. Workers spin
// briefly between jobs (a plan runs many short kernels back to back) and then sleep on a futex.
//
// Why this shape: a job handed over between cores costs one cache-line transfer per shared line
// touched on the way. The first design (one job record on the caller's stack, a shared chunk
// counter and a shared finished counter, and a count of workers inside the job) took about nine
// transfers per job: 2.7 µs above the ideal for two chunks of 2.2 µs of work on the AVX-512 VM,
// against 0.4 µs for a bare one-line handoff. That cost every kernel launch of a plan at two
// threads (MobileNetV2 runs 99, YOLOX 324).
//
// Why one chunk per thread, in order: thread i always computes the i-th part of every kernel's
// parallel axis, so a kernel split the same way as the one before it (rows of an image, rows of a
// matrix) reads what the same core just wrote, from its own L2. Until 2026-11-28 each thread took
// one chunk up front and then four per thread in all were claimed from a shared counter: which core
// computed which part changed from kernel to kernel and from run to run, and every claim moved the
// counter's line between the cores. At two threads on the AVX-512 VM one chunk per thread was
// faster on 14 of 15 models (geomean 0.950x; YOLOX 0.93x, ShuffleNet 0.89x); bench/README.md.
#include "runtime/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "support/debug.h"
#include "support/error.h"

namespace kiln {

namespace {

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

// A worker's own lines. `claimed` is written by the worker when it takes its up-front chunk of job
// generation g (2g) and by the caller only when it takes that chunk over (2g + 1); whoever moves it
// from an older value wins. `finished` (g) is written by the worker alone and read by the caller,
// which waits on it. On separate lines, so the caller's reads of `finished` do not pull away the
// line the worker claims on.
struct ThreadPool::WorkerSlot {
  alignas(64) std::atomic<uint64_t> claimed{0};
  alignas(64) std::atomic<uint64_t> finished{0};
};

namespace {

constexpr int kGenerationShift = 16;  // job_word = generation << 16 | chunk count
constexpr uint64_t kChunkCountMask = (uint64_t{1} << kGenerationShift) - 1;
static_assert(kMaxThreads <= static_cast<long>(kChunkCountMask), "chunk counts fit the job word");

uint64_t generation_of(uint64_t job_word) { return job_word >> kGenerationShift; }
uint32_t chunk_count_of(uint64_t job_word) { return static_cast<uint32_t>(job_word & kChunkCountMask); }

// Balanced split: chunk i starts at i*base + min(i, remainder), so sizes differ by at most one
// and no product can overflow.
int64_t chunk_begin(int64_t count, int64_t chunk_count, int64_t chunk) {
  int64_t base = count / chunk_count;
  int64_t remainder = count % chunk_count;
  return chunk * base + std::min(chunk, remainder);
}

}  // namespace

int ThreadPool::default_thread_count() {
  long requested = env_integer("KILN_THREADS", 0);
  if (requested > 0) return static_cast<int>(std::min(requested, kMaxThreads));
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(std::min<long>(hardware, kMaxThreads));
}

ThreadPool::ThreadPool(int threads) : created_in_fork_generation_(0) {
  if (threads < 0) throw UserError(str_cat("ThreadPool: thread count must be >= 0, got ", threads));
  if (threads == 0) threads = default_thread_count();
  threads = static_cast<int>(std::min<long>(threads, kMaxThreads));
  register_fork_handler();
  created_in_fork_generation_ = fork_generation.load(std::memory_order_relaxed);
  slots_ = std::make_unique<WorkerSlot[]>(static_cast<size_t>(threads - 1));
  workers_.reserve(static_cast<size_t>(threads - 1));
  // The workers start from the word read here, not one they read themselves: a worker that starts
  // late must still notice the jobs (and the shutdown) announced before it ran.
  uint64_t start_word = announcement_.job_word.load(std::memory_order_relaxed);
  for (size_t i = 0; i + 1 < static_cast<size_t>(threads); ++i)
    workers_.emplace_back([this, i, start_word] { worker_main(i, start_word); });
}

ThreadPool::~ThreadPool() {
  if (fork_generation.load(std::memory_order_relaxed) != created_in_fork_generation_) {
    // In a forked child the std::thread objects name threads that do not exist here: joining would
    // hang and destroying them joinable would terminate, so they are deliberately leaked.
    new std::vector<std::thread>(std::move(workers_));
    return;
  }
  stopping_.store(true, std::memory_order_seq_cst);
  uint64_t word = announcement_.job_word.load(std::memory_order_relaxed);
  announcement_.job_word.store((generation_of(word) + 1) << kGenerationShift, std::memory_order_seq_cst);
  announcement_.job_word.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

bool ThreadPool::inside_parallel_for() { return body_depth > 0; }

void ThreadPool::run_chunk(uint32_t chunk) {
  if (failed_.load(std::memory_order_relaxed)) return;
  const Announcement& job = announcement_;
  try {
    (*job.body)(chunk_begin(job.count, job.chunk_count, chunk), chunk_begin(job.count, job.chunk_count, int64_t{chunk} + 1));
  } catch (...) {
    // Only the first failure is kept; the caller reads it after every thread reported.
    if (!failed_.exchange(true, std::memory_order_relaxed)) error_ = std::current_exception();
  }
}

void ThreadPool::worker_main(size_t index, uint64_t seen) {
  WorkerSlot& slot = slots_[index];
  const auto own_chunk = static_cast<uint32_t>(index + 1);
  std::atomic<uint64_t>& job_word = announcement_.job_word;
  for (;;) {
    if (!spin_until([&] { return job_word.load(std::memory_order_acquire) != seen; })) {
      // Announce the sleep before the last look (both seq_cst): a caller that publishes a job after
      // that look sees this sleeper and wakes it.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      if (job_word.load(std::memory_order_seq_cst) == seen) job_word.wait(seen, std::memory_order_acquire);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = job_word.load(std::memory_order_acquire);
    if (stopping_.load(std::memory_order_acquire)) return;
    uint64_t generation = generation_of(seen);
    if (own_chunk >= chunk_count_of(seen)) continue;  // no chunk for this worker in this job
    // Claim the chunk, unless the caller took it over (it then set `claimed` to this
    // generation). Winning the claim also keeps the job alive: the caller waits for `finished`.
    uint64_t claimed = slot.claimed.load(std::memory_order_relaxed);
    if (claimed >= 2 * generation ||
        !slot.claimed.compare_exchange_strong(claimed, 2 * generation, std::memory_order_relaxed))
      continue;
    {
      BodyScope scope;
      run_chunk(own_chunk);
    }
    // Release: the chunks' writes (and error_) become visible to the caller that sees it.
    slot.finished.store(generation, std::memory_order_release);
    slot.finished.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t count, FunctionRef<void(int64_t, int64_t)> body,
                              int64_t min_chunk, int64_t max_chunks) {
  if (count <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  int64_t chunk_count = std::min<int64_t>(count / min_chunk, thread_count());
  if (max_chunks > 0) chunk_count = std::min(chunk_count, max_chunks);
  bool nested = body_depth > 0;
  bool forked = fork_generation.load(std::memory_order_relaxed) != created_in_fork_generation_;
  if (chunk_count <= 1 || workers_.empty() || nested || forked) {
    body(0, count);
    return;
  }

  std::lock_guard turn(submit_mutex_);
  auto chunks = static_cast<uint32_t>(chunk_count);
  announcement_.body = &body;
  announcement_.count = count;
  announcement_.chunk_count = chunks;
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  uint64_t generation = generation_of(announcement_.job_word.load(std::memory_order_relaxed)) + 1;
  // Release (seq_cst for the sleepers check below): the fields above are visible to a worker
  // that sees the new word.
  announcement_.job_word.store(generation << kGenerationShift | chunks, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) announcement_.job_word.notify_all();

  {
    BodyScope scope;
    run_chunk(0);
    // Workers that have not claimed their chunk yet (asleep, or slower than this thread's share)
    // lose it to the caller.
    for (uint32_t chunk = 1; chunk < chunks; ++chunk) {
      WorkerSlot& slot = slots_[chunk - 1];
      if (slot.finished.load(std::memory_order_acquire) == generation) continue;
      uint64_t claimed = slot.claimed.load(std::memory_order_relaxed);
      if (claimed < 2 * generation &&
          slot.claimed.compare_exchange_strong(claimed, 2 * generation + 1, std::memory_order_relaxed))
        run_chunk(chunk);
    }
  }
  // Wait for the workers that did claim theirs (acquire: their writes are visible after).
  for (uint32_t chunk = 1; chunk < chunks; ++chunk) {
    WorkerSlot& slot = slots_[chunk - 1];
    if (slot.claimed.load(std::memory_order_relaxed) != 2 * generation) continue;  // taken over, or done
    auto done = [&] { return slot.finished.load(std::memory_order_acquire) == generation; };
    while (!spin_until(done)) {
      uint64_t finished = slot.finished.load(std::memory_order_acquire);
      if (finished == generation) break;
      slot.finished.wait(finished, std::memory_order_acquire);
    }
  }
  if (failed_.load(std::memory_order_relaxed)) std::rethrow_exception(error_);
}

ThreadPool& default_thread_pool() {
  // Never destroyed: kernels may still run from other static destructors or detached threads at
  // exit, and the process takes the idle workers down with it.
  static ThreadPool* pool = new ThreadPool();
  return *pool;
}

}  // namespace kiln
