// troupe drill SCENARIO: what the drills share (drill.hpp) — the drill folder and its runs, the
// verdict, the account of a recovery from the job's events — and the command itself.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include <spdlog/fmt/fmt.h>

#include "actors/job_events.hpp"
#include "apps/commands/drill/drill.hpp"
#include "apps/commands/job_arguments.hpp"
#include "apps/config/print.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/unclaimed_port.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "compute/check.hpp"
#include "compute/train/balance.hpp"
#include "monitor/list_text.hpp"

namespace troupe::apps::drill {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> drill_scenarios{"kill-node",          "kill-worker",            "hang",
                                               "slow-node",          "corrupt-checkpoint",     "kill-during-checkpoint",
                                               "disk-full",          "node-lost",              "chaos",
                                               "grow"};

// A drill's job reports every step at once: its events time the fault and the recovery to within
// a heartbeat.
constexpr double drill_heartbeat_seconds = 0.02;

// "recovery: in place done in 0.412 s (epoch 1): node 1's process started again on h1 (pid 7, was
// 5); every other node kept its process); 5200000 bytes of state from rank 0 over the data plane in
// 0.1 s; every rank goes on after step 5", from a recovery's last two events.
std::string in_place_done(const actors::training_resumed& resumed, const actors::state_moved& moved,
                          const std::vector<actors::job_event>& events) {
  std::string respawned;
  if (resumed.nodes.empty() && !resumed.ranks.empty())
    respawned = "rank " + std::to_string(resumed.ranks.front()) + " respawned in its process (kept)";
  for (std::size_t i = 0; i < resumed.nodes.size(); ++i) {
    const int node = resumed.nodes[i];
    std::string host = "?";
    int pid = 0;
    for (const actors::job_event& event : events)
      if (const auto* joined = caf::get_if<actors::node_joined>(&event.body); joined && joined->node == node) {
        host = joined->host;
        pid = joined->pid;
      }
    respawned += fmt::format("{}node {}'s process started again on {} (pid {}, was {}", respawned.empty() ? "" : "), ",
                             node, host, pid, i < resumed.replaced_pids.size() ? resumed.replaced_pids[i] : 0);
  }
  if (!resumed.nodes.empty()) respawned += "; every other node kept its process)";
  if (resumed.route == actors::RecoveryRoute::in_place_rollback)
    return fmt::format("recovery: in place done in {:.3f} s (epoch {}): {}; every rank rolled back to checkpoint "
                       "step {} ({} bytes of its own shards read by all ranks, the slowest in {:.3f} s); every rank "
                       "goes on after step {}",
                       resumed.seconds, resumed.epoch, respawned, resumed.after_step, moved.bytes, moved.seconds,
                       resumed.after_step);
  return fmt::format(
      "recovery: in place done in {:.3f} s (epoch {}): {}; {} bytes of state from {} over the data "
      "plane in {:.3f} s; every rank goes on after step {}",
      resumed.seconds, resumed.epoch, respawned, moved.bytes, monitor::numbered("rank", moved.donors), moved.seconds,
      resumed.after_step);
}

// Whether a surviving replica's memory was the job's source, by the first recovery that says.
std::string replica_source(const std::vector<actors::job_event>& events) {
  using Route = actors::RecoveryRoute;
  for (const actors::job_event& event : events) {
    if (const auto* resumed = caf::get_if<actors::training_resumed>(&event.body)) {
      if (resumed->route == Route::in_place_rollback)
        return "no (in place by rollback to checkpoint step " + std::to_string(resumed->after_step) +
               ": every rank loaded its own shards)";
      if (resumed->route == Route::in_place_from_replica) return "yes (in place, over the data plane)";
      if (resumed->route == Route::island_left_out)
        return "no (DiLoCo: the lost island rejoined after step " + std::to_string(resumed->after_step) + " with " +
               resumed->from + "; its weights since its last sync were lost with it)";
    }
    if (const auto* chosen = caf::get_if<actors::recovery_chosen>(&event.body)) {
      if (chosen->route == Route::restart_from_replica) return "yes";
      if (chosen->route == Route::restart_from_checkpoint) return "no (" + chosen->reason + ")";
    }
  }
  return "no";
}

}  // namespace

