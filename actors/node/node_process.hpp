#pragma once
// One node process of a job (what `troupe node` runs): its logs and /metrics, one compute backend
// and one comm engine per slot (a rank's scratch buffers and tag space are its own), the node
// supervisor that joins the job supervisor, and, once the job starts, a worker actor per slot
// that trains its rank (rank_wiring.hpp) and obeys the shell's orders at step boundaries.

#include <cstdint>
#include <chrono>
#include <string>

#include "actors/job_options.hpp"
#include "actors/recovery_counts.hpp"

namespace troupe::actors {

// Where the node stands in the job, as the launcher told it (docs/launch.md).
struct NodeProcessOptions {
  std::string join_host;  // the job supervisor
  int join_port = 0;
  std::string token;     // the job's secret, presented at join
  int attempt = 0;       // TROUPE_ATTEMPT, presented at join
  std::int64_t peak_flops = 0;  // TROUPE_PEAK_FLOPS: the replaced process's MFU basis; 0 none
  int node_index = 0;    // host-file line
  std::string host_name;  // this machine, as the job's logs and shell name it
  std::string build_id;   // what the job checks at join: the same build ...
  std::uint64_t config_hash = 0;  // ... and the same resolved configuration
  int first_rank = 0;     // the node's slots are ranks first_rank … first_rank + slots − 1
  int slots = 1;
  int world_size = 1;
  int local_rank_base = 0;   // this machine's rank of the first slot (its device on a GPU host)
  int local_world_size = 1;  // workers on this machine, which share its cores
  RecoveryCounts recovery;   // the job's failures so far, exported in /metrics
  // How long to keep trying a job that does not listen yet (0: one try): a node started beside
  // the job rather than after it, by srun or torchrun, may come first.
  std::chrono::milliseconds join_patience{0};
  // How long to keep trying a job that listens but answers the handshake late (connection_timeout
  // on a loaded machine): the job waits this long for every node anyway (--join-timeout).
  std::chrono::milliseconds handshake_patience{0};
};

struct NodeOutcome {
  int exit_code = 0;
  std::string reason;        // one line when exit_code != 0
  bool before_join = false;  // the node could not start (its input, the job unreachable), not the job's end
};

// Runs until the job ends, or until this node cannot start.
NodeOutcome run_node_process(const NodeProcessOptions& options, const ResolvedJob& job);

}  // namespace troupe::actors
