#pragma once
// A job as the layout planner (schedules/layout_plan.hpp) sees it, and back: its workload and
// layout from the config keys and the number of ranks, and a planner layout written as the config
// keys that give it. The memory check asks the planner about the job's own layout and words the
// layout it would suggest instead in these keys.

#include <string>
#include <vector>

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"
#include "schedules/layout_plan.hpp"

namespace troupe::apps {

// Where a job's ranks (workers) run: all of them, on how many machines, and how many on this one.
struct JobRanks {
  int ranks = 1;
  int hosts = 1;
  int here = 1;
};

// The model, the global batch (data-parallel ranks × train.batch_size × micro-batches per step),
// train.seq_len, and train.precision as the runtime keeps it: fp32, or bf16 (f32 weights,
// gradients, AdamW moments and activations, and the products' operand copies as this CPU's
// products make them).
schedules::Workload job_workload(const ResolvedJob& job, int ranks);

// The keys that set how many ranks one data-parallel replica takes: "pipeline.stages 2", or
// "pipeline.stages 2 × tensor.shards 2" when there are tensor shards (and "× context.shards C"
// when there are context shards).
std::string replica_keys(const JobConfig& config);
// The ranks fill whole replicas (pipeline.stages × tensor.shards × context.shards divides them) and the replicas
// whole islands (train.islands divides them), or the error names the keys and the count.
Status check_grid_divides(const ResolvedJob& job, int ranks);

// dp = ranks / (pipeline.stages × tensor.shards × context.shards), pp = pipeline.stages, tp = tensor.shards,
// train.zero, train.recompute, micro-batches of train.batch_size, train.grad_accum of them per step
// (pipeline.microbatches with a pipeline), pipeline.schedule and pipeline.virtual_stages,
// cp = context.shards joined by context.method, ep = expert.shards.
schedules::Layout job_layout(const ResolvedJob& job, int ranks);

// The job's ranks as a cluster of `device_memory` bytes per device: its hosts as nodes (one node of
// every rank when the hosts hold unequal shares). Its speeds are rough constants — a CPU core's
// FLOP/s and copy bandwidth, the links `troupe plan` assumes — since a layout's memory does not depend on them and
// the memory check uses the predicted time only to order layouts.
schedules::Cluster job_cluster(const JobRanks& ranks, double device_memory);

// `config` with the keys of job_layout set to give `layout`: train.grad_accum 1 with a pipeline;
// without one pipeline.stages and pipeline.virtual_stages 1, and 1f1b for an interleaved schedule;
// with context shards fault.recovery restart (they recover by restarting only).
JobConfig with_layout(const JobConfig& config, const schedules::Layout& layout);

// "train.zero 2", "context.shards 2": each layout key (and fault.recovery) whose value differs, in
// key-table order.
std::vector<std::string> changed_layout_keys(const JobConfig& from, const JobConfig& to);

}  // namespace troupe::apps
