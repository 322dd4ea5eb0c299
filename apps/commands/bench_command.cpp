// troupe bench compute: training throughput of one worker (forward + backward + clip + AdamW)
// for each model preset, as model FLOP/s over OpenBLAS' sgemm peak measured in the same run on
// the same thread count, so the figure (MFU) means the same on any machine.
//
// Model FLOPs per token = 6·N + 12·L·C·T (N all parameters), as in the PaLM/nanoGPT estimate.

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "compute/cpu/sgemm_peak.hpp"
#include "compute/model/flops.hpp"
#include "compute/data/synthetic_tokens.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct ModelFigures {
  double params = 0, tokens_per_s = 0, flops_per_s = 0, step_ms = 0;
};

ModelFigures bench_model(compute::Backend& backend, const compute::GPTConfig& cfg, const BenchComputeOptions& o) {
  const int T = cfg.block_size;
  const std::vector<std::uint16_t> stream =
      compute::synthetic_tokens(static_cast<std::size_t>(o.batch) * T * 4 + 1, cfg.vocab_size);
  compute::GPT model(cfg, backend);
  model.init_parameters(1);
  compute::TrainerOptions options;
  options.batch_size = o.batch;
  options.seq_len = T;
  options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
  compute::Trainer trainer(model, options, stream, stream);
  for (int i = 0; i < o.warmup; ++i) trainer.step();
  // The median step, not the mean: a shared machine's stalls hit single steps, not the model.
  std::vector<double> step_seconds;
  for (int i = 0; i < o.steps; ++i) {
    auto start = Clock::now();
    trainer.step();
    step_seconds.push_back(seconds_since(start));
  }
  std::sort(step_seconds.begin(), step_seconds.end());
  const std::size_t n = step_seconds.size();
  const double secs = n % 2 ? step_seconds[n / 2] : 0.5 * (step_seconds[n / 2 - 1] + step_seconds[n / 2]);

  ModelFigures f;
  f.params = static_cast<double>(model.layout().total());
  double tokens = static_cast<double>(trainer.tokens_per_step());
  const double flops_per_token = compute::model_flops_per_token(cfg, T);
  f.tokens_per_s = tokens / secs;
  f.flops_per_s = f.tokens_per_s * flops_per_token;
  f.step_ms = secs * 1e3;
  return f;
}

}  // namespace

int run_bench_compute(const BenchComputeOptions& options) {
  auto backend = compute::make_backend("cpu", options.threads);
  if (!backend) return error_exit(ExitCode::bad_input, backend.error().message);
  std::printf("bench compute: cpu backend, %d thread(s), micro-batch %d, %d measured step(s) after %d warm-up\n",
              options.threads, options.batch, options.steps, options.warmup);
  const double peak = compute::cpu::measure_sgemm_peak();
  std::printf("sgemm peak (OpenBLAS, %d thread(s), best of n=1024/2048): %.1f GFLOP/s\n\n", options.threads,
              peak / 1e9);
  std::printf("%-6s %9s %4s %5s %10s %9s %13s %7s\n", "model", "params", "B", "T", "tokens/s", "median ms",
              "model GFLOP/s", "MFU");
  for (const auto& name : options.models) {
    compute::GPTConfig cfg = *compute::gpt_preset(name);
    ModelFigures f = bench_model(**backend, cfg, options);
    std::printf("%-6s %8.2fM %4d %5d %10.0f %9.1f %13.1f %7.3f\n", name.c_str(), f.params / 1e6, options.batch,
                cfg.block_size, f.tokens_per_s, f.step_ms, f.flops_per_s / 1e9, f.flops_per_s / peak);
    std::fflush(stdout);
  }
  std::printf("\nFigures from the median step. MFU = model FLOP/s / sgemm peak; model FLOPs per token = 6N + 12*L*C*T.\n");
  return to_int(ExitCode::success);
}

}  // namespace troupe::apps
