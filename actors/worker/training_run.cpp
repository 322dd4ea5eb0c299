// One rank's training run (training_run.hpp): a line per step, the validation loss every
// train.val_every steps, a summary, and a sample from the trained model.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include <spdlog/fmt/fmt.h>

#include "actors/worker/training_run.hpp"
#include "compute/data/decode.hpp"
#include "compute/model/generate.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/duration_text.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

compute::TrainerOptions trainer_options(const ResolvedJob& job) {
  const TrainOptions& t = job.config.train;
  compute::TrainerOptions o;
  o.batch_size = t.batch_size;
  o.seq_len = t.seq_len;
  o.grad_accum = t.grad_accum;
  o.lr = {t.lr, t.min_lr, t.warmup_steps, t.steps};
  o.adamw = {t.beta1, t.beta2, t.eps, t.weight_decay};
  o.grad_clip = t.grad_clip;
  o.seed = t.seed;
  return o;
}

namespace {

void print_sample(compute::GPT& model, const ResolvedJob& job, spdlog::logger& log) {
  const SampleOptions& s = job.config.sample;
  std::vector<int> prompt(s.prompt.begin(), s.prompt.end());
  for (int& t : prompt) t = static_cast<unsigned char>(t);
  if (prompt.empty()) prompt.push_back('\n');
  compute::SamplingOptions options{s.tokens, s.temperature, s.top_k, job.config.train.seed};
  log.info("sample ({} tokens, temperature {}, top_k {}):", s.tokens, s.temperature, s.top_k);
  std::vector<int> produced = compute::generate(model, prompt, options);
  std::vector<int> text = prompt;
  text.insert(text.end(), produced.begin(), produced.end());
  std::printf("%s\n", compute::decode_bytes(text).c_str());
  std::fflush(stdout);
}

// The job's configuration as a manifest records it: every key's value as text.
nlohmann::json config_json(const ResolvedJob& job) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, value] : job.settings) json[key] = value;
  return json;
}

checkpoint::RunCheckpointOptions checkpoint_options(const CheckpointOptions& c) {
  checkpoint::RunCheckpointOptions o;
  o.dir = c.dir;
  o.every = c.every;
  o.keep_last = c.keep_last;
  o.async = c.async;
  o.resume = c.resume;
  return o;
}

// `troupe drill kill-worker` makes one worker of a fresh run throw, as a bug would: the variable
// TROUPE_DRILL_THROW_AT = "RANK:STEP" names the worker and the step it fails in. Read once per run.
struct DrilledFailure {
  int rank = -1;
  long step = -1;

  static DrilledFailure from_environment() {
    DrilledFailure d;
    const char* target = std::getenv("TROUPE_DRILL_THROW_AT");
    if (!target || std::sscanf(target, "%d:%ld", &d.rank, &d.step) != 2) return {};
    return d;
  }

  void throw_if_due(int rank_now, long step_now) const {
    if (rank_now != rank || step_now != step) return;
    monitor::logger("drill")->error("drill: the worker of rank {} throws in step {}", rank, step);
    throw std::runtime_error("drill: injected failure in the worker of rank " + std::to_string(rank) + " at step " +
                             std::to_string(step));
  }
};

// Tells the shell's step control that no boundary is left, however the loop ends.
struct ControlFinisher {
  monitor::StepControl* control;
  ~ControlFinisher() {
    if (control) control->finished();
  }
};

// Obeys the shell's orders at the boundary before the step after `steps_done`: waits while held
// or paused, saves a checkpoint when told, throws when told to fail (kill worker). A stop while
// waiting ends the run with the returned outcome.
std::optional<RunOutcome> obey_orders(monitor::StepControl& control, long steps_done, int rank,
                                      checkpoint::RunCheckpoints& checkpoints, const TrainingLoop& loop,
                                      monitor::WorkProgress& progress) {
  for (;;) {
    const monitor::BoundaryOrder order = control.at_boundary(steps_done, progress);
    if (order.stop) return RunOutcome{1, fmt::format("stopped while held after step {}", steps_done)};
    if (order.rescue) throw RescueAtBoundary(steps_done);
    if (order.fail) {
      monitor::logger("drill")->error("shell: the worker of rank {} fails after step {} (kill worker)", rank,
                                      steps_done);
      throw std::runtime_error(fmt::format("shell: kill worker {}: injected failure after step {}", rank, steps_done));
    }
    if (!order.checkpoint) return std::nullopt;
    if (loop.mirror_to_host) loop.mirror_to_host();
    // A failed save is reported by the checkpoint reporter; training goes on as after a due one.
    (void)checkpoints.save_now(steps_done, loop.held);
  }
}

