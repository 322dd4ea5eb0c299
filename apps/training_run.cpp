// One rank's training run (training_run.hpp): a line per step, the validation loss every
// train.val_every steps, a summary, and a sample from the trained model.

#include <chrono>
#include <cmath>
#include <cstdio>

#include <spdlog/fmt/fmt.h>

#include "apps/training_run.hpp"
#include "compute/data/decode.hpp"
#include "compute/model/generate.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

std::string format_duration(double seconds) {
  long s = std::lround(seconds);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

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

  const auto run_start = Clock::now();
  double train_seconds = 0, last_loss = 0, last_val = NAN;
  for (long s = 0; s < t.steps; ++s) {
    progress.begin(fmt::format("step {}", s + 1));
    auto start = Clock::now();
    compute::StepResult r = loop.step();
    progress.step_done(s + 1);
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    train_seconds += secs;
    last_loss = r.loss;
    if (!std::isfinite(r.loss))
      return {1, fmt::format("training diverged at step {} (loss {}); lower train.lr", s + 1, r.loss)};
    long done = s + 1;
    if (t.log_every > 0 && (done % t.log_every == 0 || done == t.steps)) {
      double eta = train_seconds / static_cast<double>(done) * static_cast<double>(t.steps - done);
      log.info("step {:>5}/{} | loss {:.4f} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | {:.0f} ms | ETA {}", done,
               t.steps, r.loss, r.lr, r.grad_norm, static_cast<double>(loop.tokens_per_step) / secs,
               secs * 1e3, format_duration(eta));
    }
    if (t.val_every > 0 && done % t.val_every == 0 && done != t.steps) validate_now(done);
  }
  last_val = validate_now(t.steps);
  double wall = std::chrono::duration<double>(Clock::now() - run_start).count();
  // The parameter norm fingerprints the weights: equal layouts of one job print the same digits.
  log.info(
      "done: {} steps in {} | {:.0f} tok/s while training | final train loss {:.4f} | final val loss {:.4f} | "
      "param norm {:.9g}",
      t.steps, format_duration(wall), static_cast<double>(loop.tokens_per_step * t.steps) / train_seconds,
      last_loss, last_val, loop.param_norm());
  if (reports && job.config.sample.tokens > 0) {
    if (loop.whole_model != nullptr)
      print_sample(*loop.whole_model, job, log);
    else
      log.info("no sample: no rank holds the whole model (pipeline.stages > 1)");
  }
  return {};
}

RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, monitor::WorkProgress& progress) {
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
  return drive_training(job, data, backend.name(), loop, reports, progress);
}

}  // namespace troupe::apps