#include "actors/supervision/job_runner.hpp"

#include <algorithm>
#include <atomic>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>

#include "actors/process_environment.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "checkpoint/store.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

int replicas(const JobShape& job) {
  int world = 0;
  for (const NodeShape& node : job.nodes) world += node.slots;
  return world / (job.stages * job.shards);
}

// The micro-batches each replica sums, and the key that says so.
std::pair<int, std::string> per_replica(const JobShape& job, const BatchShape& batch) {
  if (job.stages > 1) return {batch.microbatches, "pipeline.microbatches"};
  return {batch.grad_accum, "train.grad_accum"};
}

// The job's nodes and batch, as the restart policy works on them.
JobShape job_shape(const std::vector<NodeShape>& lines, const JobConfig& config) {
  return {lines, config.pipeline.stages, config.tensor.shards,
          {config.train.batch_size, config.train.grad_accum, config.pipeline.microbatches}};
}

void set_batch(JobConfig& config, const BatchShape& batch) {
  config.train.batch_size = batch.batch_size;
  config.train.grad_accum = batch.grad_accum;
  config.pipeline.microbatches = batch.microbatches;
}

// The step of the newest committed checkpoint in checkpoint.dir; -1 with none.
long newest_checkpoint(const JobConfig& config) {
  if (config.checkpoint.dir.empty()) return -1;
  auto steps = checkpoint::committed_steps(config.checkpoint.dir);
  return steps && !steps->empty() ? steps->front() : -1;
}

void log_lines(const std::vector<PolicyLine>& lines) {
  auto log = monitor::logger("job");
  for (const PolicyLine& line : lines) {
    switch (line.level) {
      case PolicyLine::Level::info: log->info(line.text); break;
      case PolicyLine::Level::warn: log->warn(line.text); break;
      case PolicyLine::Level::error: log->error(line.text); break;
    }
  }
}

// "h1 slots=1": a node's host-file line, as the shell names a node left out.
std::string host_line(const NodeShape& node) { return node.host + " slots=" + std::to_string(node.slots); }

// The job across its attempts: the host file's nodes (`configured`), which of them this attempt
// runs (`running`, by index there, in node order) and on which hosts (`lines`: a node moved to a
// spare line stays there), the spare lines the job knows of, its configuration (the batch a shrink
// or grow split anew) and its restart history.
struct JobNodes {
  std::vector<NodeShape> configured;
  std::vector<int> running;
  std::vector<NodeShape> lines;
  std::vector<NodeShape> spare_lines;
  JobConfig config;

  // The host file's nodes that `running` leaves out, by index there.
  std::vector<int> left_out() const {
    std::vector<int> out;
    for (std::size_t i = 0; i < configured.size(); ++i)
      if (std::find(running.begin(), running.end(), static_cast<int>(i)) == running.end())
        out.push_back(static_cast<int>(i));
    return out;
  }
};

// The nodes a grow brings back (indices into the host file's nodes) and the batch split for the
// job then.
struct GrownJob {
  std::vector<int> back;
  BatchShape batch;
};

// A grow: each of `new_spares` takes the first node of `left_out` it has slots for, which moves to
// it (`configured` updated); with no new spare line, every node left out comes back on its own
// line. Nodes still left out keep the global batch as a shrink does.
GrownJob grow(std::vector<NodeShape>& configured, const std::vector<int>& left_out,
              const std::vector<NodeShape>& new_spares, const JobConfig& configured_config) {
  GrownJob grown;
  if (new_spares.empty()) grown.back = left_out;
  for (const NodeShape& spare : new_spares)
    for (int index : left_out) {
      NodeShape& node = configured[static_cast<std::size_t>(index)];
      if (node.slots > spare.slots || std::find(grown.back.begin(), grown.back.end(), index) != grown.back.end())
        continue;
      node.host = spare.host;
      grown.back.push_back(index);
      break;
    }
  const JobShape whole = job_shape(configured, configured_config);
  grown.batch = whole.batch;
  std::vector<int> still_out;
  for (int index : left_out)
    if (std::find(grown.back.begin(), grown.back.end(), index) == grown.back.end()) still_out.push_back(index);
  if (!still_out.empty()) {
    Expected<ShrinkPlan> smaller = plan_shrink(whole, still_out);
    TROUPE_CHECK(smaller.ok(), "a grow leaves out fewer nodes than the shrink that planned this batch");
    grown.batch = smaller->batch;
  }
  return grown;
}

