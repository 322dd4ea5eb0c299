#include "monitor/log.hpp"

#include <algorithm>
#include <ctime>
#include <functional>
#include <mutex>

#include <nlohmann/json.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace troupe::monitor {
namespace {

const std::vector<std::string> subsystems{"job", "node", "train", "comm", "checkpoint", "drill", "monitor", "launch"};
const std::vector<std::string> level_names{"trace", "debug", "info", "warn", "error", "critical", "off"};

struct Identity {
  std::string job = "-";
  int rank = 0;
  std::string role = "main";
};

std::string joined(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

Expected<spdlog::level::level_enum> parse_level(const std::string& name) {
  for (std::size_t i = 0; i < level_names.size(); ++i)
    if (level_names[i] == name) return static_cast<spdlog::level::level_enum>(i);
  return Error{"unknown log level '" + name + "' (one of " + joined(level_names) + ")"};
}

Status check_subsystem(const std::string& name) {
  for (const auto& known : subsystems)
    if (known == name) return Status::success();
  return Error{"unknown log subsystem '" + name + "' (one of " + joined(subsystems) + ")"};
}

std::string escaped_for_pattern(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '%' ? std::string("%%") : std::string(1, c);
  return out;
}

std::unique_ptr<spdlog::formatter> text_formatter(const Identity& id) {
  return std::make_unique<spdlog::pattern_formatter>(
      "%H:%M:%S.%e [" + escaped_for_pattern(id.job + " r" + std::to_string(id.rank) + " " + id.role) + "] %l %n: %v");
}

// One JSON object a line; nlohmann-json escapes the message, so any text stays one valid line.
class JsonLineFormatter : public spdlog::formatter {
 public:
  explicit JsonLineFormatter(Identity id) : id_(std::move(id)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch).count() % 1000;
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    char time[32];
    const std::size_t length = std::strftime(time, sizeof time, "%Y-%m-%dT%H:%M:%S", &utc);
    const auto level = spdlog::level::to_string_view(msg.level);
    const nlohmann::json line{
        {"time", std::string(time, length) + fmt::format(".{:03}Z", millis)},
        {"level", std::string(level.data(), level.size())},
        {"job", id_.job},
        {"rank", id_.rank},
        {"role", id_.role},
        {"subsystem", std::string(msg.logger_name.data(), msg.logger_name.size())},
        {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLineFormatter>(id_); }

 private:
  Identity id_;
};

// Every subsystem's logger writes to one fan-out sink: the console, and the file when there is
// one. Swapping the file or the identity touches the sinks only, never the loggers. Until the
// first log_to_file the lines are also kept in memory, so the file starts with the process.
// Each subsystem also has a rank-detail logger of the same name, whose fan-out leaves the console
// out while the process hosts more than console_detail_ranks ranks and writes a file.
class Loggers {
 public:
  Loggers()
      : fan_out_(std::make_shared<spdlog::sinks::dist_sink_mt>()),
        detail_fan_out_(std::make_shared<spdlog::sinks::dist_sink_mt>()),
        console_(std::make_shared<spdlog::sinks::stdout_sink_mt>()),
        early_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(early_lines)) {
    fan_out_->add_sink(console_);
    fan_out_->add_sink(early_);
    for (const auto& name : subsystems) {
      for (auto [fan_out, loggers] : {std::pair{&fan_out_, &by_name_}, std::pair{&detail_fan_out_, &detail_by_name_}}) {
        auto created = std::make_shared<spdlog::logger>(name, *fan_out);
        created->flush_on(spdlog::level::trace);  // few lines; a crash or a kill must not lose them
        loggers->push_back(std::move(created));
      }
    }
    format_sinks();
    route_detail();
  }

  std::shared_ptr<spdlog::logger> get(const std::string& name, bool detail = false) const {
    for (const auto& l : detail ? detail_by_name_ : by_name_)
      if (l->name() == name) return l;
    return nullptr;
  }
  // Each subsystem's loggers: the plain one, then the rank-detail one.
  std::vector<std::shared_ptr<spdlog::logger>> named(const std::string& name) const {
    return {get(name), get(name, true)};
  }
  std::vector<std::shared_ptr<spdlog::logger>> all() const {
    std::vector<std::shared_ptr<spdlog::logger>> every = by_name_;
    every.insert(every.end(), detail_by_name_.begin(), detail_by_name_.end());
    return every;
  }

  void set_ranks(int ranks) {
    std::lock_guard lock(mutex_);
    ranks_ = ranks;
    route_detail();
  }
  bool details_on_console() {
    std::lock_guard lock(mutex_);
    return detail_on_console();
  }

  void set_identity(const std::function<void(Identity&)>& change) {
    std::lock_guard lock(mutex_);
    change(identity_);
    format_sinks();
  }

  Status write_file(const std::string& path, LogFormat format) {
    std::shared_ptr<spdlog::sinks::sink> opened;
    if (!path.empty()) {
      try {
        opened = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path);
      } catch (const spdlog::spdlog_ex& e) {
        return Error{"cannot write the log file " + path + ": " + e.what()};
      }
    }
    std::lock_guard lock(mutex_);
    if (file_) fan_out_->remove_sink(file_);
    file_ = std::move(opened);
    file_format_ = format;
    format_sinks();
    if (early_) {
      fan_out_->remove_sink(early_);
      if (file_)
        for (const auto& line : early_->last_raw()) file_->log(line);
      early_.reset();
    }
    if (file_) fan_out_->add_sink(file_);
    route_detail();
    return Status::success();
  }

 private:
  bool detail_on_console() const { return !file_ || ranks_ <= console_detail_ranks; }

  // The rank-detail fan-out: the plain one's sinks, less the console where detail_on_console says.
  void route_detail() {
    std::vector<std::shared_ptr<spdlog::sinks::sink>> sinks;
    if (detail_on_console()) sinks.push_back(console_);
    if (early_) sinks.push_back(early_);
    if (file_) sinks.push_back(file_);
    detail_fan_out_->set_sinks(std::move(sinks));
  }

  void format_sinks() {
    console_->set_formatter(text_formatter(identity_));
    if (!file_) return;
    if (file_format_ == LogFormat::json)
      file_->set_formatter(std::make_unique<JsonLineFormatter>(identity_));
    else
      file_->set_formatter(text_formatter(identity_));
  }

  std::mutex mutex_;
  Identity identity_;
  std::shared_ptr<spdlog::sinks::dist_sink_mt> fan_out_, detail_fan_out_;
  static constexpr std::size_t early_lines = 256;
  int ranks_ = 1;

  std::shared_ptr<spdlog::sinks::sink> console_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> early_;  // until the first log_to_file
  std::shared_ptr<spdlog::sinks::sink> file_;
  LogFormat file_format_ = LogFormat::text;
  std::vector<std::shared_ptr<spdlog::logger>> by_name_, detail_by_name_;
};

Loggers& loggers() {
  static Loggers instance;
  return instance;
}

}  // namespace

