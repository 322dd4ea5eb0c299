// troupe bench compute: training throughput of one worker (forward + backward + clip + AdamW)
// for each model preset and thread count, as model FLOP/s over OpenBLAS' sgemm peak measured in
// the same run on the same thread count, so the figure (MFU) means the same on any machine.
//
// Model FLOPs per token: the matmuls a causal model needs (compute/model/flops.hpp).
//
// With --vs-pytorch, each (model, thread count) runs in rounds that alternate with the same model
// in PyTorch (scripts/bench/torch_cpu_train.py, a process per round): Troupe's round, PyTorch's
// round, and so on, so both sides see the machine in the same state. A round is `steps` measured
// steps on each side, its figure the median step; the ratio reported is the median of the rounds'
// ratios. Troupe's model is built and warmed up once per row; PyTorch's once per round.
//
// With --precision bf16, each round runs Troupe twice, fp32 then bf16 (train.precision, each on a
// backend of its own), then PyTorch under bf16 autocast: the figures are bf16's, beside fp32's
// and their ratio (the median of the rounds'). On a CPU with BF16 units the rows of a preset that
// has targets print them, met or not; on one without, the bench says the policy brings no speed
// there and prints no target.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/op_timing_backend.hpp"
#include "apps/bench/pytorch_script.hpp"
#include "apps/exit_codes.hpp"
#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/sgemm_peak.hpp"
#include "compute/cpu/simd_clones.hpp"
#include "compute/data/synthetic_tokens.hpp"
#include "compute/model/flops.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kTorchScript = "torch_cpu_train.py";

// The PyTorch side, once the interpreter has answered the probe.
struct Torch {
  std::string python, script;
  std::string version;  // the probe's line: "torch <version> attention <kind> adamw <kind>"
};

// One model on one backend: the trainer is built and warmed up once; each measure() is a round.
class ModelRun {
 public:
  ModelRun(compute::Backend& backend, const compute::GPTConfig& cfg, const BenchComputeOptions& o, int rounds)
      : cfg_(cfg),
        steps_(o.steps),
        stream_(compute::synthetic_tokens(static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1, cfg.vocab_size)),
        timed_(backend, [] {}),
        model_(cfg, timed_) {
    model_.init_parameters(1);
    compute::TrainerOptions options;
    options.batch_size = o.batch;
    options.seq_len = cfg.block_size;
    options.lr = {1e-4, 1e-5, 0, o.warmup + rounds * o.steps + 1};
    trainer_.emplace(model_, options, stream_, stream_);
    for (int i = 0; i < o.warmup; ++i) trainer_->step();
  }

  // Tokens/s of the median of `steps` steps (a shared machine's stalls hit single steps).
  double measure() {
    std::vector<double> step_seconds;
    for (int i = 0; i < steps_; ++i) {
      const auto start = Clock::now();
      trainer_->step();
      step_seconds.push_back(seconds_since(start));
    }
    return static_cast<double>(trainer_->tokens_per_step()) / median(step_seconds);
  }

  // One more step with every op timed; prints the table.
  void profile() {
    timed_.clear();
    timed_.set_timing(true);
    const auto start = Clock::now();
    trainer_->step();
    const double step = seconds_since(start);
    timed_.set_timing(false);
    print_op_times(timed_.seconds(), step);
  }

  double params() const { return static_cast<double>(model_.layout().total()); }
  // Bytes of the activation buffers the model reserved for its micro-batch (GPTStage::activation_bytes).
  double activation_bytes() { return static_cast<double>(model_.stage().activation_bytes()); }
  double tokens_per_step() const { return static_cast<double>(trainer_->tokens_per_step()); }

 private:
  compute::GPTConfig cfg_;
  int steps_;
  std::vector<std::uint16_t> stream_;
  OpTimingBackend timed_;  // forwards only, but for profile()
  compute::GPT model_;
  std::optional<compute::Trainer> trainer_;
};

// One round of the PyTorch script at this model's dimensions; nothing (and its last lines
// printed) when it fails.
std::optional<double> torch_round(const Torch& torch, const compute::GPTConfig& cfg, const BenchComputeOptions& o,
                                  int threads) {
  std::vector<std::string> args{
      "--layers", std::to_string(cfg.n_layer),    "--embd",         std::to_string(cfg.n_embd),
      "--heads",  std::to_string(cfg.n_head),     "--seq",          std::to_string(cfg.block_size),
      "--vocab",  std::to_string(cfg.vocab_size), "--padded-vocab", std::to_string(cfg.padded_vocab_size),
      "--batch",  std::to_string(o.batch),        "--threads",      std::to_string(threads),
      "--steps",  std::to_string(o.steps),        "--warmup",       std::to_string(o.warmup)};
  args.insert(args.end(), {"--precision", std::string(compute::precision_name(o.precision))});
  const ScriptRun run = run_python_script(torch.python, torch.script, args);
  if (!run.tokens_per_s)
    for (const std::string& line : run.lines) std::printf("  pytorch | %s\n", line.c_str());
  return run.tokens_per_s;
}

