#include "actors/worker/outer_syncs.hpp"

#include <chrono>
#include <map>

#include <spdlog/fmt/fmt.h>

#include "compute/model/gpt.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {

compute::OuterOptions outer_options(const ResolvedJob& job) {
  const TrainOptions& t = job.config.train;
  const std::vector<compute::ParameterUnit> units = compute::GPT::parameter_units(job.model);
  return {t.diloco_steps,
          t.outer_lr,
          t.outer_momentum,
          t.diloco_precision,
          compute::outer_fragments(units, t.diloco_fragments, t.diloco_steps),
          t.diloco_overlap};
}

namespace {

// The job's options with `fragments` in place of the whole model's.
compute::OuterOptions options_for(const ResolvedJob& job, std::vector<compute::OuterFragment> fragments) {
  compute::OuterOptions options = outer_options(job);
  options.fragments = std::move(fragments);
  return options;
}

}  // namespace

OuterSyncs::OuterSyncs(const ResolvedJob& job, const compute::Tensor& params,
                       std::vector<compute::OuterFragment> fragments, compute::IslandGroup islands, int rank,
                       monitor::WorkerMetrics* metrics)
    : outer_(params, options_for(job, std::move(fragments))),
      islands_(std::move(islands)),
      rank_(rank),
      total_steps_(job.config.train.steps),
      model_fragments_(job.config.train.diloco_fragments),
      metrics_(metrics) {}

void OuterSyncs::record_into(monitor::TraceRecorder& recorder, monitor::TraceTrack track, std::string name) {
  trace_ = &recorder;
  track_ = track;
  recorder.name_track(track, std::move(name));
  sync_started_us_.assign(outer_.fragments().size(), 0);
  sync_started_after_.assign(outer_.fragments().size(), -1);
}

std::string OuterSyncs::describe(int ranks_per_island) const {
  const compute::OuterOptions& o = outer_.options();
  std::string text =
      fmt::format(", {} island(s) of {}, outer step every {} steps", islands_.count, ranks_per_island, o.every);
  if (model_fragments_ > 1)
    text += fmt::format(" in {} fragments, {} steps apart", model_fragments_, o.every / model_fragments_);
  if (o.overlap > 0) text += fmt::format(", each applied {} step(s) after its sync", o.overlap);
  if (o.precision != compute::OuterPrecision::f32)
    text += fmt::format(", pseudo-gradients in {}", compute::outer_precision_name(o.precision));
  return text;
}

bool OuterSyncs::due(long steps) const {
  return !outer_.landing(steps, total_steps_).empty() || !outer_.starting(steps, total_steps_).empty();
}

void OuterSyncs::after_step(long steps, compute::Tensor& params, compute::StepResult& result) {
  const double outer_start_us = trace_ ? monitor::trace_clock_us() : 0;
  const std::vector<compute::OuterFragment>& runs = outer_.fragments();
  if (trace_)
    for (int f : outer_.starting(steps, total_steps_)) {
      sync_started_us_[static_cast<std::size_t>(f)] = outer_start_us;
      sync_started_after_[static_cast<std::size_t>(f)] = steps;
    }
  const std::vector<int> landed = outer_.after_step(steps, total_steps_, params, islands_);
  const double outer_end_us = trace_ ? monitor::trace_clock_us() : 0;
  // A model fragment may be several runs of this rank's buffer (a stage's chunks, a tied copy):
  // each landed fragment is one sync, its runs' bytes together.
  std::vector<int> fragments;
  std::map<int, std::vector<int>> runs_of;
  for (int r : landed) {
    const int fragment = runs[static_cast<std::size_t>(r)].fragment;
    if (!runs_of.count(fragment)) fragments.push_back(fragment);
    runs_of[fragment].push_back(r);
  }
  const compute::OuterPrecision precision = outer_.options().precision;
  const double k = outer_.last_islands();  // fewer than K where islands were left out
  for (int fragment : fragments) {
    ++fragment_syncs_;
    double bytes = 0;
    for (int r : runs_of[fragment])
      bytes +=
          static_cast<double>(runs[static_cast<std::size_t>(r)].size()) * compute::outer_precision_bytes(precision);
    // The pseudo-gradients on the wire: a ring all-reduce over K ranks sends 2(K − 1)/K of them from
    // each; int8 payloads are gathered, each rank passing on the K − 1 it does not hold.
    const double sent = (precision == compute::OuterPrecision::int8 ? k - 1 : 2.0 * (k - 1) / k) * bytes;
    last_outer_bytes_ = static_cast<std::int64_t>(sent);
    if (trace_) {
      // From the outer work after the step that started the fragment's sum to the end of the one
      // that landed it: the pseudo-gradient, the sum over the islands (and the inner steps it
      // overlapped) and the outer step.
      const std::size_t first = static_cast<std::size_t>(runs_of[fragment].front());
      const double started = sync_started_us_[first];
      trace_->add_complete(track_, fmt::format("outer sync {}", fragment_syncs_), "sync", started,
                           outer_end_us - started,
                           {{"fragment", std::to_string(fragment)},
                            {"started_after_step", std::to_string(sync_started_after_[first])},
                            {"landed_after_step", std::to_string(steps)},
                            {"bytes", std::to_string(last_outer_bytes_)},
                            {"islands", std::to_string(outer_.last_islands())}});
    }
    if (metrics_) metrics_->outer_synced(static_cast<std::uint64_t>(sent), outer_.last_islands());
    if (rank_ != 0) continue;
    const std::string which =
        model_fragments_ > 1 ? fmt::format(" (fragment {} of {})", fragment + 1, model_fragments_) : "";
    monitor::logger("train")->info(
        "diloco: outer step {}{} after step {}: pseudo-gradients of {:.2f} MB averaged over {} island(s), {:.2f} MB "
        "sent by each rank",
        fragment_syncs_, which, steps, bytes / 1e6, outer_.last_islands(), sent / 1e6);
  }
  result.islands = outer_.syncs() > 0 ? outer_.last_islands() : islands_.count;
  result.outer_syncs = fragment_syncs_;
  result.outer_bytes = last_outer_bytes_;
  result.next_sync_step = outer_.next_sync(steps, total_steps_);
}

}  // namespace troupe::actors
