// troupe bench gpu. MFU = model FLOP/s / the device's bf16 GEMM peak measured by cuBLASLt in the
// same run; model FLOPs per token as compute/model/flops.hpp counts them (the matmuls a causal
// model needs: 72·L·C² + 6·L·C·(T + 1) + 6·V·C).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/op_timing_backend.hpp"
#include "apps/bench/pytorch_script.hpp"
#include "apps/exit_codes.hpp"
#include "compute/data/synthetic_tokens.hpp"
#include "compute/model/flops.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/trainer.hpp"
#ifdef TROUPE_HAVE_CUDA
#include "compute/cuda/cuda_backend.hpp"
#include "compute/cuda/device.hpp"
#include "compute/cuda/gemm_peak.hpp"
#endif

namespace troupe::apps {
namespace {

#ifdef TROUPE_HAVE_CUDA
// Tokens/s that the PyTorch script prints for `mode`, or nothing when the run fails; then the
// script's last lines are printed, so the failure can be read without running it again.
std::optional<double> torch_tokens_per_s(const BenchGpuOptions& o, const std::string& mode) {
  const ScriptRun run = run_python_script("python3", o.torch_script,
                                          {"--mode", mode, "--batch", std::to_string(o.batch), "--seq",
                                           std::to_string(o.seq), "--steps", std::to_string(o.steps), "--warmup",
                                           std::to_string(o.warmup)});
  if (!run.tokens_per_s)
    for (const std::string& l : run.lines) std::printf("  pytorch %s | %s\n", mode.c_str(), l.c_str());
  return run.tokens_per_s;
}

bool torch_available() { return std::system("python3 -c 'import torch' > /dev/null 2>&1") == 0; }
#endif

}  // namespace

int run_bench_gpu(const BenchGpuOptions& o) {
#ifndef TROUPE_HAVE_CUDA
  return error_exit(
      ExitCode::bad_input,
      "bench gpu: this build has no CUDA support (no nvcc, cuBLAS and NCCL under /usr/local/cuda at configure time)");
#else
  using Clock = std::chrono::steady_clock;
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  if (o.seq > cfg.block_size)
    return error_exit(ExitCode::bad_input, "bench gpu: --seq " + std::to_string(o.seq) + " exceeds " + o.model +
                                               "'s block size " + std::to_string(cfg.block_size));
  auto device = compute::cuda_device();
  if (!device) return error_exit(ExitCode::bad_input, "bench gpu: " + device.error().message);
  auto backend = compute::CudaBackend::create(o.precision);
  if (!backend) return error_exit(ExitCode::bad_input, "bench gpu: " + backend.error().message);
  compute::CudaBackend& gpu = **backend;
  auto peak = compute::measure_bf16_gemm_peak(8192, 20);
  if (!peak) return error_exit(ExitCode::bad_input, peak.error().message);
  std::printf("bench gpu: %s; bf16 GEMM peak (cuBLASLt, 8192³) %.1f TFLOP/s\n", device->c_str(), *peak / 1e12);

  const std::vector<std::uint16_t> stream =
      compute::synthetic_tokens(static_cast<std::size_t>(o.batch) * o.seq * 4 + 1, cfg.vocab_size);
  OpTimingBackend timed(gpu, [&gpu] { gpu.synchronize(); });
  compute::GPT model(cfg, timed);
  model.init_parameters(1);
  compute::TrainerOptions options;
  options.batch_size = o.batch;
  options.seq_len = o.seq;
  options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
  compute::Trainer trainer(model, options, stream, stream);
  for (int i = 0; i < o.warmup; ++i) trainer.step();
  gpu.synchronize();
  std::vector<double> seconds;
  double loss = 0;
  for (int i = 0; i < o.steps; ++i) {
    const auto start = Clock::now();
    loss = trainer.step().loss;
    gpu.synchronize();  // the step's last AdamW kernels belong to it
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  const double step = seconds[seconds.size() / 2];
  const double flops_per_token = compute::model_flops_per_token(cfg, o.seq);
  const double tokens_per_s = static_cast<double>(trainer.tokens_per_step()) / step;
  std::printf("troupe %s (%s): B=%d T=%d, %.1f ms/step, %.0f tokens/s, MFU %.1f%% (loss %.3f)\n", o.model.c_str(),
              gpu.name().c_str(), o.batch, o.seq, step * 1e3, tokens_per_s,
              100.0 * tokens_per_s * flops_per_token / *peak, loss);

  // One more step with a wait after every op: where the time goes.
  timed.set_timing(true);
  const auto profiled = Clock::now();
  trainer.step();
  gpu.synchronize();
  const double profiled_step = std::chrono::duration<double>(Clock::now() - profiled).count();
  timed.set_timing(false);
  print_op_times(timed.seconds(), profiled_step);

  if (o.torch_script.empty()) return to_int(ExitCode::success);
  if (!torch_available()) {
    std::printf("pytorch: not measured (python3 cannot import torch)\n");
    return to_int(ExitCode::success);
  }
  for (const char* mode : {"eager", "compile"}) {
    const auto torch = torch_tokens_per_s(o, mode);
    if (!torch) {
      std::printf("pytorch %s: the script failed (run it by hand: python3 %s --mode %s)\n", mode,
                  o.torch_script.c_str(), mode);
      continue;
    }
    std::printf("pytorch %s: %.0f tokens/s, MFU %.1f%%; troupe / pytorch = %.2f\n", mode, *torch,
                100.0 * *torch * flops_per_token / *peak, tokens_per_s / *torch);
  }
  return to_int(ExitCode::success);
#endif
}

Command add_bench_gpu_command(CLI::App& bench) {
  auto options = std::make_shared<BenchGpuOptions>();
  CLI::App* command = bench.add_subcommand(
      "gpu", "One GPU's training tokens/s and MFU against its measured bf16 GEMM peak, beside PyTorch.");
  add_model_option(*command, options->model);
  add_precision_option(*command, options->precision, "the cuda backend's train.precision: fp32 or bf16");
  command->add_option("--batch", options->batch, "micro-batch size B")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--seq", options->seq, "sequence length T (at most the preset's block size)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command->add_option("--steps", options->steps, "measured steps")->check(CLI::Range(1, 100000))->capture_default_str();
  command->add_option("--warmup", options->warmup, "unmeasured steps first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  command->add_option("--torch-script", options->torch_script, "PyTorch comparison script; empty to skip")
      ->capture_default_str();
  command->allow_extras(false);  // bench allows extras for its default; an unknown option here is an error
  return {command, [options] { return run_bench_gpu(*options); }};
}

}  // namespace troupe::apps
