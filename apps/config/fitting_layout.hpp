#pragma once
// The layout to name when a job does not fit its memory per rank. The layout planner
// (schedules::plan_layouts) makes every layout of the job's ranks for the job's global batch and
// sequence length, context shards among them (a sequence too long for one rank splits over several);
// of those the runtime can run (nothing `not built`, and the config they give
// passes resolve()) and that fit, the one that changes the fewest of the job's layout keys, the
// fastest predicted among equals, and of those the one with the most memory (nearest the job's
// own): the smallest edit to the config that makes it fit, and the best it buys. When none
// fits, the runnable one that needs the least memory, to say how far off the job is.

#include <optional>
#include <string>
#include <vector>

#include "apps/config/job_config.hpp"
#include "apps/config/job_layout.hpp"

namespace troupe::apps {

// The search is skipped beyond these: its schedules grow with the micro-batches of a step, and the
// pipeline split with the square of the layers; a job this large is refused without a suggestion.
inline constexpr int max_searched_batch = 4096;  // sequences per step
inline constexpr int max_searched_layers = 1024;
// Context shards per replica searched: splitting each sequence over up to this many ranks.
inline constexpr int max_searched_context_shards = 64;

struct FittingLayout {
  bool fits = false;                 // else: no runnable layout fits, and this is the smallest
  std::vector<std::string> changes;  // the keys to set, "train.zero 2", in key-table order
  double planned_bytes = 0;          // the planner's memory per rank for it
};

// The layout for `planned_budget` bytes per rank of the planner's figure. nullopt when the search is
// skipped (above the limits) or no layout of the ranks can run.
std::optional<FittingLayout> fitting_layout(const ResolvedJob& job, const JobRanks& ranks, double planned_budget);

}  // namespace troupe::apps
