// This machine's roofline: fp32 FMA throughput and memory streaming bandwidth, on one core and on
// all of them. Header-only so that any benchmark can include it and print "fraction of peak" next
// to its own numbers; bench_peak.cpp prints the table itself.
#pragma once

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_PEAK_X86 1
#endif

namespace kiln::bench {

// GFLOP/s are rates per second of CPU time that the measuring threads actually ran, summed over the
// threads: what the cores do when a kernel has them, even when other processes share the machine (a
// wall-clock rate would be low by the share of time the scheduler gave away). Bandwidth is shared by
// all cores, so the all-threads stream number is wall-clock; one thread's is per CPU second.
struct PeakNumbers {
  const char* fma_isa = "";           // which FMA loop ran: "avx512f", "avx2+fma" or "scalar"
  int threads = 1;                    // the "all cores" thread count
  double gflops_one_core = 0;         // fp32 GFLOP/s, an FMA counted as two
  double gflops_all_cores = 0;
  double stream_gbs_one_thread = 0;   // STREAM triad a = b + s*c: 12 bytes per element, write
  double stream_gbs_all_threads = 0;  // allocation not counted (the STREAM convention)
  // CPU time the all-cores FMA threads got, over threads x wall time: about 1 on an idle machine.
  // Below that, other processes were running and wall-clock numbers (stream, all threads) are low.
  double cpu_share = 1;
};

namespace peak_detail {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Each FMA loop keeps enough independent accumulator chains to cover the FMA latency (4 cycles)
// times the number of FMA pipes (2) on current x86 cores, so that it is bound by throughput alone.
// The multiplier is just below one and the addend tiny, so the values stay finite and normal for any
// iteration count (denormals would slow some cores down). Returns a value derived from every
// accumulator so that no chain can be optimised away; each function returns its flops per iteration.

#ifdef KILN_PEAK_X86
constexpr int kAccumulators512 = 16;  // 16 of 32 zmm registers
__attribute__((target("avx512f"))) inline float fma_loop_avx512(int64_t iterations) {
  __m512 acc[kAccumulators512];
  for (int k = 0; k < kAccumulators512; ++k) acc[k] = _mm512_set1_ps(1.0f + 0.01f * k);
  const __m512 multiplier = _mm512_set1_ps(0.9999999f);
  const __m512 addend = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAccumulators512; ++k) acc[k] = _mm512_fmadd_ps(acc[k], multiplier, addend);
  }
  __m512 sum = acc[0];
  for (int k = 1; k < kAccumulators512; ++k) sum = _mm512_add_ps(sum, acc[k]);
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized inside its header.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}
constexpr double kFlopsPerIteration512 = kAccumulators512 * 16 * 2.0;

constexpr int kAccumulators256 = 12;  // 12 of 16 ymm registers, leaving room for the constants
__attribute__((target("avx2,fma"))) inline float fma_loop_avx2(int64_t iterations) {
  __m256 acc[kAccumulators256];
  for (int k = 0; k < kAccumulators256; ++k) acc[k] = _mm256_set1_ps(1.0f + 0.01f * k);
  const __m256 multiplier = _mm256_set1_ps(0.9999999f);
  const __m256 addend = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int k = 0; k < kAccumulators256; ++k) acc[k] = _mm256_fmadd_ps(acc[k], multiplier, addend);
  }
  __m256 sum = acc[0];
  for (int k = 1; k < kAccumulators256; ++k) sum = _mm256_add_ps(sum, acc[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0;
  for (float lane : lanes) total += lane;
  return total;
}
constexpr double kFlopsPerIteration256 = kAccumulators256 * 8 * 2.0;

// 8-bit dot products (AVX-512 VNNI's vpdpbusd): 64 u8·s8 multiply-adds into 16 i32 lanes per
// instruction, an operation counted as two (as the fp32 loops count an FMA). The accumulators
// wrap; they are summed only to keep the chains alive.
__attribute__((target("avx512f,avx512vnni"))) inline float dot_loop_avx512vnni(int64_t iterations) {
  __m512i acc[kAccumulators512];
  for (int k = 0; k < kAccumulators512; ++k) acc[k] = _mm512_set1_epi32(k);
  const __m512i unsigned_bytes = _mm512_set1_epi8(3), signed_bytes = _mm512_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int k = 0; k < kAccumulators512; ++k) acc[k] = _mm512_dpbusd_epi32(acc[k], unsigned_bytes, signed_bytes);
  }
  __m512i sum = acc[0];
  for (int k = 1; k < kAccumulators512; ++k) sum = _mm512_add_epi32(sum, acc[k]);
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, sum);
  int64_t total = 0;
  for (int32_t lane : lanes) total += lane;
  return static_cast<float>(total);
}
constexpr double kInt8OpsPerIteration512 = kAccumulators512 * 64 * 2.0;
#endif

