// troupe train: one process trains a GPT on the job's data (see actors/worker/training_run.hpp).

#include <cstdio>

#include "apps/commands/commands.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/monitor/process_logs.hpp"
#include "actors/monitor/process_metrics.hpp"
#include "actors/worker/training_run.hpp"

namespace troupe::apps {

int run_train(const ResolvedJob& job) {
  if (const int stages = job.config.pipeline.stages; stages > 1) {
    std::fprintf(stderr, "troupe: error: pipeline.stages %d needs a worker per stage: add --workers %d (or a multiple)\n",
                 stages, stages);
    return 2;
  }
  const actors::ProcessLogs logs(job.config, "local", 0, 0, "trainer");
  auto metrics = actors::ProcessMetrics::serve(job.config.monitor, {"local", 0}, 0, 1, "trainer");
  if (!metrics) {
    std::fprintf(stderr, "troupe: error: %s\n", metrics.error().message.c_str());
    return 2;
  }
  auto backend = compute::make_backend(job.config.train.backend, job.config.train.threads);
  if (!backend) {
    std::fprintf(stderr, "troupe: error: %s\n", backend.error().message.c_str());
    return 2;
  }
  metrics->set_mfu_basis(job, 1);
  auto data = actors::load_job_data(job);
  if (!data) {
    std::fprintf(stderr, "troupe: error: %s\n", data.error().message.c_str());
    return 2;
  }
  if (Status opened = logs.open_file(); !opened) {
    std::fprintf(stderr, "troupe: error: %s\n", opened.error().message.c_str());
    return 2;
  }
  monitor::WorkProgress progress;
  actors::RunOutcome outcome = actors::run_training(job, **backend, *data, {}, {progress, metrics->worker(0)});
  if (outcome.exit_code != 0) std::fprintf(stderr, "troupe: error: %s\n", outcome.reason.c_str());
  return outcome.exit_code;
}

}  // namespace troupe::apps
