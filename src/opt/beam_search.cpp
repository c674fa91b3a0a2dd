// The beam search over one kernel's Opt lists; see beam_search.h.
#include "opt/beam_search.h"

#include <algorithm>
#include <exception>
#include <limits>
#include <optional>
#include <unordered_set>

#include "opt/heuristics.h"
#include "opt/optimize_schedule.h"
#include "passes/pipeline.h"
#include "support/parallel_tasks.h"
#include "support/error.h"

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSearchSamples = 3;   // samples per candidate while searching (min of them)
constexpr int kFinalRounds = 3;     // the finalists are re-timed this many times, interleaved
constexpr int kFinalSamples = 3;

struct Candidate {
  std::vector<Opt> opts;
  ScheduledKernel kernel;  // optimised
  KernelFunction function = nullptr;
  double seconds = std::numeric_limits<double>::infinity();
};

int64_t extent_of(const UOp* range) {
  return range->src(0)->is_const() ? static_cast<int64_t>(range->src(0)->const_int()) : 0;
}

int f32_lanes(const TargetCaps& caps) { return std::max(1, caps.vector_lanes(DType(ScalarType::Float32))); }

// The vector registers the accumulators of an unrolled, upcast kernel need, at least: one vector per
// UNROLL copy and UPCAST register width. Beyond the register file, LLVM spills (slow code) and the
// copies make compiles slow, so such candidates are not tried.
bool fits_register_file(const UOpPtr& ast, const TargetCaps& caps) {
  int64_t copies = 1, upcast = 1;
  for (const UOp* range : kernel_ranges(ast)) {
    AxisKind kind = axis_kind(range->arg_int());
    if (kind == AxisKind::Unroll) copies *= std::max<int64_t>(extent_of(range), 1);
    if (kind == AxisKind::Upcast) upcast = std::max<int64_t>(extent_of(range), 1);
  }
  int64_t lanes = f32_lanes(caps);
  return copies * ((upcast + lanes - 1) / lanes) <= caps.vector_registers;
}

class Search {
 public:
  Search(const Schedule& schedule, const ScheduledKernel& kernel, const TargetCaps& caps, KernelTimer& timer,
         const BeamSettings& settings, BeamResult& result)
      : base_(kernel), caps_(caps), timer_(timer), settings_(settings), result_(result), arguments_(schedule, kernel) {}

  // `opts` applied to the kernel, ready to compile; nothing when they do not apply, repeat an AST
  // already tried or overflow the register file.
  std::optional<Candidate> prepare(const std::vector<Opt>& opts, bool required) {
    Candidate candidate{opts, base_, nullptr};
    try {
      apply_kernel_opts(candidate.kernel, opts);
    } catch (const InvalidOpt&) {
      if (required) throw;
      return std::nullopt;
    }
    // Hash-consing makes equal ASTs one node: different Opt lists that give the same kernel are
    // timed once.
    if (!seen_.insert(candidate.kernel.ast.get()).second && !required) return std::nullopt;
    alive_.push_back(candidate.kernel.ast);  // so that no later AST reuses a pointer in seen_
    if (!required && !fits_register_file(candidate.kernel.ast, caps_)) return std::nullopt;
    return candidate;
  }

  // Compiles `batch` side by side (compile threads, support/parallel_tasks.h), then times each
  // alone, so that no compile runs while a kernel is timed. Returns those that compiled; a failed
  // compile is counted, or thrown when `required` (the heuristics' own list).
  std::vector<Candidate> compile_and_time(std::vector<Candidate> batch, bool required) {
    auto start = Clock::now();
    std::vector<std::exception_ptr> failures(batch.size());
    run_tasks_in_parallel(batch.size(), compile_thread_count(), [&](size_t i) {
      try {
        batch[i].function = compile_cpu_kernel(batch[i].kernel).function;
      } catch (const std::bad_alloc&) {
        throw;
      } catch (const std::exception&) {
        failures[i] = std::current_exception();
      }
    });
    std::vector<Candidate> compiled;
    for (size_t i = 0; i < batch.size(); ++i) {
      if (failures[i]) {
        if (required) std::rethrow_exception(failures[i]);
        ++result_.failed;
        continue;
      }
      if (!required && stopped()) break;  // the required list is timed regardless: the search needs it
      batch[i].seconds = timer_.time(batch[i].function, batch[i].kernel, arguments_, kSearchSamples);
      ++result_.candidates;
      compiled.push_back(std::move(batch[i]));
    }
    // A running mean of what one candidate costs (its share of the batch), to stop before the
    // deadline rather than after it.
    if (!batch.empty()) {
      double cost = std::chrono::duration<double>(Clock::now() - start).count() / static_cast<double>(batch.size());
      mean_cost_ = mean_cost_ == 0 ? cost : 0.8 * mean_cost_ + 0.2 * cost;
    }
    return compiled;
  }

