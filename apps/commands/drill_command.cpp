// troupe drill SCENARIO: a failure rehearsal. It runs the job twice in test mode with checkpoints
// in a drill folder — once undisturbed, once with the fault injected — and prints a verdict: when
// the fault was detected, when training was going again, how many steps were lost, and whether
// the final weights equal the undisturbed run's (parameters and AdamW moments, bitwise).
//
// Recovery is in place where it applies (fault.recovery in_place, actors/supervision/recovery_path.hpp):
// only the failed worker is respawned, in its process (kill-worker), or only the lost node's process
// is started again (kill-node, hang), its state from a surviving replica over the data plane, or,
// where no replica holds it, every rank's own shards of the newest checkpoint (a rollback); the
// verdict then says whether every other node kept its process and what state moved or was read.
// Elsewhere (launch_command.cpp) every node restarts from the survivors' rescue snapshot when a
// data-parallel replica survived (no steps lost), else from the newest checkpoint, and with
// fault.elastic goes on without a node that cannot come back; the verdict says which it was.
//
// chaos repeats the node kill: one in every --kill-every-th step, each at a random moment within
// the step and never the node killed the time before, the choices drawn from a printed seed.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <random>
#include <regex>
#include <thread>

#include "actors/process_environment.hpp"
#include "apps/commands/commands.hpp"
#include "apps/config/print.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/commands/watched_run.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;
using Clock = WatchedRun::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> drill_scenarios{"kill-node",          "kill-worker",            "hang",
                                               "slow-node",          "corrupt-checkpoint",     "kill-during-checkpoint",
                                               "disk-full",          "node-lost",              "chaos",
                                               "grow"};

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One drill: its folder, the job's config file there, and how to run the job into a checkpoint
// folder of its own.
class Drill {
 public:
  Drill(const DrillOptions& options, const ResolvedJob& job) : options_(options), job_(job) {
    dir_ = options.dir.empty() ? fs::current_path() / ("drill-" + options.scenario + "-" + std::to_string(::getpid()))
                               : fs::path(options.dir);
  }

  Status prepare() {
    // Recorded before anything is written, so that a PASS removes exactly what the drill made
    // and nothing that was in a --dir folder before.
    for (const char* name : {"job.toml", "undisturbed", "undisturbed.log", "drilled", "drilled.log"})
      if (!fs::exists(dir_ / name)) created_.push_back(dir_ / name);
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec) return Error{"--dir " + dir_.string() + ": cannot create: " + ec.message()};
    JobConfig config = job_.config;
    config.sample.tokens = 0;
    config.checkpoint.resume = false;
    config.train.log_every = 1;  // the drill times faults and recovery by the step lines
    const bool chaos = options_.scenario == "chaos";
    if (config.checkpoint.every <= 0)
      config.checkpoint.every = std::max(1L, (chaos ? options_.kill_every : options_.at_step) / 2);
    // Every kill costs a restart where the job restarts every node: the budget must cover them all.
    if (chaos) config.fault.max_restarts = std::max(config.fault.max_restarts, static_cast<int>(kills()));
    // A straggler is told by sampling who waits at every heartbeat: sample often.
    if (options_.scenario == "slow-node") config.fault.heartbeat_seconds = std::min(config.fault.heartbeat_seconds, 0.1);
    // A node that cannot come back: the job is to go on without it.
    if (options_.scenario == "node-lost") config.fault.elastic = true;
    std::ofstream out(dir_ / "job.toml");
    out << config_to_toml(config);
    if (!out) return Error{"--dir " + dir_.string() + ": cannot write job.toml"};
    every_ = config.checkpoint.every;
    return Status::success();
  }

  const fs::path& dir() const { return dir_; }
  const JobConfig& config() const { return job_.config; }
  long steps() const { return job_.config.train.steps; }
  long every() const { return every_; }
  // chaos: the kills the run is to take, one in each --kill-every-th step before the last.
  long kills() const { return (steps() - 1) / options_.kill_every; }

  // After a PASS: what the drill created, and the folder itself unless the user named it (--dir)
  // or it held something else already.
  void remove_created() const {
    std::error_code ec;
    for (const fs::path& path : created_) fs::remove_all(path, ec);
    if (options_.dir.empty()) fs::remove(dir_, ec);
  }

  // The job with its checkpoints in dir()/name, as `troupe train` (1 worker) or with --workers.
  Expected<std::unique_ptr<WatchedRun>> start(const std::string& name, bool resume,
                                              const std::vector<std::string>& env = {}) const {
    std::vector<std::string> argv{launch::this_executable(), "train", "--config", (dir_ / "job.toml").string(),
                                  "--checkpoint.dir", (dir_ / name).string()};
    if (options_.workers > 1) argv.insert(argv.end(), {"--workers", std::to_string(options_.workers)});
    if (resume) argv.push_back("--resume");
    return WatchedRun::start(argv, env, (dir_ / (name + ".log")).string());
  }

  std::regex step_line(long step) const {
    return std::regex("step +" + std::to_string(step) + "/" + std::to_string(steps()) + " \\|");
  }

 private:
  DrillOptions options_;
  const ResolvedJob& job_;
  fs::path dir_;
  std::vector<fs::path> created_;
  long every_ = 1;
};

// Whether two runs' final checkpoints hold the same parameters and moments, bit for bit.
Expected<bool> same_final_state(const fs::path& a, const fs::path& b, long step) {
  auto first = checkpoint::open_checkpoint(checkpoint::step_dir(a, step));
  if (!first) return first.error();
  auto second = checkpoint::open_checkpoint(checkpoint::step_dir(b, step));
  if (!second) return second.error();
  for (const char* kind : {"param", "adam_m", "adam_v"}) {
    auto x = first->read_all(kind);
    if (!x) return x.error();
    auto y = second->read_all(kind);
    if (!y) return y.error();
    if (std::memcmp(x->data(), y->data(), x->size() * sizeof(float)) != 0) return false;  // bits, not ==
  }
  return true;
}

// What the drill saw, printed as the verdict.
struct Verdict {
  std::string fault;  // what was injected, when
  std::optional<double> detected_after;
  std::string detected_by;
  bool recovery_expected = true;  // false: the job is to go on undisturbed (a straggler)
  std::optional<double> resumed_after;  // to the ranks' going on: process start, join and state moved
  std::optional<double> recovered_after;  // to the first step trained again, the interrupted one retrained
  std::string recovered_how;
  std::optional<long> steps_lost;
  std::optional<bool> weights_equal;
  std::vector<std::string> checks;  // scenario-specific yes/no lines, "name: yes"
  bool passed = false;
};

