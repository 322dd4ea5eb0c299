// troupe: the command line. Parses the arguments, turns a config file plus overrides into a
// checked job, and runs the chosen command.
//
//   troupe train [--config FILE] [--workers N] [--memory-limit SIZE] [--resume] [--trace FILE] [--section.name VALUE ...]
//   troupe bench compute [--models tiny,small] [--batch 8] [--threads 1[,2]] [--steps 10] [--warmup 1]
//                        [--vs-pytorch [--python python3] [--rounds 3]] [--profile]
//   troupe bench allreduce [--processes 2,4] [--mib 1,16,64] [--iterations 15]
//   troupe bench dp [--model small] [--batch 8] [--processes 2] [--steps 15] [--warmup 1]
//   troupe bench checkpoint [--model small] [--dir .] [--rounds 3] [--steps 4]
//   troupe bench gpu [--model gpt2] [--precision bf16] [--batch 16] [--seq 1024] [--steps 10]
//   troupe schedule --kind gpipe|1f1b|interleaved --stages P --microbatches M [--virtual-stages V]
//                   [--forward 1] [--backward 2] [--latency 0] [--print] [--trace FILE]
//   troupe plan [--model.preset small] [--model.n_layer N ...] [--nodes 1 --devices-per-node CORES | --hostfile FILE]
//               [--device-memory SIZE] [--peak-flops F] [--mfu 0.5] [--intra-bw B] [--inter-bw B]
//               [--global-batch 8] [--seq T] [--precision fp32|mixed|mixed-fp32-grads] [--top 10]
//   troupe launch [--hostfile FILE] [--memory-limit SIZE] [--config FILE] [--section.name VALUE ...]
//   troupe node   (started by launch)
//   troupe drill SCENARIO [--at-step 3] [--target 1] [--workers 2] [--dir DIR] [--keep] [--config FILE] [--section.name VALUE ...]
//   troupe drill chaos [--kill-every 10] [--seed S] [--workers 4] [--train.steps 100] ...
//   troupe export --checkpoint DIR [--format safetensors] [--out model.safetensors]
//   troupe shell HOST:PORT [-c COMMAND] [--token-file FILE]
//
// Exit codes: apps/exit_codes.hpp (0 success; 1 the command failed while running; 2 the input was
// wrong, found before any work starts; 3 and 128 + signal from troupe launch). Every error is one
// line on stderr: "troupe: error: <message>".

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/process_environment.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_gpu_command.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_arguments.hpp"
#include "apps/config/print.hpp"
#include "apps/config/unknown_arguments.hpp"
#include "apps/exit_codes.hpp"

namespace {

using namespace troupe;
using namespace troupe::apps;

// Every connection to a guarded port costs the job three descriptors, and a node's UCX, CAF and
// metrics connections more; Debian's default soft limit (1024) is far below the hard limit.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

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
  if (args.workers > 1) {
    LaunchArgs launch;
    launch.workers = args.workers;
    launch.memory_limit = *limit;
    return run_launch(launch, *job);
  }
  return run_train(*job, *limit);
}

int bench_compute(const CLI::App& command, BenchComputeOptions options) {
  if (Status extras = reject_unknown_arguments(command); !extras)
    return error_exit(ExitCode::bad_input, extras.error().message);
  options.python_given = command.count("--python") > 0;
  options.vs_pytorch = options.vs_pytorch || options.python_given;
  if (Status valid = validate(options); !valid) return error_exit(ExitCode::bad_input, valid.error().message);
  return run_bench_compute(options);
}

