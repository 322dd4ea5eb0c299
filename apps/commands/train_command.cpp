// troupe train: one process trains a GPT on the job's data (see actors/worker/training_run.hpp);
// with --workers N, troupe launch on N local lines.

#include <cstdio>
#include <memory>

#include "actors/process_environment.hpp"
#include "actors/process_logs.hpp"
#include "actors/process_metrics.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/worker/training_run.hpp"
#include "apps/commands/checkpoint_folder_lock.hpp"
#include "apps/commands/commands.hpp"
#include "apps/config/job_layout.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/print.hpp"
#include "apps/exit_codes.hpp"
#include "monitor/log.hpp"
#include "monitor/trace.hpp"

namespace troupe::apps {

int run_train(const ResolvedJob& job, std::optional<double> memory_limit) {
  if (const int ranks = job.config.pipeline.stages * job.config.tensor.shards * job.config.context.shards; ranks > 1)
    return error_exit(ExitCode::bad_input,
                      replica_keys(job.config) + " needs a worker per " +
                          (job.config.context.shards > 1  ? "context shard"
                           : job.config.tensor.shards > 1 ? "shard"
                                                          : "stage") +
                          (job.config.pipeline.stages > 1 && job.config.tensor.shards > 1 ? " of every stage" : "") +
                          ": add --workers " + std::to_string(ranks) + " (or a multiple)");
  // Input errors come before any work or output, as the job process of --workers reports them.
  if (Status islands = check_grid_divides(job, 1); !islands)
    return error_exit(ExitCode::bad_input, islands.error().message);
  if (Status fits = check_memory_fit(job, {1, 1, 1}, memory_limit); !fits)
    return error_exit(ExitCode::bad_input, fits.error().message);
  auto data = actors::load_job_data(job);
  if (!data) return error_exit(ExitCode::bad_input, data.error().message);
  const auto folder_lock = lock_checkpoint_folder(job.config);
  if (!folder_lock) return error_exit(ExitCode::bad_input, folder_lock.error().message);
  const actors::ProcessLogs logs(job.config, "local", 0, 0, "trainer");
  auto metrics = actors::ProcessMetrics::serve(job.config.monitor, {"local", 0}, 0, 1, "trainer");
  if (!metrics) return error_exit(ExitCode::bad_input, metrics.error().message);
  auto backend = compute::make_backend(job.config.train.backend, job.config.train.precision, job.config.train.threads,
                                       job.config.sim);
  if (!backend) return error_exit(ExitCode::bad_input, backend.error().message);
  metrics->set_mfu_basis(job, 1, 0);
  if (Status opened = logs.open_file(); !opened) return error_exit(ExitCode::bad_input, opened.error().message);
  monitor::WorkProgress progress;
  // pipeline.trace under DiLoCo: the steps and outer syncs (one island in one process).
  monitor::TraceRecorder trace;
  const std::string trace_path = job.config.train.sync == compute::SyncMode::diloco ? job.config.pipeline.trace : "";
  actors::RunServices services{progress, metrics->worker(0)};
  if (!trace_path.empty()) services.trace = &trace;
  actors::RunOutcome outcome = actors::run_training(job, **backend, *data, {}, services);
  if (outcome.exit_code != 0) return error_exit(exit_code_of(outcome.exit_code), outcome.reason);
  if (!trace_path.empty()) {
    if (Status s = monitor::write_trace(trace, trace_path); !s) return error_exit(ExitCode::failure, s.error().message);
    monitor::logger("train")->info("trace of the steps and outer syncs written to {} (Chrome trace JSON)", trace_path);
  }
  return to_int(ExitCode::success);
}

namespace {

// --print-keys, --print-config, or the job in this process or, with --workers, in local nodes.
int train(const CLI::App& command, const TrainArgs& args) {
  if (args.print_keys) {
    std::fputs(config_keys_markdown().c_str(), stdout);
    return to_int(ExitCode::success);
  }
  auto limit = memory_limit(args);
  if (!limit) return error_exit(ExitCode::bad_input, limit.error().message);
  auto job = train_job(command, args);
  if (!job) return error_exit(ExitCode::bad_input, job.error().message);
  if (args.print_config) {
    std::fputs(config_to_toml(job->config).c_str(), stdout);
    return to_int(ExitCode::success);
  }
  if (Status inherited = actors::env::check_inherited(); !inherited)
    return error_exit(ExitCode::bad_input, inherited.error().message);
  if (!job->config.init.from.empty())
    if (Status imported = import_initial_weights(*job); !imported)
      return error_exit(ExitCode::bad_input, imported.error().message);
  if (args.workers > 1) {
    LaunchArgs launch;
    launch.workers = args.workers;
    launch.memory_limit = *limit;
    return run_launch(launch, *job);
  }
  return run_train(*job, *limit);
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand("train", "Train a GPT model; keys come from --config, then overrides.");
  command->add_option("--config", args->config_path, "TOML file with [model] [train] [data] [sample]")
      ->type_name("FILE");
  command->add_flag("--print-config", args->print_config,
                    "print the resolved configuration as TOML and exit without training");
  command->add_flag("--print-keys", args->print_keys, "print the key table of docs/configuration.md")->group("");
  command->add_option("--workers", args->workers, "local worker processes (data parallel); 1 = this process")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_shorthands(*command, *args);
  add_memory_limit(*command, *args);
  args->overrides.add_options(*command);
  command->footer("Each key is --section.name VALUE or --section.name=VALUE; it overrides the config file.");
  command->allow_extras();
  return {command, [command, args] { return train(*command, *args); }};
}

}  // namespace troupe::apps