int print_verdict(const std::string& scenario, const Verdict& v) {
  std::printf("drill %s: %s\n", scenario.c_str(), v.fault.c_str());
  if (v.detected_after)
    std::printf("  detected after %.2f s: %s\n", *v.detected_after, v.detected_by.c_str());
  else
    std::printf("  detected: no\n");
  if (v.resumed_after)
    std::printf("  training resumed after %.2f s: the ranks went on from the recovered state\n", *v.resumed_after);
  if (v.recovered_after)
    std::printf("  recovered after %.2f s: %s\n", *v.recovered_after, v.recovered_how.c_str());
  else if (v.recovery_expected)
    std::printf("  recovered: no\n");
  if (v.steps_lost) std::printf("  steps lost: %ld\n", *v.steps_lost);
  for (const std::string& check : v.checks) std::printf("  %s\n", check.c_str());
  if (v.weights_equal)
    std::printf("  final weights equal to an undisturbed run: %s\n",
                *v.weights_equal ? "yes (parameters and AdamW moments, bitwise)" : "NO");
  std::printf("verdict: %s\n", v.passed ? "PASS" : "FAIL");
  std::fflush(stdout);
  return to_int(v.passed ? ExitCode::success : ExitCode::failure);
}

// The pid of node `node` as the job logged its join: "node 1 (host, pid 1234) joined".
std::optional<pid_t> node_pid(WatchedRun& run, int node) {
  std::smatch m;
  const auto line = run.wait_for_line(std::regex("node " + std::to_string(node) + " \\([^,]*, pid ([0-9]+)"),
                                      seconds(60));
  if (!line || !std::regex_search(line->text, m, std::regex("pid ([0-9]+)"))) return std::nullopt;
  return static_cast<pid_t>(std::stol(m[1].str()));
}

// After a fault at `fault_at`, in the output from line `from` on: the restart, the resumed step,
// and the first step trained again. Returns the index of that step's line (`from` if none came).
std::size_t watch_recovery(WatchedRun& run, const Drill& drill, Clock::time_point fault_at, long last_step_before,
                           const std::regex& detection, bool node_process_lost, bool fresh_start_recovers, Verdict& v,
                           std::size_t from = 0) {
  std::size_t index = from, trained_index = from;
  if (auto detected = run.wait_for_line(detection, seconds(120), from, &index)) {
    v.detected_after = seconds_between(fault_at, detected->at);
    v.detected_by = detected->text;
  }
  std::size_t resumed_index = 0;
  // A restart before the first checkpoint starts the run again from step 0: a recovery where the
  // fault came before it (`fresh_start_recovers`), not where a checkpoint was to be restored.
  const std::regex resumed_line(fresh_start_recovers ? "resumed from .* after step ([0-9]+)|to resume from: starting fresh"
                                                     : "resumed from .* after step ([0-9]+)");
  auto resumed = run.wait_for_line(resumed_line, seconds(180), index, &resumed_index);
  if (resumed) {
    std::smatch m;
    const bool fresh = !std::regex_search(resumed->text, m, std::regex("resumed from (.*) after step ([0-9]+)"));
    const long from_step = fresh ? 0 : std::stol(m[2].str());
    const std::string from = fresh ? "the start (no checkpoint yet)" : m[1].str();
    v.resumed_after = seconds_between(fault_at, resumed->at);
    if (auto trained = run.wait_for_line(drill.step_line(from_step + 1), seconds(180), resumed_index, &trained_index)) {
      v.recovered_after = seconds_between(fault_at, trained->at);
      std::smatch respawned;
      const bool in_place = std::regex_search(resumed->text, respawned, std::regex("rank ([0-9]+) respawned in place"));
      const std::string where = node_process_lost ? " in its node's new process" : "'s worker respawned in its process";
      v.recovered_how = (in_place ? "rank " + respawned[1].str() + where + ", resumed from "
                                  : std::string("every node restarted from ")) +
                        from + " and trained step " + std::to_string(from_step + 1);
    }
    v.steps_lost = std::max(0L, last_step_before - from_step);
  }
  return trained_index;
}

// Whether the job recovered from a surviving replica's memory, as its log says: in place, or by
// restarting every node from the survivors' rescue snapshot.
std::string replica_source(const WatchedRun& run) {
  const std::regex rollback("recovery: in place by rollback to checkpoint step ([0-9]+)");
  for (const auto& line : run.lines()) {
    std::smatch back;
    if (std::regex_search(line.text, back, rollback))
      return "no (in place by rollback to checkpoint step " + back[1].str() + ": every rank loaded its own shards)";
    if (line.text.find("recovery: in place done") != std::string::npos) return "yes (in place, over the data plane)";
    if (line.text.find("rescue snapshot of step") != std::string::npos &&
        line.text.find("recovery: ") != std::string::npos)
      return "yes";
    std::smatch m;
    if (std::regex_search(line.text, m, std::regex("no rescue snapshot \\(([^)]*)\\)|\\(no rescue: ([^)]*)\\)")))
      return "no (" + (m[1].matched ? m[1].str() : m[2].str()) + "; restored from the newest checkpoint)";
  }
  return "no";
}

// Every pid each node joined with, in order, from the job's "node N (host, pid P) joined" lines:
// one pid per node means every node kept its process.
std::map<int, std::vector<long>> joined_pids(const WatchedRun& run) {
  std::map<int, std::vector<long>> pids;
  const std::regex joined("node ([0-9]+) \\([^,]*, pid ([0-9]+)\\)[^;]* joined");
  for (const auto& line : run.lines()) {
    std::smatch m;
    if (std::regex_search(line.text, m, joined)) pids[std::stoi(m[1].str())].push_back(std::stol(m[2].str()));
  }
  return pids;
}

