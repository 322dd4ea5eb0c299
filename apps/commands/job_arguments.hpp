#pragma once
// The arguments of the commands that run a job (train, launch, node, drill): --config, the key
// overrides and their shorthands, --memory-limit, and the job they resolve to; and seconds_in,
// the check of their timeouts.

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/commands/command.hpp"
#include "apps/config/cli.hpp"
#include "apps/config/resolve.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

struct TrainArgs {
  std::string config_path;
  int workers = 1;
  bool print_config = false;
  bool print_keys = false;
  bool resume = false;
  std::string trace;
  std::string memory_limit;  // --memory-limit as given; empty: this machine's share
  ConfigOverrides overrides;
};

// A duration in seconds within [low, high]; CLI::Range alone lets "nan" and "inf" through.
CLI::Validator seconds_in(double low, double high);

// Flags for the keys a user reaches for most, on every command that runs a job.
void add_shorthands(CLI::App& command, TrainArgs& args);
// --memory-limit on a command that trains: the memory per rank its layout is checked against.
void add_memory_limit(CLI::App& command, TrainArgs& args);
// Registers --config and every key override on a command that runs a job.
void add_config_options(CLI::App& command, TrainArgs& args);

// The job the command was given, or the user-input error that stops it.
Expected<ResolvedJob> train_job(const CLI::App& command, const TrainArgs& args);
// --memory-limit in bytes; none when it is not given.
Expected<std::optional<double>> memory_limit(const TrainArgs& args);
// A command that runs `run` on the job it was given (config file, then overrides; `args` as
// add_config_options filled it) in the environment its processes inherit
// (actors::env::check_inherited), or stops at the first error in either (one line, exit 2).
Command job_command(CLI::App& command, std::shared_ptr<const TrainArgs> args,
                    std::function<int(const ResolvedJob&)> run);

}  // namespace troupe::apps
