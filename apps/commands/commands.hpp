#pragma once
// The commands of troupe. Each add_<name>_command registers `troupe <name>` and its options and
// returns the Command that runs it (command.hpp); main() lists them in the order `troupe --help`
// shows, and the commands that run a job build their options from job_arguments.hpp. A run
// returns the process exit code of apps/exit_codes.hpp: 0 on success, 1 on a run-time failure.
// Mistakes in the user's input the command line shows never reach a run_* function: its Command
// refuses them first, with exit code 2; what a command finds wrong in its input itself (an
// environment variable, a file) is 2 too. Every error is reported through error_exit(): one line
// "troupe: error: <message>". The bench commands are apps/bench's (bench_commands.hpp).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/commands/command.hpp"
#include "apps/commands/job_arguments.hpp"
#include "apps/config/resolve.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// troupe train: trains job.model on job.config's data and reports loss, validation and a sample.
// `memory_limit`: --memory-limit in bytes, the memory the one rank may use (apps/config/memory_fit.hpp).
int run_train(const ResolvedJob& job, std::optional<double> memory_limit);
Command add_train_command(CLI::App& app);

// troupe node: what troupe launch starts once per host-file line.
struct NodeArgs {
  std::string join;     // HOST:PORT of the job supervisor (default: TROUPE_JOIN)
  std::string token;    // the job's token (default: TROUPE_TOKEN)
  int node_index = -1;  // the host-file line (default: TROUPE_NODE_INDEX)
  double join_timeout = 60;  // started by srun or torchrun: seconds for every node to join the job
};
int run_node(const NodeArgs& args, const ResolvedJob& job);
Command add_node_command(CLI::App& app);

// troupe launch (and troupe train --workers N, with N local lines): the job process.
struct LaunchArgs {
  std::string host_file;          // empty with --workers
  int workers = 0;                // > 0: an implied host file of this many "localhost slots=1" lines
  std::string bind = "127.0.0.1";  // where the job supervisor listens
  int port = 0;                   // 0: any free port
  std::string launcher;           // template for remote hosts; empty: ssh
  double join_timeout = 60;       // seconds for every node to join
  int external = 0;               // > 0: start no node; wait for this many one-rank nodes started elsewhere
  std::optional<double> memory_limit;  // --memory-limit: bytes per rank; none: this machine's share
};
int run_launch(const LaunchArgs& args, const ResolvedJob& job);
Command add_launch_command(CLI::App& app);

// troupe schedule: generates a pipeline schedule, checks it, simulates it and reports memory,
// makespan and bubble beside the closed form; optionally every stream and a Chrome trace.
struct ScheduleOptions {
  std::string kind;        // gpipe, 1f1b, interleaved
  int stages = 0;          // p
  int microbatches = 0;    // m
  int virtual_stages = 1;  // v: model chunks per stage (interleaved only)
  double forward = 1;      // cost units per forward of one chunk of one micro-batch
  double backward = 2;     // cost units per backward of one chunk of one micro-batch
  double weight_share = 0.5;  // the share of `backward` a split backward's W takes (zb-h1, zb-v)
  double latency = 0;      // cost units from posting a send to the data being usable
  std::string stage_speeds;  // "1,0.5": each stage's relative speed, its costs over it; empty: all 1
  double cost_spread = 0;    // > 0: also the bubble with every op's cost varying by this log-normal spread
  int trials = 200;          // simulations drawn at that spread
  bool print = false;      // every stage's instruction stream
  std::string trace;       // Chrome trace JSON path; empty: none
};
// The first problem with options as one line naming the option and its value.
Status validate(const ScheduleOptions& options);
int run_schedule(const ScheduleOptions& options);
Command add_schedule_command(CLI::App& app);

// troupe plan: every (dp, tp, pp, cp, zero, recompute, micro-batch, schedule) layout of a model on a
// cluster, the ones that fit fastest first, with memory per device by kind, bytes per link and the
// predicted step time, then the ones that do not fit with the reason (schedules/layout_plan.hpp).
// A cluster figure left out is this machine's.
struct PlanOptions {
  // --model.*: the preset, each flag given replacing its figure, as troupe train reads them.
  ModelOptions model;
  std::optional<int> nodes;             // default: 1
  std::optional<int> devices_per_node;  // default: this machine's cores
  std::string host_file;                // nodes and devices from a host file's hosts and slots
  std::string device_memory;            // "80GB"; empty: this machine's available memory / devices
  std::optional<double> peak_flops;     // per device; default: one thread's sgemm peak, measured
  std::optional<double> memory_bw;      // bytes/s per device; default: one thread's copy bandwidth, measured
  double mfu = 0.5;
  double intra_bw = 6e9;    // bytes/s, bus bandwidth inside a node
  double inter_bw = 1.25e9; // bytes/s between nodes
  int global_batch = 8;     // sequences per step
  std::optional<int> seq;   // default: the model's block size
  int context_shards = 1;   // the most context shards per replica planned (1: none)
  std::string precision = "fp32";
  int top = 10;             // layouts listed of each kind
  std::string stage_speeds;  // "1,0.5": only pipelines of that many stages, split balanced and by speed
};
int run_plan(const PlanOptions& options);
Command add_plan_command(CLI::App& app);