// The job after the nodes it went on without come back while it runs (an in-place grow): the
// running nodes in their order, then those back, so that no running rank is numbered anew.
JobNodes grown_in_place(const JobNodes& job, const std::vector<NodeShape>& new_spares,
                        const JobConfig& configured_config) {
  JobNodes grown = job;
  const GrownJob back = grow(grown.configured, job.left_out(), new_spares, configured_config);
  for (int index : back.back) {
    grown.lines.push_back(grown.configured[static_cast<std::size_t>(index)]);
    grown.running.push_back(index);
  }
  set_batch(grown.config, back.batch);
  grown.config.train.replica_speeds = running_speeds(configured_config, grown.configured, grown.running);
  grown.spare_lines.insert(grown.spare_lines.end(), new_spares.begin(), new_spares.end());
  return grown;
}

// The host-file lines of the nodes `job` leaves out, as the shell names them.
std::vector<std::string> left_out_lines(const JobNodes& job) {
  std::vector<std::string> lines;
  for (int index : job.left_out()) lines.push_back(host_line(job.configured[static_cast<std::size_t>(index)]));
  return lines;
}

int world_of(const std::vector<NodeShape>& lines) {
  int world = 0;
  for (const NodeShape& line : lines) world += line.slots;
  return world;
}

// An attempt's grow in place: when the shell's rejoin (or a new spare line) comes while it runs,
// the job with the left-out nodes back, whose new nodes the starter starts; and whether the job ran
// grown, so that what follows starts from it. The supervisor's thread plans it while the runner
// waits in the attempt.
class InPlaceGrowth {
 public:
  InPlaceGrowth(const JobNodes& job, const JobConfig& configured_config, const RecoveryCounts& counts,
                const JobContactOptions& contact, NodeStarter& starter, ControlPort& control, SpareLineWatch* watch)
      : job_(job), configured_config_(configured_config), counts_(counts), contact_(contact), starter_(starter),
        control_(control), watch_(watch) {}

  // JobPlan::grow_nodes: starts the nodes left out, as the job's attempt `attempt`, after the
  // running ones (AttemptHooks::grow_nodes).
  GrownNodes grow_nodes(int attempt) {
    std::lock_guard lock(mutex_);
    GrownNodes grown;
    if (layout_) {
      grown.why_not = "the nodes left out came back already";
      return grown;
    }
    if (job_.left_out().empty()) {
      grown.why_not = "no node was left out";
      return grown;
    }
    JobNodes layout = grown_in_place(job_, watch_ ? watch_->found() : std::vector<NodeShape>{}, configured_config_);
    const int running_nodes = static_cast<int>(job_.lines.size());
    const int world = world_of(layout.lines);
    // A running node started again later (in place of its lost process) joins the grown job.
    for (int index = 0; index < running_nodes; ++index) starter_.update(index, layout.config, world);
    grown.batch_size = layout.config.train.batch_size;
    grown.grad_accum = layout.config.train.grad_accum;
    grown.replica_speeds = contact_.replica_speeds(layout.config);
    grown.config_hash = contact_.config_hash(layout.config);
    const std::vector<PlacedNode> placed = starter_.place(layout.lines);
    for (const PlacedNode& node : placed) {
      if (node.node_index < running_nodes) continue;
      starter_.add(layout.lines, node.node_index, layout.config,
                   {{recovery_counts_variable, counts_.to_text()}, {env::attempt.name, std::to_string(attempt)}});
      grown.nodes.push_back({node.node_index, node.host, node.slots, node.first_rank});
    }
    layout_ = std::move(layout);
    placed_ = placed;
    return grown;
  }

  // JobPlan::grew: the job runs grown; the shell learns it.
  void grew() {
    std::lock_guard lock(mutex_);
    grown_ = true;
    control_.grew(world_of(layout_->lines), nodes_on_this_machine(placed_), left_out_lines(*layout_));
  }