// A step that threw before its optimizer update left this rank holding the state of step
// `steps_done`: it writes that as a rescue snapshot when the job names it a writer.
void rescue_after_failed_step(const TrainingLoop& loop, checkpoint::RunCheckpoints& checkpoints, long steps_done) {
  if (!loop.rescue.role) return;
  const std::optional<RescueRole> role = loop.rescue.role(std::current_exception());
  if (!role) return;
  monitor::logger("checkpoint")->info("rank {} writes its memory of step {} as a rescue snapshot (shard {} of {})",
                                      loop.rank, steps_done, role->writer, role->writers);
  const Status written = checkpoints.rescue(steps_done, loop.held, role->writer, role->writers, role->commit_timeout);
  if (!written) monitor::logger("checkpoint")->error("rescue snapshot of step {}: {}", steps_done, written.error().message);
  if (loop.rescue.done) loop.rescue.done(steps_done, written);
}

}  // namespace

RunOutcome drive_training(const ResolvedJob& job, const JobData& data, const std::string& backend_name,
                          TrainingLoop& loop, bool reports, monitor::WorkProgress& progress) {
  auto log_ptr = reports ? monitor::logger("train") : monitor::silent_logger();
  spdlog::logger& log = *log_ptr;
  const TrainOptions& t = job.config.train;
  const compute::GPTConfig& m = job.model;
  log.info("model: {} layers, {} embd, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters", m.n_layer,
           m.n_embd, m.n_head, m.block_size, m.vocab_size, m.padded_vocab_size,
           compute::ParameterLayout(m).total() / 1e6);
  log.info("data: {}", data.description);
  log.info("training {} steps of {} tokens ({}) on {} with {} thread(s) each", t.steps, loop.tokens_per_step,
           loop.layout, backend_name, t.threads == 0 ? std::string("all") : std::to_string(t.threads));

  auto validate_now = [&](long step) {
    progress.begin(fmt::format("validation after step {}", step));
    auto start = Clock::now();
    double val = loop.evaluate(t.val_batches);
    progress.unit_done();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    log.info("step {:>5}/{} | val loss {:.4f} ({} batches, {:.1f}s)", step, t.steps, val, t.val_batches, secs);
    return val;
  };

  auto checkpoint_log = monitor::logger("checkpoint");
  checkpoint::CheckpointReporter reporter{[checkpoint_log](const std::string& line) { checkpoint_log->info(line); },
                                          [checkpoint_log](const std::string& line) { checkpoint_log->error(line); },
                                          [metrics = loop.metrics](double seconds, std::uint64_t bytes) {
                                            if (metrics) metrics->checkpoint_saved(seconds, bytes);
                                          }};
  checkpoint::RunIdentity identity{job.model,
                                   config_json(job),
                                   loop.grid,
                                   loop.rank,
                                   loop.checkpoint_writers,
                                   t.seed,
                                   loop.tokens_per_step / t.seq_len,
                                   t.steps};
  checkpoint::RunCheckpoints checkpoints(checkpoint_options(job.config.checkpoint), identity, reporter);
  if (!checkpoints.startup()) return {2, checkpoints.startup().error().message};
  auto resumed = checkpoints.restore(loop.held);
  if (!resumed) return {2, resumed.error().message};
  for (const std::string& skipped : resumed->skipped) if (reports) checkpoint_log->warn(skipped);
  if (resumed->steps > 0) {
    if (loop.mirror_to_device) loop.mirror_to_device();
    loop.resume_at(resumed->steps);
    log.info("resumed from {} after step {} (data position and optimizer state included)", resumed->from,
             resumed->steps);
  } else if (job.config.checkpoint.resume) {
    log.info("no checkpoint in {} to resume from: starting fresh", job.config.checkpoint.dir);
  }

  const DrilledFailure drilled = DrilledFailure::from_environment();
  const auto run_start = Clock::now();
  double train_seconds = 0, last_loss = 0, last_val = NAN;
  Status last_save = Status::success();
  const ControlFinisher finisher{loop.control};
  for (long s = resumed->steps; s < t.steps; ++s) {
    if (loop.control) {
      std::optional<RunOutcome> stopped;
      try {
        stopped = obey_orders(*loop.control, s, loop.rank, checkpoints, loop, progress);
      } catch (const RescueAtBoundary&) {
        rescue_after_failed_step(loop, checkpoints, s);
        throw;
      }
      if (stopped) return *stopped;
    }
    progress.begin(fmt::format("step {}", s + 1));
    auto start = Clock::now();
    const auto wall_start = std::chrono::system_clock::now().time_since_epoch();
    if (resumed->steps == 0) drilled.throw_if_due(loop.rank, s + 1);
    compute::StepResult r;
    try {
      r = loop.step();
    } catch (...) {
      rescue_after_failed_step(loop, checkpoints, s);
      throw;
    }
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    progress.step_done({s + 1, std::chrono::duration<double>(wall_start).count(), secs, r.loss, loop.tokens_per_step});
    if (loop.metrics) loop.metrics->step_done(s + 1, secs, loop.tokens_per_step, r.loss, r.lr, r.grad_norm);
    train_seconds += secs;
    last_loss = r.loss;
    if (!std::isfinite(r.loss))
      return {1, fmt::format("training diverged at step {} (loss {}); lower train.lr", s + 1, r.loss)};
    long done = s + 1;
    const long steps_this_run = done - resumed->steps;
    if (t.log_every > 0 && (done % t.log_every == 0 || done == t.steps)) {
      double eta = train_seconds / static_cast<double>(steps_this_run) * static_cast<double>(t.steps - done);
      log.info("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | {:.0f} ms | ETA {}", done,
               t.steps, r.loss, r.lr, r.grad_norm, static_cast<double>(loop.tokens_per_step) / secs,
               secs * 1e3, monitor::duration_text(eta));
    }
    if (loop.mirror_to_host && checkpoints.due(done)) loop.mirror_to_host();
    // A failed save is reported and training goes on; only the last one decides the exit code.
    if (Status saved = checkpoints.after_step(done, loop.held); !saved && done == t.steps) last_save = saved;
    if (t.val_every > 0 && done % t.val_every == 0 && done != t.steps) validate_now(done);
  }
  last_val = validate_now(t.steps);
  if (Status saved = checkpoints.finish(); !saved && last_save) last_save = saved;
  double wall = std::chrono::duration<double>(Clock::now() - run_start).count();
  // The parameter norm fingerprints the weights: equal layouts of one job print the same digits.
  log.info(
      "done: {} steps in {} | {:.0f} tok/s while training | final train loss {:.4f} | final val loss {:.4f} | "
      "param norm {:.9g}",
      t.steps, monitor::duration_text(wall),
      train_seconds > 0 ? static_cast<double>(loop.tokens_per_step * (t.steps - resumed->steps)) / train_seconds : 0.0,
      last_loss, last_val, loop.param_norm());
  if (!last_save) return {1, "the last checkpoint failed: " + last_save.error().message};
  if (reports && job.config.sample.tokens > 0) {
    if (loop.whole_model != nullptr)
      print_sample(*loop.whole_model, job, log);
    else
      log.info("no sample: no rank holds the whole model (pipeline.stages > 1)");
  }
  return {};
}

RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, monitor::WorkProgress& progress,
                        monitor::WorkerMetrics* metrics, monitor::StepControl* control, RescueHooks rescue) {
  const TrainOptions& t = job.config.train;
  compute::GPT model(job.model, backend);
  model.init_parameters(t.seed);
  compute::TrainerOptions options = trainer_options(job);
  const bool reports = data_parallel.rank == 0;
  const int ranks = data_parallel.size;
  options.data_parallel = std::move(data_parallel);
  compute::Trainer trainer(model, options, data.train, data.val);
  TrainingLoop loop;
  loop.step = [&] { return trainer.step(); };
  loop.evaluate = [&](int batches) { return trainer.evaluate(batches); };
  loop.param_norm = [&] { return std::sqrt(backend.sum_of_squares(model.params())); };
  loop.tokens_per_step = trainer.tokens_per_step();
  loop.layout = fmt::format("{} rank(s) x batch {} x seq {} x accum {}", ranks, t.batch_size, t.seq_len, t.grad_accum);
  loop.whole_model = &model;
  // Replicas hold equal parameters and (ZeRO 0) equal moments: the first writes them. Under ZeRO
  // each rank's moments are its own shard and every rank writes its shard.
  const bool writes_params = options.data_parallel.rank == 0;
  const bool writes_moments = writes_params || options.data_parallel.zero_stage > 0;
  compute::AdamW& adamw = trainer.optimizer();
  const auto [moments_begin, moments_end] = adamw.range();
  // Checkpoints read and write host memory: state on a device goes through host mirrors.
  const std::vector<compute::Tensor*> state{&model.params(), &adamw.first_moments(), &adamw.second_moments()};
  std::vector<compute::Tensor> mirrors;
  for (compute::Tensor* t : state)
    mirrors.push_back(backend.device() == compute::Device::cpu ? *t : compute::Tensor::zeros(t->shape(), t->dtype()));
  if (backend.device() != compute::Device::cpu) {
    loop.mirror_to_host = [&backend, state, &mirrors] {
      for (std::size_t i = 0; i < state.size(); ++i) backend.copy(mirrors[i], *state[i]);
    };
    loop.mirror_to_device = [&backend, state, &mirrors] {
      for (std::size_t i = 0; i < state.size(); ++i) backend.copy(*state[i], mirrors[i]);
    };
  }
  loop.held = {{"param", 0, model.layout().total(), mirrors[0].data_as<float>(), writes_params},
               {"adam_m", moments_begin, moments_end, mirrors[1].data_as<float>(), writes_moments},
               {"adam_v", moments_begin, moments_end, mirrors[2].data_as<float>(), writes_moments}};
  loop.resume_at = [&trainer](long steps) { trainer.resume_at(steps); };
  loop.rank = options.data_parallel.rank;
  loop.grid = {ranks, 1, 1};
  loop.checkpoint_writers = options.data_parallel.zero_stage > 0 ? ranks : 1;
  loop.metrics = metrics;
  loop.control = control;
  loop.rescue = std::move(rescue);
  return drive_training(job, data, backend.name(), loop, reports, progress);
}

}  // namespace troupe::actors