Drill::Drill(const DrillOptions& options, const ResolvedJob& job) : options_(options), job_(job) {
  dir_ = options.dir.empty() ? fs::current_path() / ("drill-" + options.scenario + "-" + std::to_string(::getpid()))
                             : fs::path(options.dir);
}

Status Drill::prepare() {
  // Recorded before anything is written, so that a PASS removes exactly what the drill made and
  // nothing that was in a --dir folder before.
  for (const char* name :
       {"job.toml", "hosts.txt", "undisturbed", "undisturbed.log", "drilled", "drilled.log", "drilled.events"})
    if (!fs::exists(dir_ / name)) created_.push_back(dir_ / name);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Error{"--dir " + dir_.string() + ": cannot create: " + ec.message()};
  JobConfig config = job_.config;
  config.sample.tokens = 0;
  config.checkpoint.resume = false;
  config.train.log_every = 1;
  config.fault.heartbeat_seconds = std::min(config.fault.heartbeat_seconds, drill_heartbeat_seconds);
  const bool chaos = options_.scenario == "chaos";
  if (config.checkpoint.every <= 0)
    config.checkpoint.every = std::max(1L, (chaos ? options_.kill_every : options_.at_step) / 2);
  // Every kill costs a restart where the job restarts every node: the budget must cover them all.
  if (chaos) config.fault.max_restarts = std::max(config.fault.max_restarts, static_cast<int>(kills()));
  // A node that cannot come back: the job is to go on without it.
  if (options_.scenario == "node-lost") config.fault.elastic = true;
  std::ofstream out(dir_ / "job.toml");
  out << config_to_toml(config);
  std::ofstream hosts(dir_ / "hosts.txt");
  for (int node = 0; node < options_.workers; ++node) hosts << "localhost slots=" << options_.slots << "\n";
  if (!out || !hosts) return Error{"--dir " + dir_.string() + ": cannot write job.toml and hosts.txt"};
  every_ = config.checkpoint.every;
  return Status::success();
}

void Drill::remove_created() const {
  std::error_code ec;
  for (const fs::path& path : created_) fs::remove_all(path, ec);
  if (options_.dir.empty()) fs::remove(dir_, ec);
}

Expected<Run> Drill::start(const std::string& name, bool resume, bool watched,
                           const std::vector<std::string>& env) const {
  std::vector<std::string> argv{launch::this_executable(), "launch",           "--hostfile", (dir_ / "hosts.txt").string(),
                                "--config",                (dir_ / "job.toml").string(), "--checkpoint.dir",
                                (dir_ / name).string()};
  if (resume) argv.push_back("--resume");
  int port = 0;
  if (watched) {
    auto found = launch::unclaimed_port();
    if (!found) return found.error();
    port = *found;
  }
  argv.push_back("--monitor.control_port=" + std::to_string(port));
  auto process = WatchedRun::start(argv, env, (dir_ / (name + ".log")).string());
  if (!process) return process.error();
  Run run{std::move(*process), nullptr};
  if (!watched) return run;
  WatchedRun* job = run.process.get();
  auto events = EventFeed::open(port, 120s, [job] { return !job->wait_exit(0ms); },
                                (dir_ / (name + ".events")).string());
  if (!events) {
    // A job that ended first says why in its last line: the verdict carries it, so the reason
    // survives a drill folder that is removed.
    std::string why = events.error().message;
    if (const std::optional<int> code = job->wait_exit(0ms)) why += " (exit " + std::to_string(*code) + ")";
    if (const auto lines = job->lines(); !lines.empty()) why += "; its last line: " + lines.back().text;
    return Error{why};
  }
  run.events = std::move(*events);
  run.events->set_stall_limit(stall_limit());
  return run;
}

std::chrono::seconds Drill::stall_limit() const {
  const double seconds =
      job_.config.fault.heartbeat_timeout + job_.config.fault.rescue_timeout + std::max(30.0, 3 * undisturbed_seconds_);
  return std::chrono::seconds(static_cast<long>(std::ceil(seconds)));
}