// After an in-place recovery: whether every node kept its process — but `replaced`, the nodes whose
// processes were lost and started again once each — and the state moved over the data plane or
// read back from a checkpoint. Returns whether the processes were kept.
bool add_in_place_account(const WatchedRun& run, const std::vector<int>& replaced, Verdict& v) {
  std::string kept, changed;
  std::map<int, std::string> started_again;
  bool replaced_once = true;
  for (const auto& [node, pids] : joined_pids(run)) {
    std::string list;
    for (long pid : pids) list += (list.empty() ? "" : " then ") + std::to_string(pid);
    if (std::find(replaced.begin(), replaced.end(), node) != replaced.end()) {
      replaced_once = replaced_once && pids.size() == 2;
      started_again[node] = "node " + std::to_string(node) + "'s process started again: " +
                            (pids.size() == 2 ? "yes (pid " + list + ")" : "NO (pid " + list + ")");
      continue;
    }
    std::string& into = pids.size() == 1 ? kept : changed;
    into += (into.empty() ? "node " : ", node ") + std::to_string(node) + " pid " + list;
  }
  const bool all_kept = changed.empty() && !kept.empty();
  v.checks.push_back((!replaced.empty() ? "survivors kept their processes: " : "every node kept its process: ") +
                     std::string(all_kept ? "yes (" + kept + ")" : "NO (" + changed + ")"));
  for (int node : replaced) {
    const auto said = started_again.find(node);
    if (said == started_again.end()) replaced_once = false;
    v.checks.push_back(said == started_again.end() ? "node " + std::to_string(node) + " never joined" : said->second);
  }
  // One donor, or several when a survivor also held fewer steps than its peers ("from ranks 0, 2").
  const std::regex moved("recovery: in place done in ([0-9.]+) s .*; ([0-9]+) bytes of state from (ranks? [0-9, ]+) "
                         "over the data plane in ([0-9.]+) s");
  const std::regex read_back(
      "recovery: in place done in ([0-9.]+) s .*; every rank rolled back to checkpoint step ([0-9]+) \\(([0-9]+) bytes "
      "of its own shards read by all ranks, the slowest in ([0-9.]+) s\\)");
  for (const auto& line : run.lines()) {
    std::smatch m;
    if (std::regex_search(line.text, m, moved))
      v.checks.push_back("state moved over the data plane: " + m[2].str() + " bytes from " + m[3].str() + " in " +
                         m[4].str() + " s (the whole recovery " + m[1].str() + " s)");
    if (std::regex_search(line.text, m, read_back))
      v.checks.push_back("state read back from checkpoint step " + m[2].str() + ": " + m[3].str() +
                         " bytes, every rank its own shards, the slowest in " + m[4].str() + " s (the whole recovery " +
                         m[1].str() + " s)");
  }
  return all_kept && replaced_once;
}

// The ended job's own account: whether a surviving replica's memory was the source, each
// recovery it chose, and what it counted.
void add_job_account(const WatchedRun& run, Verdict& v) {
  v.checks.push_back("recovered from a surviving replica's memory: " + replica_source(run));
  const std::regex recovery("recovery: (.*)"), counted("job finished after .*; (restarts=.*)");
  for (const auto& line : run.lines()) {
    std::smatch m;
    if (std::regex_search(line.text, m, recovery)) v.checks.push_back("recovery: " + m[1].str());
    if (std::regex_search(line.text, m, counted)) v.checks.push_back("counted: " + m[1].str());
  }
}


// The highest step a line reported before `until`.
long last_step_logged(const WatchedRun& run, Clock::time_point until, long steps) {
  long last = 0;
  const std::regex step("step +([0-9]+)/" + std::to_string(steps) + " \\|");
  for (const auto& line : run.lines()) {
    std::smatch m;
    if (line.at <= until && std::regex_search(line.text, m, step)) last = std::max(last, std::stol(m[1].str()));
  }
  return last;
}

void compare_weights(const Drill& drill, Verdict& v) {
  auto equal = same_final_state(drill.dir() / "undisturbed", drill.dir() / "drilled", drill.steps());
  if (equal) v.weights_equal = *equal;
  else v.checks.push_back("final checkpoint: " + equal.error().message);
}

// Whether a job that shrank (from 2 replicas to 1: `two_to_one`) is to end with an undisturbed
// run's weights, and if so whether it did (v.weights_equal); otherwise a line saying why not.
// One replica accumulating both micro-batches adds their gradients as the two replicas' sum did
// (compute/train/trainer.hpp). Other shrinks sum in another order, and ZeRO-2's clip, a compressed
// sum or tensor shards' micro-batches too: equal weights are not expected there.
bool shrink_keeps_weights(const Drill& drill, bool two_to_one, Verdict& v) {
  const JobConfig& config = drill.config();
  const bool expected = two_to_one && !compute::shards_gradients(config.train.zero) && config.comm.compress == "none" &&
                        config.tensor.shards == 1;
  if (expected)
    compare_weights(drill, v);
  else
    v.checks.push_back("final weights equal to an undisturbed run: not expected (the replicas left sum the "
                       "gradients in another order)");
  return expected;
}

// The job supervisor's first word on a failure: the rescue it asks for, in place, or the job's end.
const std::regex first_word_on_failure("for a rescue snapshot of their memory|job failed: |recovery: in place \\(epoch");

