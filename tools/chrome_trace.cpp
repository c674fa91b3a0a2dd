// The Chrome trace of `kiln bench --trace`: events are collected in memory while the plan runs (a
// lock per event, in runs of their own after the benchmark's timed ones) and written as JSON at the end.
#include "chrome_trace.h"

#include <algorithm>
#include <cstdio>

#include <unistd.h>

namespace kiln::tools {
namespace {

// A JSON string literal: quotes, backslashes and control characters escaped; other bytes (UTF-8
// node names) as they are.
std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      quoted += escaped;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

// Microseconds with nanosecond digits: the unit of "ts" and "dur".
std::string microseconds(std::chrono::steady_clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f",
                static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(duration).count()) / 1000.0);
  return text;
}

}  // namespace

ChromeTraceRecorder::ChromeTraceRecorder() { tracks_.push_back(std::this_thread::get_id()); }

int ChromeTraceRecorder::track_of_this_thread() {
  std::thread::id self = std::this_thread::get_id();
  auto found = std::find(tracks_.begin(), tracks_.end(), self);
  if (found != tracks_.end()) return static_cast<int>(found - tracks_.begin());
  tracks_.push_back(self);
  return static_cast<int>(tracks_.size()) - 1;
}

void ChromeTraceRecorder::launch(size_t kernel, Clock::time_point start, Clock::time_point end) {
  std::lock_guard lock(mutex_);
  events_.push_back({Kind::Launch, track_of_this_thread(), kernel, runs_, 0, 0, start, end});
}

void ChromeTraceRecorder::chunk(size_t kernel, int64_t begin, int64_t end, Clock::time_point start,
                                Clock::time_point stop) {
  std::lock_guard lock(mutex_);
  events_.push_back({Kind::Chunk, track_of_this_thread(), kernel, runs_, begin, end, start, stop});
}

void ChromeTraceRecorder::run(Clock::time_point start, Clock::time_point end) {
  std::lock_guard lock(mutex_);
  events_.push_back({Kind::Run, track_of_this_thread(), 0, runs_, 0, 0, start, end});
  ++runs_;
}

std::string ChromeTraceRecorder::json(const std::string& process_name, const std::vector<TracedKernel>& kernels) const {
  std::lock_guard lock(mutex_);
  std::vector<const Event*> ordered;
  ordered.reserve(events_.size());
  for (const Event& event : events_) ordered.push_back(&event);
  // Time order, an enclosing event before the events inside it (same start: the longer first), so
  // that viewers nest them on a track.
  std::stable_sort(ordered.begin(), ordered.end(), [](const Event* a, const Event* b) {
    if (a->start != b->start) return a->start < b->start;
    return a->stop - a->start > b->stop - b->start;
  });
  const Clock::time_point origin = ordered.empty() ? Clock::time_point{} : ordered.front()->start;
  const std::string pid = std::to_string(getpid());

  std::vector<std::string> entries;  // one JSON object per event
  auto metadata = [&](const char* name, int track, const std::string& value) {
    entries.push_back("{\"name\": \"" + std::string(name) + "\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " +
                      std::to_string(track) + ", \"args\": {\"name\": " + json_string(value) + "}}");
  };
  metadata("process_name", 0, process_name);
  for (size_t track = 0; track < tracks_.size(); ++track)
    metadata("thread_name", static_cast<int>(track),
             track == 0 ? std::string("runs (calling thread)") : "worker " + std::to_string(track));
  for (size_t track = 0; track < tracks_.size(); ++track)  // the calling thread's track first
    entries.push_back("{\"name\": \"thread_sort_index\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " +
                      std::to_string(track) + ", \"args\": {\"sort_index\": " + std::to_string(track) + "}}");

  for (const Event* traced : ordered) {
    const Event& event = *traced;
    std::string name, category, args;
    if (event.kind == Kind::Run) {
      name = "run " + std::to_string(event.iteration);
      category = "run";
      args = "\"iteration\": " + std::to_string(event.iteration);
    } else {
      const TracedKernel& kernel = kernels.at(event.kernel);
      name = kernel.symbol;
      if (event.kind == Kind::Launch) {
        category = "kernel";
        std::string sources;
        for (const std::string& source : kernel.sources) sources += (sources.empty() ? "" : ", ") + json_string(source);
        char estimates[96];
        std::snprintf(estimates, sizeof estimates, "\"estimated_flops\": %.17g, \"estimated_bytes\": %.17g",
                      kernel.estimated_flops, kernel.estimated_bytes);
        args = "\"kernel\": " + std::to_string(event.kernel) + ", \"iteration\": " + std::to_string(event.iteration) +
               ", \"sources\": [" + sources + "], " + estimates;
      } else {
        category = "chunk";
        args = "\"kernel\": " + std::to_string(event.kernel) + ", \"iteration\": " + std::to_string(event.iteration) +
               ", \"begin\": " + std::to_string(event.begin) + ", \"end\": " + std::to_string(event.end);
      }
    }
    entries.push_back("{\"name\": " + json_string(name) + ", \"cat\": \"" + category + "\", \"ph\": \"X\", \"ts\": " +
                      microseconds(event.start - origin) + ", \"dur\": " + microseconds(event.stop - event.start) +
                      ", \"pid\": " + pid + ", \"tid\": " + std::to_string(event.track) + ", \"args\": {" + args +
                      "}}");
  }
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  for (size_t i = 0; i < entries.size(); ++i) out += entries[i] + (i + 1 < entries.size() ? ",\n" : "\n");
  return out + "]}\n";
}

}  // namespace kiln::tools
