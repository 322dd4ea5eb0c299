#pragma once
// The bench commands: what each measures, its options, the function that runs it and the one
// that registers it under `troupe bench` (add_bench_<name>_command, as apps/commands/commands.hpp
// registers the commands). Each returns the process exit code of apps/exit_codes.hpp.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/commands/command.hpp"
#include "comm/bench/allreduce_bench.hpp"
#include "compute/expected.hpp"
#include "compute/precision.hpp"

namespace troupe::apps {

// troupe bench: registers the group and every bench below under it, in the order `troupe bench
// --help` lists them; its Command runs the bench the command line chose.
Command add_bench_command(CLI::App& app);

// troupe bench compute: forward/backward/update throughput of one worker per model preset and
// thread count, optionally beside the same model in PyTorch (scripts/bench/torch_cpu_train.py).
struct BenchComputeOptions {
  std::vector<std::string> models;  // preset names
  int batch = 8;
  std::vector<int> threads{1};  // one row per count, each in this process; 0 = all cores
  int steps = 10;               // measured steps per round (figures from the median)
  int warmup = 1;               // unmeasured steps first
  bool vs_pytorch = false;      // alternate rounds with PyTorch when `python` imports torch
  std::string python = "python3";
  bool python_given = false;  // --python named: it must exist (the default may be absent: no torch)
  int rounds = 3;             // rounds per model and thread count with PyTorch (one without)
  bool profile = false;       // one more step timed op by op, printed per model and thread count
  // bf16: each row runs Troupe under train.precision bf16 and fp32 in alternating rounds, and
  // PyTorch (with --vs-pytorch) under bf16 autocast.
  compute::Precision precision = compute::Precision::fp32;
};
// The first problem with options (unknown model, count out of range) as a one-line error.
Status validate(const BenchComputeOptions& options);
int run_bench_compute(const BenchComputeOptions& options);
Command add_bench_compute_command(CLI::App& bench);

// troupe bench dp: data-parallel training throughput against one process, same run, the
// processes taking turns step by step.
struct BenchDpOptions {
  std::string model = "small";
  int batch = 8;  // micro-batch per rank
  int processes = 2;
  int steps = 15;  // measured iterations, each one step alone, independent and data-parallel
  int warmup = 1;  // unmeasured iterations first
};
int run_bench_dp(const BenchDpOptions& options);
Command add_bench_dp_command(CLI::App& bench);
// troupe bench compress: data parallelism on 2 ranks with gradient sums plain, in bf16 and as
// PowerSGD factors, stepping in turns: bytes per step and tokens/s of each, and their ratios.
struct BenchCompressOptions {
  std::string model = "small";
  int batch = 8;   // micro-batch per rank
  int steps = 6;   // measured iterations, each one step of every variant
  int warmup = 1;  // unmeasured iterations first
  int powersgd_rank = 4;
  int hosts = 1;  // 2: rank r on simulated host h<r> (scripts/netns-cluster.sh, root)
};
int run_bench_compress(BenchCompressOptions options);
Command add_bench_compress_command(CLI::App& bench);
// troupe bench diloco: what DiLoCo buys across a slow link. Two ranks train `model` in turns as
// plain data parallelism, with PowerSGD gradient sums, and as two DiLoCo islands (Streaming
// DiLoCo's fragments, overlap and bf16 pseudo-gradients), first over the link as it is, then
// shaped to `rate` on simulated hosts: bytes over the link per step and tokens/s of each.
struct BenchDilocoOptions {
  std::string model = "small";
  int batch = 8;   // micro-batch per rank
  int steps = 40;  // measured steps of each mode per turn
  int warmup = 2;  // unmeasured steps of each mode first
  int powersgd_rank = 4;
  long every = 20;              // H
  int fragments = 3;            // F
  long overlap = -1;            // d; -1 = the most the fragments allow, H/F - 1
  int hosts = 1;                // 2: rank r on simulated host h<r> (scripts/netns-cluster.sh, root)
  std::string rate = "20mbit";  // the shaped turn's link (tc rate), with --hosts 2
  std::string precision = "bf16";  // the pseudo-gradients on the wire: f32, bf16 or int8
};
int run_bench_diloco(BenchDilocoOptions options);
Command add_bench_diloco_command(CLI::App& bench);
// troupe bench zero3: ZeRO-3 (and ZeRO-3 with full recompute) against ZeRO-0 on the same ranks,
// stepping in turns: tokens/s and bytes per rank.
struct BenchZero3Options {
  std::string model = "small";
  int batch = 8;  // micro-batch per rank
  int processes = 2;
  int steps = 6;  // measured iterations, each one step of every variant
  int warmup = 1;
};
int run_bench_zero3(const BenchZero3Options& options);
Command add_bench_zero3_command(CLI::App& bench);
// troupe bench tp: a stage split over tensor shards against one process, same run, taking turns
// step by step: tokens/s, the bytes each shard moved per step and the bytes it holds.
struct BenchTpOptions {
  std::string model = "small";
  int batch = 8;  // micro-batch, the same for the shards together and for the one process
  int shards = 2;
  int steps = 15;  // measured iterations, each one step alone and one in tensor shards
  int warmup = 1;  // unmeasured iterations first
};
int run_bench_tp(const BenchTpOptions& options);
Command add_bench_tp_command(CLI::App& bench);
// troupe bench cp: context shards (ring and all_to_all) of a narrow model's long sequences against
// one process, same run, taking turns step by step: tokens/s and the scaling, the activation
// bytes a rank keeps, and the share of the ring's forward transfers hidden behind compute.
struct BenchCpOptions {
  int layers = 4;
  int channels = 32;
  int heads = 4;
  std::vector<int> seqs{4096, 8192, 16384};  // sequence lengths, one table each
  int shards = 2;                            // C; more than the cores is oversubscribed, and said so
  int steps = 2;                             // measured iterations, each a step of every side
  int warmup = 1;                            // unmeasured iterations first
};
int run_bench_cp(const BenchCpOptions& options);
Command add_bench_cp_command(CLI::App& bench);

// troupe bench moe: expert shards of a model with experts against one process, same run, taking
// turns step by step: the dispatch's all-to-all against an all-reduce of the same bytes, tokens/s
// and the scaling, and the load balance with and without the auxiliary loss.
struct BenchMoeOptions {
  std::string model = "moe-small";
  int batch = 4;   // micro-batch per rank
  int shards = 2;  // EP; more than the cores is oversubscribed, and said so
  int steps = 5;   // measured iterations, each a step of every side and one exchange of each kind
  int warmup = 1;
  int balance_steps = 40;  // steps of each load-balance run
  double aux_coef = 0.01;  // the load-balancing loss's coefficient in the runs with it
  double z_coef = 0.001;
};
int run_bench_moe(const BenchMoeOptions& options);
Command add_bench_moe_command(CLI::App& bench);

// troupe bench pipeline: the measured bubble of each schedule beside the simulator's prediction
// (from the costs measured in the same run) and the closed form; with --stage-speeds, 1F1B split
// balanced and by speed, the slower stages held to their speed by a CPU quota, each split's tokens/s
// beside the simulator's prediction at the declared speeds.
struct BenchPipelineOptions {
  std::string model = "small";
  int layers = 0;          // transformer blocks; 0 = the preset's
  int virtual_stages = 0;  // interleaved chunks per stage; 0 = the smallest v >= 2 that splits the layers evenly
  int stages = 2;
  int microbatches = 8;
  int batch = 4;  // micro-batch size
  int steps = 3;  // measured steps (figures from the median)
  int rounds = 3;  // every schedule once a round (figures from the median over the rounds)
  int warmup = 1;
  std::string stage_speeds;  // "1,0.5": compare the splits at these speeds; empty: compare the schedules
};
int run_bench_pipeline(const BenchPipelineOptions& options);
int run_bench_pipeline_split(const BenchPipelineOptions& options);  // --stage-speeds: bench_pipeline_split.cpp
Command add_bench_pipeline_command(CLI::App& bench);

// troupe bench balance (bench_balance_command.cpp): 2 data-parallel replicas, replica 1 held to
// slow_share of a core by a CPU quota; each alone, then uniform, static and dynamic shares in turns.
struct BenchBalanceOptions {
  std::string model = "small";
  int batch = 1;       // micro-batch size
  int grad_accum = 6;  // micro-batches a replica takes in the uniform split: 12 a step
  double slow_share = 0.5;
  int window = 3;        // train.balance_window
  int steps = 10;        // measured steps of each turn
  int warmup = 8;        // before them (dynamic settles there)
  std::string slowdown;  // "20,60": a last dynamic turn, replica 1 held for steps 20 … 59 only; empty: none
  int slowdown_from = 0, slowdown_to = 0;  // read from it
};
int run_bench_balance(const BenchBalanceOptions& options);
Command add_bench_balance_command(CLI::App& bench);
// troupe bench sim-check: the sim backend against the CPU backend on this machine. Measures one
// rank's sgemm peak and copy bandwidth and the loopback link's bandwidth and latency (through the
// engine's all-reduce), trains the model on the CPU backend in bench dp's and bench pipeline's
// layouts, then on the sim given those figures, and prints each layout's measured and simulated
// step time and their ratio (docs/scale.md).
struct BenchSimCheckOptions {
  std::string model = "small";
  int processes = 2;  // data-parallel ranks (bench dp's layout)
  int batch = 8;      // their micro-batch
  int stages = 2;     // pipeline stages, 1F1B (bench pipeline's layout)
  int microbatches = 8;
  int stage_batch = 4;  // the pipeline's micro-batch
  int steps = 3;        // measured steps per layout and backend (figures from the median)
  int warmup = 1;
};
int run_bench_sim_check(const BenchSimCheckOptions& options);
Command add_bench_sim_check_command(CLI::App& bench);
// troupe bench allreduce: bus bandwidth beside UCX's point-to-point bandwidth, same run.
// With options.hosts > 1, the ranks run on the hosts scripts/netns-cluster.sh simulates.
int run_bench_allreduce(comm::AllReduceBenchOptions options);
Command add_bench_allreduce_command(CLI::App& bench);

// troupe bench checkpoint: a synchronous save's throughput against the disk's sequential write
// speed, and the async save's stall against a training step, same run.
struct BenchCheckpointOptions {
  std::string model = "small";
  std::string dir = ".";  // an existing folder; the bench writes in a fresh subfolder and removes it
  int rounds = 3;         // figures are the medians of the rounds'
  int steps = 4;          // measured training steps per phase (plain, saving) and round
};
int run_bench_checkpoint(const BenchCheckpointOptions& options);
Command add_bench_checkpoint_command(CLI::App& bench);

// troupe bench gpu: one GPU's training throughput and MFU for a model preset, against the bf16
// GEMM peak measured in the same run, and the same model in PyTorch (eager and torch.compile)
// when python3 can import torch.
struct BenchGpuOptions {
  std::string model = "gpt2";
  compute::Precision precision = compute::Precision::bf16;  // the cuda backend's train.precision
  int batch = 16;
  int seq = 1024;
  int steps = 10;  // measured steps (figures from the median)
  int warmup = 3;
  std::string torch_script = "scripts/bench/torch_gpt2.py";  // "" = skip PyTorch
};
int run_bench_gpu(const BenchGpuOptions& options);
Command add_bench_gpu_command(CLI::App& bench);

// troupe bench scale: control-plane costs against the rank count, each N a sim job on the model
// (train.backend sim) in node processes of `slots` ranks, undisturbed and kill-node drilled
// (docs/scale.md): one table, and each figure's slope against N on log-log axes.
struct BenchScaleOptions {
  std::vector<int> ranks{8, 16, 32, 64};
  int slots = 16;
  std::string model = "tiny";
  long steps = 12;  // enough that the kill after step 3 comes while the job still trains
  // fault.heartbeat_timeout of every run: hundreds of ranks starting on two cores can keep a node
  // process from its heartbeat longer than the default 10 s.
  double heartbeat_timeout = 10;
  // Seconds of modelled compute a step takes at the least: a faster sim device is slowed to it, so
  // that the shell's round trips and the kill after step 3 land while the job trains (`tiny` on
  // an A100-class rank steps in microseconds of compute). 0: sim.flops as it is.
  double step_compute = 0.2;
  std::string dir = ".";
  std::string svg_dir;  // empty: no plots
};
int run_bench_scale(const BenchScaleOptions& options);
Command add_bench_scale_command(CLI::App& bench);

// troupe bench tokenize: the byte-level BPE's tokens per second on 1 and more threads, and
// with --vs-python the `tokenizers` library's on one thread, on the same text.
struct BenchTokenizeOptions {
  std::string tokenizer;
  std::string text;  // empty: license texts repeated to `megabytes`
  double megabytes = 20;
  std::vector<int> threads{1, 2};
  std::string python;  // empty: Troupe alone
};
int run_bench_tokenize(const BenchTokenizeOptions& options);
Command add_bench_tokenize_command(CLI::App& bench);

}  // namespace troupe::apps
