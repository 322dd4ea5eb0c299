// troupe train: one process trains a GPT on the job's data (see actors/worker/training_run.hpp).

#include <cstdio>

#include "apps/commands/checkpoint_folder_lock.hpp"
#include "apps/commands/commands.hpp"
#include "apps/config/job_layout.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/exit_codes.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/process_logs.hpp"
#include "actors/process_metrics.hpp"
#include "actors/worker/training_run.hpp"

namespace troupe::apps {

int run_train(const ResolvedJob& job, std::optional<double> memory_limit) {
  if (const int ranks = job.config.pipeline.stages * job.config.tensor.shards; ranks > 1)
    return error_exit(ExitCode::bad_input, replica_keys(job.config) + " needs a worker per " +
                                               (job.config.tensor.shards > 1 ? "shard" : "stage") +
                                               (job.config.pipeline.stages > 1 && job.config.tensor.shards > 1
                                                    ? " of every stage"
                                                    : "") +
                                               ": add --workers " + std::to_string(ranks) + " (or a multiple)");
  // Input errors come before any work or output, as the job process of --workers reports them.
  if (Status fits = check_memory_fit(job, {1, 1, 1}, memory_limit); !fits)
    return error_exit(ExitCode::bad_input, fits.error().message);
  auto data = actors::load_job_data(job);
  if (!data) return error_exit(ExitCode::bad_input, data.error().message);
  const auto folder_lock = lock_checkpoint_folder(job.config);
  if (!folder_lock) return error_exit(ExitCode::bad_input, folder_lock.error().message);
  const actors::ProcessLogs logs(job.config, "local", 0, 0, "trainer");
  auto metrics = actors::ProcessMetrics::serve(job.config.monitor, {"local", 0}, 0, 1, "trainer");
  if (!metrics) return error_exit(ExitCode::bad_input, metrics.error().message);
  auto backend = compute::make_backend(job.config.train.backend, job.config.train.threads);
  if (!backend) return error_exit(ExitCode::bad_input, backend.error().message);
  metrics->set_mfu_basis(job, 1, 0);
  if (Status opened = logs.open_file(); !opened) return error_exit(ExitCode::bad_input, opened.error().message);
  monitor::WorkProgress progress;
  actors::RunOutcome outcome = actors::run_training(job, **backend, *data, {}, {progress, metrics->worker(0)});
  if (outcome.exit_code != 0) return error_exit(exit_code_of(outcome.exit_code), outcome.reason);
  return to_int(ExitCode::success);
}

}  // namespace troupe::apps