std::optional<int> await_end(Run& run, Verdict& v) {
  TROUPE_CHECK(run.events != nullptr, "a drill awaits the end of a run it does not watch");
  const auto deadline = std::chrono::steady_clock::now() + 600s;
  std::optional<std::chrono::seconds> stalled;
  while (std::chrono::steady_clock::now() < deadline) {
    if (const std::optional<int> code = run.process->wait_exit(1s)) return code;
    if ((stalled = run.events->stalled_for())) break;
  }
  if (const std::optional<int> code = run.process->wait_exit(0ms)) return code;
  v.checks.push_back(
      stalled ? fmt::format("stalled: the job sent no event for {} s; where it stood then:", stalled->count())
              : std::string("the job still ran after 600 s more; where it stood then:"));
  for (const char* command : {"workers", "nodes"}) {
    Expected<std::string> answer = run.events->order(command, 10s);
    const std::string text = answer ? *answer : answer.error().message;
    std::string check = std::string(command) + ":";  // the answer's lines under it, indented
    for (std::size_t at = 0; at < text.size();) {
      const std::size_t end = std::min(text.find('\n', at), text.size());
      check += "\n    " + text.substr(at, end - at);
      at = end + 1;
    }
    v.checks.push_back(check);
  }
  run.process->kill_all();
  return run.process->wait_exit(30s);
}

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
    std::printf("  final weights equal to an undisturbed run: %s (%s)\n", *v.weights_equal ? "yes" : "NO",
                v.weights_compared.c_str());
  std::printf("verdict: %s\n", v.passed ? "PASS" : "FAIL");
  std::fflush(stdout);
  return to_int(v.passed ? ExitCode::success : ExitCode::failure);
}

namespace {

// Elements [begin, end) of `kind`.
Expected<std::vector<float>> read_range(const checkpoint::LoadedCheckpoint& checkpoint, const std::string& kind,
                                        std::int64_t begin, std::int64_t end) {
  std::vector<float> values(static_cast<std::size_t>(end - begin));
  if (Status read = checkpoint.read(kind, begin, end, values); !read) return read.error();
  return values;
}

// Whether two runs' final checkpoints hold the same parameters and moments, bit for bit. A sim
// run's token pieces hold no values: their ranges have to be the same.
Expected<bool> same_final_state(const fs::path& a, const fs::path& b, long step) {
  auto first = checkpoint::open_checkpoint(checkpoint::step_dir(a, step));
  if (!first) return first.error();
  auto second = checkpoint::open_checkpoint(checkpoint::step_dir(b, step));
  if (!second) return second.error();
  for (const std::string kind : {"param", "adam_m", "adam_v"}) {
    for (const checkpoint::LoadedCheckpoint* checkpoint : {&*first, &*second})
      if (Status held = checkpoint->read(kind, 0, 0, {}); !held) return held.error();
    const auto ranges = first->value_ranges(kind);
    if (ranges != second->value_ranges(kind)) return false;
    for (const auto& [begin, end] : ranges) {
      auto x = read_range(*first, kind, begin, end);
      if (!x) return x.error();
      auto y = read_range(*second, kind, begin, end);
      if (!y) return y.error();
      if (std::memcmp(x->data(), y->data(), x->size() * sizeof(float)) != 0) return false;  // bits, not ==
    }
  }
  return true;
}

// The final checkpoint's parameter norm, summed in double (a token piece's elements are zeros).
Expected<double> final_param_norm(const fs::path& run, long step) {
  auto opened = checkpoint::open_checkpoint(checkpoint::step_dir(run, step));
  if (!opened) return opened.error();
  if (Status held = opened->read("param", 0, 0, {}); !held) return held.error();
  double sum = 0;
  for (const auto& [begin, end] : opened->value_ranges("param")) {
    auto params = read_range(*opened, "param", begin, end);
    if (!params) return params.error();
    for (float value : *params) sum += static_cast<double>(value) * value;
  }
  return std::sqrt(sum);
}

}  // namespace

