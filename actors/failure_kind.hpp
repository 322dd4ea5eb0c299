#pragma once
// How an attempt at a job failed: the one list of failure kinds. The job supervisor names the kind
// of the failures it sees (job_outcome_msg::failure_kind carries to_string(kind), empty on
// success), the launcher's restart loop adds the ones only it can see, the recovery counts
// (TROUPE_RESTARTS, `troupe_failures_total{kind=...}`) count them by name, and docs/metrics.md
// lists them: a test compares that list with this one.
//
//   node_lost         a node supervisor went away (its process died or its connection broke)
//   worker_exception  a node reported that one of its workers failed
//   hang              a node sent no heartbeat for fault.heartbeat_timeout (stopped or wedged, or
//                     unreachable where the network did not say so first)
//   unreachable       a node's host stopped answering the job's connection at the TCP level (no
//                     acknowledgement or keepalive answer): a cut link or a host gone
//   stall             no worker finished a step for fault.step_timeout (names no node)
//   join_timeout      nodes did not join within the join deadline
//   rejected          one of the job's own nodes (its token) runs another build or config
//   start_failed      a node process ended before it joined (the launcher saw it, not the job)
//   node_exit         an attempt ended without a kind (the launcher could not start the nodes,
//                     or was told to stop): never restartable, so never counted
//   drained           the shell asked to go on without a node (`drain node N`)

#include <optional>
#include <span>
#include <string_view>

namespace troupe::actors {

enum class FailureKind {
  node_lost,
  worker_exception,
  hang,
  unreachable,
  stall,
  join_timeout,
  rejected,
  start_failed,
  node_exit,
  drained,
};

// "node_lost", …: the name in logs, TROUPE_RESTARTS, metric labels and job_outcome_msg.
std::string_view to_string(FailureKind kind);
// The kind named `name`; nullopt for any other text (the empty text of a success included).
std::optional<FailureKind> parse_failure_kind(std::string_view name);
// Every kind, in the order above.
std::span<const FailureKind> all_failure_kinds();
// Whether the job supervisor names the kind (job_outcome_msg); the others only launch names.
bool named_by_job_supervisor(FailureKind kind);
// Whether the kind takes a node's whole process from the job: lost, silent or out of reach
// (node_lost, hang, unreachable), as opposed to one of its workers or the job as a whole.
bool node_process_gone(FailureKind kind);

// Orders kinds by name, so maps keyed by kind list them as their text does (alphabetically).
struct FailureKindByName {
  bool operator()(FailureKind a, FailureKind b) const { return to_string(a) < to_string(b); }
};

}  // namespace troupe::actors
