#pragma once
// What a job runs with, as plain option structs the runtime defines. Every field is a config key
// "section.name" that can be set in a TOML file and overridden on the command line
// (--section.name=value); the key table in apps/config/keys.cpp is the one place that lists them,
// with defaults and help text, and apps/config/resolve.hpp turns what the user asked for into a
// ResolvedJob. Nothing in actors/ or below knows how the values were spelled: a setting that is one
// of a few names (train.backend, comm.compress, ...) is its library's enum here.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/compression.hpp"
#include "compute/backend_kind.hpp"
#include "compute/context/context_method.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/recompute.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/precision.hpp"
#include "compute/sim/sim_options.hpp"
#include "compute/train/balance.hpp"
#include "compute/train/sync_mode.hpp"
#include "compute/train/zero_stage.hpp"
#include "monitor/log.hpp"
#include "schedules/schedule.hpp"

namespace troupe::actors {

struct ModelOptions {
  std::string preset = "small";  // tiny | small | gpt2; the fields below override it when > 0
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int block_size = 0;
  int vocab_size = 0;
  // Mixture of experts (compute/moe/moe_layer.hpp); -1 or 0 = the preset's, as each says.
  int experts = -1;         // E; 0 = a dense model
  int top_k = 0;            // experts each token reaches
  int moe_every = 0;        // the MoE MLP in every n-th block
  int shared_experts = -1;  // 0 or 1 always-on expert
  int expert_width = 0;     // an expert's hidden width H
};

struct TrainOptions {
  long steps = 200;
  int batch_size = 8;     // micro-batch B per worker
  int seq_len = 0;        // T; 0 = the model's block_size
  int grad_accum = 1;     // micro-batches per optimizer step
  double lr = 1e-3;       // peak learning rate
  double min_lr = 1e-4;   // cosine decays to this
  long warmup_steps = 20;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global-norm clip; 0 = off
  double moe_aux_coef = 0.01;                          // the MoE blocks' load-balancing loss in the objective
  double moe_z_coef = 0.001;                           // the MoE blocks' router z-loss in the objective
  compute::ZeroStage zero = compute::ZeroStage::none;  // over the data-parallel group; train.zero 0-3
  bool zero3_reshard = true;  // ZeRO-3 frees each block's gathered parameters after its forward
  compute::Recompute recompute = compute::Recompute::none;  // activations recomputed in backward, not kept
  compute::SyncMode sync = compute::SyncMode::allreduce;    // every step over every replica, or DiLoCo's islands
  int islands = 1;              // DiLoCo's islands K: each N/K consecutive data-parallel replicas
  long diloco_steps = 20;       // H: inner steps between outer syncs
  double outer_lr = 0.7;        // the outer Nesterov step's learning rate
  double outer_momentum = 0.9;  // its momentum
  compute::OuterPrecision diloco_precision = compute::OuterPrecision::f32;  // the pseudo-gradients' sum
  int diloco_fragments = 1;  // F: Streaming DiLoCo's fragments of consecutive blocks, synced staggered
  long diloco_overlap = 0;   // d: steps a fragment's sum is in flight before it is applied
  // Uneven data-parallel shares by speed (compute/train/balance.hpp); the speeds of the replicas,
  // "1,0.5", which launch fills from the host file's speed= when empty (docs/balance.md).
  compute::BalanceMode balance = compute::BalanceMode::none;
  std::string replica_speeds;
  // train.balance dynamic: the steps a measurement spans, and the fewest between two changes.
  int balance_window = 3;
  std::uint64_t seed = 1337;
  int threads = 0;         // 0 = all cores
  compute::BackendKind backend = compute::BackendKind::cpu;
  compute::Precision precision = compute::Precision::fp32;  // the linear layers' products (precision.hpp)
  long val_every = 50;     // 0 = only at the end
  int val_batches = 16;
  long log_every = 1;
};

struct DataOptions {
  std::string corpus = "/usr/share/games/fortunes";  // text file or directory (byte tokens)
  std::string train_tokens;  // llm.c .bin token file; when set, replaces corpus
  std::string val_tokens;    // .bin for validation; default: split off train_tokens
  double val_fraction = 0.1;
  std::string tokenizer;  // Hugging Face tokenizer.json: corpus and sample in its tokens; empty = bytes
};

// Where the weights start: empty = random initialization (train.seed); a Hugging Face GPT-2 folder
// is imported into checkpoint.dir as step 0 (checkpoint/import_gpt2.hpp) and resumed from.
struct InitOptions {
  std::string from;
};

struct SampleOptions {
  int tokens = 200;  // 0 = no sample at the end
  double temperature = 0.8;
  int top_k = 0;     // 0 = all tokens
  std::string prompt = "\n";
};

// Pipeline parallelism: the workers form pipelines of `stages` ranks (world = dp × stages).
struct PipelineOptions {
  int stages = 1;                 // p; 1 = no pipeline
  int microbatches = 4;           // m per optimizer step, each of train.batch_size sequences
  schedules::ScheduleKind schedule = schedules::ScheduleKind::one_f_one_b;
  int virtual_stages = 1;         // v model chunks per stage (interleaved only)
  compute::SplitMethod split = compute::SplitMethod::balanced;  // layers by parameters, or by stage_speeds
  // Each stage's relative speed, "1,0.5", read with split = speed; the config parser splits the
  // layers by them (ResolvedJob::pipeline_split).
  std::string stage_speeds;
  std::string trace;              // Chrome trace JSON of every rank's ops, written at the end; empty = none
};

// Tensor parallelism (compute/model/tensor_shard.hpp): each pipeline stage's layers split over
// `shards` neighbouring ranks.
struct TensorOptions {
  int shards = 1;                  // T; 1 = no tensor parallelism (workers = dp x p x T)
  bool sequence_parallel = false;  // the residual stream and LayerNorms split along the B·T rows
};

// Context parallelism (compute/model/context_shard.hpp): each sequence's positions split over C
// consecutive ranks of the data-parallel axis, which attention joins by `method`.
struct ContextOptions {
  int shards = 1;  // C; 1 = none (workers = dp x C)
  compute::context::ContextMethod method = compute::context::ContextMethod::ring;
};

// Expert parallelism (docs/moe.md): each MoE block's experts split over the EP consecutive ranks of
// an expert group on the data-parallel axis.
struct ExpertOptions {
  int shards = 1;  // EP; 1 = none
};

// Gradient compression on the data-parallel path (docs/comm.md, "Gradient compression").
struct CommOptions {
  comm::Compression compress = comm::Compression::none;
  int powersgd_rank = 4;           // r of P and Q
  long compress_start_step = -1;   // steps before it are summed plain; -1 = 10% of train.steps
};

// fault.recovery: respawn only what died where that applies, falling back to restarting every
// node (in_place), or always restart every node (restart).
enum class RecoveryMode : std::uint8_t { in_place, restart };
// Every mode, in the order fault.recovery lists them: the config parser reads a name with these.
inline constexpr RecoveryMode recovery_modes[] = {RecoveryMode::in_place, RecoveryMode::restart};
// The mode's name, as fault.recovery spells it and metrics label a recovery's path: the one table
// of these names.
std::string_view to_string(RecoveryMode mode);

// How a multi-process job notices a hung node or worker (the job supervisor's watchdog), and how it
// recovers (docs/drills.md, "Recovery").
struct FaultOptions {
  double heartbeat_seconds = 1;   // each node's heartbeat period
  double heartbeat_timeout = 10;  // a node silent this long is lost: unreachable, stopped or hung
  double step_timeout = 600;      // a worker without a finished step (or validation) this long is stuck; 0 = off
  int max_restarts = 3;           // with checkpoint.dir: restarts of every node from the newest checkpoint
  bool elastic = false;           // a node that cannot come back is left out: fewer dp replicas, same global batch
  double rescue_timeout = 60;     // seconds the job waits for the survivors' rescue snapshot (rescue_timing.hpp)
  // in place: respawn only what died, its state from a surviving replica over the data plane,
  // falling back to restart (every node from the rescue snapshot or checkpoint) where it cannot
  // apply (actors/supervision/recovery_path.hpp); restart: always the fallback.
  RecoveryMode recovery = RecoveryMode::in_place;
};

// Sharded checkpoints (docs/formats/checkpoint.md) and resuming from them.
struct CheckpointOptions {
  std::string dir;      // DIR/step-NNNNNNN/ folders; empty = no checkpoints
  long every = 0;       // save after every N steps; 0 = only after the last step
  int keep_last = 3;    // committed checkpoints kept; older ones are removed
  bool async = false;   // snapshot to memory and write in the background while training goes on
  bool resume = false;  // start from the newest valid checkpoint in dir (a fresh start when there is none)
};

// Prometheus metrics (docs/metrics.md): every process of the job serves /metrics over HTTP.
// Logs (docs/logging.md): every process writes to the console and to its own file.
struct MonitorOptions {
  int metrics_port = 0;                   // 0 = any free port; -1 = off; P > 0: node i listens on P + i
  std::string metrics_bind = "127.0.0.1";  // IPv4 address the metrics listen on; 0.0.0.0 = every interface
  double peak_flops = 0;                  // a rank's peak FLOP/s, the MFU's denominator; 0 = measure sgemm at start
  std::string log_dir = "auto";  // DIR/<job>/node-<i>.log; auto = <checkpoint.dir>/logs or troupe-logs; "" = none
  monitor::LogFormat log_format = monitor::LogFormat::text;  // of the file (JSON lines); the console is always text
  std::string log_level = "info";   // "info" or "warn,comm=debug": a level for all, then per subsystem
  int control_port = 0;                     // the monitor actor's port for `troupe shell`; 0 = any free port
  std::string control_bind = "127.0.0.1";  // IPv4 address it listens on; 0.0.0.0 = every interface
  int web_port = 0;             // the job's web page and /metrics, on control_bind; 0 = any free port; -1 = off
  std::string tensorboard_dir;  // TensorBoard event files, DIR/rank-R/ and DIR/job/; "" = none
};

struct JobConfig {
  ModelOptions model;
  InitOptions init;
  TrainOptions train;
  DataOptions data;
  SampleOptions sample;
  PipelineOptions pipeline;
  TensorOptions tensor;
  ContextOptions context;
  ExpertOptions expert;
  CommOptions comm;
  FaultOptions fault;
  CheckpointOptions checkpoint;
  MonitorOptions monitor;
  compute::SimOptions sim;  // the modelled device of train.backend sim
};

// A job after resolve(): the options with every derived value filled in, and the model they make.
struct ResolvedJob {
  JobConfig config;          // as given, with train.seq_len and comm.compress_start_step filled in
  compute::GPTConfig model;  // the preset with the model.* overrides, vocabulary padded
  // Every config key with its value as text, in key-table order: what a checkpoint's manifest
  // records, so a checkpoint says how it was made without the runtime knowing the key table.
  std::vector<std::pair<std::string, std::string>> settings;
  // With pipeline.stages > 1 or tensor.shards > 1: the blocks of every virtual stage, in depth order.
  std::vector<compute::StageLayers> pipeline_split;
  // train.replica_speeds, read: each data-parallel replica's speed, in replica order; empty = even.
  std::vector<double> replica_speeds;
};

// `job` after it grew in place (recover_msg's batch split): train.batch_size, train.grad_accum and
// under train.balance each replica's speed as the replicas split the global batch now, in its
// configuration and its settings alike.
ResolvedJob split_batch(const ResolvedJob& job, int batch_size, int grad_accum, std::vector<double> replica_speeds);

}  // namespace troupe::actors
