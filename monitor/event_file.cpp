#include "monitor/event_file.hpp"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "monitor/tfrecord.hpp"

namespace troupe::monitor {
namespace {

// Protobuf's wire format: a key is (field << 3 | wire type); varints carry 7 bits a byte.
enum WireType : std::uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}
void put_key(std::string& out, std::uint32_t field, WireType type) { put_varint(out, (field << 3) | type); }
void put_fixed(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}
void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, length_delimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_double(std::string& out, std::uint32_t field, double value) {
  put_key(out, field, fixed64);
  put_fixed(out, std::bit_cast<std::uint64_t>(value), 8);
}
void put_float(std::string& out, std::uint32_t field, float value) {
  put_key(out, field, fixed32);
  put_fixed(out, std::bit_cast<std::uint32_t>(value), 4);
}
void put_int(std::string& out, std::uint32_t field, std::uint64_t value) {
  put_key(out, field, varint);
  put_varint(out, value);
}

// Field numbers (tensorflow/core/util/event.proto, framework/summary.proto, tensor.proto).
namespace event {
constexpr std::uint32_t wall_time = 1, step = 2, file_version = 3, summary = 5;
}
namespace summary_value {
constexpr std::uint32_t tag = 1, simple_value = 2, tensor = 8, metadata = 9;
}
constexpr std::uint32_t summary_values = 1;        // Summary.value (repeated)
constexpr std::uint32_t metadata_plugin_data = 1;  // SummaryMetadata.plugin_data
constexpr std::uint32_t plugin_name = 1;           // PluginData.plugin_name
constexpr std::uint32_t tensor_dtype = 1, tensor_shape = 2, tensor_string_val = 8;
constexpr std::uint64_t dt_string = 7;

std::string event_with_summary(double wall_time, std::int64_t step, const std::string& value) {
  std::string summary;
  put_bytes(summary, summary_values, value);
  std::string out;
  put_double(out, event::wall_time, wall_time);
  put_int(out, event::step, static_cast<std::uint64_t>(step));
  put_bytes(out, event::summary, summary);
  return out;
}

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

std::string version_event(double wall_time) {
  std::string out;
  put_double(out, event::wall_time, wall_time);
  put_bytes(out, event::file_version, "brain.Event:2");
  return out;
}

std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
  std::string v;
  put_bytes(v, summary_value::tag, tag);
  put_float(v, summary_value::simple_value, value);
  return event_with_summary(wall_time, step, v);
}

std::string text_event(double wall_time, std::int64_t step, std::string_view tag, std::string_view text) {
  std::string plugin;
  put_bytes(plugin, plugin_name, "text");
  std::string metadata;
  put_bytes(metadata, metadata_plugin_data, plugin);
  std::string tensor;
  put_int(tensor, tensor_dtype, dt_string);
  put_bytes(tensor, tensor_shape, "");  // a scalar: no dimensions
  put_bytes(tensor, tensor_string_val, text);
  std::string v;
  put_bytes(v, summary_value::tag, tag);
  put_bytes(v, summary_value::metadata, metadata);
  put_bytes(v, summary_value::tensor, tensor);
  return event_with_summary(wall_time, step, v);
}

Expected<EventFile> EventFile::create(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Error{"cannot create the folder '" + dir + "': " + error.message()};
  const double wall = now();
  const std::string path =
      (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(static_cast<long long>(wall)) + "." +
                                     host_name() + "." + std::to_string(::getpid())))
          .string();
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (!file) return Error{"cannot open '" + path + "' for writing: " + std::strerror(errno)};
  EventFile events(path, file);
  if (Status written = events.append(version_event(wall)); !written) return written.error();
  return events;
}

Status EventFile::scalar(std::int64_t step, std::string_view tag, double value) {
  return append(scalar_event(now(), step, tag, static_cast<float>(value)));
}

Status EventFile::text(std::int64_t step, std::string_view tag, std::string_view text) {
  return append(text_event(now(), step, tag, text));
}

Status EventFile::append(const std::string& event) {
  const std::string record = tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size() || std::fflush(file_.get()) != 0)
    return Error{"cannot write to '" + path_ + "': " + std::strerror(errno)};
  return Status::success();
}

}  // namespace troupe::monitor
