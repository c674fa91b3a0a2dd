// This machine's peak: fp32 FMA throughput and STREAM-triad bandwidth, on one core and on all cores.
// Other benchmarks divide by these numbers (bench/peak.h) to report a fraction of peak.
#include <cstdio>

#include "peak.h"

int main() {
  const kiln::bench::PeakNumbers& peak = kiln::bench::machine_peak();
  std::printf("%-34s %12s %12s\n", "", "1 core", "all cores");
  std::printf("%-34s %12s %12d\n", "threads", "1", peak.threads);
  char label[64];
  std::snprintf(label, sizeof label, "peak fp32 GFLOP/s (%s)", peak.fma_isa);
  std::printf("%-34s %12.1f %12.1f\n", label, peak.gflops_one_core, peak.gflops_all_cores);
  std::printf("%-34s %12.1f %12.1f\n", "stream GB/s (triad)", peak.stream_gbs_one_thread,
              peak.stream_gbs_all_threads);
  // GFLOP/s are per CPU second and survive a busy machine; the all-threads stream number does not.
  if (peak.cpu_share < 0.9)
    std::printf("note: the machine is busy (the measuring threads got %.0f%% of their cores' time);\n"
                "      'stream GB/s, all cores' is wall-clock and reads low\n",
                100 * peak.cpu_share);
  return 0;
}
