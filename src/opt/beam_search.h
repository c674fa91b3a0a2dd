// The timed search over Opt lists for one kernel (`kiln tune`), in the spirit of tinygrad's
// beam_search: a beam of the N fastest Opt lists so far, widened each round by every single Opt
// that applies to a member, each candidate compiled and timed on zero-filled buffers. The
// heuristics' choice is a seed and the final yardstick, so tuning never records something slower.
// docs/tuning.md gives the reasons for the numbers below.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "opt/kernel_timing.h"
#include "opt/opt.h"
#include "schedule/schedule.h"

namespace kiln {

struct BeamSettings {
  int beam_width = 4;
  // The search stops starting new work at this time (compiles included); the final re-timing of the
  // best candidates is planned to fit before it too.
  std::chrono::steady_clock::time_point deadline;
  // Set (by a SIGINT handler) to stop the search as soon as possible; the result is then `interrupted`.
  const std::atomic<bool>* stop = nullptr;
  // A round that improves the best time by less than this fraction ends the search (noise).
  double min_round_gain = 0.02;
  // A candidate is recorded only when its final time beats the heuristics' by this fraction.
  double min_gain_over_heuristics = 0.03;
  int max_opts = 8;  // longest Opt list tried
};

struct BeamResult {
  std::vector<Opt> opts;       // the heuristics' list unless a candidate beat it by the margin
  std::vector<Opt> heuristic;  // the heuristics' list
  double seconds = 0;          // final time of `opts` (re-timed)
  double heuristic_seconds = 0;  // final time of the heuristics' list (re-timed with the finalists)
  bool improved = false;       // `opts` is a searched candidate, not the heuristics' list
  bool interrupted = false;    // stopped by `stop`: the result is incomplete and must not be recorded
  bool out_of_time = false;    // the deadline came before the search converged
  bool timed = false;          // the final comparison was made: the result may be recorded
  int rounds = 0;
  int candidates = 0;          // timed
  int failed = 0;              // did not compile (an InvalidOpt or a compile error)
};

// The single Opts to try on `ast` (a kernel with some Opts applied already): UPCAST of each output
// loop by 2, 3, 4, 8, 16 up to the target's f32 lanes; UNROLL of output and reduce loops by 2, 3, 4,
// 8 (and a short reduce loop whole); SWAP of two output loops; MERGE of neighbouring output loops;
// PADTO of an output loop to 4 or the lanes when that adds at most a third. Some do not apply
// (InvalidOpt); the search skips those.
std::vector<Opt> beam_actions(const UOpPtr& ast, const TargetCaps& caps);

// Searches the Opts of `kernel` (unoptimised, as the schedule made it) on buffers of `schedule`'s
// sizes. Candidates are compiled through the kernel cache (compile_cpu_kernel), so a rerun of an
// interrupted search compiles little. The heuristics' list failing to compile is an error (thrown).
BeamResult beam_search_kernel(const Schedule& schedule, const ScheduledKernel& kernel, const TargetCaps& caps,
                              KernelTimer& timer, const BeamSettings& settings);

}  // namespace kiln
