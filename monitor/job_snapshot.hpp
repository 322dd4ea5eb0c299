#pragma once
// What the job's web page and its /metrics show (docs/web.md): the job process's view of every
// rank, the training curves, the timeline of failures, recoveries, grows and checkpoints, and each
// node process's memory by kind, as of one moment. Plain data: the job process fills it from the
// job supervisor's view and the job's events (actors/control/web_snapshot.hpp); monitor/ renders it.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "monitor/metrics.hpp"  // MemoryFigure

namespace troupe::monitor {

enum class RankState : std::uint8_t {
  starting,    // its node has not joined yet, or it has not reported a step
  training,    // finishing steps
  waiting,     // waiting for a message (RankTile::waiting_for says which)
  straggling,  // the rank the others keep waiting for (the job's straggler watch named it)
  lost,        // its node or worker failed; the job has not chosen a recovery yet
  recovering,  // a recovery is under way
  done,        // its node finished
};
inline constexpr RankState rank_states[] = {RankState::starting,   RankState::training, RankState::waiting,
                                            RankState::straggling, RankState::lost,     RankState::recovering,
                                            RankState::done};
std::string_view to_string(RankState state);

// One axis of the job's grid of ranks (dp, pp, tp, ...) and its size.
struct GridAxis {
  std::string name;
  int size = 1;
};

struct RankTile {
  int rank = 0;
  int node = -1;
  std::vector<int> at;  // its place in the grid: a coordinate on each of JobSnapshot::axes
  RankState state = RankState::starting;
  std::int64_t steps_done = 0;
  std::string activity;           // "step 12"
  std::string waiting_for;        // what it waits for, when waiting
  double heard_seconds_ago = -1;  // since its node's last heartbeat; -1: never
  int recoveries = 0;             // times it was lost and training resumed with it
  double state_seconds = -1;      // lost or recovering: for how long so far; -1 otherwise
};

struct CurvePoint {
  std::int64_t step = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_second = 0;
  std::optional<double> val_loss;  // the validation's after the step, where one ran
};

// A failure, recovery, grow, shrink or checkpoint: `kind` is its job event's name.
struct TimelineEntry {
  double unix_seconds = 0;
  int attempt = 0;
  std::string kind;
  std::string route;       // the recovery's path, where it has one
  double seconds = 0;      // how long it took, where known
  std::int64_t bytes = 0;  // state moved, where any
  std::string text;        // the event as one line
};

struct NodeMemory {
  int node = 0;
  std::string host;
  std::vector<MemoryFigure> memory;  // by kind, host then device
  std::int64_t resident_bytes = 0;
};

struct JobSnapshot {
  double unix_seconds = 0;  // when it was taken
  int attempt = 0;
  std::vector<GridAxis> axes;  // the grid's axes, as the page lists them
  std::int64_t step = 0;  // the newest step any rank finished
  std::int64_t total_steps = 0;
  double loss = 0;
  double tokens_per_second = 0;
  double last_checkpoint_unix_seconds = 0;         // 0: none committed yet
  std::map<std::string, long> recoveries_by_path;  // training_resumed events by route
  std::vector<RankTile> ranks;                     // by rank
  std::vector<CurvePoint> curve;                   // oldest first
  std::vector<TimelineEntry> timeline;             // oldest first
  std::vector<NodeMemory> memory;                  // by node
};

}  // namespace troupe::monitor