// Faults injected into a running job: a node SIGKILLed or SIGSTOPped, or a worker throwing.
Verdict drill_running_job(const Drill& drill, const DrillOptions& options) {
  Verdict v;
  const bool worker = options.scenario == "kill-worker", gone = options.scenario == "node-lost";
  std::vector<std::string> env;
  if (worker)
    env.push_back(std::string(actors::env::drill_throw_at.name) + "=" + std::to_string(options.target()) + ":" +
                  std::to_string(options.at_step));
  if (gone) env.push_back(std::string(actors::env::drill_node_gone.name) + "=" + std::to_string(options.target()));
  auto run = drill.start("drilled", false, env);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  Clock::time_point fault_at;
  if (worker) {
    auto thrown = (*run)->wait_for_line(std::regex("drill: the worker of rank"), seconds(300));
    if (!thrown) {
      v.fault = "the worker never reached step " + std::to_string(options.at_step);
      return v;
    }
    fault_at = thrown->at;
    v.fault = "the worker of rank " + std::to_string(options.target()) + " threw in step " + std::to_string(options.at_step);
  } else {
    std::vector<pid_t> pids;
    std::string nodes, listed;
    for (std::size_t i = 0; i < options.targets.size(); ++i) {
      const int node = options.targets[i];
      const std::optional<pid_t> pid = node_pid(**run, node);
      nodes += (i == 0 ? "" : i + 1 == options.targets.size() ? " and " : ", ") + std::to_string(node);
      if (pid) {
        pids.push_back(*pid);
        listed += (listed.empty() ? "" : ", ") + std::to_string(*pid);
      }
    }
    nodes = (options.targets.size() == 1 ? "node " : "nodes ") + nodes;
    if (pids.size() != options.targets.size() || !(*run)->wait_for_line(drill.step_line(options.at_step), seconds(300))) {
      v.fault = nodes + " or step " + std::to_string(options.at_step) + " never appeared in the job's output";
      return v;
    }
    const bool hang = options.scenario == "hang";
    for (pid_t pid : pids) kill(pid, hang ? SIGSTOP : SIGKILL);
    fault_at = Clock::now();
    v.fault = std::string(hang ? "SIGSTOP" : "SIGKILL") + " to " + nodes + " (pid" + (pids.size() > 1 ? "s " : " ") +
              listed + ") after step " + std::to_string(options.at_step) +
              (gone ? ", which then fails at every restart" : "");
  }
  const long last = last_step_logged(**run, fault_at + milliseconds(1), drill.steps());
  watch_recovery(**run, drill, fault_at, std::max(last, options.at_step - (worker ? 1 : 0)), first_word_on_failure,
                 !worker, true, v);
  const std::optional<int> code = (*run)->wait_exit(seconds(600));
  add_job_account(**run, v);
  v.checks.push_back("job finished: " + std::string(code == 0 ? "yes" : "NO (exit " + std::to_string(code.value_or(-1)) + ")"));
  if (gone) {
    bool shrank = false, two_to_one = false;
    for (const auto& line : (*run)->lines()) {
      shrank = shrank || line.text.find("recovery: restarting every node without node " +
                                        std::to_string(options.target())) != std::string::npos;
      two_to_one = two_to_one || line.text.find("shrinking from 2 to 1 data-parallel replica(s): train.grad_accum") !=
                                     std::string::npos;
    }
    v.checks.push_back(std::string("the job went on without node ") + std::to_string(options.target()) + ": " +
                       (shrank ? "yes" : "NO"));
    const bool equal_expected = shrink_keeps_weights(drill, two_to_one, v);
    v.passed = v.detected_after && v.recovered_after && code == 0 && shrank &&
               (!equal_expected || v.weights_equal.value_or(false));
    return v;
  }
  // In place, no node process may have been restarted but the one that was lost.
  bool in_place = false;
  for (const auto& line : (*run)->lines()) in_place = in_place || line.text.find("recovery: in place done") != std::string::npos;
  const bool processes_kept =
      !in_place || add_in_place_account(**run, worker ? std::vector<int>{} : options.targets, v);
  compare_weights(drill, v);
  v.passed = v.detected_after && v.recovered_after && code == 0 && processes_kept && v.weights_equal.value_or(false);
  return v;
}

// The seconds of the step whose line is at `index`, from the step line before it back to line
// `from`; 1 s when there is none there (the first step after a restore).
double step_seconds(const WatchedRun& run, std::size_t from, std::size_t index, long steps) {
  const std::vector<WatchedRun::Line> lines = run.lines();
  const std::regex step("step +[0-9]+/" + std::to_string(steps) + " \\|");
  for (std::size_t i = index; i-- > from;)
    if (std::regex_search(lines[i].text, step)) return seconds_between(lines[i].at, lines[index].at);
  return 1.0;
}

// The checkpoint being written in `dir`: its staging folder's name (step-….tmp), or empty.
std::string checkpoint_in_flight(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".tmp") return it->path().filename().string();
  return "";
}

// The newest step line among lines [from, to): its step and when it came.
std::pair<long, Clock::time_point> newest_step_line(const WatchedRun& run, std::size_t from, std::size_t to, long steps) {
  const std::vector<WatchedRun::Line> lines = run.lines();
  const std::regex step("step +([0-9]+)/" + std::to_string(steps) + " \\|");
  std::smatch m;
  for (std::size_t i = std::min(to, lines.size()); i-- > from;)
    if (std::regex_search(lines[i].text, m, step)) return {std::stol(m[1].str()), lines[i].at};
  return {0, Clock::time_point{}};
}

// The chaos drill's random choices, the same for the same seed on any machine (no standard
// distribution: their results differ between standard libraries).
class KillChoices {
 public:
  explicit KillChoices(std::uint64_t seed) : random_(seed) {}
  // Where in its step a kill lands, in [0, 1).
  double moment() { return static_cast<double>(random_() >> 11) * 0x1p-53; }
  // A node of `nodes` other than `previous` (−1: any).
  int node(int nodes, int previous) {
    const int candidates = previous < 0 ? nodes : nodes - 1;
    const int drawn = static_cast<int>(random_() % static_cast<std::uint64_t>(candidates));
    return previous >= 0 && drawn >= previous ? drawn + 1 : drawn;
  }

 private:
  std::mt19937_64 random_;
};

