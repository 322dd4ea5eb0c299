#include "monitor/trace.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace troupe::monitor {

double trace_clock_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
namespace {

using json = nlohmann::ordered_json;  // keeps the field order of docs/formats/chrome-trace.md

json metadata(const char* kind, int process, int thread, const std::string& name) {
  return json{{"ph", "M"}, {"name", kind}, {"pid", process}, {"tid", thread}, {"args", {{"name", name}}}};
}

json complete(const TraceEvent& event) {
  json args = json::object();
  for (const auto& [key, value] : event.args) args[key] = value;
  return json{{"ph", "X"},
              {"name", event.name},
              {"cat", event.category},
              {"pid", event.track.process},
              {"tid", event.track.thread},
              {"ts", event.start_us},
              {"dur", event.duration_us},
              {"args", std::move(args)}};
}

}  // namespace

void TraceRecorder::name_process(int process, std::string name) {
  std::lock_guard lock(mutex_);
  auto it =
      std::find_if(process_names_.begin(), process_names_.end(), [&](const auto& p) { return p.first == process; });
  if (it != process_names_.end()) {
    it->second = std::move(name);
  } else {
    process_names_.emplace_back(process, std::move(name));
  }
}

void TraceRecorder::name_track(TraceTrack track, std::string name) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(track_names_.begin(), track_names_.end(), [&](const auto& t) { return t.first == track; });
  if (it != track_names_.end()) {
    it->second = std::move(name);
  } else {
    track_names_.emplace_back(track, std::move(name));
  }
}

void TraceRecorder::add(TraceEvent event) {
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
}

void TraceRecorder::add_complete(TraceTrack track, std::string name, std::string category, double start_us,
                                 double duration_us, TraceArgs args) {
  add(TraceEvent{track, std::move(name), std::move(category), start_us, duration_us, std::move(args)});
}

Status TraceRecorder::add_document(const std::string& document) {
  const json doc = json::parse(document, nullptr, false);
  if (doc.is_discarded() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    return Error{"not a trace document: no traceEvents array"};
  for (const json& e : doc["traceEvents"]) {
    if (!e.is_object() || !e.contains("ph") || !e.contains("pid") || !e.contains("tid") || !e.contains("name"))
      return Error{"not a trace event: " + e.dump()};
    const TraceTrack track{e["pid"].get<int>(), e["tid"].get<int>()};
    if (e["ph"] == "M") {
      const std::string name = e["args"]["name"].get<std::string>();
      if (e["name"] == "process_name") name_process(track.process, name);
      if (e["name"] == "thread_name") name_track(track, name);
    } else if (e["ph"] == "X") {
      TraceArgs args;
      for (const auto& [key, value] : e["args"].items()) args.emplace_back(key, value.get<std::string>());
      add_complete(track, e["name"].get<std::string>(), e["cat"].get<std::string>(), e["ts"].get<double>(),
                   e["dur"].get<double>(), std::move(args));
    }
  }
  return Status::success();
}

std::vector<TraceEvent> TraceRecorder::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::string TraceRecorder::to_json() const {
  std::lock_guard lock(mutex_);
  auto processes = process_names_;
  auto tracks = track_names_;
  // Sorted so the document does not depend on which thread named its track first.
  std::sort(processes.begin(), processes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::sort(tracks.begin(), tracks.end(), [](const auto& a, const auto& b) {
    return std::pair(a.first.process, a.first.thread) < std::pair(b.first.process, b.first.thread);
  });
  // One event per line: small, and still readable and greppable by hand.
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  const char* separator = "\n";
  auto append = [&](const json& event) {
    out += separator;
    out += event.dump();
    separator = ",\n";
  };
  for (const auto& [process, name] : processes) append(metadata("process_name", process, 0, name));
  for (const auto& [track, name] : tracks) append(metadata("thread_name", track.process, track.thread, name));
  for (const auto& event : events_) append(complete(event));
  out += "\n]}\n";
  return out;
}

Status write_trace(const TraceRecorder& recorder, const std::string& path) {
  const std::string text = recorder.to_json();
  auto failed = [&](int error) { return Error{"cannot write trace file '" + path + "': " + std::strerror(error)}; };
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return failed(errno);
  const bool written = std::fwrite(text.data(), 1, text.size(), file) == text.size();
  const int write_error = errno;
  // fclose flushes, so a full disk may only show here.
  if (std::fclose(file) != 0) return failed(errno);
  if (!written) return failed(write_error);
  return Status::success();
}

}  // namespace troupe::monitor