  // The grown job, once it ran grown.
  std::optional<JobNodes> grown() {
    std::lock_guard lock(mutex_);
    if (!grown_) return std::nullopt;
    return layout_;
  }
  bool has_grown() {
    std::lock_guard lock(mutex_);
    return grown_;
  }
  // The grow's new nodes were started, but the attempt ended before the job ran grown (a node
  // failed during the grow): the nodes the rejoin asked for.
  std::vector<int> interrupted() {
    std::lock_guard lock(mutex_);
    if (!layout_ || grown_) return {};
    return std::vector<int>(layout_->running.begin() + static_cast<std::ptrdiff_t>(job_.running.size()),
                            layout_->running.end());
  }

 private:
  std::mutex mutex_;
  const JobNodes& job_;
  const JobConfig& configured_config_;
  RecoveryCounts counts_;
  const JobContactOptions& contact_;
  NodeStarter& starter_;
  ControlPort& control_;
  SpareLineWatch* watch_;
  std::optional<JobNodes> layout_;
  std::vector<PlacedNode> placed_;
  bool grown_ = false;
};

}  // namespace

RecoveryRoute announce_decision(JobEvents& events, int attempt, const AttemptOutcome& outcome,
                                const RestartDecision& decision, const JobShape& job) {
  using Action = RestartDecision::Action;
  events.emit(attempt, attempt_ended{outcome.exit_code, outcome.failure_kind.value_or(FailureKind::node_exit),
                                     outcome.failed_nodes, outcome.reason});
  const int restarts = decision.next.counts.restarts;
  switch (decision.action) {
    case Action::finish:
      events.emit(attempt, job_ended{0, restarts, decision.next.counts.to_text(), outcome.reason});
      return RecoveryRoute::stop;
    case Action::stop:
      events.emit(attempt, recovery_chosen{RecoveryRoute::stop, 0, outcome.failed_nodes,
                                           decision.recovery.empty() ? "stopping the job" : decision.recovery});
      events.emit(attempt, job_ended{decision.exit_code, restarts, decision.next.counts.to_text(), decision.reason});
      return RecoveryRoute::stop;
    case Action::restart_from_replica:
    case Action::restart_from_checkpoint: {
      const RecoveryRoute route = decision.action == Action::restart_from_replica
                                      ? RecoveryRoute::restart_from_replica
                                      : RecoveryRoute::restart_from_checkpoint;
      events.emit(attempt, recovery_chosen{route, 0, outcome.failed_nodes, decision.recovery});
      return route;
    }
    case Action::shrink: {
      events.emit(attempt, recovery_chosen{RecoveryRoute::shrink, 0, decision.drop, decision.recovery});
      const auto [count, key] = per_replica(job, decision.shrink->batch);
      const int stage_ranks = job.stages * job.shards;
      int kept = 0;
      for (int index : decision.shrink->kept) kept += job.nodes.at(static_cast<std::size_t>(index)).slots;
      events.emit(attempt, layout_changed{RecoveryRoute::shrink, decision.drop, replicas(job), kept / stage_ranks,
                                          decision.shrink->batch.batch_size, count, key});
      return RecoveryRoute::shrink;
    }
    case Action::grow:
      events.emit(attempt, recovery_chosen{RecoveryRoute::grow_by_restart, 0, {}, decision.recovery});
      return RecoveryRoute::grow_by_restart;
  }
  return RecoveryRoute::stop;
}

std::vector<FailureKind> in_place_recoveries(const JobEvents& events, std::int64_t after_seq) {
  std::vector<FailureKind> kinds;
  for (const job_event& event : events.since(after_seq, std::numeric_limits<std::size_t>::max()))
    if (const auto* resumed = caf::get_if<training_resumed>(&event.body))
      if (resumed->route == RecoveryRoute::in_place_from_replica || resumed->route == RecoveryRoute::in_place_rollback)
        kinds.push_back(resumed->kind);
  return kinds;
}