std::string fixed2(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// Repeated failures: in every --kill-every-th step a node process gets SIGKILL at a random moment
// within the step, never the node killed the time before. Before the next kill the drill waits
// for the job to be training again (the first step trained after the restore), so no kill lands
// in a recovery; a kill may land while a checkpoint is being written. PASS needs every kill
// recovered, the job finished, and the final weights bitwise those of the undisturbed run.
Verdict drill_chaos(const Drill& drill, const DrillOptions& options, std::uint64_t seed) {
  Verdict v;
  v.fault = "SIGKILL to a node process every " + std::to_string(options.kill_every) + " steps of " +
            std::to_string(drill.steps()) + " (" + std::to_string(drill.kills()) +
            " kills), each at a random moment within its step and never the node killed the time before; seed " +
            std::to_string(seed) + " (--seed " + std::to_string(seed) + " replays the choices)";
  auto started = drill.start("drilled", false);
  if (!started) {
    v.fault = started.error().message;
    return v;
  }
  WatchedRun& run = **started;
  KillChoices choices(seed);
  std::size_t from = 0;  // the output before this line is done with: the last recovery's
  int previous = -1;
  long kills = 0, recovered = 0, steps_lost = 0, during_checkpoint = 0;
  double recovery_sum = 0, resume_sum = 0;
  for (long step = options.kill_every; step < drill.steps(); step += options.kill_every) {
    const std::string kill = "kill " + std::to_string(kills + 1) + " (step " + std::to_string(step) + ")";
    std::size_t before_index = 0;
    if (!run.wait_for_line(drill.step_line(step - 1), seconds(300), from, &before_index)) {
      v.checks.push_back(kill + ": the job never reached step " + std::to_string(step - 1));
      break;
    }
    // Drawn in the same order every time, so that a seed replays the nodes and the moments.
    const double moment = choices.moment();
    const int node = choices.node(options.workers, previous);
    std::this_thread::sleep_for(
        std::chrono::duration<double>(moment * step_seconds(run, from, before_index, drill.steps())));
    const auto pids = joined_pids(run);
    const auto joined = pids.find(node);
    if (joined == pids.end()) {
      v.checks.push_back(kill + ": node " + std::to_string(node) + " never joined");
      break;
    }
    const std::size_t kill_index = run.lines().size();
    const std::string writing = checkpoint_in_flight(drill.dir() / "drilled");
    ::kill(static_cast<pid_t>(joined->second.back()), SIGKILL);
    const Clock::time_point fault_at = Clock::now();
    if (!writing.empty()) ++during_checkpoint;
    ++kills;
    previous = node;
    // The kill landed after the newest step line: the drawn moment may reach past a short step.
    const auto [last, last_at] = newest_step_line(run, before_index, kill_index, drill.steps());
    Verdict one;
    from = watch_recovery(run, drill, fault_at, last, first_word_on_failure, true, true, one, kill_index);
    std::string account = "kill " + std::to_string(kills) + ": node " + std::to_string(node) + " (pid " +
                          std::to_string(joined->second.back()) + ") in step " + std::to_string(last + 1) + " (" +
                          fixed2(seconds_between(last_at, fault_at)) + " s after step " + std::to_string(last) +
                          "'s line; drawn at " + std::to_string(static_cast<int>(moment * 100)) + "% of a step)" +
                          (writing.empty() ? std::string() : ", while " + writing + " was being written") + "; ";
    account += one.detected_after ? "detected after " + fixed2(*one.detected_after) + " s; " : "detected: NO; ";
    if (!one.recovered_after) {
      v.checks.push_back(account + "training again: NO");
      break;
    }
    ++recovered;
    recovery_sum += *one.recovered_after;
    resume_sum += one.resumed_after.value_or(0.0);
    if (one.resumed_after) account += "resumed after " + fixed2(*one.resumed_after) + " s; ";
    steps_lost += one.steps_lost.value_or(0);
    v.checks.push_back(account + "training again after " + fixed2(*one.recovered_after) + " s: " + one.recovered_how +
                       "; steps lost " + std::to_string(one.steps_lost.value_or(0)));
    if (one.detected_after && (!v.detected_after || *one.detected_after > *v.detected_after)) {
      v.detected_after = one.detected_after;
      v.detected_by = "the slowest of the detections, kill " + std::to_string(kills) + ": " + one.detected_by;
    }
    if (!v.recovered_after || *one.recovered_after > *v.recovered_after) {
      v.recovered_after = one.recovered_after;
      v.recovered_how = "the slowest of the recoveries, kill " + std::to_string(kills) + ": " + one.recovered_how;
    }
  }
  v.steps_lost = steps_lost;
  const std::optional<int> code = run.wait_exit(seconds(600));
  add_job_account(run, v);
  v.checks.push_back("totals: " + std::to_string(kills) + " of " + std::to_string(drill.kills()) + " kills made (" +
                     std::to_string(during_checkpoint) + " while a checkpoint was being written), " +
                     std::to_string(recovered) + " recovered; steps lost " + std::to_string(steps_lost) +
                     (recovered > 0 ? "; resumed after " + fixed2(resume_sum / static_cast<double>(recovered)) +
                                          " s and training again after " +
                                          fixed2(recovery_sum / static_cast<double>(recovered)) + " s on average"
                                    : std::string()));
  v.checks.push_back("job finished: " + std::string(code == 0 ? "yes" : "NO (exit " + std::to_string(code.value_or(-1)) + ")"));
  compare_weights(drill, v);
  v.passed = kills == drill.kills() && recovered == kills && code == 0 && v.weights_equal.value_or(false);
  return v;
}

// A straggler: node `--target` is stopped for 150 ms of every 200 ms from step `--at-step` to the
// end, so it runs at a quarter of its speed. It must be named, and the job must go on.
Verdict drill_slow_node(const Drill& drill, const DrillOptions& options) {
  Verdict v;
  v.recovery_expected = false;
  auto run = drill.start("drilled", false);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  const std::optional<pid_t> pid = node_pid(**run, options.target());
  if (!pid || !(*run)->wait_for_line(drill.step_line(options.at_step), seconds(300))) {
    v.fault = "node " + std::to_string(options.target()) + " or step " + std::to_string(options.at_step) +
              " never appeared in the job's output";
    return v;
  }
  const Clock::time_point fault_at = Clock::now();
  v.fault = "node " + std::to_string(options.target()) + " (pid " + std::to_string(*pid) +
            ") stopped for 150 ms of every 200 ms from step " + std::to_string(options.at_step) + " on";
  std::atomic<bool> slowing{true};
  std::thread throttle([&] {
    while (slowing) {
      kill(*pid, SIGSTOP);
      std::this_thread::sleep_for(milliseconds(150));
      kill(*pid, SIGCONT);
      std::this_thread::sleep_for(milliseconds(50));
    }
  });
  const auto named = (*run)->wait_for_line(std::regex("straggler: rank"), seconds(300));
  const std::optional<int> code = (*run)->wait_exit(seconds(600));
  slowing = false;
  throttle.join();
  kill(*pid, SIGCONT);
  if (named) {
    v.detected_after = seconds_between(fault_at, named->at);
    v.detected_by = named->text;
  }
  v.checks.push_back("the job went on to the end: " + std::string(code == 0 ? "yes" : "NO"));
  compare_weights(drill, v);
  v.passed = v.detected_after && code == 0 && v.weights_equal.value_or(false);
  return v;
}

// The shell's `command` to the running job, as a user gives it (`troupe shell ADDR -c COMMAND`
// with the job's token file): its answer, or why there is none.
Expected<std::string> shell_order(WatchedRun& run, const Drill& drill, const std::string& command) {
  const std::regex banner("troupe shell ([^ ]+) \\(the job's token is in (.+)\\)");
  const auto line = run.wait_for_line(banner, seconds(60));
  std::smatch m;
  if (!line || !std::regex_search(line->text, m, banner)) return Error{"the job printed no shell address"};
  auto shell = WatchedRun::start({launch::this_executable(), "shell", m[1].str(), "--token-file", m[2].str(), "-c", command},
                                 {}, (drill.dir() / "shell.log").string());
  if (!shell) return shell.error();
  const std::optional<int> code = (*shell)->wait_exit(seconds(300));
  std::string answer;
  for (const auto& said : (*shell)->lines()) answer += (answer.empty() ? "" : " ") + said.text;
  if (code != 0) return Error{"troupe shell -c '" + command + "' failed: " + answer};
  return answer;
}

// The shell's drain of a node after --at-step (the job restarts without it: one replica fewer, the
// same global batch), two steps on the nodes left, then the shell's rejoin: the node joins the
// running job in place where it can, the survivors keeping their processes, else every node
// restarts with it; either way it ends with an undisturbed run's weights where the shrink keeps them.
Verdict drill_grow(const Drill& drill, const DrillOptions& options) {
  Verdict v;
  const int node = options.target();
  auto run = drill.start("drilled", false);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  if (!(*run)->wait_for_line(drill.step_line(options.at_step), seconds(300))) {
    v.fault = "step " + std::to_string(options.at_step) + " never appeared in the job's output";
    return v;
  }
  Expected<std::string> drained = shell_order(**run, drill, "drain node " + std::to_string(node));
  if (!drained) {
    v.fault = drained.error().message;
    return v;
  }
  std::size_t shrunk_at = 0, trained_at = 0;
  const bool shrank = (*run)->wait_for_line(std::regex("shrinking from [0-9]+ to [0-9]+ data-parallel replica"),
                                            seconds(120), 0, &shrunk_at)
                          .has_value();
  const bool two_to_one =
      shrank && (*run)->lines()[shrunk_at].text.find("shrinking from 2 to 1 data-parallel replica(s): train.grad_accum") !=
                    std::string::npos;
  const auto resumed = (*run)->wait_for_line(std::regex("resumed from .* after step ([0-9]+)"), seconds(120), shrunk_at,
                                             &trained_at);
  std::smatch m;
  const std::string resumed_text = resumed ? resumed->text : std::string();
  if (!resumed || !std::regex_search(resumed_text, m, std::regex("after step ([0-9]+)")) ||
      !(*run)->wait_for_line(drill.step_line(std::stol(m[1].str()) + 2), seconds(300), trained_at)) {
    v.fault = "drain node " + std::to_string(node) + ": the job did not train on without it (" + drained.value() + ")";
    return v;
  }
  // The nodes left, and the processes they run now: a grow in place keeps them.
  const std::map<int, std::vector<long>> before = joined_pids(**run);
  const Clock::time_point rejoin_at = Clock::now();
  Expected<std::string> rejoined = shell_order(**run, drill, "rejoin");
  v.fault = "drain node " + std::to_string(node) + " after step " + std::to_string(options.at_step) +
            ", two steps without it, then rejoin";
  if (!rejoined) {
    v.checks.push_back("rejoin: " + rejoined.error().message);
    return v;
  }
  std::size_t grow_at = 0, grown_at = 0;
  const std::regex growing("rejoin: growing in place \\(epoch|rejoin: growing by restarting every node: (.*)");
  if (const auto said = (*run)->wait_for_line(growing, seconds(120), shrunk_at, &grow_at)) {
    v.detected_after = seconds_between(rejoin_at, said->at);
    v.detected_by = said->text;
  }
  const bool in_place = v.detected_by.find("growing in place") != std::string::npos;
  const std::regex back(in_place ? "rejoin: grown in place in" : "resumed from .* after step ([0-9]+)");
  if (const auto grown = (*run)->wait_for_line(back, seconds(180), grow_at, &grown_at)) {
    v.resumed_after = seconds_between(rejoin_at, grown->at);
    if (const auto stepped = (*run)->wait_for_line(std::regex("step +[0-9]+/" + std::to_string(drill.steps()) + " \\|"),
                                                   seconds(180), grown_at)) {
      v.recovered_after = seconds_between(rejoin_at, stepped->at);
      v.recovered_how = std::string(in_place ? "node " + std::to_string(node) + " joined the running job"
                                             : "every node restarted with node " + std::to_string(node)) +
                        ", and the grown job trained a step";
    }
  }
  const std::optional<int> code = (*run)->wait_exit(seconds(600));
  v.checks.push_back("the job went on without node " + std::to_string(node) + ": " + (shrank ? "yes" : "NO"));
  v.checks.push_back("grown in place: " + (in_place ? std::string("yes") : "no (" + v.detected_by + ")"));
  bool kept = true;
  if (in_place) {
    const std::map<int, std::vector<long>> after = joined_pids(**run);
    std::string pids;
    for (const auto& [index, seen] : before) {
      if (index == node) continue;
      kept = kept && after.at(index) == seen;
      pids += (pids.empty() ? "node " : ", node ") + std::to_string(index) + " pid " + std::to_string(seen.back());
    }
    v.checks.push_back("survivors kept their processes through the grow: " + std::string(kept ? "yes (" : "NO (") + pids +
                       ")");
    const std::regex moved("rejoin: grown in place in ([0-9.]+) s .*; ([0-9]+) bytes of state from (ranks? [0-9, ]+) "
                           "over the data plane in ([0-9.]+) s");
    for (const auto& line : (*run)->lines())
      if (std::regex_search(line.text, m, moved))
        v.checks.push_back("state moved over the data plane: " + m[2].str() + " bytes from " + m[3].str() + " in " +
                           m[4].str() + " s (the whole grow " + m[1].str() + " s)");
  }
  v.checks.push_back("job finished: " + std::string(code == 0 ? "yes" : "NO (exit " + std::to_string(code.value_or(-1)) + ")"));
  const bool equal_expected = shrink_keeps_weights(drill, two_to_one, v);
  v.passed = shrank && v.recovered_after && kept && code == 0 && (!equal_expected || v.weights_equal.value_or(false));
  return v;
}

// Flips one byte in the middle of the newest checkpoint's first shard.
Status corrupt_newest(const fs::path& dir, long step, std::string& what) {
  const fs::path shard = checkpoint::step_dir(dir, step) / checkpoint::shard_file_name(0);
  std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) return Error{"cannot open " + shard.string()};
  const auto middle = static_cast<std::streamoff>(fs::file_size(shard) / 2);
  file.seekg(middle);
  const char old = static_cast<char>(file.get());
  file.seekp(middle);
  file.put(static_cast<char>(old ^ 0x5a));
  what = "flipped bits of byte " + std::to_string(middle) + " of " + shard.string();
  return file ? Status::success() : Status(Error{"cannot write " + shard.string()});
}

