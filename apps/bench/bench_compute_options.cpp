#include <algorithm>
#include <string>

#include "apps/bench/bench_commands.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::apps {

Status validate(const BenchComputeOptions& options) {
  const auto presets = compute::gpt_preset_names();
  std::string known;
  for (const auto& preset : presets) known += (known.empty() ? "" : ", ") + preset;
  if (options.models.empty()) return Error{"--models is empty; give one or more of " + known};
  for (const auto& model : options.models) {
    if (std::find(presets.begin(), presets.end(), model) == presets.end())
      return Error{"--models: '" + model + "' is not a preset (known: " + known + ")"};
  }
  if (options.batch <= 0) return Error{"--batch must be positive, got " + std::to_string(options.batch)};
  if (options.threads.empty()) return Error{"--threads is empty; give one or more counts, e.g. 1,2"};
  for (const int threads : options.threads)
    if (threads < 0) return Error{"--threads must not be negative (0 = all cores), got " + std::to_string(threads)};
  if (options.steps <= 0) return Error{"--steps must be positive, got " + std::to_string(options.steps)};
  if (options.warmup < 0) return Error{"--warmup must not be negative, got " + std::to_string(options.warmup)};
  if (options.rounds <= 0) return Error{"--rounds must be positive, got " + std::to_string(options.rounds)};
  return Status::success();
}

}  // namespace troupe::apps
