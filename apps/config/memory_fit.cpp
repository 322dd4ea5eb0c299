#include "apps/config/memory_fit.hpp"

#include <algorithm>
#include <string>

#include "apps/config/byte_size.hpp"
#include "apps/config/fitting_layout.hpp"
#include "compute/train/balance.hpp"
#include "schedules/layout_plan.hpp"

namespace troupe::apps {
namespace {

std::string ranks_text(int ranks) { return std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks"); }

// What ends a refusal: the nearest layout that fits, or how much the smallest needs.
std::string advice(const ResolvedJob& job, const JobRanks& ranks, double available) {
  const double runtime = runtime_bytes_per_rank(job.config.train.backend);
  const auto layout = fitting_layout(job, ranks, available - runtime);
  if (!layout) return "";
  const std::string needs = format_binary_size(layout->planned_bytes + runtime) + " per rank";
  if (!layout->fits) return "; no layout of " + ranks_text(ranks.ranks) + " fits; the smallest needs about " + needs;
  std::string keys = layout->changes.front();
  for (std::size_t i = 1; i < layout->changes.size(); ++i) keys += (i == 1 ? " with " : ", ") + layout->changes[i];
  return "; " + keys + " would fit (about " + needs + ")";
}

// The job's layout as its most loaded replica runs it: under train.balance a replica of pipeline
// stages or tensor shards stashes the activations of its share of the step's micro-batches, and
// under ZeRO-3 a replica of whole models runs its share as one batch, so the largest share is
// planned — static's largest, or the most dynamic can move to one replica (a replica of whole
// models below ZeRO-3 accumulates them one by one, whatever its share). ZeRO-3 on stages or
// tensor shards then holds every unit and gradient of the step whole: ZeRO-1's memory.
schedules::Layout most_loaded_layout(const ResolvedJob& job, int ranks) {
  schedules::Layout layout = job_layout(job, ranks);
  const compute::BalanceMode balance = job.config.train.balance;
  const bool whole_models = layout.pp == 1 && layout.tp == 1;
  const bool one_pass = compute::shards_parameters(layout.zero) && whole_models;
  if (balance == compute::BalanceMode::none || (whole_models && !one_pass)) return layout;
  if (compute::shards_parameters(layout.zero) && !whole_models) layout.zero = compute::ZeroStage::optimizer_state;
  const int units = layout.microbatches * layout.dp;
  int largest = layout.microbatches;
  if (balance == compute::BalanceMode::dynamic) {
    largest = units - (layout.dp - 1);  // every other replica at its one micro-batch
  } else if (!job.replica_speeds.empty()) {
    auto shares = compute::proportional_shares(units, job.replica_speeds);
    if (shares) largest = *std::max_element(shares->begin(), shares->end());
  }
  if (one_pass) {
    layout.micro_batch *= largest;
    layout.microbatches = 1;
  } else {
    layout.microbatches = largest;
  }
  return layout;
}

}  // namespace

double runtime_bytes_per_rank(compute::BackendKind backend) {
  return (backend == compute::BackendKind::sim ? 12.0 : 40.0) * 1024 * 1024;
}

Status check_memory_fit(const ResolvedJob& job, const JobRanks& ranks, std::optional<double> memory_limit) {
  if (compute::on_device(job.config.train.backend)) return Status::success();
  const auto available = rank_memory(memory_limit, ranks.here);
  if (!available) return Status::success();
  return check_memory_fit(job, ranks, *available);
}

Status check_memory_fit(const ResolvedJob& job, const JobRanks& ranks, const RankMemory& available) {
  const schedules::Layout layout = most_loaded_layout(job, ranks.ranks);
  schedules::Workload workload = job_workload(job, ranks.ranks);
  workload.global_batch = layout.dp * layout.micro_batch * layout.microbatches;
  auto planned = schedules::plan_layout(workload, job_cluster(ranks, available.bytes), layout);
  if (!planned) return planned.error();
  const schedules::DeviceMemory& memory = planned->memory;
  const double runtime = runtime_bytes_per_rank(job.config.train.backend);
  // A sim rank's model is token tensors (compute/sim/sim_backend.hpp): address space, not memory.
  const bool sim = job.config.train.backend == compute::BackendKind::sim;
  const double needed = (sim ? 0.0 : memory.total()) + runtime;
  if (needed <= available.bytes) return Status::success();
  const compute::GPTConfig& m = job.model;
  const TrainOptions& t = job.config.train;
  const std::string parts = sim ? format_binary_size(runtime) + " of runtime; a sim rank's tensors are token tensors"
                                : format_binary_size(memory.model_states()) +
                                      " of parameters, gradients and optimizer state, " +
                                      format_binary_size(memory.activations) + " of activations, " +
                                      format_binary_size(runtime) + " of runtime";
  return Error{"model.n_layer " + std::to_string(m.n_layer) + ", model.n_embd " + std::to_string(m.n_embd) +
               ", model.vocab_size " + std::to_string(m.vocab_size) + ", train.batch_size " +
               std::to_string(t.batch_size) + ", train.seq_len " + std::to_string(t.seq_len) + " as " +
               schedules::describe(layout) + " on " + ranks_text(ranks.ranks) + ": a rank needs about " +
               format_binary_size(needed) + " (" + parts + "), but " + format_binary_size(available.bytes) +
               " is available per rank (" + available.source + ")" + advice(job, ranks, available.bytes)};
}

}  // namespace troupe::apps