// The PyTorch side when `python` runs the script's probe; otherwise nothing, after one line
// saying why and how to get a PyTorch.
std::optional<Torch> probe_torch(const std::string& python, const std::string& script) {
  const ScriptRun run = run_python_script(python, script, {"--probe"});
  for (const std::string& line : run.lines)
    if (run.exit_code == 0 && line.rfind("torch ", 0) == 0) return Torch{python, script, line};
  const std::string why = run.lines.empty() ? "no output" : run.lines.back();
  std::printf(
      "pytorch: not measured, %s cannot import torch (%s). For PyTorch 1.13: apt-get install python3-torch; for 2.x "
      "(about 5 GB): python3 -m venv V && V/bin/pip install torch, then --python V/bin/python3\n",
      python.c_str(), why.c_str());
  return std::nullopt;
}

struct Row {
  std::string model;
  int threads = 0;
  double params = 0, tokens = 0, tokens_per_s = 0, flops_per_s = 0, peak = 0;
  int T = 0;
  std::optional<double> torch_tokens_per_s, ratio;   // medians over the rounds
  std::optional<double> fp32_tokens_per_s, speedup;  // --precision bf16: fp32's, and bf16 ÷ fp32
  std::optional<double> activation_ratio;            // --precision bf16: bf16's activation bytes ÷ fp32's
};

// What bf16 should reach on a CPU with BF16 units, per preset: tokens/s over Troupe fp32's and
// over PyTorch's under bf16 autocast, both in the same run, and activation bytes at most this
// share of fp32's.
struct Bf16Target {
  std::string_view model;
  double over_fp32, over_pytorch, activations;
};
constexpr Bf16Target bf16_targets[] = {{"small", 1.6, 1.2, 0.55}};

void print_bf16_targets(const std::vector<Row>& rows) {
  for (const Row& r : rows)
    for (const Bf16Target& target : bf16_targets) {
      if (r.model != target.model) continue;
      std::printf("target %s, %d thread(s): bf16 / fp32 %.3f (target %.1f, %s)", r.model.c_str(), r.threads, *r.speedup,
                  target.over_fp32, *r.speedup >= target.over_fp32 ? "met" : "not met");
      if (r.ratio)
        std::printf("; troupe / pytorch bf16 %.3f (target %.1f, %s)", *r.ratio, target.over_pytorch,
                    *r.ratio >= target.over_pytorch ? "met" : "not met");
      std::printf("; activation bytes bf16 / fp32 %.3f (target %.2f, %s)\n", *r.activation_ratio, target.activations,
                  *r.activation_ratio <= target.activations ? "met" : "not met");
    }
}

// A torch built on the system's OpenBLAS (Debian's python3-torch) takes the kernels that OpenBLAS
// picks for this CPU, and one older than the CPU falls back to SSE3 ("Prescott"), about a fifth of
// the sgemm speed, where troupe's backend has already named the right core
// (compute/cpu/openblas_setup.hpp). Unless the user chose a core, the PyTorch rounds get the core
// troupe's OpenBLAS runs, so both sides multiply with the same kernels. A torch on MKL ignores it.
// Once set, the variable makes later calls (one per thread count) do nothing.
void give_torch_the_same_blas_kernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const std::string core = compute::cpu::openblas_core();
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  std::printf("pytorch: runs with OPENBLAS_CORETYPE=%s, the OpenBLAS kernels troupe runs\n", core.c_str());
}

}  // namespace

