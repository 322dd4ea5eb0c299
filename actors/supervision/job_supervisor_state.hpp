#pragma once
// What the job supervisor (job_supervisor.hpp) keeps, and the functions its files share: the
// phases and the per-node watch (job_supervisor.cpp), the in-place recovery and grow protocol
// (recovery_coordinator.hpp) and how nodes and ranks are named (supervisor_reports.cpp). Internal
// to supervision/.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/job_events.hpp"
#include "actors/local_messages.hpp"
#include "actors/supervision/job_supervisor.hpp"
#include "comm/grid.hpp"
#include "monitor/list_text.hpp"
#include "monitor/straggler_watch.hpp"

namespace troupe::actors::supervision {

using Clock = std::chrono::steady_clock;

// The job supervisor's phases (the header's diagram). Each but ended is a behaviour of its own,
// switched with become(): what a phase answers differs (the join deadline only while joining, the
// watchdog while running or recovering, the recovery's reports only while recovering, the
// writers' answers only while rescuing), so each behaviour lists its own handlers before
// every_phase()'s, instead of every handler checking a flag. `phase` says which one is current,
// for what CAF delivers outside behaviours (down_msg) and for the functions several phases share.
enum class JobPhase { joining, running, recovering, rescuing, ended };

// What the watchdog knows of a running node.
struct node_liveness {
  Clock::time_point last_heartbeat;
  std::vector<worker_beat> workers;  // from the last heartbeat, by slot
  std::vector<memory_beat> memory;   // the process's memory by kind, from the last heartbeat
  std::int64_t resident_bytes = 0, peak_resident_bytes = 0;
};

// Time since `worker` last finished a unit of work, as of `now`.
Clock::duration idle(const node_liveness& live, const worker_beat& worker, Clock::time_point now);

// An in-place recovery or grow in progress (recovery_coordinator.hpp has its diagram).
struct recovery_in_progress {
  // What the recovery answers: a worker that threw (its process kept), node processes lost,
  // silent or unreachable (each started again), nodes the job went on without (a grow), or DiLoCo
  // islands lost, left out until their new processes rejoin (island_coordinator.hpp).
  enum class Goal { respawn_worker, replace_nodes, grow, rejoin_island };
  // Its steps: waiting for every rank's readiness (and for new processes to join), then the plan
  // sent and the state moving.
  enum class Step { gathering, restoring };
  Goal goal = Goal::respawn_worker;
  Step step = Step::gathering;
  int epoch = 0;
  Clock::time_point started;
  double started_unix = 0;
  worker_failed_msg failed;
  std::map<int, recover_ready_msg> ready;  // by rank
  std::map<int, double> ready_after;       // by rank: seconds from `started`
  recover_plan_msg plan;
  std::map<int, recover_done_msg> done;  // by rank
  // The nodes whose processes are started again (replace_nodes) or that join (grow): by node
  // index the pid it had (0 for a grow) and whether the new one joined.
  struct new_process {
    int old_pid = 0;
    bool joined = false;
  };
  FailureKind kind = FailureKind::worker_exception;
  std::map<int, new_process> replaced;
  recover_msg order;                  // what every other node got; the new processes get it with their start
  bool replacements_started = false;  // the new processes got their start: they know each other's address
  // By rollback (recovery_path.hpp): chosen with the failure (no replica holds the failed rank's
  // state), or when the plan finds no rank holding the newest steps of some stage and shard; why.
  bool rollback = false;
  std::string why_rollback;
  std::int64_t steps_held = 0;  // the most steps any rank held: a rollback loses those since its checkpoint
  // DiLoCo's islands left out: the present ranks' outer sums applied, by rank, for the settle
  // (island_coordinator.hpp); sent on to them once every present rank reported.
  std::map<int, islands_applied_msg> applied;
  bool settle_sent = false;
};

struct job_supervisor_state {
  JobPlan plan;
  caf::actor listener;
  JobPhase phase = JobPhase::joining;
  std::map<int, join_msg> joined;  // by node index
  std::map<int, node_liveness> liveness;
  std::set<int> done;
  std::set<int> succeeded;      // done without a failure
  std::string pending_failure;  // a node's failure report, held briefly in case a peer was lost
  std::vector<int> pending_failed_nodes;
  bool pending_failure_reported = false;  // its failure_detected event went out already
  std::set<int> lost;                     // nodes whose supervisor went away
  // The rescue in progress (rescuing; see the header): the failure it answers, its writers (rank →
  // node index), and the step each writer reported.
  job_outcome_msg failure;
  std::map<int, int> rescue_writers;
  std::map<int, std::int64_t> rescued;
  monitor::StragglerWatch stragglers;
  std::set<int> stragglers_reported;  // by rank: each is named once
  // While the shell has the job paused its workers make no progress on purpose: the step
  // watchdog counts idle time only from the last resume.
  bool paused = false;
  Clock::time_point resumed_at{};
  std::optional<recovery_in_progress> recovery;  // while recovering
  int recovery_epoch = 0;
  // Each respawned rank's last in-place recovery (its epoch and the step it went on after), to
  // tell a worker that fails again before a step from a new failure.
  struct respawn {
    int epoch = 0;
    std::int64_t steps = 0;
  };
  std::map<int, respawn> respawned;          // by rank
  std::vector<FailureKind> recovered_kinds;  // the failure kind of each in-place recovery done
  // Node processes an in-place recovery or grow started, which hold no state until it is done: a
  // rescue asks none of them for a snapshot.
  std::set<int> holding_nothing;
  bool restart_logged = false;               // "recovery: restarting every node: ..." is said once
  // Since the job grew in place: each replica's rows per micro-batch and micro-batches (0: never
  // grew), and under train.balance each replica's speed (empty: even).
  int batch_size = 0;
  int grad_accum = 0;
  std::vector<double> replica_speeds;
  // Fencing (docs/protocols/control-plane.md, "Attempts"): the job's attempt, each node's (the
  // attempt that started its current process), and the processes an in-place recovery replaced,
  // whose joins and messages are refused, each logged once.
  int attempt = 0;
  std::map<int, int> node_attempts;                        // by node index
  std::map<caf::actor_addr, join_msg> replaced_processes;  // by node supervisor
  std::set<caf::actor_addr> refusals_logged;
  // Events (actors/job_events.hpp): the newest step announced, each rank's newest step record
  // taken from its heartbeats (by its start time), and whether this attempt's resume was announced.
  std::int64_t step_announced = -1;
  std::map<int, double> step_records_taken;
  bool resume_announced = false;
  std::set<std::int64_t> skips_announced;  // checkpoint steps a resume passed over, announced once
  static inline const char* name = "job_supervisor";