void compare_weights(const Drill& drill, Verdict& v) {
  // Dynamic shares follow the replicas' measured times, which a fault changes (a replacement starts
  // at the mean share): the drilled run sums its gradients in another order than the undisturbed one.
  const JobConfig& config = drill.config();
  if (config.train.balance == compute::BalanceMode::dynamic)
    return compare_weights_within(drill,
                                  config.comm.compress == comm::Compression::none
                                      ? compute::reordered_sums_param_norm_tolerance
                                      : compute::compressed_sums_param_norm_tolerance,
                                  v);
  auto equal = same_final_state(drill.dir() / "undisturbed", drill.dir() / "drilled", drill.steps());
  if (equal)
    v.weights_equal = *equal;
  else
    v.checks.push_back("final checkpoint: " + equal.error().message);
}

void compare_weights_within(const Drill& drill, double relative, Verdict& v) {
  auto undisturbed = final_param_norm(drill.dir() / "undisturbed", drill.steps());
  auto drilled = final_param_norm(drill.dir() / "drilled", drill.steps());
  if (!undisturbed || !drilled) {
    v.checks.push_back("final checkpoint: " + (!undisturbed ? undisturbed.error() : drilled.error()).message);
    return;
  }
  const double differs = std::abs(*drilled - *undisturbed) / *undisturbed;
  v.weights_equal = differs <= relative;
  v.weights_compared = fmt::format(
      "parameter norm {:.9g} against {:.9g}, {:.2g} relative, within {:g}: uneven shares sum the gradients in another "
      "order",
      *drilled, *undisturbed, differs, relative);
}

double now() { return actors::unix_now(); }

long last_step_before(const std::vector<actors::job_event>& events, double at, std::size_t from) {
  long last = 0;
  for (std::size_t i = from; i < events.size(); ++i)
    if (const auto* step = caf::get_if<actors::step_trained>(&events[i].body); step && events[i].unix_seconds <= at)
      last = std::max(last, static_cast<long>(step->step));
  return last;
}

std::size_t watch_recovery(EventFeed& feed, double fault_at, const Match& detection, bool node_lost, Verdict& v,
                           std::size_t from, std::size_t since) {
  std::size_t index = from, trained_index = from;
  if (auto detected = feed.wait_for(detection, 120s, from, &index)) {
    v.detected_after = detected->unix_seconds - fault_at;
    if (const auto* failure = caf::get_if<actors::failure_detected>(&detected->body))
      v.detected_by = failure->reason;
    else if (const auto* noted = caf::get_if<actors::checkpoint_noted>(&detected->body))
      v.detected_by = noted->detail;
    else if (const auto* resumed = caf::get_if<actors::training_resumed>(&detected->body))
      v.detected_by = "resumed from " + resumed->from + " after step " + std::to_string(resumed->after_step);
    else if (const auto* chosen = caf::get_if<actors::recovery_chosen>(&detected->body))
      v.detected_by = said(*chosen);
  }
  std::size_t resumed_index = 0;
  const auto resumed = feed.wait_for(body_is<actors::training_resumed>(), 180s, index, &resumed_index);
  if (!resumed) return trained_index;
  const auto& how = caf::get<actors::training_resumed>(resumed->body);
  v.resumed_after = resumed->unix_seconds - fault_at;
  const long first = static_cast<long>(how.after_step) + 1;
  if (auto trained = feed.wait_for(body_is<actors::step_trained>([first](const auto& s) { return s.step == first; }),
                                   180s, resumed_index, &trained_index)) {
    v.recovered_after = trained->unix_seconds - fault_at;
    const bool in_place = how.route == actors::RecoveryRoute::in_place_from_replica ||
                          how.route == actors::RecoveryRoute::in_place_rollback ||
                          how.route == actors::RecoveryRoute::island_left_out;
    // A DiLoCo island's worker that threw is answered by its node's new process too.
    const bool new_process = node_lost || !how.nodes.empty();
    const std::string where = new_process ? " in its node's new process" : "'s worker respawned in its process";
    v.recovered_how = (in_place && !how.ranks.empty()
                           ? "rank " + std::to_string(how.ranks.front()) + where + ", resumed from "
                           : std::string("every node restarted from ")) +
                      how.from + " and trained step " + std::to_string(first);
  }
  // The newest step before the fault, as the job heard of it: every report of such a step has come
  // by now (the recovery's own events come after).
  v.steps_lost = std::max(0L, last_step_before(feed.events(), fault_at, since) - static_cast<long>(how.after_step));
  return trained_index;
}