// troupe export: a checkpoint's weights as one Hugging Face GPT-2 safetensors file, or a folder; the model
// config comes from the checkpoint's manifest. Unlike the commands above it finds its input
// errors itself (an unusable checkpoint shows only when opened): each is one line and exit 2.
enum class ExportFormat {
  safetensors,  // one model.safetensors
  hf,           // a folder from_pretrained loads
};
struct ExportOptions {
  std::string checkpoint;  // checkpoint.dir (its newest valid step) or one step-NNNNNNN folder
  ExportFormat format = ExportFormat::safetensors;
  std::string out = "model.safetensors";
  std::string tokenizer;  // --format hf: tokenizer.json copied into the folder
};
int run_export(const ExportOptions& options);
Command add_export_command(CLI::App& app);

// troupe import: a Hugging Face GPT-2 folder as step 0 of a new Troupe checkpoint folder
// (checkpoint/import_gpt2.hpp). Its input errors are its own: one line each, exit 2.
struct ImportOptions {
  std::string hf;   // the Hugging Face folder
  std::string out;  // the checkpoint folder to create
};
int run_import(const ImportOptions& options);
Command add_import_command(CLI::App& app);
// init.from: imports the job's folder into checkpoint.dir as step 0 unless that holds a
// checkpoint already (a fine-tune resumed), before any rank starts; says which on stdout.
Status import_initial_weights(const ResolvedJob& job);

// troupe tokenize: text files to an llm.c token file with a Hugging Face tokenizer.json.
struct TokenizeOptions {
  std::string tokenizer;
  std::vector<std::string> in;
  std::string out;
  int threads = 0;  // 0 = all cores
};
int run_tokenize(const TokenizeOptions& options);
Command add_tokenize_command(CLI::App& app);

// troupe generate: a checkpoint's continuation of a prompt, through a Hugging Face tokenizer.
struct GenerateOptions {
  std::string checkpoint;  // checkpoint.dir or one step-NNNNNNN folder
  std::string tokenizer;
  std::string prompt;
  int tokens = 100;
  double temperature = 0.8;
  int top_k = 0;
  std::uint64_t seed = 1337;
};
int run_generate(const GenerateOptions& options);
Command add_generate_command(CLI::App& app);

// troupe drill SCENARIO: runs the job undisturbed, then again with a fault injected, and prints a
// verdict (detected after, recovered after, steps lost, final weights equal). Checkpoints go to
// a folder per run under `dir`; after a PASS what the drill wrote is removed unless `keep`.
struct DrillOptions {
  std::string scenario;  // kill-node, kill-worker, hang, slow-node, corrupt-checkpoint, kill-during-checkpoint, disk-full,
                         // node-lost, chaos, grow
  long at_step = 3;      // the fault comes after this step
  long kill_every = 10;  // chaos: a node is killed in every kill_every-th step
  std::optional<std::uint64_t> seed;  // chaos: replays the random choices of a run; none = a fresh seed
  // The node (kill-node, hang, slow-node; grow: the one drained, then brought back) or rank (kill-worker) that fails; kill-node and hang
  // take several nodes, which fail at once.
  std::vector<int> targets{1};
  int target() const { return targets.front(); }
  int workers = 2;       // node processes (1: one process; only for the checkpoint scenarios)
  int slots = 1;         // ranks in each node process
  std::string dir;       // empty: drill-SCENARIO-PID in the current folder
  bool keep = false;     // after a PASS keep what the drill wrote (a FAIL always keeps it)
};
int run_drill(const DrillOptions& options, const ResolvedJob& job);
Command add_drill_command(CLI::App& app);

// troupe shell HOST:PORT: the monitor shell of a running job (docs/shell.md), or one command (-c).
struct ShellArgs {
  std::string address;     // HOST:PORT as the job prints it
  std::string command;     // -c: run this one command and exit
  std::string token_file;  // empty: TROUPE_TOKEN, else the job's default token file for PORT
};
int run_shell(const ShellArgs& args);
Command add_shell_command(CLI::App& app);

}  // namespace troupe::apps