// The portable fallback: a multiply and an add per step (not fused), eight chains.
constexpr int kScalarAccumulators = 8;
inline float fma_loop_scalar(int64_t iterations) {
  float acc[kScalarAccumulators];
  for (int k = 0; k < kScalarAccumulators; ++k) acc[k] = 1.0f + 0.01f * static_cast<float>(k);
  const float multiplier = 0.9999999f;
  const float addend = 1e-7f;
  for (int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 8
    for (int k = 0; k < kScalarAccumulators; ++k) acc[k] = acc[k] * multiplier + addend;
  }
  float total = 0;
  for (float value : acc) total += value;
  return total;
}
constexpr double kFlopsPerIterationScalar = kScalarAccumulators * 2.0;

struct FmaLoop {
  const char* isa;
  float (*run)(int64_t iterations);
  double flops_per_iteration;
};

// The widest loop this CPU (and its OS) supports, chosen at run time.
inline FmaLoop best_fma_loop() {
#ifdef KILN_PEAK_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return {"avx512f", fma_loop_avx512, kFlopsPerIteration512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", fma_loop_avx2, kFlopsPerIteration256};
#endif
  return {"scalar", fma_loop_scalar, kFlopsPerIterationScalar};
}

// Keeps results alive without a volatile in the hot loop.
inline std::atomic<float> result_sink{0};

// CPU time of the calling thread, in seconds.
inline double thread_cpu_seconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

struct Timing {
  double wall_seconds = 0;          // from the common release to the last finish
  std::vector<double> cpu_seconds;  // per thread, of its own work
};

// Runs `work(thread_index)` on `threads` threads released together.
template <class Work>
Timing run_together(int threads, Work work) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int64_t> last_end_ns{0};
  Timing timing;
  timing.cpu_seconds.assign(static_cast<size_t>(threads), 0.0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      double cpu_start = thread_cpu_seconds();
      work(t);
      timing.cpu_seconds[static_cast<size_t>(t)] = thread_cpu_seconds() - cpu_start;
      int64_t end = Clock::now().time_since_epoch().count();
      int64_t seen = last_end_ns.load();
      while (end > seen && !last_end_ns.compare_exchange_weak(seen, end)) {
      }
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  Clock::time_point start = Clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread& thread : pool) thread.join();
  timing.wall_seconds = seconds_between(start, Clock::time_point(Clock::duration(last_end_ns.load())));
  return timing;
}

}  // namespace peak_detail

