#include "actors/supervision/restart_policy.hpp"

#include <algorithm>

#include "actors/supervision/recovery_path.hpp"

namespace troupe::actors {
namespace {

// "node 1 (host), node 2 (other)".
std::string node_list(const std::vector<int>& nodes, const JobShape& job) {
  std::string text;
  for (int n : nodes) {
    text += (text.empty() ? "node " : ", node ") + std::to_string(n);
    if (n >= 0 && n < static_cast<int>(job.nodes.size()))
      text += " (" + job.nodes[static_cast<std::size_t>(n)].host + ")";
  }
  return text;
}

// " after step 40", or "" when the attempt started from no checkpoint.
std::string after_step(long step) { return step < 0 ? "" : " after step " + std::to_string(step); }

// The failure's kind and nodes, in an order that does not depend on which report came first.
FailureSignature signature(FailureKind kind, std::vector<int> nodes) {
  std::sort(nodes.begin(), nodes.end());
  return {kind, std::move(nodes)};
}

PolicyLine info(std::string text) { return {PolicyLine::Level::info, std::move(text)}; }
PolicyLine warn(std::string text) { return {PolicyLine::Level::warn, std::move(text)}; }
PolicyLine error(std::string text) { return {PolicyLine::Level::error, std::move(text)}; }

}  // namespace

AttemptOutcome attempt_outcome(const job_outcome_msg& o) {
  AttemptOutcome a;
  a.exit_code = o.exit_code;
  a.reason = o.reason;
  a.restartable = o.exit_code == 1 || !o.drop_nodes.empty();
  if (o.exit_code != 0 && o.failure_kind != FailureKind::node_exit) a.failure_kind = o.failure_kind;
  a.failed_nodes = o.failed_nodes;
  a.rescued_step = o.rescued_step;
  a.drop_nodes = o.drop_nodes;
  a.rejoin = o.rejoin;
  return a;
}

RestartOptions restart_options(const JobConfig& config, const RecoveryShape& shape) {
  return {config.checkpoint.dir, config.fault.max_restarts, config.fault.elastic, shape};
}

std::string running_speeds(const JobConfig& configured_config, const std::vector<NodeShape>& configured,
                           const std::vector<int>& running) {
  const std::string& listed = configured_config.train.replica_speeds;
  if (listed.empty()) return {};
  std::vector<std::string> speeds;  // each configured replica's, as written
  for (std::size_t from = 0;;) {
    const std::size_t comma = listed.find(',', from);
    speeds.push_back(listed.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  const int ranks_per_replica = configured_config.pipeline.stages * configured_config.tensor.shards;
  std::vector<int> first_rank(configured.size(), 0);  // of each configured line
  for (std::size_t i = 1; i < configured.size(); ++i) first_rank[i] = first_rank[i - 1] + configured[i - 1].slots;
  std::string kept;
  int rank = 0;  // in the running job
  for (int index : running)
    for (int slot = 0; slot < configured[static_cast<std::size_t>(index)].slots; ++slot, ++rank)
      if (rank % ranks_per_replica == 0)
        kept += (kept.empty() ? "" : ",") +
                speeds.at(
                    static_cast<std::size_t>((first_rank[static_cast<std::size_t>(index)] + slot) / ranks_per_replica));
  return kept;
}

Expected<ShrinkPlan> plan_shrink(const JobShape& job, const std::vector<int>& drop) {
  const int stages = job.stages * job.shards;  // ranks per replica
  int old_world = 0, new_world = 0;
  ShrinkPlan plan;
  plan.batch = job.batch;
  for (std::size_t i = 0; i < job.nodes.size(); ++i) {
    old_world += job.nodes[i].slots;
    if (std::find(drop.begin(), drop.end(), static_cast<int>(i)) != drop.end()) continue;
    plan.kept.push_back(static_cast<int>(i));
    new_world += job.nodes[i].slots;
  }
  if (new_world == 0) return Error{"no node would be left"};
  if (new_world % stages != 0)
    return Error{std::to_string(new_world) + " workers would be left, which pipeline.stages " + std::to_string(job.stages) +
                 (job.shards > 1 ? " × tensor.shards " + std::to_string(job.shards) : "") + " does not divide"};
  const int old_dp = old_world / stages, new_dp = new_world / stages;
  int& per_replica = job.stages > 1 ? plan.batch.microbatches : plan.batch.grad_accum;
  const std::string per_replica_key = job.stages > 1 ? "pipeline.microbatches" : "train.grad_accum";
  const std::string shrinking =
      "shrinking from " + std::to_string(old_dp) + " to " + std::to_string(new_dp) + " data-parallel replica(s): ";
  if (per_replica * old_dp % new_dp == 0) {
    per_replica = per_replica * old_dp / new_dp;
    plan.log_line = shrinking + per_replica_key + " = " + std::to_string(per_replica) + " keeps the global batch";
  } else if (plan.batch.batch_size * old_dp % new_dp == 0) {
    plan.batch.batch_size = plan.batch.batch_size * old_dp / new_dp;
    plan.log_line =
        shrinking + "train.batch_size = " + std::to_string(plan.batch.batch_size) + " keeps the global batch";
  } else {
    return Error{"the global batch (" + std::to_string(old_dp) + " replicas x train.batch_size " +
                 std::to_string(plan.batch.batch_size) + " x " + per_replica_key + " " + std::to_string(per_replica) +
                 ") cannot be split over " + std::to_string(new_dp) + " replicas"};
  }
  return plan;
}

RestartDecision decide_restart(const RestartHistory& history, const AttemptOutcome& attempt,
                               const RestartOptions& options, const JobShape& job) {
  using Action = RestartDecision::Action;
  RestartDecision d;
  d.next = history;
  RecoveryCounts& counts = d.next.counts;
  // What the attempt recovered from in place counts as well, so a restarted node starts there.
  for (FailureKind kind : attempt.in_place_recoveries) {
    ++counts.failures[kind];
    ++counts.recoveries[RecoverySource::in_place];
  }
  if (attempt.exit_code == 0 && attempt.drop_nodes.empty()) {
    if (history.attempts_ended > 0)
      d.log.push_back(
          info("job finished after " + std::to_string(counts.restarts) + " restart(s); " + counts.to_text()));
    return d;
  }
  if (attempt.rejoin) {
    // Not a failure: the restart the shell asked for, from the checkpoint its order wrote. A node
    // that fails again before joining is then one that cannot come back, as after any restart.
    d.action = Action::grow;
    d.next.restarted_after.reset();
    ++d.next.attempts_ended;
    ++counts.recoveries[RecoverySource::grow];
    d.recovery = "restarting every node with the nodes the job went on without (the shell's rejoin), from the "
                 "newest checkpoint in " + options.checkpoint_dir;
    d.log.push_back(info("recovery: " + d.recovery));
    return d;
  }
  const FailureKind kind = attempt.failure_kind         ? *attempt.failure_kind
                           : attempt.drop_nodes.empty() ? FailureKind::node_exit
                                                        : FailureKind::drained;
  // Nodes that never join are bad input at first, but after a restart one of ours did not come back.
  const bool restarted = history.attempts_ended > 0;
  const bool restartable = attempt.restartable || (kind == FailureKind::join_timeout && restarted);
  if (restartable) ++counts.failures[kind];
  // A node that fails again before joining, after a restart, will not come back by restarting.
  const bool cannot_come_back = restarted && (kind == FailureKind::start_failed || kind == FailureKind::join_timeout) &&
                                !attempt.failed_nodes.empty();
  // The failure the last restart answered, and this attempt got no further than where it started:
  // a restart from the same place meets the same failure.
  const long reached = std::max(attempt.checkpoint_at_end, attempt.rescued_step);
  const bool repeat = restartable && !cannot_come_back &&
                      history.restarted_after == signature(kind, attempt.failed_nodes) &&
                      reached <= attempt.checkpoint_at_start;
  const bool budget_left = counts.restarts < options.max_restarts;
  const bool can_restart = !options.checkpoint_dir.empty();
  std::vector<int> drop = attempt.drop_nodes;
  std::string why_dropped = "the job asked to drop it";
  const bool rejoin_failed =
      cannot_come_back && std::all_of(attempt.failed_nodes.begin(), attempt.failed_nodes.end(), [&](int node) {
        return std::find(history.rejoined.begin(), history.rejoined.end(), node) != history.rejoined.end();
      });
  d.next.rejoined.clear();
  if (drop.empty() && restartable && (options.elastic || rejoin_failed) && (cannot_come_back || !budget_left)) {
    drop = attempt.failed_nodes;
    why_dropped = rejoin_failed ? "it could not rejoin" : cannot_come_back ? "it cannot come back" : "the restart budget is spent";
  }
  const std::string failure =
      "failure " + std::to_string(history.attempts_ended + 1) + " (" + std::string(to_string(kind)) + ")" +
      (attempt.failed_nodes.empty() ? "" : " of " + node_list(attempt.failed_nodes, job)) + ": " + attempt.reason;

  if (!restartable || !can_restart || (drop.empty() && (!budget_left || cannot_come_back || repeat))) {
    d.action = Action::stop;
    d.exit_code = attempt.exit_code;
    d.reason = attempt.reason;
    if (restartable && !can_restart && options.max_restarts > 0)
      d.log.push_back(warn("not restarting: no checkpoint.dir to restart from"));
    if (restartable && can_restart) {
      d.reason += " (after " + std::to_string(counts.restarts) + " restart(s)";
      if (cannot_come_back) d.reason += "; " + node_list(attempt.failed_nodes, job) + " cannot come back";
      if (repeat)
        d.reason += "; the same failure again, and no checkpoint" + after_step(attempt.checkpoint_at_start) +
                    " was written: another restart would repeat it)";
      else
        d.reason += options.elastic ? ")" : "; fault.elastic is off)";
      d.recovery = "stopping the job: " + counts.to_text();
      d.log.push_back(error(failure + "; recovery: " + d.recovery));
    }
    return d;
  }

  RecoverySource source;
  if (!drop.empty()) {
    const std::string dropped = node_list(drop, job);
    auto shrunk = plan_shrink(job, drop);
    if (!shrunk) {
      d.action = Action::stop;
      d.exit_code = std::max(attempt.exit_code, 1);
      d.reason = attempt.reason + "; cannot go on without " + dropped + ": " + shrunk.error().message;
      return d;
    }
    d.action = Action::shrink;
    d.drop = drop;
    d.why_dropped = why_dropped;
    d.log.push_back(info(shrunk->log_line));
    d.recovery = "restarting every node without " + dropped + " (" + why_dropped + "), " +
                 std::to_string(shrunk->kept.size()) + " node(s) left, from the newest checkpoint in " +
                 options.checkpoint_dir;
    d.log.push_back(warn(failure + "; recovery: " + d.recovery));
    d.shrink = std::move(*shrunk);
    d.next.restarted_after.reset();
    source = RecoverySource::shrink;
  } else {
    ++counts.restarts;
    d.next.restarted_after = signature(kind, attempt.failed_nodes);
    const bool rescued = attempt.rescued_step >= 0;
    d.action = rescued ? Action::restart_from_replica : Action::restart_from_checkpoint;
    source = rescued ? RecoverySource::replica : RecoverySource::checkpoint;
    std::string from = "the newest checkpoint";
    if (rescued)
      from = "the survivors' rescue snapshot of step " + std::to_string(attempt.rescued_step) + " (no steps lost)";
    else if (const RescueChoice choice = rescue_choice(options.shape); !choice.allowed)
      from += " (no rescue: " + choice.why_not + ")";
    d.recovery = "restarting every node from " + from + " in " + options.checkpoint_dir + " (restart " +
                 std::to_string(counts.restarts) + " of " + std::to_string(options.max_restarts) + ")";
    d.log.push_back(warn(failure + "; recovery: " + d.recovery));
  }
  ++counts.recoveries[source];
  ++d.next.attempts_ended;
  return d;
}

std::string_view to_string(RestartDecision::Action action) {
  switch (action) {
    case RestartDecision::Action::finish: return "finish";
    case RestartDecision::Action::stop: return "stop";
    case RestartDecision::Action::restart_from_replica: return "restart from replica";
    case RestartDecision::Action::restart_from_checkpoint: return "restart from checkpoint";
    case RestartDecision::Action::shrink: return "shrink";
    case RestartDecision::Action::grow: return "grow";
  }
  return "unknown";
}

}  // namespace troupe::actors
