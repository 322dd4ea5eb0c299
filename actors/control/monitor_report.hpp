#pragma once
// What the monitor actor answers the shell with, as text: status, nodes, workers, top, loss,
// experts, and the trace document. Pure functions of the job supervisor's view, the steps remembered from it
// and the job's events, so each reads the same whichever shell asks.

#include <cstdint>
#include <map>
#include <string>

#include "actors/control/monitor_actor.hpp"
#include "actors/control/rank_rows.hpp"
#include "actors/job_events.hpp"
#include "actors/local_messages.hpp"

namespace troupe::actors {

// Each rank's recent steps: rank → step → record.
using StepHistory = std::map<int, std::map<std::int64_t, step_beat>>;
// Adds the steps the view's heartbeats carry; keeps each rank's newest 4096, the experts'
// token-slots only in its newest.
void remember_steps(StepHistory& history, const job_view_msg& view);

struct PauseState {
  bool paused = false;
  std::int64_t after_step = -1;
  double seconds = 0;  // since the pause was ordered
};

// `events`: the job's events so far (its recoveries and grows are listed from them).
std::string status_text(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                        const PauseState& pause, const std::vector<job_event>& events);
std::string nodes_text(const job_view_msg& view);
// `workers` and `top` show the ranks `selection` names, or past every_rank_rows ranks a summary
// (actors/control/rank_rows.hpp); an error for a node or rank the job does not have.
Expected<std::string> workers_text(const MonitorPlan& plan, const job_view_msg& view,
                                   const RankSelection& selection = {});
// Every node process's memory by kind (now and peak, from its last heartbeat) beside its resident
// set and the resident set's peak.
std::string memory_text(const job_view_msg& view);
Expected<std::string> top_text(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                               const PauseState& pause, const RankSelection& selection = {});
// Rank 0's recent losses as a sparkline `width` wide, with the steps, min, max and last.
std::string loss_text(const StepHistory& history, std::size_t width);
// A model with experts: per MoE block, each expert's share of the token-slots of every rank's
// newest step that carries its routing, and the most loaded expert's slots over the mean.
std::string experts_text(const StepHistory& history);

// The newest step every rank of the view has a record of; -1 when some rank has none.
std::int64_t common_step(const job_view_msg& view, const StepHistory& history);
// Chrome trace JSON (docs/formats/chrome-trace.md) of steps [first, last]: a track per rank,
// grouped under its node, a "step N" span per step with its loss.
std::string trace_json(const job_view_msg& view, const StepHistory& history, std::int64_t first,
                       std::int64_t last);

}  // namespace troupe::actors