namespace {

std::shared_ptr<spdlog::logger> known_logger(const std::string& subsystem, bool detail) {
  auto found = loggers().get(subsystem, detail);
  TROUPE_CHECK(found != nullptr, "no logger for subsystem '" + subsystem + "'; add it to monitor/log.cpp's list");
  return found;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& subsystem) { return known_logger(subsystem, false); }

std::shared_ptr<spdlog::logger> rank_detail_logger(const std::string& subsystem) {
  return known_logger(subsystem, true);
}

void set_ranks_in_process(int ranks) { loggers().set_ranks(ranks); }

bool rank_details_on_console() { return loggers().details_on_console(); }

std::shared_ptr<spdlog::logger> silent_logger() {
  static const auto silent = std::make_shared<spdlog::logger>("silent");
  return silent;
}

std::vector<std::string> log_subsystems() { return subsystems; }

Status set_log_level(const std::string& level, const std::string& subsystem) {
  auto parsed = parse_level(level);
  if (!parsed) return parsed.error();
  if (subsystem.empty()) {
    for (const auto& l : loggers().all()) l->set_level(*parsed);
    return Status::success();
  }
  if (auto known = check_subsystem(subsystem); !known) return known;
  for (const auto& l : loggers().named(subsystem)) l->set_level(*parsed);
  return Status::success();
}

Expected<std::vector<LevelSetting>> parse_log_levels(const std::string& spec) {
  std::vector<LevelSetting> settings;
  std::size_t start = 0;
  while (start <= spec.size()) {
    const std::size_t end = std::min(spec.find(',', start), spec.size());
    const std::string part = spec.substr(start, end - start);
    const std::size_t equals = part.find('=');
    LevelSetting& setting = settings.emplace_back();
    setting.level = equals == std::string::npos ? part : part.substr(equals + 1);
    if (equals != std::string::npos) {
      setting.subsystem = part.substr(0, equals);
      if (Status known = check_subsystem(setting.subsystem); !known)
        return Error{"log levels '" + spec + "': " + known.error().message};
    }
    if (auto parsed = parse_level(setting.level); !parsed)
      return Error{"log levels '" + spec + "': " + parsed.error().message};
    start = end + 1;
  }
  return settings;
}

Status set_log_levels(const std::string& spec) {
  auto settings = parse_log_levels(spec);
  if (!settings) return settings.error();
  for (const LevelSetting& s : *settings) TROUPE_CHECK(set_log_level(s.level, s.subsystem).ok());
  return Status::success();
}

void set_identity(int rank, const std::string& role) {
  loggers().set_identity([&](Identity& id) {
    id.rank = rank;
    id.role = role;
  });
}

void set_log_job(const std::string& job) {
  loggers().set_identity([&](Identity& id) { id.job = job; });
}

std::string_view log_format_name(LogFormat format) { return format == LogFormat::json ? "json" : "text"; }

Status log_to_file(const std::string& path, LogFormat format) { return loggers().write_file(path, format); }

}  // namespace troupe::monitor