// When a node fails or is lost, the survivors write their memory of the last completed step as a
// checkpoint when the policy allows a rescue (recovery_path.hpp), and every node restarts from the
// newest checkpoint, up to fault.max_restarts times. A node that cannot come back, or a spent
// budget, ends the job unless fault.elastic lets it shrink; a node the job asks to drop is left out
// at once. A failure that repeats with no newer checkpoint to start from ends the job too.
JobEnd run_job(const JobContactOptions& contact, const JobConfig& config, const std::vector<NodeShape>& lines,
               const std::vector<NodeShape>& spares, NodeStarter& starter, ControlPort& control, JobEvents& events) {
  JobNodes job{lines, std::vector<int>(lines.size()), lines, spares, config};
  std::iota(job.running.begin(), job.running.end(), 0);
  RestartHistory history;
  int attempt_number = 0;  // TROUPE_ATTEMPT: the last one this job began
  RecoveryRoute start_route = RecoveryRoute::restart_from_checkpoint;  // how the next attempt resumes
  for (;;) {
    control.set_left_out(left_out_lines(job));
    std::vector<int> left_out_slots;
    for (int index : job.left_out()) left_out_slots.push_back(job.configured[static_cast<std::size_t>(index)].slots);
    std::unique_ptr<SpareLineWatch> watch;
    std::unique_ptr<InPlaceGrowth> growth;
    watch = starter.watch_spares(job.spare_lines, left_out_slots, [&control, &growth] {
      if (growth && growth->has_grown()) return;
      control.order("rejoin");
    });
    const RecoveryShape shape = recovery_shape(job.config, world_of(job.lines), true);
    const RestartOptions options = restart_options(job.config, shape);
    AttemptSetup setup{job.lines, job.config, history.counts, history.attempts_ended, start_route, shape};
    SpareLines spare_lines{job.spare_lines, {}};
    const long checkpoint_at_start = newest_checkpoint(job.config);
    growth = std::make_unique<InPlaceGrowth>(job, config, history.counts, contact, starter, control, watch.get());
    AttemptHooks hooks;
    hooks.grow_nodes = [&](int attempt) { return growth->grow_nodes(attempt); };
    hooks.grew = [&] { growth->grew(); };
    const std::int64_t attempt_began = events.last_seq();
    std::optional<RestartDecision> decision;
    JobNodes after = job;
    int attempt_now = attempt_number;  // in-place replacements begin new attempts
    // Decided while the attempt's monitor still answers the job's event readers.
    hooks.ended = [&](AttemptOutcome& attempt) {
      const std::vector<NodeShape> new_spares = watch ? watch->found() : std::vector<NodeShape>{};
      if (std::optional<JobNodes> grown = growth->grown()) after = std::move(*grown);
      // A node that went to a spare line stays there.
      for (const auto& [index, spare] : spare_lines.taken) {
        after.lines[static_cast<std::size_t>(index)].host = spare.host;
        after.configured[static_cast<std::size_t>(after.running[static_cast<std::size_t>(index)])].host = spare.host;
      }
      attempt.checkpoint_at_start = checkpoint_at_start;
      attempt.checkpoint_at_end = newest_checkpoint(after.config);
      attempt.in_place_recoveries = in_place_recoveries(events, attempt_began);
      control.attempt_ended(attempt.reason);
      const JobShape before = job_shape(after.lines, after.config);
      const RestartOptions now = growth->has_grown()
                                     ? restart_options(after.config, recovery_shape(after.config,
                                                                                    world_of(after.lines), true))
                                     : options;
      decision = decide_restart(history, attempt, now, before);
      log_lines(decision->log);
      start_route = announce_decision(events, attempt_now, attempt, *decision, before);
      const std::vector<int> rejoin_interrupted = growth->interrupted();
      const bool restarting = decision->action == RestartDecision::Action::restart_from_replica ||
                              decision->action == RestartDecision::Action::restart_from_checkpoint;
      if (!rejoin_interrupted.empty()) {
        std::string nodes;
        for (int index : rejoin_interrupted)
          nodes += (nodes.empty() ? "" : ", ") + host_line(after.configured[static_cast<std::size_t>(index)]);
        const std::string instead = restarting ? "the restart brings " + nodes + " back"
                                    : decision->action == RestartDecision::Action::shrink
                                        ? nodes + " stay(s) left out: the job shrinks instead (`rejoin` asks again)"
                                        : nodes + " stay(s) left out: the job stops";
        log_lines({{restarting ? PolicyLine::Level::info : PolicyLine::Level::warn,
                    "rejoin: the grow in place did not finish before the attempt ended; " + instead}});
      }
      if (decision->action == RestartDecision::Action::grow || (restarting && !rejoin_interrupted.empty())) {
        // The new spare lines seen, unless a grow in place took them already.
        const std::vector<NodeShape> spares_seen = growth->has_grown() ? std::vector<NodeShape>{} : new_spares;
        const GrownJob grown = grow(after.configured, after.left_out(), spares_seen, config);
        after.spare_lines.insert(after.spare_lines.end(), spares_seen.begin(), spares_seen.end());
        after.running.insert(after.running.end(), grown.back.begin(), grown.back.end());
        std::sort(after.running.begin(), after.running.end());
        after.lines.clear();
        decision->next.rejoined.clear();
        for (int index : after.running) {
          if (std::find(grown.back.begin(), grown.back.end(), index) != grown.back.end())
            decision->next.rejoined.push_back(static_cast<int>(after.lines.size()));
          after.lines.push_back(after.configured[static_cast<std::size_t>(index)]);
        }
        set_batch(after.config, grown.batch);
        const JobShape grown_shape = job_shape(after.lines, after.config);
        const auto [count, key] = per_replica(grown_shape, grown_shape.batch);
        events.emit(attempt_now, layout_changed{RecoveryRoute::grow_by_restart, grown.back, replicas(before),
                                                   replicas(grown_shape), grown.batch.batch_size, count, key});
      }
    };
    run_attempt(contact, setup, attempt_now, &starter, spare_lines, control, events, hooks);
    growth.reset();
    watch.reset();
    attempt_number = attempt_now + 1;  // a restart, if one follows, is the next attempt
    history = decision->next;
    switch (decision->action) {
      case RestartDecision::Action::finish: return {};
      case RestartDecision::Action::stop: return {decision->exit_code, decision->reason};
      case RestartDecision::Action::shrink: {
        std::vector<NodeShape> kept;
        std::vector<int> still_running;
        for (int index : decision->shrink->kept) {
          kept.push_back(after.lines[static_cast<std::size_t>(index)]);
          still_running.push_back(after.running[static_cast<std::size_t>(index)]);
        }
        after.lines = std::move(kept);
        after.running = std::move(still_running);
        set_batch(after.config, decision->shrink->batch);
        break;
      }
      case RestartDecision::Action::grow:
      case RestartDecision::Action::restart_from_replica:
      case RestartDecision::Action::restart_from_checkpoint: break;
    }
    job = std::move(after);
    job.config.checkpoint.resume = true;
    job.config.train.replica_speeds = running_speeds(config, job.configured, job.running);
  }
}

JobEnd run_external_job(const JobContactOptions& contact, const JobConfig& config, int nodes, ControlPort& control,
                        JobEvents& events) {
  const std::vector<NodeShape> lines(static_cast<std::size_t>(nodes), NodeShape{"started elsewhere", 1});
  // Nodes started elsewhere cannot be started again in place.
  const RecoveryShape shape = recovery_shape(config, nodes, false);
  AttemptSetup setup{lines, config, {}, 0, RecoveryRoute::restart_from_checkpoint, shape};
  SpareLines no_spares;
  AttemptHooks hooks;
  hooks.ended = [&](AttemptOutcome& attempt) {
    control.attempt_ended(attempt.reason);
    events.emit(0, attempt_ended{attempt.exit_code, attempt.failure_kind.value_or(FailureKind::node_exit),
                                 attempt.failed_nodes, attempt.reason});
    events.emit(0, job_ended{attempt.exit_code, 0, RecoveryCounts{}.to_text(), attempt.reason});
  };
  int attempt = 0;
  const AttemptOutcome ended = run_attempt(contact, setup, attempt, nullptr, no_spares, control, events, hooks);
  return {ended.exit_code, ended.exit_code == 0 ? std::string() : ended.reason};
}

}  // namespace troupe::actors
