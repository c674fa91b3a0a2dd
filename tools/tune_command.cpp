// `kiln tune`: the model's schedule as `kiln compile` makes it, its distinct kernels (by tuning key)
// searched largest first within one time budget, the database saved after every kernel. The search
// is src/opt/beam_search.*; this file owns the budget, the order, resuming and Ctrl-C.
#include "tune_command.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>

#include "codegen/cpu_codegen.h"
#include "codegen/target.h"
#include "driver/run_on_device.h"
#include "compile_onnx_file.h"
#include "model_arguments.h"
#include "opt/beam_search.h"
#include "opt/heuristics.h"
#include "opt/kernel_timing.h"
#include "opt/optimize_schedule.h"
#include "opt/tuning_db.h"
#include "passes/pipeline.h"
#include "plan/plan_writer.h"
#include "support/error.h"
#include "support/large_stack.h"

namespace kiln::tools {
namespace {

// Exit statuses as the other commands: 1 bad input, 2 bad command line, 3 kiln bug; 130 after Ctrl-C.
constexpr int kExitError = 1, kExitUsage = 2, kExitInternal = 3, kExitInterrupted = 130;

using Clock = std::chrono::steady_clock;

void print_tune_help(std::ostream& out) {
  out << "usage: kiln tune MODEL.onnx --db DB [--budget SECONDS] [--beam N] [--threads T] [--shape SPEC...]\n"
         "\n"
         "Searches the optimisations (Opt actions: UPCAST, UNROLL, SWAP, MERGE, PADTO) of each kernel\n"
         "of MODEL by compiling and timing candidates on this machine (a beam search seeded with the\n"
         "heuristics' choice), and records each kernel's best list in the tuning database DB; then\n"
         "'kiln compile MODEL -o PLAN --tuning DB' uses them. A kernel is recorded with a searched list\n"
         "only when it beats the heuristics' by 3 % when re-timed, so tuning never makes a kernel\n"
         "slower. DB is rewritten after every kernel; kernels DB has already are skipped, so an\n"
         "interrupted run (Ctrl-C, or the budget) continues where it stopped. docs/tuning.md has the\n"
         "details.\n"
         "\n"
         "options:\n"
         "  --db DB            the tuning database to extend (created if absent; required)\n"
         "  --budget SECONDS   wall time for the whole run, compiles included (default 600); kernels\n"
         "                     left when it runs out get no entry (the heuristics apply)\n"
         "  --beam N           Opt lists kept per round (default 4)\n"
         "  --threads T        threads a kernel runs on while timed (default: all cores), as with\n"
         "                     'kiln bench --threads T'; tune for the thread count you will run with\n"
         "  --shape SPEC...    input shapes, as for 'kiln compile'\n"
         "  -h, --help         show this help\n";
}

int usage_error(const std::string& message) {
  std::cerr << "kiln tune: " << message << " (try 'kiln tune --help')\n";
  return kExitUsage;
}

std::atomic<bool> interrupted{false};

extern "C" void on_interrupt(int) {
  interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

std::string opts_text(const std::vector<Opt>& opts) {
  std::string text;
  for (const Opt& opt : opts) text += (text.empty() ? "" : ", ") + opt.text();
  return text.empty() ? "no opts" : text;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Options {
  std::string model_path, db_path;
  double budget = 600;
  int beam = 4;
  int threads = 0;
  std::vector<onnx_import::ShapeSpec> shapes;
};

// One distinct kernel: its key, where it first occurs, how often, and the heuristics' time.
struct Work {
  TuningKey key;
  size_t index = 0;
  int count = 0;
  double heuristic_seconds = 0;
};

int tune(const Options& options) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.budget));
  auto say = [&](const std::string& line) { std::fprintf(stderr, "kiln tune: [%6.1fs] %s\n", seconds_since(start), line.c_str()); };

