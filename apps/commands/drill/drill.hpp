#pragma once
// troupe drill SCENARIO (docs/drills.md): a failure rehearsal. It runs the job twice with
// checkpoints in a drill folder — once undisturbed, once with the fault injected — and prints a
// verdict: when the fault was detected, when training was going again, how many steps were lost,
// and whether the final weights equal the undisturbed run's (parameters and AdamW moments,
// bitwise). Every run is `troupe launch` on a host file of the drill's, so the job's events
// (docs/protocols/job-events.md) tell the drill what happened, read through the job's control port
// as the shell reads it: the verdict is made of events and files, never of log lines.
//
// The scenarios: process faults of a running job (running_drills.cpp: kill-node, kill-worker, hang,
// node-lost, slow-node, grow), repeated kills (chaos_drill.cpp), and the checkpoints' own faults
// (checkpoint_drills.cpp: corrupt-checkpoint, kill-during-checkpoint, disk-full).

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/commands/commands.hpp"
#include "apps/commands/drill/event_feed.hpp"
#include "apps/commands/watched_run.hpp"

namespace troupe::apps::drill {

namespace fs = std::filesystem;

struct Verdict;

// A run of the job: its process (the job process, its nodes below it) and, when watched, its
// events.
struct Run {
  std::unique_ptr<WatchedRun> process;
  std::unique_ptr<EventFeed> events;
};

// One drill: its folder, the job's config file and host file there, and how to run the job into a
// checkpoint folder of its own.
class Drill {
 public:
  Drill(const DrillOptions& options, const ResolvedJob& job);

  Status prepare();
  const fs::path& dir() const { return dir_; }
  const JobConfig& config() const { return job_.config; }
  const DrillOptions& options() const { return options_; }
  long steps() const { return job_.config.train.steps; }
  long every() const { return every_; }
  // chaos: the kills the run is to take, one in each --kill-every-th step before the last.
  long kills() const { return (steps() - 1) / options_.kill_every; }
  // After a PASS: what the drill created, and the folder itself unless the user named it (--dir)
  // or it held something else already.
  void remove_created() const;
  // The job with its checkpoints in dir()/name, on the drill's host file (`workers` local lines),
  // its output in dir()/name.log; with `watched`, its events are read from its control port and
  // written to dir()/name.events as they come.
  Expected<Run> start(const std::string& name, bool resume, bool watched,
                      const std::vector<std::string>& env = {}) const;
  // The undisturbed run's length, once it has run: the drilled run's stall limit follows from it.
  void set_undisturbed_seconds(double seconds) { undisturbed_seconds_ = seconds; }
  // How long a watched run may send no event before the drill calls it stalled: the heartbeat
  // timeout (a hung node's detection) plus the rescue timeout (the survivors' wait before a
  // restart from the checkpoint) plus three undisturbed runs, at least 30 s.
  std::chrono::seconds stall_limit() const;

 private:
  DrillOptions options_;
  const ResolvedJob& job_;
  fs::path dir_;
  std::vector<fs::path> created_;
  long every_ = 1;
  double undisturbed_seconds_ = 0;
};

// What the drill saw, printed as the verdict. Times are seconds from the fault.
struct Verdict {
  std::string fault;  // what was injected, when
  std::optional<double> detected_after;
  std::string detected_by;
  bool recovery_expected = true;  // false: the job is to go on undisturbed (a straggler)
  std::optional<double> resumed_after;    // to the ranks' going on: process start, join and state moved
  std::optional<double> recovered_after;  // to the first step trained again, the interrupted one retrained
  std::string recovered_how;
  std::optional<long> steps_lost;
  std::optional<bool> weights_equal;
  std::string weights_compared = "parameters and AdamW moments, bitwise";  // how weights_equal was decided
  std::vector<std::string> checks;  // scenario-specific yes/no lines, "name: yes"
  bool passed = false;
};

int print_verdict(const std::string& scenario, const Verdict& v);

// Waits for the watched run's job to end: its exit code. Where the job stalls (its feed's stall limit,
// Drill::stall_limit) or runs 600 s more, the drill asks it where its ranks and nodes stand
// (`workers`, `nodes`), puts the answers in the verdict's checks, and kills it.
std::optional<int> await_end(Run& run, Verdict& v);

// Whether two runs' final checkpoints hold the same parameters and moments, bit for bit, into v;
// under train.balance dynamic, whose shares follow measured times, compare_weights_within the
// tolerance of reordered (or compressed) sums.
void compare_weights(const Drill& drill, Verdict& v);

// Whether the drilled run's final parameter norm is the undisturbed run's within `relative`, into v:
// for a job whose gradients are summed in another order after the fault (uneven shares), the
// tolerance its layout is tested to.
void compare_weights_within(const Drill& drill, double relative, Verdict& v);

// The wall clock, as the job's events carry it.
double now();

// The newest step the job reported finished at or before `at`, among the events from position
// `from` on (0 with none).
long last_step_before(const std::vector<actors::job_event>& events, double at, std::size_t from = 0);

// After a fault at `fault_at`, in the events from position `from` on: the first that `detection`
// matches, the ranks' resume (training_resumed) and the first step trained after it; steps lost
// against the newest step reported before the fault since position `since` (the last recovery).
// `node_lost`: the fault took a node's process (its rank's words). Returns the position of that
// step's event (`from` if none came).
std::size_t watch_recovery(EventFeed& feed, double fault_at, const Match& detection, bool node_lost, Verdict& v,
                           std::size_t from = 0, std::size_t since = 0);

// The line a person reads for a recovery_chosen event ("recovery: …", or "rejoin: …" for a grow).
std::string said(const actors::recovery_chosen& chosen);

// The ended job's own account: whether a surviving replica's memory was the source, each recovery
// it chose, each in-place recovery done, and what it counted.
void add_job_account(const std::vector<actors::job_event>& events, Verdict& v);

// Each failure the job met after the drilled fault (its first), as "also failed (KIND): REASON".
void add_later_failures(const std::vector<actors::job_event>& events, Verdict& v);

// Every pid each node joined with, in order: one pid per node means every node kept its process.
std::map<int, std::vector<int>> joined_pids(const std::vector<actors::job_event>& events);

// After an in-place recovery: whether every node kept its process — but `replaced`, the nodes whose
// processes were lost and started again once each — and the state moved over the data plane or
// read back from a checkpoint. Returns whether the processes were kept.
bool add_in_place_account(const std::vector<actors::job_event>& events, const std::vector<int>& replaced, Verdict& v);

// Whether a job that shrank (from 2 replicas to 1: `two_to_one`) is to end with an undisturbed
// run's weights, bit for bit or (under train.balance) within the balance tolerance, and if so
// whether it did (v.weights_equal); otherwise a line saying why not.
bool shrink_keeps_weights(const Drill& drill, bool two_to_one, Verdict& v);

// "yes" / "NO (exit 3)": how the job's process ended.
std::string finished(const std::optional<int>& code);

Verdict drill_running_job(const Drill& drill);
Verdict drill_slow_node(const Drill& drill);
Verdict drill_grow(const Drill& drill);
Verdict drill_chaos(const Drill& drill, std::uint64_t seed);
Verdict drill_checkpoints(const Drill& drill);
Verdict drill_disk_full(const Drill& drill);

}  // namespace troupe::apps::drill