  bool started() const {
    return phase == JobPhase::running || phase == JobPhase::recovering || phase == JobPhase::rescuing;
  }
};

using job_actor = caf::stateful_actor<job_supervisor_state>;

// Appends an event of this attempt to the job's events (JobPlan::events), as of now or `unix_seconds`.
void emit(job_supervisor_state& st, job_event_body body, double unix_seconds = 0);

// The ranks of the job, 0 … world − 1: every rank a node runs.
int world_size(const JobPlan& plan);
// The job's grid (comm/grid.hpp) from its plan: every rank a node runs, over stages and shards.
comm::Grid job_grid(const JobPlan& plan);
// Every planned node with its process's data-plane addresses as joined now.
start_msg current_start(const job_supervisor_state& st);
// A node's liveness as of `now`, before its first heartbeat: each slot's worker at step 0.
node_liveness fresh_liveness(const PlannedNode& planned, Clock::time_point now);

// How the supervisor names things (supervisor_reports.cpp).
std::string describe(const join_msg& m);                                  // "node 1 (h1, pid 7)"
std::string describe(const job_supervisor_state& st, const join_msg& m);  // "...; pipeline stage 1 of replica 0"
std::string seconds_text(Clock::duration d);                              // "2.0 s"
// "node 2", "nodes 1, 2 and 3", "nodes 0-31" (monitor::numbered).
std::string nodes_text(const std::vector<int>& nodes);
// A failure's reason lists at most so many described parts (monitor/list_text.hpp).
using monitor::BoundedList;
// How many ranks one reason describes in full (each silent node: of its ranks).
inline constexpr std::size_t described_ranks = 8;
inline constexpr std::size_t described_ranks_of_silent_node = 4;
// How many silent nodes one reason describes in full; the others are named.
inline constexpr std::size_t described_silent_nodes = 2;

// "rank 1 (node 1 (host, pid 7), heard from 0.4 s ago) in step 3, waiting 2.0 s for X".
std::string describe_activity(const job_supervisor_state& st, int node_index, const worker_beat& beat,
                              Clock::time_point now);
// Why the job must stop now, or "" while every running node beats and its workers progress;
// `silent_nodes` receives the nodes that stopped beating, when that is why.
std::string watchdog_verdict(const job_supervisor_state& st, Clock::time_point now, std::vector<int>& silent_nodes);
// ", the likely cause: rank …" when the last heartbeats single out one rank a failed collective
// waited for; "" otherwise.
std::string likely_cause_of_comm_failure(const job_supervisor_state& st, Clock::time_point now);
// Names, once per rank, a rank the others keep waiting for; the job goes on.
void report_straggler(job_supervisor_state& st);

// Shared by the phases (job_supervisor.cpp).
// Where a failure is not recovered in place: the one line that says so and why, and its event.
void log_restart(job_supervisor_state& st, const std::string& why);
// A failure's outcome: exit code, kind and the nodes to blame (and to drop, for a drain).
job_outcome_msg failure_outcome(int exit_code, FailureKind kind, std::string reason, std::vector<int> nodes,
                                std::vector<int> drop = {});
// Every phase ─► ended: stop_msg to every joined node, the outcome to the listener, quit.
void end_job(job_actor* self, job_outcome_msg outcome);
// A node failed, was lost or went silent: the job ends, after a rescue snapshot when one can be had.
void fail_job(job_actor* self, FailureKind kind, std::string reason, std::vector<int> nodes);
// A node lost or silent after every rank finished its last step: the job ends as finished.
bool end_if_completed(job_actor* self, FailureKind kind, const std::string& reason, const std::vector<int>& gone);
// A node's report that its work ended; `reported`: its failure's event went out already.
void on_node_done(job_actor* self, const node_done_msg& d, bool reported = false);
// Whether the message being handled comes from a node process an in-place recovery replaced.
bool from_replaced_process(job_actor* self);
// "attempt A is stale, the job is at attempt B", or "" where `attempt` is node_index's current one.
std::string stale_attempt(const job_supervisor_state& st, int node_index, int attempt);
// The handlers of the running phase (a recovery in progress answers them too).
caf::message_handler running_handlers(job_actor* self);
caf::message_handler every_phase(job_actor* self);
caf::behavior running(job_actor* self);

}  // namespace troupe::actors::supervision