  // Prepares, compiles and times `opts` alone.
  std::optional<Candidate> try_opts(const std::vector<Opt>& opts, bool required) {
    std::optional<Candidate> candidate = prepare(opts, required);
    if (!candidate) return std::nullopt;
    std::vector<Candidate> timed = compile_and_time({std::move(*candidate)}, required);
    if (timed.empty()) return std::nullopt;
    return std::move(timed.front());
  }

  // Time the final re-timing of `finalists` will take, from their search times.
  double final_cost(size_t finalists, double seconds) const {
    double per_call = (1 + kFinalSamples) * std::max(seconds, 2e-4) * 1.5;
    return static_cast<double>(finalists) * kFinalRounds * per_call + 0.05;
  }

  bool time_left_for(size_t candidates, double best_seconds) const {
    double needed = mean_cost_ * static_cast<double>(candidates) +
                    final_cost(static_cast<size_t>(settings_.beam_width) + 1, best_seconds);
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(needed)) <
           settings_.deadline;
  }

  bool stopped() const { return settings_.stop != nullptr && settings_.stop->load(); }

  void run() {
    std::vector<Opt> heuristic = hand_coded_opts(base_.ast, caps_);
    result_.heuristic = heuristic;
    result_.opts = heuristic;
    std::optional<Candidate> heuristic_seed = try_opts(heuristic, true);
    const UOp* heuristic_ast = heuristic_seed->kernel.ast.get();
    std::vector<Candidate> beam{*heuristic_seed};
    if (stopped()) return interrupt();
    if (std::optional<Candidate> plain = try_opts({}, false)) beam.push_back(std::move(*plain));
    auto by_time = [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; };
    std::sort(beam.begin(), beam.end(), by_time);
    double best = beam.front().seconds;

    bool converged = false;
    while (!converged && !result_.out_of_time) {
      ++result_.rounds;
      std::vector<Candidate> round;
      // The round's candidates go in batches of one per compile thread: compiled side by side,
      // then timed one at a time.
      const size_t batch_size = std::max<size_t>(1, compile_thread_count());
      std::vector<Candidate> batch;
      auto run_batch = [&] {
        for (Candidate& timed : compile_and_time(std::move(batch), false)) round.push_back(std::move(timed));
        batch.clear();
      };
      for (const Candidate& member : beam) {
        if (static_cast<int>(member.opts.size()) >= settings_.max_opts) continue;
        for (const Opt& action : beam_actions(member.kernel.ast, caps_)) {
          if (stopped()) return interrupt();
          if (batch.empty() && !time_left_for(batch_size, best)) {
            result_.out_of_time = true;
            break;
          }
          // A SWAP right after the same SWAP undoes it (simplify may not give back the same AST,
          // so the duplicate check would not catch it).
          if (action.op == OptOp::Swap && !member.opts.empty() && member.opts.back() == action) continue;
          std::vector<Opt> opts = member.opts;
          opts.push_back(action);
          if (std::optional<Candidate> candidate = prepare(opts, false)) batch.push_back(std::move(*candidate));
          if (batch.size() == batch_size) run_batch();
        }
        if (result_.out_of_time) break;
      }
      if (!batch.empty()) run_batch();
      if (stopped()) return interrupt();
      if (round.empty()) break;
      round.insert(round.end(), beam.begin(), beam.end());
      std::sort(round.begin(), round.end(), by_time);
      if (round.size() > static_cast<size_t>(settings_.beam_width)) round.resize(static_cast<size_t>(settings_.beam_width));
      converged = round.front().seconds >= best * (1 - settings_.min_round_gain);
      best = std::min(best, round.front().seconds);
      beam = std::move(round);
    }
    finish(beam, *heuristic_seed, heuristic_ast);
  }

 private:
  void interrupt() { result_.interrupted = true; }

  // Re-times the beam and the heuristics' kernel side by side (interleaved rounds, so a burst of
  // load from elsewhere hits them alike) and keeps a candidate only when it wins by the margin.
  void finish(std::vector<Candidate> finalists, const Candidate& heuristic, const UOp* heuristic_ast) {
    if (std::none_of(finalists.begin(), finalists.end(),
                     [&](const Candidate& c) { return c.kernel.ast.get() == heuristic_ast; }))
      finalists.push_back(heuristic);
    std::vector<double> times(finalists.size(), std::numeric_limits<double>::infinity());
    for (int round = 0; round < kFinalRounds; ++round) {
      for (size_t i = 0; i < finalists.size(); ++i) {
        if (stopped()) return interrupt();
        times[i] = std::min(times[i], timer_.time(finalists[i].function, finalists[i].kernel, arguments_, kFinalSamples));
      }
    }
    size_t best = 0, heuristic_index = 0;
    for (size_t i = 0; i < finalists.size(); ++i) {
      if (times[i] < times[best]) best = i;
      if (finalists[i].kernel.ast.get() == heuristic_ast) heuristic_index = i;
    }
    result_.heuristic_seconds = times[heuristic_index];
    result_.timed = true;
    if (best != heuristic_index && times[best] < times[heuristic_index] * (1 - settings_.min_gain_over_heuristics)) {
      result_.opts = finalists[best].opts;
      result_.seconds = times[best];
      result_.improved = true;
    } else {
      result_.opts = finalists[heuristic_index].opts;
      result_.seconds = times[heuristic_index];
    }
  }

  const ScheduledKernel& base_;
  const TargetCaps& caps_;
  KernelTimer& timer_;
  const BeamSettings& settings_;
  BeamResult& result_;
  KernelArguments arguments_;
  std::unordered_set<const UOp*> seen_;
  std::vector<UOpPtr> alive_;
  double mean_cost_ = 0;
};

}  // namespace