// The newest checkpoint corrupted after the run, then a restore forced with --resume; or the job
// killed while a checkpoint is being written, then resumed.
Verdict drill_checkpoints(const Drill& drill, const DrillOptions& options) {
  Verdict v;
  const bool corrupt = options.scenario == "corrupt-checkpoint";
  const fs::path drilled = drill.dir() / "drilled";
  auto first = drill.start("drilled", false);
  if (!first) {
    v.fault = first.error().message;
    return v;
  }
  Clock::time_point fault_at;
  if (corrupt) {
    if ((*first)->wait_exit(seconds(600)) != 0) {
      v.fault = "the run to corrupt did not finish";
      return v;
    }
    std::string what;
    if (Status s = corrupt_newest(drilled, drill.steps(), what); !s) {
      v.fault = s.error().message;
      return v;
    }
    fault_at = Clock::now();
    v.fault = what + ", then a restore forced with --resume";
  } else {
    if (!(*first)->wait_for_line(drill.step_line(options.at_step), seconds(300))) {
      v.fault = "step " + std::to_string(options.at_step) + " never appeared";
      return v;
    }
    // Kill the job while a staging folder exists: a checkpoint is being written.
    const auto deadline = Clock::now() + seconds(300);
    bool caught = false;
    while (!caught && Clock::now() < deadline && !(*first)->wait_exit(milliseconds(0))) {
      caught = !checkpoint_in_flight(drilled).empty();
      if (caught) (*first)->kill_all();
      std::this_thread::sleep_for(milliseconds(1));
    }
    (void)(*first)->wait_exit(seconds(30));
    fault_at = Clock::now();
    if (!caught) {
      v.fault = "the job never had a checkpoint in flight to kill";
      return v;
    }
    v.fault = "SIGKILL to the job and its nodes while a checkpoint was being written (after step " +
              std::to_string(options.at_step) + ")";
  }
  auto newest = checkpoint::open_newest_valid(drilled);
  if (newest && newest->checkpoint)
    v.checks.push_back("newest valid checkpoint before the restore: " + newest->checkpoint->dir().string() +
                       (newest->skipped.empty() ? "" : " (" + newest->skipped.front().why + ")"));
  auto second = drill.start("drilled", true);
  if (!second) {
    v.fault = second.error().message;
    return v;
  }
  const long last = corrupt ? drill.steps() : last_step_logged(**first, fault_at, drill.steps());
  watch_recovery(**second, drill, fault_at, last, std::regex(corrupt ? "skipped step-" : "resumed from"), false, false,
                 v);
  const std::optional<int> code = (*second)->wait_exit(seconds(600));
  v.checks.push_back("resumed job finished: " + std::string(code == 0 ? "yes" : "NO"));
  bool torn = false;
  for (const auto& line : (*second)->lines())
    if (line.text.find("resumed from") != std::string::npos && line.text.find(".tmp") != std::string::npos) torn = true;
  v.checks.push_back(std::string("a torn checkpoint was loaded: ") + (torn ? "YES" : "no"));
  compare_weights(drill, v);
  v.passed = v.detected_after && v.recovered_after && code == 0 && !torn && v.weights_equal.value_or(false);
  return v;
}