int schedule(const CLI::App& command, const ScheduleOptions& options) {
  if (Status extras = reject_unknown_arguments(command); !extras)
    return error_exit(ExitCode::bad_input, extras.error().message);
  if (Status valid = validate(options); !valid) return error_exit(ExitCode::bad_input, valid.error().message);
  return run_schedule(options);
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f, or the disk-full drill) a write must fail with EFBIG and be
  // reported, not end the process.
  std::signal(SIGXFSZ, SIG_IGN);
  raise_open_file_limit();
  CLI::App app{"Troupe: GPT training on a supervised actor runtime.", "troupe"};
  app.set_version_flag("--version", "troupe " TROUPE_VERSION);
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.get_formatter()->column_width(34);  // room for the longest key option and its default

  TrainArgs train_args;
  CLI::App* train_command = app.add_subcommand("train", "Train a GPT model; keys come from --config, then overrides.");
  train_command->add_option("--config", train_args.config_path, "TOML file with [model] [train] [data] [sample]")
      ->type_name("FILE");
  train_command->add_flag("--print-config", train_args.print_config,
                          "print the resolved configuration as TOML and exit without training");
  train_command->add_flag("--print-keys", train_args.print_keys, "print the key table of docs/configuration.md")
      ->group("");
  train_command->add_option("--workers", train_args.workers, "local worker processes (data parallel); 1 = this process")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  add_shorthands(*train_command, train_args);
  add_memory_limit(*train_command, train_args);
  train_args.overrides.add_options(*train_command);
  train_command->footer("Each key is --section.name VALUE or --section.name=VALUE; it overrides the config file.");
  train_command->allow_extras();

  TrainArgs launch_config;
  LaunchArgs launch_args;
  CLI::App* launch_command = app.add_subcommand("launch", "Start a data-parallel job: one node process per host-file line.");
  launch_command->add_option("--hostfile", launch_args.host_file,
                             "DeepSpeed host file: 'host slots=N' per line (default inside a Slurm allocation: its nodes)")
      ->type_name("FILE");
  launch_command->add_option("--bind", launch_args.bind, "address the job supervisor listens on")->capture_default_str();
  launch_command->add_option("--port", launch_args.port, "port of the job supervisor; 0 = any free")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  launch_command->add_option("--launcher", launch_args.launcher, "command template for remote hosts, e.g. 'ssh {host} {command}'");
  launch_command->add_option("--join-timeout", launch_args.join_timeout, "seconds for every node to join")
      ->check(seconds_in(0.1, 86400))
      ->capture_default_str();
  launch_command
      ->add_option("--external", launch_args.external,
                   "start no node: wait for N one-rank nodes started by srun, torchrun or by hand (token: $TROUPE_TOKEN)")
      ->check(CLI::Range(1, 1 << 20))
      ->type_name("N");
  add_config_options(*launch_command, launch_config);
  add_memory_limit(*launch_command, launch_config);

  TrainArgs node_config;
  NodeArgs node_args;
  CLI::App* node_command = app.add_subcommand("node", "One node process of a job (troupe launch starts these).");
  node_command->add_option("--join", node_args.join, "HOST:PORT of the job supervisor (default $TROUPE_JOIN)");
  node_command->add_option("--token", node_args.token, "the job's token (default $TROUPE_TOKEN)");
  node_command->add_option("--node-index", node_args.node_index, "this node's host-file line (default $TROUPE_NODE_INDEX)")
      ->check(CLI::Range(0, 1 << 20));
  node_command
      ->add_option("--join-timeout", node_args.join_timeout,
                   "started by srun or torchrun: seconds for every node to join the job that rank 0 hosts")
      ->check(seconds_in(0.1, 86400))
      ->capture_default_str();
  add_config_options(*node_command, node_config);

  CLI::App* bench_command = app.add_subcommand("bench", "Measure throughput.");
  bench_command->require_subcommand(0, 1);
  bench_command->allow_extras();
  BenchComputeOptions bench_options{{"tiny", "small"}};
  CLI::App* compute_command =
      bench_command->add_subcommand("compute", "Training-step throughput of one worker, per model preset.");
  compute_command->add_option("--models", bench_options.models, "model presets, comma-separated")
      ->delimiter(',')
      ->type_name("LIST")
      ->default_str("tiny,small");
  compute_command->add_option("--batch", bench_options.batch, "micro-batch size B")->capture_default_str();
  compute_command
      ->add_option("--threads", bench_options.threads, "CPU thread counts, comma-separated (1,2: both); 0 = all cores")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](std::string& count) -> std::string { return count.empty() ? "a thread count is empty" : ""; },
          "COUNT"))
      ->type_name("LIST")
      ->default_str("1");
  compute_command->add_option("--steps", bench_options.steps, "measured steps per round")->capture_default_str();
  compute_command->add_option("--warmup", bench_options.warmup, "unmeasured steps first")->capture_default_str();
  compute_command->add_flag("--vs-pytorch", bench_options.vs_pytorch,
                            "alternate rounds with the same model in PyTorch (scripts/bench/torch_cpu_train.py)");
  compute_command
      ->add_option("--python", bench_options.python, "the Python that runs PyTorch (implies --vs-pytorch)")
      ->type_name("PATH")
      ->capture_default_str();
  compute_command->add_option("--rounds", bench_options.rounds, "alternating rounds per row with PyTorch")
      ->capture_default_str();
  compute_command->add_flag("--profile", bench_options.profile, "time one more step op by op and print where it goes");
  compute_command->allow_extras();

  std::vector<int> allreduce_mib{1, 16, 64};
  comm::AllReduceBenchOptions allreduce_options;
  CLI::App* allreduce_command =
      bench_command->add_subcommand("allreduce", "All-reduce bus bandwidth beside UCX point-to-point bandwidth.");
  allreduce_command->add_option("--processes", allreduce_options.processes, "process counts, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(2, 64))
      ->default_str("2,4");
  allreduce_command->add_option("--mib", allreduce_mib, "buffer sizes in MiB, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096))
      ->default_str("1,16,64");
  allreduce_command->add_option("--iterations", allreduce_options.iterations, "timed iterations")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  allreduce_command
      ->add_option("--hosts", allreduce_options.hosts,
                   "spread the ranks over this many hosts simulated by scripts/netns-cluster.sh (root)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  allreduce_command->allow_extras();

  BenchDpOptions dp_options;
  CLI::App* dp_command =
      bench_command->add_subcommand("dp", "Data-parallel tokens/s against one process, same run.");
  dp_command->add_option("--model", dp_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  dp_command->add_option("--batch", dp_options.batch, "micro-batch per rank")->check(CLI::Range(1, 4096))->capture_default_str();
  dp_command->add_option("--processes", dp_options.processes, "data-parallel processes")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  dp_command->add_option("--steps", dp_options.steps, "measured iterations (a step alone, independent, data-parallel)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  dp_command->add_option("--warmup", dp_options.warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  dp_command->allow_extras();

  BenchCompressOptions compress_options;
  CLI::App* compress_command = bench_command->add_subcommand(
      "compress",
      "Data parallelism on 2 ranks with gradient sums plain, bf16 and PowerSGD, in turns: bytes and tokens/s.");
  compress_command->add_option("--model", compress_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  compress_command->add_option("--batch", compress_options.batch, "micro-batch per rank")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  compress_command->add_option("--steps", compress_options.steps, "measured iterations (one step of each variant)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  compress_command->add_option("--warmup", compress_options.warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  compress_command->add_option("--powersgd-rank", compress_options.powersgd_rank, "PowerSGD's r")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  compress_command
      ->add_option("--hosts", compress_options.hosts,
                   "2: the ranks on two hosts simulated by scripts/netns-cluster.sh (root); 1: this host")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  compress_command->allow_extras();

  BenchZero3Options zero3_options;
  CLI::App* zero3_command = bench_command->add_subcommand(
      "zero3", "ZeRO-3 (and with full recompute) against ZeRO-0 on the same ranks, in turns: tokens/s and bytes.");
  zero3_command->add_option("--model", zero3_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  zero3_command->add_option("--batch", zero3_options.batch, "micro-batch per rank")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  zero3_command->add_option("--processes", zero3_options.processes, "data-parallel processes")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  zero3_command->add_option("--steps", zero3_options.steps, "measured iterations (one step of each variant)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  zero3_command->add_option("--warmup", zero3_options.warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  zero3_command->allow_extras();

  BenchTpOptions tp_options;
  CLI::App* tp_command = bench_command->add_subcommand(
      "tp", "Tensor shards of one stage against one process, in turns: tokens/s, bytes moved and held.");
  tp_command->add_option("--model", tp_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  tp_command->add_option("--batch", tp_options.batch, "micro-batch (the shards' together, and the one process's)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  tp_command->add_option("--shards", tp_options.shards, "tensor shards")->check(CLI::Range(2, 64))->capture_default_str();
  tp_command->add_option("--steps", tp_options.steps, "measured iterations (a step alone, one in tensor shards)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  tp_command->add_option("--warmup", tp_options.warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  tp_command->allow_extras();

  BenchPipelineOptions pipeline_options;
  CLI::App* pipeline_command = bench_command->add_subcommand(
      "pipeline", "Measured pipeline bubble per schedule beside the simulator's prediction and the closed form.");
  pipeline_command->add_option("--model", pipeline_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  pipeline_command->add_option("--layers", pipeline_options.layers, "transformer blocks; 0 = the preset's")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  pipeline_command
      ->add_option("--virtual-stages", pipeline_options.virtual_stages,
                   "interleaved chunks per stage; 0 = the smallest v >= 2 that splits the layers evenly")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  pipeline_command->add_option("--stages", pipeline_options.stages, "pipeline stages p (one process each)")
      ->check(CLI::Range(2, 16))
      ->capture_default_str();
  pipeline_command->add_option("--microbatches", pipeline_options.microbatches, "micro-batches per step m")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  pipeline_command->add_option("--batch", pipeline_options.batch, "sequences per micro-batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  pipeline_command->add_option("--steps", pipeline_options.steps, "measured steps")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  pipeline_command->add_option("--warmup", pipeline_options.warmup, "unmeasured steps first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  pipeline_command->allow_extras();

  BenchCheckpointOptions checkpoint_bench_options;
  CLI::App* checkpoint_bench_command = bench_command->add_subcommand(
      "checkpoint", "Checkpoint save throughput against the disk's write speed; async save's stall against a step.");
  checkpoint_bench_command->add_option("--model", checkpoint_bench_options.model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
  checkpoint_bench_command
      ->add_option("--dir", checkpoint_bench_options.dir, "folder to write in (a fresh subfolder, removed after)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  checkpoint_bench_command->add_option("--rounds", checkpoint_bench_options.rounds, "measurement rounds (medians)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  checkpoint_bench_command->add_option("--steps", checkpoint_bench_options.steps, "measured steps per phase and round")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  checkpoint_bench_command->allow_extras();
  BenchGpuOptions gpu_bench_options;
  CLI::App* gpu_bench_command = add_bench_gpu_command(*bench_command, gpu_bench_options);

  ScheduleOptions schedule_options;
  CLI::App* schedule_command = app.add_subcommand(
      "schedule", "Generate, check and simulate a pipeline schedule: memory, makespan, bubble; optionally a trace.");
  schedule_command->add_option("--kind", schedule_options.kind, "gpipe, 1f1b or interleaved")->required();
  schedule_command->add_option("--stages", schedule_options.stages, "pipeline stages p")->required();
  schedule_command->add_option("--microbatches", schedule_options.microbatches, "micro-batches per step m")->required();
  schedule_command
      ->add_option("--virtual-stages", schedule_options.virtual_stages, "model chunks per stage v (interleaved only)")
      ->capture_default_str();
  schedule_command->add_option("--forward", schedule_options.forward, "cost units per forward of one chunk")
      ->capture_default_str();
  schedule_command->add_option("--backward", schedule_options.backward, "cost units per backward of one chunk")
      ->capture_default_str();
  schedule_command->add_option("--latency", schedule_options.latency, "cost units from a send to its data arriving")
      ->capture_default_str();
  schedule_command->add_flag("--print", schedule_options.print, "print every stage's instruction stream");
  schedule_command
      ->add_option("--trace", schedule_options.trace,
                   "write the simulated timeline as Chrome trace JSON (1 cost unit = 1 ms)")
      ->type_name("FILE");
  schedule_command->allow_extras();

  PlanOptions plan_options;
  CLI::App* plan_command = app.add_subcommand(
      "plan", "Every dp x tp x pp x zero x recompute layout of a model on a cluster: memory, traffic, step time.");
  plan_command->add_option("--model.preset", plan_options.preset, "model preset; the dimension flags replace its figures")
      ->capture_default_str();
  plan_command->add_option("--model.n_layer", plan_options.n_layer, "transformer blocks");
  plan_command->add_option("--model.n_embd", plan_options.n_embd, "channels");
  plan_command->add_option("--model.n_head", plan_options.n_head, "attention heads");
  plan_command->add_option("--model.block_size", plan_options.block_size, "longest sequence");
  plan_command->add_option("--model.vocab_size", plan_options.vocab_size, "vocabulary");
  plan_command->add_option("--nodes", plan_options.nodes, "machines (default: 1)");
  plan_command->add_option("--hostfile", plan_options.host_file,
                           "nodes and devices from a host file: its hosts, each with its slots")
      ->type_name("FILE");
  plan_command->add_option("--devices-per-node", plan_options.devices_per_node,
                           "devices (ranks) per machine (default: this machine's cores)");
  plan_command->add_option("--device-memory", plan_options.device_memory,
                           "memory per device, as 80GB or 512MiB (default: this machine's available memory / devices)")
      ->type_name("SIZE");
  plan_command->add_option("--peak-flops", plan_options.peak_flops,
                           "peak FLOP/s per device (default: one thread's sgemm peak, measured at start)");
  plan_command->add_option("--mfu", plan_options.mfu, "share of the peak the model's FLOPs reach")->capture_default_str();
  plan_command->add_option("--intra-bw", plan_options.intra_bw, "bytes/s per device inside a node (bus bandwidth)")
      ->capture_default_str();
  plan_command->add_option("--inter-bw", plan_options.inter_bw, "bytes/s per device between nodes")->capture_default_str();
  plan_command->add_option("--global-batch", plan_options.global_batch, "sequences per optimizer step")
      ->capture_default_str();
  plan_command->add_option("--seq", plan_options.seq, "tokens per sequence (default: the model's block size)");
  plan_command->add_option("--precision", plan_options.precision, "fp32 (as Troupe trains), mixed (2+2+12) or mixed-fp32-grads (2+4+12)")
      ->capture_default_str();
  plan_command->add_option("--top", plan_options.top, "layouts listed that fit, and that do not")->capture_default_str();
  plan_command->allow_extras();

  TrainArgs drill_config;
  DrillOptions drill_options;
  CLI::App* drill_command = app.add_subcommand(
      "drill", "Failure drill: the job undisturbed, then with a fault injected; prints a verdict.");
  drill_command
      ->add_option("scenario", drill_options.scenario,
                   "kill-node, kill-worker, hang, slow-node, corrupt-checkpoint, kill-during-checkpoint, disk-full, "
                   "node-lost or chaos")
      ->required();
  drill_command->add_option("--at-step", drill_options.at_step, "the fault comes after this step")->capture_default_str();
  drill_command
      ->add_option("--target", drill_options.targets,
                   "node (kill-node, hang, slow-node) or rank (kill-worker) to fail; kill-node and hang take a list "
                   "(1,2) of nodes failing at once")
      ->delimiter(',')
      ->capture_default_str();
  drill_command->add_option("--kill-every", drill_options.kill_every, "chaos: a node is killed in every Nth step")
      ->capture_default_str();
  drill_command->add_option("--seed", drill_options.seed,
                            "chaos: the seed of the kills' nodes and moments, as a verdict prints it (default: fresh)");
  drill_command->add_option("--workers", drill_options.workers, "node processes; 1 only for checkpoint scenarios")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  drill_command
      ->add_option("--dir", drill_options.dir,
                   "folder for the runs' checkpoints and logs (default: drill-SCENARIO-PID here); a folder named "
                   "here stays after a PASS, only what the drill wrote in it is removed")
      ->type_name("DIR");
  drill_command->add_flag("--keep", drill_options.keep,
                          "keep the drill's checkpoints and logs after a PASS (a FAIL always keeps them)");
  add_config_options(*drill_command, drill_config);

  ExportOptions export_options;
  CLI::App* export_command =
      app.add_subcommand("export", "Write a checkpoint's weights as a Hugging Face GPT-2 model.safetensors.");
  export_command
      ->add_option("--checkpoint", export_options.checkpoint,
                   "checkpoint.dir (its newest valid checkpoint) or one step-NNNNNNN folder")
      ->type_name("DIR")
      ->required();
  export_command->add_option("--format", export_options.format, "output format: safetensors")->capture_default_str();
  export_command->add_option("--out", export_options.out, "file to write")->type_name("FILE")->capture_default_str();
  export_command->allow_extras();
  ShellArgs shell_args;
  CLI::App* shell_command =
      app.add_subcommand("shell", "Attach a monitor shell to a running job (status, top, pause, checkpoint, drills).");
  shell_command->add_option("address", shell_args.address, "HOST:PORT as the job prints it (\"monitor: troupe shell ...\")")
      ->required();
  shell_command->add_option("-c", shell_args.command, "run this one command, print its answer and exit")
      ->type_name("COMMAND");
  shell_command->add_option("--token-file", shell_args.token_file,
                            "file holding the job's token (default: $TROUPE_TOKEN, else the job's token file)")
      ->type_name("FILE");
  shell_command->allow_extras();
  // Set after the subcommands are added, which would otherwise inherit it.
  app.footer("Run 'troupe COMMAND --help' for a command's options; 'troupe train --help' lists every config key.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    return error_exit(ExitCode::bad_input, e.what());
  }

  try {
    if (Status chosen = require_subcommand(app); !chosen)
      return error_exit(ExitCode::bad_input, chosen.error().message);
    if (train_command->parsed()) return train(*train_command, train_args);
    if (launch_command->parsed())
      return with_job(*launch_command, launch_config, [&](const ResolvedJob& job) {
        auto limit = memory_limit(launch_config);
        if (!limit) return error_exit(ExitCode::bad_input, limit.error().message);
        launch_args.memory_limit = *limit;
        return run_launch(launch_args, job);
      });
    if (node_command->parsed())
      return with_job(*node_command, node_config, [&](const ResolvedJob& job) { return run_node(node_args, job); });
    if (schedule_command->parsed()) return schedule(*schedule_command, schedule_options);
    if (plan_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*plan_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_plan(plan_options);
    }
    if (drill_command->parsed())
      return with_job(*drill_command, drill_config, [&](const ResolvedJob& job) { return run_drill(drill_options, job); });
    if (shell_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*shell_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_shell(shell_args);
    }
    if (export_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*export_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_export(export_options);
    }
    if (Status chosen = require_subcommand(*bench_command); !chosen)
      return error_exit(ExitCode::bad_input, chosen.error().message);
    if (allreduce_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*allreduce_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      allreduce_options.bytes.clear();
      for (int mib : allreduce_mib) allreduce_options.bytes.push_back(std::int64_t{mib} << 20);
      return run_bench_allreduce(allreduce_options);
    }
    if (dp_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*dp_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_dp(dp_options);
    }
    if (compress_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*compress_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_compress(compress_options);
    }
    if (zero3_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*zero3_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_zero3(zero3_options);
    }
    if (tp_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*tp_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_tp(tp_options);
    }
    if (pipeline_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*pipeline_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_pipeline(pipeline_options);
    }
    if (gpu_bench_command->parsed()) return run_bench_gpu(gpu_bench_options);
    if (checkpoint_bench_command->parsed()) {
      if (Status extras = reject_unknown_arguments(*checkpoint_bench_command); !extras)
        return error_exit(ExitCode::bad_input, extras.error().message);
      return run_bench_checkpoint(checkpoint_bench_options);
    }
    return bench_compute(*compute_command, bench_options);
  } catch (const std::exception& e) {
    return error_exit(ExitCode::failure, e.what());
  } catch (const Error& e) {
    return error_exit(ExitCode::failure, e.message);
  }
}