std::vector<Opt> beam_actions(const UOpPtr& ast, const TargetCaps& caps) {
  std::vector<Opt> actions;
  std::vector<const UOp*> ranges = kernel_ranges(ast);
  int64_t lanes = f32_lanes(caps);
  bool has_upcast = std::any_of(ranges.begin(), ranges.end(),
                                [](const UOp* r) { return axis_kind(r->arg_int()) == AxisKind::Upcast; });
  std::vector<int64_t> loops;
  for (const UOp* range : ranges) {
    int64_t axis = range->arg_int(), extent = extent_of(range);
    AxisKind kind = axis_kind(axis);
    if (extent < 2 || (kind != AxisKind::Loop && kind != AxisKind::Reduce)) continue;
    if (kind == AxisKind::Loop) {
      loops.push_back(axis);
      if (!has_upcast)
        for (int64_t width : {2, 3, 4, 8, 16})
          if (width <= lanes && extent % width == 0) actions.push_back({OptOp::Upcast, axis, width});
      std::vector<int64_t> multiples{4};
      if (lanes > 4) multiples.push_back(lanes);
      for (int64_t multiple : multiples) {
        int64_t padded = (extent + multiple - 1) / multiple * multiple;
        if (padded != extent && padded * 3 <= extent * 4) actions.push_back({OptOp::Padto, axis, multiple});
      }
    }
    std::vector<int64_t> amounts{2, 3, 4, 8};
    // A short reduce loop (a conv's window row) unrolled whole: its copies share loads.
    if (kind == AxisKind::Reduce && extent <= 16 && std::find(amounts.begin(), amounts.end(), extent) == amounts.end())
      amounts.push_back(extent);
    for (int64_t amount : amounts)
      if (extent % amount == 0) actions.push_back({OptOp::Unroll, axis, amount});
  }
  for (size_t i = 0; i < loops.size(); ++i) {
    for (size_t j = i + 1; j < loops.size(); ++j) actions.push_back({OptOp::Swap, loops[i], loops[j]});
    if (i + 1 < loops.size()) actions.push_back({OptOp::Merge, loops[i], loops[i + 1]});
  }
  return actions;
}

BeamResult beam_search_kernel(const Schedule& schedule, const ScheduledKernel& kernel, const TargetCaps& caps,
                              KernelTimer& timer, const BeamSettings& settings) {
  BeamResult result;
  Search search(schedule, kernel, caps, timer, settings, result);
  search.run();
  return result;
}

}  // namespace kiln