  TuningDb db = TuningDb::load_or_empty(options.db_path);
  say(str_cat("tuning database ", options.db_path, ": ", db.size(), " entries"));
  onnx_import::OnnxCompileOptions compile_options;
  compile_options.shapes = options.shapes;
  compile_options.progress = say;
  PlanWriteOptions write_options;
  write_options.progress = say;
  // Import and scheduling recurse as deep as the graph: on a large stack, as `kiln compile` runs them.
  // The graph outlives the lambda: the schedule's weight buffers belong to its tensors.
  onnx_import::OnnxGraph graph;
  std::optional<PlanSchedule> scheduled;
  run_on_large_stack([&] {
    ScopedGraphTarget target(&host_cpu_caps());  // tuning is for CPU plans, whatever KILN_DEVICE says
    graph = onnx_import::build_onnx_graph(options.model_path, compile_options);
    scheduled = schedule_plan(graph.outputs, write_options);
  });
  PlanSchedule& planned = *scheduled;
  const Schedule& schedule = planned.schedule;
  const std::string target = cpu_target_id();
  const TargetCaps& caps = host_cpu_caps();

  std::vector<Work> work;
  std::map<TuningKey, size_t> position;
  size_t known = 0;
  for (size_t k = 0; k < schedule.kernels.size(); ++k) {
    TuningKey key = tuning_key(schedule.kernels[k].ast, target);
    if (db.find(key) != nullptr) {
      ++known;
      continue;
    }
    auto [at, added] = position.emplace(key, work.size());
    if (added) work.push_back({key, k, 0, 0});
    ++work[at->second].count;
  }
  KernelTimer timer(options.threads);
  say(str_cat(schedule.kernels.size(), " kernels: ", work.size(), " distinct to tune, ", known,
              " already in the database; target ", caps.name, ", ", timer.threads(), " threads, budget ",
              options.budget, " s"));

  std::signal(SIGINT, on_interrupt);
  struct RestoreSignal {
    ~RestoreSignal() { std::signal(SIGINT, SIG_DFL); }
  } restore;

  // The heuristics' time of each kernel decides the order (and each kernel's share of the budget):
  // the kernels that take the longest have the most to gain.
  size_t measured = 0;
  for (Work& item : work) {
    if (interrupted.load() || Clock::now() >= deadline) break;
    ScheduledKernel kernel = schedule.kernels[item.index];
    apply_kernel_opts(kernel, hand_coded_opts(kernel.ast, caps));
    KernelFunction function = compile_cpu_kernel(kernel).function;
    item.heuristic_seconds = timer.time(function, kernel, KernelArguments(schedule, kernel), 3);
    ++measured;
  }
  work.resize(measured);
  std::stable_sort(work.begin(), work.end(), [](const Work& a, const Work& b) {
    return a.heuristic_seconds * a.count > b.heuristic_seconds * b.count;
  });
  double remaining_weight = 0;
  for (const Work& item : work) remaining_weight += item.heuristic_seconds * item.count;
  say(str_cat("timed the heuristics' choice of ", measured, " kernels; searching, largest first"));

