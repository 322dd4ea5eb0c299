#pragma once
// Named spdlog loggers. Every line carries the rank and role of the process that wrote it, so
// logs from many nodes can be merged and still read: "12:00:01.123 [r0 trainer] info: ...".

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace troupe::monitor {

// Returns the logger called `name` for this process, creating it on first use (stdout sink).
std::shared_ptr<spdlog::logger> logger(const std::string& name);

// A logger that writes nothing: for a rank that runs the same code as the reporting rank but
// must not repeat its lines (several ranks may share a process, so levels are not theirs to set).
std::shared_ptr<spdlog::logger> silent_logger();

// Sets the rank and role that every logger of this process prints from now on.
void set_identity(int rank, const std::string& role);

}  // namespace troupe::monitor
