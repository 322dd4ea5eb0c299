#include "apps/config/fitting_layout.hpp"

#include <algorithm>
#include <tuple>

#include "apps/config/resolve.hpp"

namespace troupe::apps {
namespace {

bool runs(const schedules::PlannedLayout& planned, const JobConfig& config) {
  return planned.not_built.empty() && resolve(config).ok();
}

}  // namespace

std::optional<FittingLayout> fitting_layout(const ResolvedJob& job, const JobRanks& ranks, double planned_budget) {
  const schedules::Workload workload = job_workload(job, ranks.ranks);
  if (workload.global_batch > max_searched_batch || job.model.n_layer > max_searched_layers) return std::nullopt;
  // The planner takes only a positive size; with none left, every layout is rejected.
  const schedules::Cluster cluster = job_cluster(ranks, std::max(planned_budget, 1.0));
  auto plan = schedules::plan_layouts(workload, cluster, std::min(ranks.ranks, max_searched_context_shards));
  if (!plan) return std::nullopt;

  // Fewest keys changed, then fastest, then the most memory: of layouts alike in keys and time
  // (without micro-batch sums, micro-batch sizes take the same time), the one nearest the job's own.
  std::vector<FittingLayout> fitting;
  std::vector<JobConfig> configs;
  for (const schedules::PlannedLayout& p : plan->feasible) {
    configs.push_back(with_layout(job.config, p.layout));
    fitting.push_back({true, changed_layout_keys(job.config, configs.back()), p.memory.total()});
  }
  std::vector<std::size_t> order(fitting.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double time_a = plan->feasible[a].time.total, time_b = plan->feasible[b].time.total;
    return std::tuple(fitting[a].changes.size(), time_a, -fitting[a].planned_bytes, a) <
           std::tuple(fitting[b].changes.size(), time_b, -fitting[b].planned_bytes, b);
  });
  for (std::size_t i : order)  // the job's own layout, with no change, is not one to name
    if (!fitting[i].changes.empty() && runs(plan->feasible[i], configs[i])) return fitting[i];

  // None fits: the runnable one that needs the least memory (the rejected come least memory first).
  for (const schedules::PlannedLayout& p : plan->rejected) {
    const JobConfig config = with_layout(job.config, p.layout);
    if (runs(p, config)) return FittingLayout{false, changed_layout_keys(job.config, config), p.memory.total()};
  }
  return std::nullopt;
}

}  // namespace troupe::apps