// A write error while saving: once the first checkpoint is committed, every node process gets a
// file-size limit the next shard cannot fit (EFBIG, as a full disk gives ENOSPC). Training must go
// on to the last step with the error reported and the previous checkpoint intact; the failed last
// checkpoint then fails the run, and the job restarts from the intact one (without the limit: a
// restarted node is a new process) and finishes.
Verdict drill_disk_full(const Drill& drill, const DrillOptions& options) {
  Verdict v;
  const fs::path drilled = drill.dir() / "drilled";
  auto run = drill.start("drilled", false);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  if (!(*run)->wait_for_line(std::regex("checkpoint .*step-[0-9]+ committed"), seconds(300))) {
    v.fault = "no checkpoint was committed before the limit";
    return v;
  }
  const long intact_step = drill.every();
  const rlimit tiny{64 * 1024, 64 * 1024};
  for (pid_t node : (*run)->descendants()) prlimit(node, RLIMIT_FSIZE, &tiny, nullptr);
  const Clock::time_point fault_at = Clock::now();
  v.fault = "file-size limit of 64 KiB on every node process after the checkpoint of step " +
            std::to_string(intact_step);
  if (auto reported = (*run)->wait_for_line(std::regex("checkpoint after step [0-9]+ failed"), seconds(300))) {
    v.detected_after = seconds_between(fault_at, reported->at);
    v.detected_by = reported->text;
  }
  std::size_t done_index = 0;
  const auto done = (*run)->wait_for_line(std::regex("done: "), seconds(600), 0, &done_index);
  v.checks.push_back(std::string("training went on to the last step: ") + (done ? "yes" : "NO"));
  auto intact = checkpoint::open_checkpoint(checkpoint::step_dir(drilled, intact_step));
  v.checks.push_back("previous checkpoint (step " + std::to_string(intact_step) + ") intact: " +
                     (intact ? "yes" : "NO: " + intact.error().message));
  if (done) {
    std::size_t resumed_index = 0;
    if (auto resumed = (*run)->wait_for_line(std::regex("resumed from .* after step ([0-9]+)"), seconds(300),
                                             done_index, &resumed_index)) {
      v.recovered_after = seconds_between(fault_at, resumed->at);
      v.recovered_how = "the failed last checkpoint failed the run; " + resumed->text.substr(resumed->text.find("resumed"));
    }
  }
  const std::optional<int> code = (*run)->wait_exit(seconds(600));
  v.checks.push_back("job finished: " + std::string(code == 0 ? "yes" : "NO (exit " + std::to_string(code.value_or(-1)) + ")"));
  compare_weights(drill, v);
  v.passed = v.detected_after && done && intact && code == 0 && v.weights_equal.value_or(false);
  return v;
}

}  // namespace

