#pragma once
// Trace events in Chrome's Trace Event Format (the JSON that Perfetto and chrome://tracing open),
// the subset documented in docs/formats/chrome-trace.md:
//
//   {"displayTimeUnit": "ms", "traceEvents": [
//     {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "..."}},
//     {"ph": "M", "name": "thread_name",  "pid": 0, "tid": 2, "args": {"name": "stage 2"}},
//     {"ph": "X", "name": "forward", "cat": "compute", "pid": 0, "tid": 2,
//      "ts": 3000.0, "dur": 1000.0, "args": {"microbatch": "3"}}]}
//
// A track is a (process, thread) pair: Perfetto draws one row per thread, grouped under its
// process. Troupe gives every pipeline stage (or rank) its own track, so a stage's events never
// overlap except by nesting. Times are microseconds, as the format requires.
//
// The recorder is thread-safe: stage actors on several scheduler threads may record into one
// recorder. Events are kept in memory until write_trace(); a trace is for one step or one run of
// a schedule, not an unbounded log.

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "compute/expected.hpp"  // header-only: Status and Error, no link to troupe_compute

namespace troupe::monitor {

struct TraceTrack {
  int process = 0;  // "pid": a rank, or one process for a whole simulated pipeline
  int thread = 0;   // "tid": a stage within that process

  bool operator==(const TraceTrack&) const = default;
};

// The trace's clock: the host's steady clock (CLOCK_MONOTONIC) in microseconds, one clock for
// every process on the machine, so that their traces line up.
double trace_clock_us();

// Extra fields shown when an event is selected, e.g. {{"microbatch", "3"}}; kept in this order.
using TraceArgs = std::vector<std::pair<std::string, std::string>>;

// A complete event ("ph": "X"): something on `track` that ran from start_us for duration_us.
struct TraceEvent {
  TraceTrack track;
  std::string name;      // what ran: "forward", "send_act"
  std::string category;  // "cat": a group to filter by ("compute", "transfer")
  double start_us = 0.0;
  double duration_us = 0.0;
  TraceArgs args;
};

class TraceRecorder {
 public:
  // Names a process ("process_name" metadata) or a track ("thread_name" metadata). Naming the
  // same one again replaces the name.
  void name_process(int process, std::string name);
  void name_track(TraceTrack track, std::string name);

  void add(TraceEvent event);
  void add_complete(TraceTrack track, std::string name, std::string category, double start_us, double duration_us,
                    TraceArgs args = {});

  std::vector<TraceEvent> events() const;  // a copy, in the order they were added
  // Adds the names and events of a document another recorder's to_json() wrote (another rank's
  // share of one trace); an Error when it is not such a document.
  Status add_document(const std::string& document);

  // The whole document: metadata events first (processes, then tracks, each in ascending id),
  // then the complete events in the order they were added.
  std::string to_json() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<int, std::string>> process_names_;
  std::vector<std::pair<TraceTrack, std::string>> track_names_;
  std::vector<TraceEvent> events_;
};

// Writes recorder.to_json() to path (replacing the file). The error names the path and what
// failed: "cannot write trace file 'out/t.json': No such file or directory".
Status write_trace(const TraceRecorder& recorder, const std::string& path);

}  // namespace troupe::monitor
