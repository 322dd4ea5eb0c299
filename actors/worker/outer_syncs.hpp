#pragma once
// DiLoCo's outer work after a rank's inner step (compute/train/outer_step.hpp), for either loop
// that trains under train.sync diloco: a rank of the whole model (replica_loop.hpp) or a tensor
// shard (rank_wiring.cpp's pipeline stage loop, whose buffer is the shard's slice of every
// parameter, synced with the same shard of every other island). After each step it lands and
// starts the fragments the schedule names over the rank's outer group, then reports each sync
// landed: the first rank's log line, the rank's metrics, its trace track and the step result's
// DiLoCo fields (islands, syncs, bytes, next sync).

#include <cstdint>
#include <string>
#include <vector>

#include "actors/job_options.hpp"
#include "compute/train/outer_step.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/metrics.hpp"
#include "monitor/trace.hpp"

namespace troupe::actors {

// The job's DiLoCo outer step: H, lr, momentum, precision, the model's fragments, the overlap.
compute::OuterOptions outer_options(const ResolvedJob& job);

class OuterSyncs {
 public:
  // The outer state starts from `params` (the rank's buffer), cut into `fragments` (the job's
  // fragments as this rank holds them; empty: the whole buffer, one fragment). `rank`: the rank
  // that logs (0) and its trace track.
  OuterSyncs(const ResolvedJob& job, const compute::Tensor& params, std::vector<compute::OuterFragment> fragments,
             compute::IslandGroup islands, int rank, monitor::WorkerMetrics* metrics);

  // Whether after_step lands or starts a fragment after the step that made `steps_taken` steps:
  // otherwise it leaves the parameters alone.
  bool due(long steps_taken) const;
  // Lands and starts the fragments due after the step that made `steps_taken` steps, on `params`,
  // and fills `result`'s DiLoCo fields.
  void after_step(long steps_taken, compute::Tensor& params, compute::StepResult& result);
  // Records every fragment's sync into `recorder` from now on, on `track`, named `name`.
  void record_into(monitor::TraceRecorder& recorder, monitor::TraceTrack track, std::string name);
  // The layout's DiLoCo part: ", 2 island(s) of 1, outer step every 20 steps …".
  std::string describe(int ranks_per_island) const;

  compute::OuterStep& outer() { return outer_; }
  const compute::IslandGroup& islands() const { return islands_; }

 private:
  compute::OuterStep outer_;
  compute::IslandGroup islands_;
  int rank_;
  long total_steps_;
  int model_fragments_;                      // train.diloco_fragments: F of the model, whatever its runs here
  long fragment_syncs_ = 0;                  // model fragments' syncs landed (a fragment of several runs once)
  monitor::WorkerMetrics* metrics_;          // counts the outer syncs; null: none kept
  std::int64_t last_outer_bytes_ = 0;        // this rank sent for the newest outer sync
  monitor::TraceRecorder* trace_ = nullptr;  // the syncs are recorded here; null: none
  monitor::TraceTrack track_{};              // ... on this track
  std::vector<double> sync_started_us_;      // per run: when its sum in flight started
  std::vector<long> sync_started_after_;     // ... after which step
};

}  // namespace troupe::actors
