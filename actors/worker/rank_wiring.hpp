#pragma once
// What one rank of a node does once the job starts: connects its engine to every peer the
// start message names, forms its groups on the dp × pp grid (comm/grid.hpp), and trains — as a
// data-parallel replica (gradients summed by the ring all-reduce, or by NCCL on a CUDA backend,
// each rank on its host's device) or as a pipeline stage running its schedule. The collectives'
// completions reach the worker as messages in its mailbox.

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
node_done_msg train_as_rank(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                            comm::Engine& engine, int local_rank, const start_msg& start, caf::blocking_actor* worker,
                            monitor::WorkProgress& progress, monitor::WorkerMetrics* metrics,
                            monitor::StepControl& control);

}  // namespace troupe::actors
