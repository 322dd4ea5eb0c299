#pragma once
// What one rank of a node does once the job starts: connects its engine to every peer the
// start message names, forms its groups on the dp × pp grid (comm/grid.hpp), and trains — as a
// data-parallel replica (gradients summed by the ring all-reduce, or by NCCL on a CUDA backend,
// each rank on its host's device) or as a pipeline stage running its schedule. The collectives'
// completions reach the worker as messages in its mailbox.

#include <optional>

#include <caf/all.hpp>

#include "actors/job_options.hpp"
#include "actors/messages.hpp"
#include "actors/worker/job_data.hpp"
#include "comm/engine.hpp"
#include "compute/backend.hpp"
#include "monitor/metrics.hpp"
#include "monitor/step_control.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// Trains `engine`'s rank in `worker` to the end; the returned outcome (exit code and one line)
// is the rank's part of the node's report. Only WorkStopped (the job stopped the work) escapes.
// `replacing` is set for a worker its node supervisor respawned in an in-place recovery: its
// engine is connected already, and it takes its state from a surviving replica before its first
// step (in_place_recovery.hpp).
node_done_msg train_as_rank(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                            comm::Engine& engine, int local_rank, const start_msg& start, caf::blocking_actor* worker,
                            monitor::WorkProgress& progress, monitor::WorkerMetrics* metrics,
                            monitor::StepControl& control, const std::optional<recover_msg>& replacing);

}  // namespace troupe::actors