int run_drill(const DrillOptions& options, const ResolvedJob& job) {
  if (std::find(drill_scenarios.begin(), drill_scenarios.end(), options.scenario) == drill_scenarios.end()) {
    std::string known;
    for (const auto& s : drill_scenarios) known += (known.empty() ? "" : ", ") + s;
    return error_exit(ExitCode::bad_input, "unknown drill scenario '" + options.scenario + "' (known: " + known + ")");
  }
  const long steps = job.config.train.steps;
  if (options.at_step < 1 || options.at_step >= steps)
    return error_exit(ExitCode::bad_input, "--at-step " + std::to_string(options.at_step) +
                                               " must be between 1 and train.steps − 1 (" + std::to_string(steps - 1) +
                                               ")");
  const bool chaos = options.scenario == "chaos";
  if (chaos && (options.kill_every < 2 || options.kill_every >= steps))
    return error_exit(ExitCode::bad_input, "--kill-every " + std::to_string(options.kill_every) +
                                               " must be between 2 and train.steps − 1 (" + std::to_string(steps - 1) +
                                               ") for at least one kill");
  const bool process_fault = options.scenario == "kill-node" || options.scenario == "hang" ||
                             options.scenario == "kill-worker" || options.scenario == "slow-node" ||
                             options.scenario == "node-lost" || chaos || options.scenario == "grow";
  if (process_fault && options.workers < 2)
    return error_exit(ExitCode::bad_input,
                      "drill " + options.scenario + " needs --workers 2 or more: recovery restarts the node processes");
  for (int target : options.targets)
    if (process_fault && (target < 0 || target >= options.workers))
      return error_exit(ExitCode::bad_input, "--target " + std::to_string(target) + " is not a node of the job's " +
                                                 std::to_string(options.workers) + " workers");
  if (options.targets.size() > 1) {
    std::string list;
    for (int target : options.targets) list += (list.empty() ? "" : ",") + std::to_string(target);
    if (options.scenario != "kill-node" && options.scenario != "hang")
      return error_exit(ExitCode::bad_input, "--target " + list + ": only kill-node and hang take several nodes, not " +
                                                 options.scenario);
    if (std::set<int>(options.targets.begin(), options.targets.end()).size() != options.targets.size())
      return error_exit(ExitCode::bad_input, "--target " + list + " names a node twice");
    if (static_cast<int>(options.targets.size()) >= options.workers)
      return error_exit(ExitCode::bad_input, "--target " + list + " leaves no node of the job's " +
                                                 std::to_string(options.workers) + " workers running");
  }
  if (!job.config.checkpoint.dir.empty())
    return error_exit(ExitCode::bad_input,
                      "checkpoint.dir is set by the drill (a folder per run under --dir); leave it out");

  Drill drill(options, job);
  if (Status prepared = drill.prepare(); !prepared) return error_exit(ExitCode::bad_input, prepared.error().message);
  // Drawn before anything runs, so that the header names it even if the drill never ends.
  const std::uint64_t seed = !chaos ? 0 : options.seed ? *options.seed : std::random_device{}();
  std::printf("drill %s in %s: %ld steps, checkpoint every %ld, %d worker(s)%s; undisturbed run first\n",
              options.scenario.c_str(), drill.dir().c_str(), steps, drill.every(), options.workers,
              chaos ? (", " + std::to_string(drill.kills()) + " kills, seed " + std::to_string(seed)).c_str() : "");
  std::fflush(stdout);
  auto reference = drill.start("undisturbed", false);
  if (!reference) return error_exit(ExitCode::bad_input, reference.error().message);
  const auto started = Clock::now();
  if (const std::optional<int> code = (*reference)->wait_exit(seconds(1800)); code != 0) {
    return error_exit(ExitCode::failure, "the undisturbed run failed (exit " + std::to_string(code.value_or(-1)) +
                                             "); its output is in " +
                                             fs::absolute(drill.dir() / "undisturbed.log").string());
  }
  std::printf("undisturbed run: %.1f s; now the drilled run\n", seconds_between(started, Clock::now()));
  std::fflush(stdout);
  Verdict verdict;
  if (chaos)
    verdict = drill_chaos(drill, options, seed);
  else if (options.scenario == "slow-node")
    verdict = drill_slow_node(drill, options);
  else if (options.scenario == "grow")
    verdict = drill_grow(drill, options);
  else if (process_fault)
    verdict = drill_running_job(drill, options);
  else if (options.scenario == "disk-full")
    verdict = drill_disk_full(drill, options);
  else
    verdict = drill_checkpoints(drill, options);
  const int code = print_verdict(options.scenario, verdict);
  if (!verdict.passed)
    std::printf("drill folder kept for inspection: %s\n", fs::absolute(drill.dir()).c_str());
  else if (!options.keep)
    drill.remove_created();
  return code;
}

Command add_drill_command(CLI::App& app) {
  auto options = std::make_shared<DrillOptions>();
  auto job = std::make_shared<TrainArgs>();
  CLI::App* command =
      app.add_subcommand("drill", "Failure drill: the job undisturbed, then with a fault injected; prints a verdict.");
  command
      ->add_option("scenario", options->scenario,
                   "kill-node, kill-worker, hang, slow-node, corrupt-checkpoint, kill-during-checkpoint, disk-full, "
                   "node-lost or chaos")
      ->required();
  command->add_option("--at-step", options->at_step, "the fault comes after this step")->capture_default_str();
  command
      ->add_option("--target", options->targets,
                   "node (kill-node, hang, slow-node) or rank (kill-worker) to fail; kill-node and hang take a list "
                   "(1,2) of nodes failing at once")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--kill-every", options->kill_every, "chaos: a node is killed in every Nth step")
      ->capture_default_str();
  command->add_option("--seed", options->seed,
                      "chaos: the seed of the kills' nodes and moments, as a verdict prints it (default: fresh)");
  command->add_option("--workers", options->workers, "node processes; 1 only for checkpoint scenarios")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      ->add_option("--dir", options->dir,
                   "folder for the runs' checkpoints and logs (default: drill-SCENARIO-PID here); a folder named "
                   "here stays after a PASS, only what the drill wrote in it is removed")
      ->type_name("DIR");
  command->add_flag("--keep", options->keep,
                    "keep the drill's checkpoints and logs after a PASS (a FAIL always keeps them)");
  add_config_options(*command, *job);
  return job_command(*command, job, [options](const ResolvedJob& resolved) { return run_drill(*options, resolved); });
}

}  // namespace troupe::apps
