#pragma once
// A TensorBoard event file of our own (docs/formats/tensorboard-events.md): TFRecord framing
// (monitor/tfrecord.hpp) around `Event` protobufs encoded by hand — the few fields TensorBoard's
// scalar and text dashboards read, no protobuf library. The first record says the file version
// ("brain.Event:2"); every later one is a scalar or a text at a step. Each record is flushed as it
// is written, so TensorBoard shows a run while it trains.

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "compute/expected.hpp"  // header-only: Expected and Error, no link to troupe_compute

namespace troupe::monitor {

// The encoded protobufs (without framing).
std::string version_event(double wall_time);
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);
// A text summary: a scalar string tensor whose metadata names the "text" plugin.
std::string text_event(double wall_time, std::int64_t step, std::string_view tag, std::string_view text);

class EventFile {
 public:
  // Creates `dir` (and its parents) and in it events.out.tfevents.<unix seconds>.<host>.<pid>,
  // holding the version record. An Error names the folder or the file and what went wrong.
  static Expected<EventFile> create(const std::string& dir);

  Status scalar(std::int64_t step, std::string_view tag, double value);
  Status text(std::int64_t step, std::string_view tag, std::string_view text);
  const std::string& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };
  EventFile(std::string path, std::FILE* file) : path_(std::move(path)), file_(file) {}
  Status append(const std::string& event);

  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace troupe::monitor
