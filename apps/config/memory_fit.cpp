#include "apps/config/memory_fit.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>

#include "apps/launch/host_memory.hpp"
#include "compute/model/recompute.hpp"

namespace troupe::apps {
namespace {

std::string in_units(double bytes) {
  const char* units[] = {"MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = bytes / (1024.0 * 1024.0);
  std::size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(units); ++unit) value /= 1024;
  char text[48];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace

compute::MemoryEstimate worker_memory(const ResolvedJob& job, compute::Recompute recompute) {
  const TrainOptions& t = job.config.train;
  const compute::GPTConfig& model = job.model;
  if (job.pipeline_split.empty())
    return compute::estimate_training_memory(model,
                                             {0, model.n_layer, t.batch_size, t.seq_len, 1, sizeof(float), recompute});
  // A stage never holds more micro-batches than a step has; the planner of each schedule knows
  // its true peak, this bound does not need it.
  compute::MemoryEstimate largest;
  for (const compute::StageLayers& chunk : job.pipeline_split) {
    const auto e =
        compute::estimate_training_memory(model, {chunk.first_layer, chunk.last_layer, t.batch_size, t.seq_len,
                                                  job.config.pipeline.microbatches, sizeof(float), recompute});
    if (e.total() > largest.total()) largest = e;
  }
  const double chunks = job.config.pipeline.virtual_stages;
  return {largest.parameter_bytes * chunks, largest.activation_bytes * chunks};
}

Status check_memory_fit(const ResolvedJob& job, int workers_here) {
  if (job.config.train.backend != "cpu" || workers_here < 1) return Status::success();
  const auto memory = launch::host_memory();
  if (!memory) return Status::success();
  return check_memory_fit(job, workers_here, static_cast<double>(memory->available_bytes), memory->source);
}

Status check_memory_fit(const ResolvedJob& job, int workers_here, double available, const std::string& source) {
  const compute::Recompute recompute =
      compute::parse_recompute(job.config.train.recompute).value_or(compute::Recompute::none);
  const compute::MemoryEstimate worker = worker_memory(job, recompute);
  const double needed = worker.total() * workers_here;
  if (needed <= available) return Status::success();
  std::string would_fit;
  if (recompute != compute::Recompute::full) {
    const double with_full = worker_memory(job, compute::Recompute::full).total() * workers_here;
    if (with_full <= available) would_fit = "; with train.recompute full they would need about " + in_units(with_full);
  }
  const compute::GPTConfig& m = job.model;
  const TrainOptions& t = job.config.train;
  return Error{"model.n_layer " + std::to_string(m.n_layer) + ", model.n_embd " + std::to_string(m.n_embd) +
               ", model.vocab_size " + std::to_string(m.vocab_size) + ", train.batch_size " +
               std::to_string(t.batch_size) + ", train.seq_len " + std::to_string(t.seq_len) + ": " +
               std::to_string(workers_here) + " worker(s) on this machine need about " + in_units(needed) + " (" +
               in_units(worker.parameter_bytes) + " of parameters, gradients and AdamW moments and " +
               in_units(worker.activation_bytes) + " of activations each), but only " + in_units(available) +
               " is available (" + source + ")" + would_fit};
}

}  // namespace troupe::apps