int run_bench_compute(const BenchComputeOptions& options) {
  std::optional<Torch> torch;
  if (options.vs_pytorch) {
    if (options.python_given && !is_executable_program(options.python))
      return error_exit(ExitCode::bad_input, "--python " + options.python + ": not found or not executable");
    const std::string script = find_bench_script(kTorchScript);
    if (script.empty())
      return error_exit(ExitCode::bad_input, "bench compute --vs-pytorch: cannot find scripts/bench/" +
                                                 std::string(kTorchScript) +
                                                 " beside this troupe or in its source tree");
  }
  const bool bf16 = options.precision == compute::Precision::bf16;
  std::printf(
      "bench compute: cpu backend (elementwise loops: the %s clone), micro-batch %d, %d measured step(s) per round "
      "after %d warm-up\n",
      compute::cpu::simd_clone_name(compute::cpu::simd_clone_in_use()), options.batch, options.steps, options.warmup);
  const bool bf16_units = compute::cpu::bf16_units_of_this_cpu() == compute::cpu::Bf16Units::hardware;
  if (bf16 && bf16_units)
    std::printf("precision bf16: products on %s (oneDNN), against fp32 in the same rounds\n",
                compute::cpu::bf16_isa_name().c_str());
  if (bf16 && !bf16_units)
    std::printf(
        "precision bf16: the products are emulated in fp32 (%s) and bring no speed here; no target is printed\n",
        compute::cpu::bf16_emulation_reason().c_str());
  if (options.vs_pytorch) {
    if (is_executable_program(options.python)) {
      torch = probe_torch(options.python, find_bench_script(kTorchScript));
    } else {
      std::printf(
          "pytorch: not measured, %s is not on PATH. For PyTorch 1.13: apt-get install python3-torch; for 2.x "
          "(about 5 GB): python3 -m venv V && V/bin/pip install torch, then --python V/bin/python3\n",
          options.python.c_str());
    }
    if (torch)
      std::printf("pytorch: %s, from %s; %d alternating rounds per row, troupe first\n", torch->version.c_str(),
                  torch->python.c_str(), options.rounds);
  }
  std::fflush(stdout);
  const int rounds = torch || bf16 ? options.rounds : 1;

  std::vector<Row> rows;
  for (const int requested : options.threads) {
    const int threads = requested > 0 ? requested : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    // The backend sets OpenBLAS' thread count for the process: one thread count at a time.
    auto backend = compute::make_backend(compute::BackendKind::cpu, options.precision, threads);
    if (!backend) return error_exit(ExitCode::bad_input, backend.error().message);
    std::unique_ptr<compute::Backend> fp32_backend;  // bf16's baseline, in the same rounds
    if (bf16) {
      auto made = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, threads);
      if (!made) return error_exit(ExitCode::bad_input, made.error().message);
      fp32_backend = std::move(*made);
    }
    if (torch) give_torch_the_same_blas_kernels();
    const double peak = compute::cpu::measure_sgemm_peak();
    std::printf("%d thread(s): sgemm peak (OpenBLAS, best of n=1024/2048) %.1f GFLOP/s\n", threads, peak / 1e9);
    std::fflush(stdout);
    for (const auto& name : options.models) {
      const compute::GPTConfig cfg = *compute::gpt_preset(name);
      ModelRun run(**backend, cfg, options, rounds);
      std::optional<ModelRun> fp32_run;
      if (fp32_backend) fp32_run.emplace(*fp32_backend, cfg, options, rounds);
      std::vector<double> troupe_rounds, torch_rounds, ratios, fp32_rounds, speedups;
      for (int r = 0; r < rounds; ++r) {
        if (fp32_run) fp32_rounds.push_back(fp32_run->measure());
        troupe_rounds.push_back(run.measure());
        if (fp32_run) {
          speedups.push_back(troupe_rounds.back() / fp32_rounds.back());
          std::printf(
              "  %s, %d thread(s), round %d/%d: troupe fp32 %.0f tokens/s, bf16 %.0f tokens/s, bf16/fp32 %.3f\n",
              name.c_str(), threads, r + 1, rounds, fp32_rounds.back(), troupe_rounds.back(), speedups.back());
          std::fflush(stdout);
        }
        if (!torch) continue;
        const std::optional<double> other = torch_round(*torch, cfg, options, threads);
        if (!other)
          return error_exit(ExitCode::failure, "bench compute --vs-pytorch: " + torch->script + " failed under " +
                                                   torch->python + " (its last lines are above)");
        torch_rounds.push_back(*other);
        ratios.push_back(troupe_rounds.back() / *other);
        std::printf(
            "  %s, %d thread(s), round %d/%d: troupe %.0f tokens/s, pytorch %.0f tokens/s, troupe/pytorch %.3f\n",
            name.c_str(), threads, r + 1, rounds, troupe_rounds.back(), *other, ratios.back());
        std::fflush(stdout);
      }
      if (options.profile) {
        std::printf("  %s, %d thread(s), ", name.c_str(), threads);
        run.profile();
      }
      Row row{name, threads, run.params(), run.tokens_per_step(), median(troupe_rounds)};
      row.T = cfg.block_size;
      row.flops_per_s = row.tokens_per_s * compute::model_flops_per_token(cfg, cfg.block_size);
      row.peak = peak;
      if (torch) {
        row.torch_tokens_per_s = median(torch_rounds);
        row.ratio = median(ratios);
      }
      if (fp32_run) {
        row.fp32_tokens_per_s = median(fp32_rounds);
        row.speedup = median(speedups);
        row.activation_ratio = run.activation_bytes() / fp32_run->activation_bytes();
      }
      rows.push_back(row);
    }
  }

  std::printf("\n%-6s %7s %9s %4s %5s %10s %9s %13s %7s", "model", "threads", "params", "B", "T", "tokens/s",
              "median ms", "model GFLOP/s", "MFU");
  if (bf16) std::printf(" %15s %9s %14s", "fp32 tokens/s", "bf16/fp32", "act bytes/fp32");
  if (torch) std::printf(" %16s %14s", "pytorch tokens/s", "troupe/pytorch");
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("%-6s %7d %8.2fM %4d %5d %10.0f %9.1f %13.1f %7.3f", r.model.c_str(), r.threads, r.params / 1e6,
                options.batch, r.T, r.tokens_per_s, 1e3 * r.tokens / r.tokens_per_s, r.flops_per_s / 1e9,
                r.flops_per_s / r.peak);
    if (r.speedup) std::printf(" %15.0f %9.3f %14.3f", *r.fp32_tokens_per_s, *r.speedup, *r.activation_ratio);
    if (r.ratio) std::printf(" %16.0f %14.3f", *r.torch_tokens_per_s, *r.ratio);
    std::printf("\n");
  }
  std::printf(
      "\nTokens/s from the median step (of each side's round; the median of the rounds). MFU = model FLOP/s / "
      "sgemm peak on the same thread count; model FLOPs per token = 72*L*C^2 + 6*L*C*(T+1) + 6*V*C, the matmuls "
      "of causal attention and the tied lm head over V.\n");
  if (bf16)
    std::printf(
        "Precision bf16: tokens/s, ms and MFU are bf16's (MFU still over the sgemm peak); bf16/fp32 the median of the "
        "rounds' ratios; act bytes/fp32 the bytes of the activation buffers the model reserves for its micro-batch, "
        "bf16's over fp32's.\n");
  if (torch)
    std::printf("troupe/pytorch: the median of the rounds' ratios%s.\n",
                bf16 ? ", PyTorch under torch.autocast(\"cpu\", dtype=torch.bfloat16)" : "");
  if (bf16 && bf16_units) print_bf16_targets(rows);
  return to_int(ExitCode::success);
}

