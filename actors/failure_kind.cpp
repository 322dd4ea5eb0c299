#include "actors/failure_kind.hpp"

namespace troupe::actors {
namespace {

constexpr FailureKind kinds[] = {FailureKind::node_lost,    FailureKind::worker_exception, FailureKind::hang,
                                 FailureKind::unreachable,  FailureKind::stall,            FailureKind::join_timeout,
                                 FailureKind::rejected,     FailureKind::start_failed,     FailureKind::node_exit,
                                 FailureKind::drained};

}  // namespace

std::string_view to_string(FailureKind kind) {
  switch (kind) {
    case FailureKind::node_lost: return "node_lost";
    case FailureKind::worker_exception: return "worker_exception";
    case FailureKind::hang: return "hang";
    case FailureKind::unreachable: return "unreachable";
    case FailureKind::stall: return "stall";
    case FailureKind::join_timeout: return "join_timeout";
    case FailureKind::rejected: return "rejected";
    case FailureKind::start_failed: return "start_failed";
    case FailureKind::node_exit: return "node_exit";
    case FailureKind::drained: return "drained";
  }
  return "unknown";
}

std::optional<FailureKind> parse_failure_kind(std::string_view name) {
  for (FailureKind kind : kinds)
    if (to_string(kind) == name) return kind;
  return std::nullopt;
}

std::span<const FailureKind> all_failure_kinds() { return kinds; }

bool node_process_gone(FailureKind kind) {
  return kind == FailureKind::node_lost || kind == FailureKind::hang || kind == FailureKind::unreachable;
}

bool named_by_job_supervisor(FailureKind kind) {
  return kind != FailureKind::start_failed && kind != FailureKind::node_exit;
}

}  // namespace troupe::actors
