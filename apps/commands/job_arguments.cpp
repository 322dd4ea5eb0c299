#include "apps/commands/job_arguments.hpp"

#include <cmath>
#include <utility>

#include "actors/process_environment.hpp"
#include "apps/config/config_file.hpp"
#include "apps/config/rank_memory.hpp"
#include "apps/config/unknown_arguments.hpp"
#include "apps/exit_codes.hpp"

namespace troupe::apps {

CLI::Validator seconds_in(double low, double high) {
  return CLI::Validator(
      [low, high](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || value < low || value > high)
          return "Value " + text + " is not a number of seconds from " + CLI::detail::to_string(low) + " to " +
                 CLI::detail::to_string(high);
        return {};
      },
      "SECONDS");
}

void add_shorthands(CLI::App& command, TrainArgs& args) {
  command.add_flag("--resume", args.resume,
                   "continue from the newest valid checkpoint in checkpoint.dir (= --checkpoint.resume=true)");
  command
      .add_option("--trace", args.trace, "write every pipeline stage's ops as Chrome trace JSON (= --pipeline.trace)")
      ->type_name("FILE");
}

void add_memory_limit(CLI::App& command, TrainArgs& args) {
  command
      .add_option("--memory-limit", args.memory_limit,
                  "memory per rank, as 6GiB, 512MiB, 2G or bytes (default: the cgroup's limit or MemAvailable, "
                  "shared by the ranks on this machine)")
      ->type_name("SIZE");
}

void add_config_options(CLI::App& command, TrainArgs& args) {
  command.add_option("--config", args.config_path, "TOML file with [model] [train] [data] [sample]")->type_name("FILE");
  add_shorthands(command, args);
  args.overrides.add_options(command);
  command.allow_extras();
}

Expected<ResolvedJob> train_job(const CLI::App& command, const TrainArgs& args) {
  if (Status extras = reject_unknown_arguments(command); !extras) return extras.error();
  JobConfig config;
  if (!args.config_path.empty()) {
    auto loaded = load_config(args.config_path);
    if (!loaded) return loaded.error();
    config = std::move(*loaded);
  }
  if (Status applied = args.overrides.apply(config); !applied) return applied.error();
  if (args.resume) config.checkpoint.resume = true;
  if (!args.trace.empty()) config.pipeline.trace = args.trace;
  return resolve(config);
}

Expected<std::optional<double>> memory_limit(const TrainArgs& args) {
  if (args.memory_limit.empty()) return std::optional<double>();
  auto bytes = parse_memory_limit(args.memory_limit);
  if (!bytes) return bytes.error();
  return std::optional<double>(*bytes);
}

Command job_command(CLI::App& command, std::shared_ptr<const TrainArgs> args,
                    std::function<int(const ResolvedJob&)> run) {
  return {&command, [&command, args = std::move(args), run = std::move(run)] {
            auto job = train_job(command, *args);
            if (!job) return error_exit(ExitCode::bad_input, job.error().message);
            if (Status inherited = actors::env::check_inherited(); !inherited)
              return error_exit(ExitCode::bad_input, inherited.error().message);
            return run(*job);
          }};
}

}  // namespace troupe::apps
