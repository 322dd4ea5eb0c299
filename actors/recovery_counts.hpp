#pragma once
// What a job's restart loop has been through: failures by kind and recoveries by source. The
// job process keeps it and hands it to every node process it (re)starts as TROUPE_RESTARTS, so
// each process can export the counts (e.g. as Prometheus counters) without asking the job.
//
//   TROUPE_RESTARTS="restarts=2 failure.node_lost=1 failure.hang=1 recovery.replica=1 recovery.checkpoint=1"
//
// `restarts` counts the restarts of every node that used fault.max_restarts' budget (from a
// replica's rescue snapshot or a checkpoint): the one count of restarts the log's "(restart 1 of
// 3)", the shell's status and /metrics show. Failure kinds: actors/failure_kind.hpp. Recovery
// sources: replica (a surviving replica's memory: no steps lost), checkpoint (the newest periodic
// checkpoint), shrink (fewer data-parallel replicas: a drain, or a node that cannot come back),
// grow (the nodes left out back, by a restart), in_place (a replica's memory over the data plane,
// only the failed worker respawned: an earlier attempt's in-place recoveries, so a restarted node's
// /metrics keeps them).

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "actors/failure_kind.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

// Where the state of a recovery came from: for a restarted attempt, a surviving replica's rescue
// snapshot, the newest checkpoint or fewer replicas; in_place, a replica over the data plane while
// only the failed worker was respawned (the attempt went on).
enum class RecoverySource { replica, checkpoint, shrink, grow, in_place };

std::string_view to_string(RecoverySource source);
std::optional<RecoverySource> parse_recovery_source(std::string_view name);

struct RecoverySourceByName {
  bool operator()(RecoverySource a, RecoverySource b) const { return to_string(a) < to_string(b); }
};

struct RecoveryCounts {
  int restarts = 0;                                                // restarts that used the budget
  std::map<FailureKind, int, FailureKindByName> failures;          // by kind
  std::map<RecoverySource, int, RecoverySourceByName> recoveries;  // by source

  // The TROUPE_RESTARTS text: "restarts=N", then "failure.KIND=N" and "recovery.SOURCE=N" by name.
  std::string to_text() const;
  // Refuses text that is not NAME=COUNT, and kinds and sources that are not ours.
  static Expected<RecoveryCounts> parse(std::string_view text);
};

inline constexpr const char* recovery_counts_variable = "TROUPE_RESTARTS";

}  // namespace troupe::actors