std::string said(const actors::recovery_chosen& chosen) {
  const bool grow = chosen.route == actors::RecoveryRoute::grow_in_place ||
                    chosen.route == actors::RecoveryRoute::grow_by_restart;
  return (grow ? "rejoin: " : "recovery: ") + chosen.reason;
}

void add_job_account(const std::vector<actors::job_event>& events, Verdict& v) {
  v.checks.push_back("recovered from a surviving replica's memory: " + replica_source(events));
  const actors::state_moved* moved = nullptr;
  for (const actors::job_event& event : events) {
    if (const auto* chosen = caf::get_if<actors::recovery_chosen>(&event.body)) v.checks.push_back(said(*chosen));
    if (const auto* m = caf::get_if<actors::state_moved>(&event.body)) moved = m;
    if (const auto* resumed = caf::get_if<actors::training_resumed>(&event.body);
        resumed && moved && moved->epoch == resumed->epoch &&
        (resumed->route == actors::RecoveryRoute::in_place_from_replica ||
         resumed->route == actors::RecoveryRoute::in_place_rollback))
      v.checks.push_back(in_place_done(*resumed, *moved, events));
    if (const auto* ended = caf::get_if<actors::job_ended>(&event.body)) v.checks.push_back("counted: " + ended->counts);
  }
}

void add_later_failures(const std::vector<actors::job_event>& events, Verdict& v) {
  bool first = true;
  for (const actors::job_event& event : events)
    if (const auto* failure = caf::get_if<actors::failure_detected>(&event.body);
        failure && !std::exchange(first, false))
      v.checks.push_back(fmt::format("also failed ({}): {}", actors::to_string(failure->kind), failure->reason));
}

std::map<int, std::vector<int>> joined_pids(const std::vector<actors::job_event>& events) {
  std::map<int, std::vector<int>> pids;
  for (const actors::job_event& event : events)
    if (const auto* joined = caf::get_if<actors::node_joined>(&event.body)) pids[joined->node].push_back(joined->pid);
  return pids;
}

bool add_in_place_account(const std::vector<actors::job_event>& events, const std::vector<int>& replaced, Verdict& v) {
  // "node 0 pid 7, node 2 pid 9", the first few of each list and how many more.
  monitor::BoundedList kept(monitor::numbers_listed_whole, ", "), changed(monitor::numbers_listed_whole, ", ");
  std::map<int, std::string> started_again;
  bool replaced_once = true;
  for (const auto& [node, pids] : joined_pids(events)) {
    const std::string list = fmt::format("{}", fmt::join(pids, " then "));
    if (std::find(replaced.begin(), replaced.end(), node) != replaced.end()) {
      replaced_once = replaced_once && pids.size() == 2;
      started_again[node] = "node " + std::to_string(node) + "'s process started again: " +
                            (pids.size() == 2 ? "yes (pid " + list + ")" : "NO (pid " + list + ")");
      continue;
    }
    (pids.size() == 1 ? kept : changed).add_described([&] { return "node " + std::to_string(node) + " pid " + list; });
  }
  const bool all_kept = changed.empty() && !kept.empty();
  v.checks.push_back((!replaced.empty() ? "survivors kept their processes: " : "every node kept its process: ") +
                     std::string(all_kept ? "yes (" + kept.text("nodes") + ")" : "NO (" + changed.text("nodes") + ")"));
  for (int node : replaced) {
    const auto line = started_again.find(node);
    if (line == started_again.end()) replaced_once = false;
    v.checks.push_back(line == started_again.end() ? "node " + std::to_string(node) + " never joined" : line->second);
  }
  const actors::state_moved* moved = nullptr;
  for (const actors::job_event& event : events) {
    if (const auto* m = caf::get_if<actors::state_moved>(&event.body)) moved = m;
    const auto* resumed = caf::get_if<actors::training_resumed>(&event.body);
    if (!resumed || !moved || moved->epoch != resumed->epoch) continue;
    if (resumed->route == actors::RecoveryRoute::in_place_from_replica)
      v.checks.push_back(
          fmt::format("state moved over the data plane: {} bytes from {} in {:.3f} s (the whole "
                      "recovery {:.3f} s)",
                      moved->bytes, monitor::numbered("rank", moved->donors), moved->seconds, resumed->seconds));
    if (resumed->route == actors::RecoveryRoute::in_place_rollback)
      v.checks.push_back(fmt::format("state read back from checkpoint step {}: {} bytes, every rank its own shards, "
                                     "the slowest in {:.3f} s (the whole recovery {:.3f} s)",
                                     resumed->after_step, moved->bytes, moved->seconds, resumed->seconds));
  }
  return all_kept && replaced_once;
}

