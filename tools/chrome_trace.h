// `kiln bench --trace`: a plan's runs recorded as a Chrome trace (the JSON "Trace Event Format" that
// Perfetto and chrome://tracing open). Each run, each kernel launch and each chunk of a launch is a
// complete event ("ph": "X") on the track of the thread that ran it; docs/profiling.md says how to
// read it.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu/plan_runner.h"

namespace kiln::tools {

// What a trace says about each kernel of the plan (indexed like the plan's kernels).
struct TracedKernel {
  std::string symbol;                // the event's name, as in the --profile table
  std::vector<std::string> sources;  // the ONNX nodes it computes, shortened as in the table
  double estimated_flops = 0, estimated_bytes = 0;
};

class ChromeTraceRecorder final : public RunTracer {
 public:
  // The calling thread becomes the first track ("runs"); other threads get tracks as they report.
  ChromeTraceRecorder();

  // The runner's reports (RunTracer). Thread-safe.
  void launch(size_t kernel, Clock::time_point start, Clock::time_point end) override;
  void chunk(size_t kernel, int64_t begin, int64_t end, Clock::time_point start, Clock::time_point stop) override;
  // One whole run (the caller times runner.run()); numbered in the order they are recorded.
  void run(Clock::time_point start, Clock::time_point end);

  // The trace as JSON: metadata naming the process and the tracks, then the events in time order.
  std::string json(const std::string& process_name, const std::vector<TracedKernel>& kernels) const;

 private:
  enum class Kind { Run, Launch, Chunk };
  struct Event {
    Kind kind;
    int track;
    size_t kernel;      // Launch, Chunk
    long iteration;     // the run it belongs to
    int64_t begin, end;  // Chunk: the range of the parallel axis
    Clock::time_point start, stop;
  };
  int track_of_this_thread();  // callers hold mutex_

  mutable std::mutex mutex_;
  std::vector<std::thread::id> tracks_;  // track k is the thread tracks_[k]
  std::vector<Event> events_;
  long runs_ = 0;  // runs recorded so far: the iteration of the launches being recorded
};

}  // namespace kiln::tools
