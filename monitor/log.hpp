#pragma once
// The loggers of a process (docs/logging.md): one spdlog logger per subsystem, from a fixed list
// that exists from the process's start, so a level set before a subsystem first logs still holds.
// Every line carries the job label, rank and role of the process that wrote it, so logs from many
// nodes can be merged and still read:
//   12:00:01.123 [3f2a9c1e r0 node] info train: step 10 ...
// Lines go to stdout as text and, once log_to_file is called, also to a file as text or JSON lines
// ({"time","level","job","rank","role","subsystem","msg"}). Levels are per subsystem and may be
// changed at any time from any thread; a subsystem's rank-detail lines (below) follow its level.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/spdlog.h>

#include "compute/expected.hpp"  // header-only: Status and Error, no link to troupe_compute

namespace troupe::monitor {

// The logger of `subsystem`, one of log_subsystems(); any other name is a bug (TROUPE_CHECK).
std::shared_ptr<spdlog::logger> logger(const std::string& subsystem);

// Lines about one rank among many — its memory at start and end, the peers it reaches, how it
// went through an in-place recovery — for `subsystem`, at its level. While this process hosts more
// than console_detail_ranks ranks and writes a log file, they go to the file only: a node process
// of 32 ranks would otherwise print a screen of them at each start, recovery and end. Else, and
// before the file opens (the file gets them then), as every line.
inline constexpr int console_detail_ranks = 8;
std::shared_ptr<spdlog::logger> rank_detail_logger(const std::string& subsystem);
// How many ranks this process hosts (1 until told).
void set_ranks_in_process(int ranks);
// Whether rank-detail lines reach the console now.
bool rank_details_on_console();

// A logger that writes nothing: for a rank that runs the same code as the reporting rank but
// must not repeat its lines (several ranks may share a process, so levels are not theirs to set).
std::shared_ptr<spdlog::logger> silent_logger();

// The subsystems (logger names) this process knows, for completion and error messages:
// job, node, train, comm, checkpoint, drill, monitor, launch.
std::vector<std::string> log_subsystems();

// Sets the level ("trace","debug","info","warn","error","critical","off") of one subsystem's logger, or of
// every logger of this process when subsystem is empty; an unknown level or subsystem is an Error naming it.
Status set_log_level(const std::string& level, const std::string& subsystem);

// A level spec such as "info" or "warn,comm=debug,train=info", applied left to right: a bare
// level sets every subsystem, SUBSYSTEM=LEVEL one.
struct LevelSetting {
  std::string level;
  std::string subsystem;  // empty: every subsystem
};
// An Error naming the spec and its wrong part.
Expected<std::vector<LevelSetting>> parse_log_levels(const std::string& spec);
// Parses and applies a spec; nothing changes when any part is wrong.
Status set_log_levels(const std::string& spec);

// Sets the rank and role that every line of this process carries from now on.
void set_identity(int rank, const std::string& role);
// Sets the job label every line carries from now on ("-" until then): the label of the metrics.
void set_log_job(const std::string& job);

enum class LogFormat { text, json };
// Every format, in the order monitor.log_format lists them: the config parser reads a name with these.
inline constexpr LogFormat log_formats[] = {LogFormat::text, LogFormat::json};
std::string_view log_format_name(LogFormat format);  // "text", "json"

// Writes every line from now on also to `path` (appended to; its folder is made), in `format`;
// an empty path stops writing a file. The first call also writes the lines logged before it (up
// to 256), so a file opened once start-up has passed its checks still begins with the process.
// An Error naming the path when it cannot be opened.
Status log_to_file(const std::string& path, LogFormat format);

}  // namespace troupe::monitor
