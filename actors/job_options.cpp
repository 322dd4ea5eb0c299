// The recovery mode's names, and what a job's options become once it grew in place (job_options.hpp).

#include "actors/job_options.hpp"

#include <string>

#include <spdlog/fmt/fmt.h>

namespace troupe::actors {

std::string_view to_string(RecoveryMode mode) {
  switch (mode) {
    case RecoveryMode::in_place: return "in_place";
    case RecoveryMode::restart: return "restart";
  }
  return "unknown";
}

ResolvedJob split_batch(const ResolvedJob& job, int batch_size, int grad_accum, std::vector<double> replica_speeds) {
  ResolvedJob split = job;
  split.config.train.batch_size = batch_size;
  split.config.train.grad_accum = grad_accum;
  split.config.train.replica_speeds = fmt::format("{}", fmt::join(replica_speeds, ","));
  split.replica_speeds = std::move(replica_speeds);
  for (auto& [key, value] : split.settings) {
    if (key == "train.batch_size") value = std::to_string(batch_size);
    if (key == "train.grad_accum") value = std::to_string(grad_accum);
    if (key == "train.replica_speeds") value = split.config.train.replica_speeds;
  }
  return split;
}

}  // namespace troupe::actors