// One replica accumulating both micro-batches adds their gradients as the two replicas' sum did
// (compute/train/trainer.hpp). Other shrinks sum in another order, and ZeRO-2's clip, a compressed
// sum or tensor shards' micro-batches too: equal weights are not expected there. Uneven shares
// (train.balance) sum in another order before and after the fault alike, so their weights are
// compared within the tolerance their layouts are tested to (docs/balance.md); compressed sums of
// other partial sums are not.
bool shrink_keeps_weights(const Drill& drill, bool two_to_one, Verdict& v) {
  const JobConfig& config = drill.config();
  const bool uncompressed = config.comm.compress == comm::Compression::none;
  if (config.train.balance != compute::BalanceMode::none && uncompressed) {
    compare_weights_within(drill, compute::reordered_sums_param_norm_tolerance, v);
    return true;
  }
  const bool expected = two_to_one && !compute::shards_gradients(config.train.zero) && uncompressed &&
                        config.tensor.shards == 1 && config.train.balance == compute::BalanceMode::none;
  if (expected)
    compare_weights(drill, v);
  else
    v.checks.push_back("final weights equal to an undisturbed run: not expected (the replicas left sum the "
                       "gradients in another order)");
  return expected;
}

std::string finished(const std::optional<int>& code) {
  return code == 0 ? "yes" : "NO (exit " + std::to_string(code.value_or(-1)) + ")";
}

}  // namespace troupe::apps::drill

namespace troupe::apps {

int run_drill(const DrillOptions& options, const ResolvedJob& job) {
  using namespace drill;
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
  auto reference = drill.start("undisturbed", false, false);
  if (!reference) return error_exit(ExitCode::bad_input, reference.error().message);
  const double started = now();
  if (const std::optional<int> code = reference->process->wait_exit(1800s); code != 0) {
    return error_exit(ExitCode::failure, "the undisturbed run failed (exit " + std::to_string(code.value_or(-1)) +
                                             "); its output is in " +
                                             fs::absolute(drill.dir() / "undisturbed.log").string());
  }
  drill.set_undisturbed_seconds(now() - started);
  std::printf("undisturbed run: %.1f s; now the drilled run\n", now() - started);
  std::fflush(stdout);
  Verdict verdict;
  if (chaos)
    verdict = drill_chaos(drill, seed);
  else if (options.scenario == "slow-node")
    verdict = drill_slow_node(drill);
  else if (options.scenario == "grow")
    verdict = drill_grow(drill);
  else if (process_fault)
    verdict = drill_running_job(drill);
  else if (options.scenario == "disk-full")
    verdict = drill_disk_full(drill);
  else
    verdict = drill_checkpoints(drill);
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
  command->add_option("--slots", options->slots, "ranks in each node process (many with train.backend sim)")
      ->check(CLI::Range(1, 1024))
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