  size_t done = 0, improved = 0;
  double before_total = 0, after_total = 0;  // per model run, over the kernels tuned now
  for (size_t i = 0; i < work.size(); ++i) {
    const Work& item = work[i];
    if (interrupted.load() || Clock::now() >= deadline) break;
    // Each kernel's share of the time left is its share of the time left to gain, but at least 2 s
    // (enough for the seeds and one round on a small kernel).
    double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    double weight = item.heuristic_seconds * item.count;
    double share = remaining_weight > 0 ? left * weight / remaining_weight : left;
    share = std::min(left, std::max(share, 2.0));
    remaining_weight -= weight;
    BeamSettings settings;
    settings.beam_width = options.beam;
    settings.deadline = std::min(deadline, Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(share)));
    settings.stop = &interrupted;
    Clock::time_point kernel_start = Clock::now();
    const ScheduledKernel& kernel = schedule.kernels[item.index];
    BeamResult result = beam_search_kernel(schedule, kernel, caps, timer, settings);
    if (result.interrupted || !result.timed) break;
    TuningEntry entry;
    entry.opts = result.opts;
    entry.time_us = result.seconds * 1e6;
    entry.heuristic_us = result.heuristic_seconds * 1e6;
    db.set(item.key, entry);
    db.save_file(options.db_path);
    ++done;
    improved += result.improved ? 1 : 0;
    before_total += result.heuristic_seconds * item.count;
    after_total += result.seconds * item.count;
    char line[160];
    std::snprintf(line, sizeof line, "heuristic %.1f µs → best %.1f µs", result.heuristic_seconds * 1e6, result.seconds * 1e6);
    std::fprintf(stderr, "[%zu/%zu] %s: %s (%s%s) in %.1f s, %d candidates%s\n", i + 1, work.size(), kernel.name().c_str(),
                 line, result.improved ? "" : "heuristics: ", opts_text(result.opts).c_str(),
                 seconds_since(kernel_start), result.candidates, result.out_of_time ? ", out of time" : "");
  }
  size_t left_out = position.size() - done;
  char totals[200];
  std::snprintf(totals, sizeof totals, "%.1f µs → %.1f µs per model run over them (%.1f %% less)", before_total * 1e6,
                after_total * 1e6, before_total > 0 ? 100 * (1 - after_total / before_total) : 0.0);
  say(str_cat("tuned ", done, " kernels, ", improved, " faster than the heuristics: ", totals, "; ", left_out,
              " left for a later run; ", options.db_path, " has ", db.size(), " entries"));
  if (interrupted.load()) {
    say("interrupted: the finished kernels are saved; run the same command again to continue");
    return kExitInterrupted;
  }
  return 0;
}

bool parse_number(const std::string& text, double& value) {
  try {
    size_t used = 0;
    value = std::stod(text, &used);
    return used == text.size();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

int tune_command(const std::vector<std::string>& arguments) {
  Options options;
  ModelArguments model;
  try {
    for (size_t i = 0; i < arguments.size(); ++i) {
      const std::string& argument = arguments[i];
      auto value = [&]() -> const std::string* {
        if (i + 1 >= arguments.size()) return nullptr;
        model.end_shapes();
        return &arguments[++i];
      };
      if (argument == "-h" || argument == "--help") {
        print_tune_help(std::cout);
        return 0;
      }
      ModelArguments::Taken taken = model.take(argument);
      if (taken == ModelArguments::Taken::SecondModel)
        return usage_error("one model at a time ('" + argument + "' is a second one)");
      if (taken == ModelArguments::Taken::Yes) continue;
      if (argument == "--db") {
        const std::string* text = value();
        if (text == nullptr) return usage_error("--db needs a file name");
        options.db_path = *text;
      } else if (argument == "--budget" || argument == "--beam" || argument == "--threads") {
        const std::string* text = value();
        double number = 0;
        if (text == nullptr || !parse_number(*text, number))
          return usage_error(argument + " needs a number");
        if (argument == "--budget") {
          if (!(number > 0)) return usage_error("--budget must be more than 0 seconds");
          options.budget = number;
        } else {
          if (number < 1 || number > 1024 || number != static_cast<int>(number))
            return usage_error(argument + " must be a whole number from 1 to 1024");
          (argument == "--beam" ? options.beam : options.threads) = static_cast<int>(number);
        }
      } else {
        return usage_error("unknown option '" + argument + "'");
      }
    }
    options.model_path = model.model_path;
    options.shapes = model.shapes;
    if (options.model_path.empty()) return usage_error("no model given");
    if (options.db_path.empty()) return usage_error("no tuning database given (--db DB)");
    return tune(options);
  } catch (const Error& error) {
    std::cerr << "kiln tune: " << error.what() << "\n";
    return kExitError;
  } catch (const std::exception& error) {
    std::cerr << "kiln tune: internal error: " << error.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace kiln::tools