// The "all cores" thread count: the hardware threads this process may use.
inline int all_threads() {
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

// Name of the FMA loop that measure_fp32_gflops runs on this CPU.
inline const char* fma_isa() { return peak_detail::best_fma_loop().isa; }

struct FmaMeasurement {
  double gflops = 0;     // summed per-CPU-second rates of the threads (see PeakNumbers)
  double cpu_share = 1;  // CPU time the threads got over threads x wall time, in the best run
};

namespace peak_detail {
inline FmaMeasurement measure_loop(const FmaLoop& loop, int threads, double seconds);
}

// fp32 FMA throughput of `threads` threads each running the FMA loop for about `seconds`; best of
// several short runs, which on a shared machine are more likely to own their cores throughout.
inline FmaMeasurement measure_fp32(int threads, double seconds = 0.1) {
  return peak_detail::measure_loop(peak_detail::best_fma_loop(), threads, seconds);
}

// 8-bit dot-product throughput (GOP/s, a multiply-add counted as two) measured the same way, where
// the CPU has AVX-512 VNNI; 0 elsewhere.
inline double measure_int8_gops(int threads, double seconds = 0.1) {
#ifdef KILN_PEAK_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni"))
    return peak_detail::measure_loop({"avx512vnni", peak_detail::dot_loop_avx512vnni, peak_detail::kInt8OpsPerIteration512},
                                     threads, seconds)
        .gflops;
#endif
  (void)threads;
  (void)seconds;
  return 0;
}

namespace peak_detail {
inline FmaMeasurement measure_loop(const FmaLoop& loop, int threads, double seconds) {
  // Calibrate on one thread (this also wakes the core from any low-power state).
  int64_t iterations = 1 << 16;
  for (;;) {
    double start = thread_cpu_seconds();
    result_sink.store(loop.run(iterations), std::memory_order_relaxed);
    double elapsed = thread_cpu_seconds() - start;
    if (elapsed >= seconds / 4) {
      iterations = static_cast<int64_t>(static_cast<double>(iterations) * seconds / elapsed);
      break;
    }
    iterations *= 2;
  }
  double flops = loop.flops_per_iteration * static_cast<double>(iterations);
  FmaMeasurement best;
  for (int repeat = 0; repeat < 7; ++repeat) {
    Timing timing = run_together(threads, [&](int) {
      result_sink.store(loop.run(iterations), std::memory_order_relaxed);
    });
    double gflops = 0;
    double cpu_total = 0;
    for (double cpu : timing.cpu_seconds) {
      gflops += flops / cpu / 1e9;
      cpu_total += cpu;
    }
    if (gflops > best.gflops) {
      best.gflops = gflops;
      best.cpu_share = std::min(1.0, cpu_total / (threads * timing.wall_seconds));
    }
  }
  return best;
}
}  // namespace peak_detail

inline double measure_fp32_gflops(int threads, double seconds = 0.1) {
  return measure_fp32(threads, seconds).gflops;
}

// STREAM-triad GB/s of `threads` threads over three arrays of `bytes_per_array` each (far larger than
// the last-level cache by default); best of ten passes. One thread is timed by its CPU time, several
// by the wall clock (they share the memory system, so only their simultaneous rate means anything). Each thread first-touches its own slice, so
// that on NUMA machines the pages sit near the thread that streams them.
inline double measure_stream_gbs(int threads, size_t bytes_per_array = size_t{64} << 20) {
  using namespace peak_detail;
  // Whole 16-byte vectors (SSE2, in every x86-64 baseline; generic code elsewhere): the loop needs no
  // scalar tail, and one core's loads and stores outrun DRAM even at this width.
  typedef float Vector __attribute__((vector_size(16)));
  size_t vectors = std::max<size_t>(bytes_per_array / sizeof(Vector), static_cast<size_t>(threads));
  std::unique_ptr<Vector[]> a(new Vector[vectors]);
  std::unique_ptr<Vector[]> b(new Vector[vectors]);
  std::unique_ptr<Vector[]> c(new Vector[vectors]);
  constexpr int kPasses = 10;
  std::vector<Clock::time_point> marks;
  marks.reserve(kPasses + 2);
  std::vector<double> single_thread_cpu(kPasses, 0.0);
  // The completion step runs once per phase, after every thread has arrived: a clean timestamp.
  std::barrier phase(threads, [&]() noexcept { marks.push_back(Clock::now()); });
  auto slice = [&](int t, size_t& begin, size_t& end) {
    begin = vectors * static_cast<size_t>(t) / static_cast<size_t>(threads);
    end = vectors * static_cast<size_t>(t + 1) / static_cast<size_t>(threads);
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      size_t begin, end;
      slice(t, begin, end);
      Vector one = {}, two = {};
      one += 1.0f;
      two += 2.0f;
      for (size_t i = begin; i < end; ++i) {
        a[i] = one;
        b[i] = two;
        c[i] = one;
      }
      phase.arrive_and_wait();  // mark 0: start of pass 1
      const float scalar = 3.0f;
      for (int pass = 0; pass < kPasses; ++pass) {
        Vector* __restrict out = a.get();
        const Vector* __restrict left = b.get();
        const Vector* __restrict right = c.get();
        double cpu_start = thread_cpu_seconds();
        for (size_t i = begin; i < end; ++i) out[i] = left[i] + scalar * right[i];
        if (threads == 1) single_thread_cpu[static_cast<size_t>(pass)] = thread_cpu_seconds() - cpu_start;
        phase.arrive_and_wait();  // mark pass+1
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  result_sink.store(a[vectors / 2][0], std::memory_order_relaxed);
  double best_seconds = 1e30;
  for (int pass = 0; pass < kPasses; ++pass) {
    double seconds = threads == 1 ? single_thread_cpu[static_cast<size_t>(pass)]
                                  : seconds_between(marks[static_cast<size_t>(pass)],
                                                    marks[static_cast<size_t>(pass) + 1]);
    best_seconds = std::min(best_seconds, seconds);
  }
  double bytes = 3.0 * static_cast<double>(vectors) * sizeof(Vector);
  return bytes / best_seconds / 1e9;
}

// All four numbers, measured on the first call (about two seconds) and remembered for the process.
inline const PeakNumbers& machine_peak() {
  static const PeakNumbers numbers = [] {
    PeakNumbers n;
    n.fma_isa = fma_isa();
    n.threads = all_threads();
    n.gflops_one_core = measure_fp32(1).gflops;
    FmaMeasurement all = measure_fp32(n.threads);
    n.gflops_all_cores = all.gflops;
    n.cpu_share = all.cpu_share;
    n.stream_gbs_one_thread = measure_stream_gbs(1);
    n.stream_gbs_all_threads = measure_stream_gbs(n.threads);
    return n;
  }();
  return numbers;
}

}  // namespace kiln::bench
