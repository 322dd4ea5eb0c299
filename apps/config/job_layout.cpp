#include "apps/config/job_layout.hpp"

#include "apps/config/keys.hpp"
#include "apps/config/value.hpp"
#include "compute/cpu/bf16_products.hpp"
#include "compute/model/recompute.hpp"

namespace troupe::apps {
namespace {

// The keys a layout sets, in key-table order.
constexpr std::string_view layout_keys[] = {"train.batch_size",  "train.grad_accum",        "train.zero",
                                            "train.recompute",   "pipeline.stages",         "pipeline.microbatches",
                                            "pipeline.schedule", "pipeline.virtual_stages", "tensor.shards",
                                            "context.shards",    "context.method",          "expert.shards"};

int microbatches_per_step(const JobConfig& config) {
  return config.pipeline.stages > 1 ? config.pipeline.microbatches : config.train.grad_accum;
}

}  // namespace

std::string replica_keys(const JobConfig& c) {
  std::string keys = "pipeline.stages " + std::to_string(c.pipeline.stages);
  if (c.tensor.shards > 1) keys += " × tensor.shards " + std::to_string(c.tensor.shards);
  if (c.context.shards > 1) keys += " × context.shards " + std::to_string(c.context.shards);
  return keys;
}

Status check_grid_divides(const ResolvedJob& job, int ranks) {
  const JobConfig& c = job.config;
  const int replica_ranks = c.pipeline.stages * c.tensor.shards * c.context.shards;
  if (ranks % replica_ranks != 0)
    return Error{replica_keys(c) + " does not divide the job's " + std::to_string(ranks) +
                 " workers (workers = data-parallel replicas x stages" + (c.tensor.shards > 1 ? " x shards" : "") +
                 (c.context.shards > 1 ? " x context shards)" : ")")};
  if (const int replicas = ranks / replica_ranks; replicas % c.expert.shards != 0)
    return Error{"expert.shards " + std::to_string(c.expert.shards) + " does not divide the job's " +
                 std::to_string(replicas) + " data-parallel replicas (each expert group is as many consecutive ones)"};
  if (const int replicas = ranks / replica_ranks; replicas % c.train.islands != 0)
    return Error{"train.islands " + std::to_string(c.train.islands) + " does not divide the job's " +
                 std::to_string(replicas) + " data-parallel replicas (each island holds as many)"};
  if (const int replicas = ranks / replica_ranks;
      !job.replica_speeds.empty() && int(job.replica_speeds.size()) != replicas)
    return Error{"train.replica_speeds '" + c.train.replica_speeds + "' lists " +
                 std::to_string(job.replica_speeds.size()) + " speeds for the job's " + std::to_string(replicas) +
                 " data-parallel replicas (one a replica)"};
  return Status::success();
}

schedules::Workload job_workload(const ResolvedJob& job, int ranks) {
  const schedules::Layout layout = job_layout(job, ranks);
  const bool bf16 = job.config.train.precision == compute::Precision::bf16;
  schedules::Workload workload{job.model, layout.dp * layout.micro_batch * layout.microbatches,
                               job.config.train.seq_len,
                               bf16 ? schedules::Precision::bf16 : schedules::Precision::fp32};
  // The CPU backend's operand copies are as this machine's products need them.
  workload.emulated_products = bf16 && job.config.train.backend == compute::BackendKind::cpu &&
                               compute::cpu::bf16_units_of_this_cpu() == compute::cpu::Bf16Units::emulated;
  workload.operands_stored_f32 = bf16 && job.config.train.backend != compute::BackendKind::cpu;
  workload.sync = layout.sync;
  workload.islands = layout.islands;
  return workload;
}

schedules::Layout job_layout(const ResolvedJob& job, int ranks) {
  const JobConfig& c = job.config;
  schedules::Layout layout;
  layout.pp = c.pipeline.stages;
  layout.tp = c.tensor.shards;
  layout.dp = ranks / (c.pipeline.stages * c.tensor.shards * c.context.shards);
  layout.zero = c.train.zero;
  layout.recompute = c.train.recompute;
  layout.micro_batch = c.train.batch_size;
  layout.microbatches = microbatches_per_step(c);
  layout.schedule = c.pipeline.schedule;
  layout.chunks = c.pipeline.virtual_stages;
  layout.cp = c.context.shards;
  layout.context = c.context.method;
  layout.ep = c.expert.shards;
  layout.sync = c.train.sync;
  layout.islands = c.train.sync == compute::SyncMode::diloco ? c.train.islands : 1;
  return layout;
}

schedules::Cluster job_cluster(const JobRanks& ranks, double device_memory) {
  schedules::Cluster cluster;
  cluster.nodes = ranks.ranks % ranks.hosts == 0 ? ranks.hosts : 1;
  cluster.devices_per_node = ranks.ranks / cluster.nodes;
  cluster.device_memory = device_memory;
  cluster.peak_flops = 1e11;
  cluster.memory_bandwidth = 1.4e10;
  cluster.intra_bandwidth = 6e9;
  cluster.inter_bandwidth = 1.25e9;
  return cluster;
}

JobConfig with_layout(const JobConfig& config, const schedules::Layout& layout) {
  JobConfig c = config;
  c.train.batch_size = layout.micro_batch;
  c.train.zero = layout.zero;
  c.train.recompute = layout.recompute;
  c.pipeline.stages = layout.pp;
  c.tensor.shards = layout.tp;
  c.context.shards = layout.cp;
  c.context.method = layout.context;
  c.expert.shards = layout.ep;
  if (layout.pp > 1) {
    c.train.grad_accum = 1;
    c.pipeline.microbatches = layout.microbatches;
    c.pipeline.schedule = layout.schedule;
    c.pipeline.virtual_stages = layout.chunks;
  } else {
    c.train.grad_accum = layout.microbatches;
    // Without stages the schedule is unused, but interleaving one stage, or a V of one, is refused.
    if (c.pipeline.schedule == schedules::ScheduleKind::interleaved ||
        c.pipeline.schedule == schedules::ScheduleKind::zb_v)
      c.pipeline.schedule = schedules::ScheduleKind::one_f_one_b;
    c.pipeline.virtual_stages = 1;
  }
  return c;
}

std::vector<std::string> changed_layout_keys(const JobConfig& from, const JobConfig& to) {
  std::vector<std::string> changed;
  for (std::string_view name : layout_keys) {
    const ConfigKey* key = find_config_key(name);
    if (const std::string value = format_text(to, *key); value != format_text(from, *key))
      changed.push_back(std::string(name) + " " + value);
  }
  return changed;
}

}  // namespace troupe::apps