Command add_bench_compute_command(CLI::App& bench) {
  auto options = std::make_shared<BenchComputeOptions>();
  options->models = {"tiny", "small"};
  CLI::App* command = bench.add_subcommand("compute", "Training-step throughput of one worker, per model preset.");
  command->add_option("--models", options->models, "model presets, comma-separated")
      ->delimiter(',')
      ->type_name("LIST")
      ->default_str("tiny,small");
  command->add_option("--batch", options->batch, "micro-batch size B")->capture_default_str();
  command->add_option("--threads", options->threads, "CPU thread counts, comma-separated (1,2: both); 0 = all cores")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& count) -> std::string { return count.empty() ? "a thread count is empty" : ""; }, "COUNT"))
      ->type_name("LIST")
      ->default_str("1");
  command->add_option("--steps", options->steps, "measured steps per round")->capture_default_str();
  command->add_option("--warmup", options->warmup, "unmeasured steps first")->capture_default_str();
  command->add_flag("--vs-pytorch", options->vs_pytorch,
                    "alternate rounds with the same model in PyTorch (scripts/bench/torch_cpu_train.py)");
  command->add_option("--python", options->python, "the Python that runs PyTorch (implies --vs-pytorch)")
      ->type_name("PATH")
      ->capture_default_str();
  command->add_option("--rounds", options->rounds, "alternating rounds per row with PyTorch")->capture_default_str();
  command->add_flag("--profile", options->profile, "time one more step op by op and print where it goes");
  add_precision_option(*command, options->precision,
                       "fp32, or bf16: train.precision bf16 against fp32 in the same rounds (and PyTorch under bf16 "
                       "autocast)");
  return refusing_unknown(*command, [command, options] {
    BenchComputeOptions given = *options;
    given.python_given = command->count("--python") > 0;
    given.vs_pytorch = given.vs_pytorch || given.python_given;
    if (Status valid = validate(given); !valid) return error_exit(ExitCode::bad_input, valid.error().message);
    return run_bench_compute(given);
  });
}

}  // namespace troupe::apps
