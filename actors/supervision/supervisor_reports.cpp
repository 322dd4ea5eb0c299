// How the job supervisor names nodes, ranks and what they wait for, in its log lines, its reports
// and the reasons it gives (job_supervisor_state.hpp declares these).

#include <algorithm>
#include <cstdio>

#include "actors/supervision/job_supervisor_state.hpp"
#include "monitor/list_text.hpp"
#include "monitor/log.hpp"

namespace troupe::actors::supervision {

std::string describe(const join_msg& m) {
  return "node " + std::to_string(m.node_index) + " (" + m.host + ", pid " + std::to_string(m.pid) + ")";
}

int world_size(const JobPlan& plan) {
  int world = 0;
  for (const PlannedNode& n : plan.nodes) world += n.slots;
  return world;
}

comm::Grid job_grid(const JobPlan& plan) {
  const int world = world_size(plan);
  const int stages = std::max(1, plan.pipeline_stages), shards = std::max(1, plan.tensor_shards);
  return {std::max(1, world / (stages * shards)), stages, shards};
}

bool has_roles(const JobPlan& plan) { return plan.pipeline_stages > 1 || plan.tensor_shards > 1; }

// "pipeline stage 1 of replica 0", "tensor shard 1 of replica 0" or "pipeline stage 1, tensor
// shard 0 of replica 1" for `rank` in a job with stages or shards, "" otherwise.
std::string grid_role(const job_supervisor_state& st, int rank) {
  if (!has_roles(st.plan)) return {};
  const comm::Grid grid = job_grid(st.plan);
  const comm::GridCoord c = comm::grid_coord(grid, rank);
  std::string role;
  if (grid.pp > 1) role = "pipeline stage " + std::to_string(c.pp);
  if (grid.tp > 1) role += (role.empty() ? "" : ", ") + std::string("tensor shard ") + std::to_string(c.tp);
  return role + " of replica " + std::to_string(c.dp);
}

// describe(m), plus "; pipeline stage 1 of replica 0" (one per rank of the node) in a pipeline job.
std::string describe(const job_supervisor_state& st, const join_msg& m) {
  if (!has_roles(st.plan)) return describe(m);
  const PlannedNode& planned = st.plan.nodes.at(m.node_index);
  std::string roles;
  for (int rank = planned.first_rank; rank < planned.first_rank + planned.slots; ++rank)
    roles += (roles.empty() ? "" : ", ") + grid_role(st, rank);
  std::string text = describe(m);
  text.insert(text.size() - 1, "; " + roles);
  return text;
}

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

// "rank 1 (node 1 (host, pid 7), heard from 0.4 s ago) in step 3, waiting 2.0 s for X", or
// "..., not waiting for any message".
std::string describe_activity(const job_supervisor_state& st, int node_index, const worker_beat& beat,
                              Clock::time_point now) {
  const join_msg& m = st.joined.at(node_index);
  const node_liveness& live = st.liveness.at(node_index);
  std::string role = grid_role(st, beat.rank);
  std::string text = "rank " + std::to_string(beat.rank) + " (" + describe(m) + (role.empty() ? "" : "; " + role) +
                     ", heard from " + seconds_text(now - live.last_heartbeat) + " ago)";
  // A beat between two units of work names none: the steps done say where the rank was.
  text += !beat.activity.empty() ? " in " + beat.activity
          : beat.steps_done > 0  ? " between steps, " + std::to_string(beat.steps_done) + " done"
                                 : " before its first step";
  if (beat.waiting_for.empty()) return text + ", not waiting for any message";
  char since[32];
  std::snprintf(since, sizeof since, "%.1f", beat.waiting_seconds);
  return text + ", waiting " + since + " s for " + beat.waiting_for;
}

// Why node `index`, last heard from at `live.last_heartbeat`, counts as silent at `now`.
std::string silence(const job_supervisor_state& st, int index, const node_liveness& live, Clock::time_point now) {
  BoundedList last_known(described_ranks_of_silent_node);
  for (const worker_beat& beat : live.workers)
    last_known.add_described([&] { return describe_activity(st, index, beat, now); });
  // Silence alone cannot tell a cut link from a stopped or hung process: say only what is known.
  return describe(st, st.joined.at(index)) + " sent no heartbeat for " + seconds_text(now - live.last_heartbeat) +
         " (limit " + seconds_text(st.plan.heartbeat_timeout) +
         "), reason unknown (unreachable, stopped or hung); last known " + last_known.text("ranks of the node");
}

// Why the job must stop now, or "" while every running node beats and its workers progress;
// `silent_nodes` receives the nodes that stopped beating, when that is why.
std::string watchdog_verdict(const job_supervisor_state& st, Clock::time_point now, std::vector<int>& silent_nodes) {
  struct running_worker {
    int node_index;
    const worker_beat* beat;
  };
  std::vector<running_worker> running;
  bool stalled = false;
  Clock::duration longest{0};
  // Every silent node, so that nodes stopped together are answered together; the first described.
  BoundedList silent(described_silent_nodes);
  std::vector<int> silent_undescribed;
  for (const auto& [index, live] : st.liveness) {
    if (st.done.count(index)) continue;
    if (now - live.last_heartbeat > st.plan.heartbeat_timeout) {
      silent_nodes.push_back(index);
      if (silent.full()) silent_undescribed.push_back(index);
      silent.add_described([&] { return silence(st, index, live, now); });
      continue;
    }
    for (const worker_beat& beat : live.workers) {
      running.push_back({index, &beat});
      const Clock::duration worker_idle = std::min(idle(live, beat, now), now - st.resumed_at);
      longest = std::max(longest, worker_idle);
      if (st.plan.step_timeout.count() > 0 && worker_idle > st.plan.step_timeout) stalled = true;
    }
  }
  if (!silent_nodes.empty()) return silent.text("silent nodes (" + nodes_text(silent_undescribed) + ")");
  if (!stalled || st.paused || st.recovery) return {};
  // One stuck rank stalls the others in their next collective, so every running rank is
  // listed. Ranks waiting for a message are victims; one that is not is the likely culprit.
  std::stable_partition(running.begin(), running.end(),
                        [](const running_worker& w) { return w.beat->waiting_for.empty(); });
  BoundedList ranks(described_ranks);
  for (const running_worker& w : running)
    ranks.add_described([&] { return describe_activity(st, w.node_index, *w.beat, now); });
  return "no progress for " + seconds_text(longest) + " (limit " + seconds_text(st.plan.step_timeout) +
         "): " + ranks.text("ranks");
}

// Names, once per rank, a rank the others keep waiting for; the job goes on.
void report_straggler(job_supervisor_state& st) {
  const auto straggler = st.stragglers.find();
  if (!straggler || !st.stragglers_reported.insert(straggler->rank).second) return;
  std::string where;
  int node = -1;
  for (const auto& [index, live] : st.liveness)
    for (const worker_beat& w : live.workers)
      if (w.rank == straggler->rank) {
        where = describe(st, st.joined.at(index));
        node = index;
      }
  emit(st, straggler_named{straggler->rank, node, straggler->waiting_share, straggler->others_waiting_share});
  monitor::logger("job")->warn(
      "straggler: rank {} ({}) keeps the others waiting: it was waiting for a message in {:.0f}% of its recent "
      "heartbeats, every other rank in {:.0f}% or more; the job goes on",
      straggler->rank, where, 100 * straggler->waiting_share, 100 * straggler->others_waiting_share);
}

// A rank whose connection broke reports the peer at the other end as lost; when every node is
// alive that peer may be a victim too (a stalled rank's peers give up on it and close). The last
// heartbeats tell more: when every other rank was waiting for a message and one was not, that
// one is the likely cause. Returns ", the likely cause: rank …; last heartbeats: …", or "" when
// the heartbeats do not single one out.
std::string likely_cause_of_comm_failure(const job_supervisor_state& st, Clock::time_point now) {
  const node_liveness* culprit_live = nullptr;
  const worker_beat* culprit = nullptr;
  int culprit_node = -1;
  BoundedList waiting(described_ranks);
  for (const auto& [index, live] : st.liveness) {
    for (const worker_beat& beat : live.workers) {
      if (!beat.waiting_for.empty()) {
        waiting.add_described([&] { return describe_activity(st, index, beat, now); });
        continue;
      }
      if (culprit) return {};  // two ranks not waiting: nothing singles one out
      culprit_live = &live, culprit = &beat, culprit_node = index;
    }
  }
  if (!culprit || waiting.empty()) return {};
  return ", the likely cause: " + describe_activity(st, culprit_node, *culprit, now) + ", no progress for " +
         seconds_text(idle(*culprit_live, *culprit, now)) + " while every other rank waited (" + waiting.text("ranks") +
         ")";
}

std::string nodes_text(const std::vector<int>& nodes) { return monitor::numbered("node", nodes); }

Clock::duration idle(const node_liveness& live, const worker_beat& worker, Clock::time_point now) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(worker.idle_seconds)) +
         (now - live.last_heartbeat);
}

}  // namespace troupe::actors::supervision
