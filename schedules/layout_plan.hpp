#pragma once
// The layout planner behind `troupe plan` (docs/plan.md): for a model, a cluster, a global batch
// and a sequence length, every (dp, tp, pp, zero, recompute, micro-batch, schedule) layout whose
// grid fills the devices, each with its memory per device by kind, its bytes per step on each
// link, and its predicted step time; the ones that do not fit a device are kept with the reason.
//
// Memory. Per device, for the pipeline stage that needs the most: parameters, gradients and
// optimizer state are the stage's parameter count (compute::split_for_pipeline, divided by tp)
// times the precision's bytes, each divided by dp from the ZeRO stage that shards it (1:
// optimizer state, 2: gradients, 3: parameters). ZeRO-3 adds what it gathers: in fp32, as Troupe
// runs it, the embeddings (kept through the step), the block computing and the next (prefetched),
// and as many unit gradients (the embeddings', the block's that backward fills and the one in its
// reduce-scatter); in the mixed precisions, as DeepSpeed does, two of the largest units (a block or
// the token embedding) and that unit's whole gradient before its reduce-scatter. Activations
// are what compute::estimate_training_memory says one tensor shard of the stage keeps for the
// micro-batches its schedule stashes at its peak (check_schedule's peak_stashed): the attention,
// MLP and vocabulary widths divided by tp, the residual stream and LayerNorm outputs whole (no
// sequence parallelism); under zb-h1 and zb-v each stashed micro-batch also keeps what B keeps
// for W. ZB-V's stages hold their chunks in the V (stage s: chunks s and 2p-1-s). Context shards
// (cp) keep the activations of T / cp rows, plus what each attention layer keeps and what its
// exchange holds (compute/context/context_cost.hpp); parameters, gradients and optimizer state stay
// whole, sharded by ZeRO over the data-parallel group of dp · cp ranks.
//
// Experts. A model with experts counts a rank's experts' parameters, gradients and moments: every
// expert (compute::split_for_pipeline's stage parameters), or under ep the E/ep of each MoE block
// a rank holds, whose gradients are summed over the dp/ep ranks holding them; under ep the
// activations hold the larger buffers of the rows a rank's experts may receive
// (StageFootprint::expert_shards). Its FLOPs are the k experts a token reaches
// (compute::model_flops). An expert group is ep consecutive data-parallel replicas (cp 1); per MoE
// block of the stage, micro-batch and token, each of the k slots' rows of C values goes to its
// expert's rank and back, forward and backward: 4 · tokens · k · C activation bytes, (ep - 1)/ep of
// them leaving the rank, on the critical path (the counts' E int64 are left out).
//
// Bounds. check_plan_inputs refuses a cluster of more than max_plan_devices devices and a model
// beyond max_plan_layers, max_plan_width or max_plan_vocabulary, far above any trained today; they
// keep every count in range. The enumeration plans at most max_planned_shards tensor shards and
// max_planned_stages pipeline stages, and a schedule of more than simulated_microbatches
// micro-batches is simulated at that many and extended at its busiest stage's pace, so a plan
// takes seconds whatever the batch.
//
// Time. Compute is the model's FLOPs (compute::model_flops; full recompute adds each block's
// forward but its MLP output projection, selective the attention's forward) at `mfu` of each
// device's peak. Troupe's runtime also sums a step's micro-batch gradients as replicas' are summed
// (compute/train/micro_batch_sum.hpp: each micro-batch's gradient computed from zero, then added
// whole to the earlier ones'): of m > 1 micro-batches without ZeRO-3, 4m - 2 passes of the stage's
// gradient buffer through memory at `memory_bandwidth` (a copy, m - 2 adds and m - 1 zero fills,
// the last add), which MFU does not cover as it grows with m; the
// precisions Troupe does not run accumulate in the products and pay none. A pipeline stretches
// its stage's busy time by the simulated bubble (simulate(), uniform stage costs; a zero-bubble
// schedule's B and W each half the backward, recompute run in both) and adds the
// 2(p - 1) activation transfers of its fill and drain; tensor-parallel all-reduces sit on the
// critical path; data-parallel traffic is counted as not overlapped, and so is the context
// group's (the ring's forward hides it behind compute where it can; its backward does not). A link's time is its bytes
// over its bandwidth (bus bandwidth, as `troupe bench allreduce` and nccl-tests report it); a
// group runs over the node's link when all its members share a node (the grid's tp-dp-pp order,
// comm/grid.hpp), else over the link between nodes.

#include <string>
#include <string_view>
#include <vector>

#include "compute/context/context_method.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/recompute.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/train/sync_mode.hpp"
#include "compute/train/zero_stage.hpp"
#include "schedules/schedule.hpp"

namespace troupe::schedules {

inline constexpr int max_plan_devices = 1 << 20;
inline constexpr int max_plan_layers = 512;
inline constexpr int max_plan_width = 1 << 20;       // model.n_embd
inline constexpr int max_plan_vocabulary = 1 << 24;  // model.vocab_size
inline constexpr int max_planned_shards = 64;
inline constexpr int max_planned_stages = 64;
inline constexpr int simulated_microbatches = 128;

// Bytes per parameter and per activation value, by how the model is trained.
//   fp32              Troupe's training as built: 4 weight + 4 gradient + 8 AdamW moments, fp32
//                     activations; its ZeRO-1 all-reduces the gradients and its ZeRO-2 keeps the
//                     whole gradient buffer (docs/parallelism.md), and the plan says so.
//   bf16              Troupe's train.precision bf16 as built (docs/precision.md): fp32's bytes but
//                     2 for the activations a slot keeps, and the CPU backend's bf16
//                     copies of the largest products' operands (2 bytes an element; 4 on a CPU
//                     without BF16 units, Workload::emulated_products).
//   mixed             the ZeRO paper's mixed-precision Adam: 2 (fp16) + 2 (fp16) + 12 (fp32
//                     master weight, momentum, variance), 2-byte activations.
//   mixed-fp32-grads  Megatron's: 2 (bf16) + 4 (fp32 gradient accumulation) + 12, 2-byte
//                     activations (megatron/training/theoretical_memory_usage.py's 18 bytes).
enum class Precision { fp32, bf16, mixed, mixed_fp32_grads };

struct PrecisionBytes {
  double weight = 4, gradient = 4, optimizer = 8, activation = 4;
  // Troupe's runtime: ZeRO-1 all-reduces and ZeRO-2 keeps the whole gradient buffer.
  bool as_troupe_runs = true;
  // An element of the copies the products take of their operands (compute::StageFootprint::operand_bytes).
  double operand = 0;
  // An element of the activations a slot keeps (compute::StageFootprint::stored_activation_bytes).
  double stored_activation = 4;
};

PrecisionBytes precision_bytes(Precision precision);
std::string_view to_string(Precision precision);  // "fp32", "bf16", "mixed", "mixed-fp32-grads"
Expected<Precision> parse_precision(std::string_view name);

struct Cluster {
  int nodes = 1;
  int devices_per_node = 1;
  double device_memory = 0;    // bytes per device
  double peak_flops = 0;       // FLOP/s per device
  double mfu = 0.5;            // share of peak_flops the model's FLOPs reach
  double memory_bandwidth = 0;  // bytes/s between a device's memory and its cores
  double intra_bandwidth = 0;  // bytes/s per device on a link inside a node (bus bandwidth)
  double inter_bandwidth = 0;  // bytes/s per device on the link between nodes

  int devices() const { return nodes * devices_per_node; }
};

struct Workload {
  compute::GPTConfig model;
  int global_batch = 1;  // sequences per optimizer step, over every replica
  int seq_len = 1;
  Precision precision = Precision::fp32;
  // Empty: every device alike. Otherwise each pipeline stage's relative speed (pipeline.stage_speeds):
  // only layouts of that many stages are planned, each split both ways (Layout::split), and a
  // stage's compute takes its time over its speed, in the simulation and in the step time.
  std::vector<double> stage_speeds;
  // bf16 on a CPU without BF16 units: the products' operand copies are bf16 values kept in f32.
  bool emulated_products = false;
  // bf16 on a backend that stores every activation in f32 (CUDA), where the CPU stores what the
  // slots keep in bf16 (PrecisionBytes::stored_activation).
  bool operands_stored_f32 = false;
  // The job's train.sync and DiLoCo islands: every layout searched splits its replicas into them.
  compute::SyncMode sync = compute::SyncMode::allreduce;
  int islands = 1;
};

// No schedule: pp = 1 (micro-batches are gradient accumulation). cp context shards split each
// sequence of a replica (dp · tp · pp · cp devices), joined by `context`.
struct Layout {
  int dp = 1, tp = 1, pp = 1;
  compute::ZeroStage zero = compute::ZeroStage::none;
  compute::Recompute recompute = compute::Recompute::none;
  int micro_batch = 1;   // sequences per micro-batch
  int microbatches = 1;  // per step and replica: global_batch / (dp · micro_batch)
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int chunks = 1;  // v: interleaved and zb-v
  int cp = 1;
  compute::context::ContextMethod context = compute::context::ContextMethod::ring;
  compute::SplitMethod split = compute::SplitMethod::balanced;  // speed: by Workload::stage_speeds
  int ep = 1;  // expert shards: a group of ep consecutive data-parallel replicas (a model with experts)
  // train.sync diloco: the dp replicas form `islands` equal islands, each summing its gradients (and
  // sharding ZeRO's state) inside, and every rank keeps DiLoCo's outer state for what it holds.
  compute::SyncMode sync = compute::SyncMode::allreduce;
  int islands = 1;
};

// "zero 1, dp 32, tp 2, pp 4 1f1b, cp 2 ring, ep 2, micro-batch 2 × 8, recompute none" (tp, pp, cp
// and ep only above 1; "pp 2 1f1b by speed" for a split by stage speeds).
std::string describe(const Layout& layout);

struct DeviceMemory {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, gathered = 0;
  // DiLoCo's outer state (compute/train/outer_step.hpp): the last-sync weights, the outer momentum
  // and the pseudo-gradient, f32 each, over what the rank holds; a stage of several chunks also
  // copies them into one buffer around each sync.
  double outer = 0;
  int stashed = 1;  // micro-batches whose activations the stage keeps at its peak
  double model_states() const { return parameters + gradients + optimizer + gathered + outer; }
  double total() const { return model_states() + activations; }
};

struct LinkBytes {
  double dp = 0, tp = 0, pp = 0, cp = 0;  // bytes each device sends per step on that group
  bool dp_inter = false, tp_inter = false, pp_inter = false, cp_inter = false;  // the group spans nodes
  double ep = 0;  // the expert group's dispatch and combine
  bool ep_inter = false;
};

struct StepTime {
  double compute = 0;  // the busy stage's FLOPs at mfu
  double sums = 0;     // its micro-batch gradient sums through memory (below)
  double bubble = 0;   // share of the pipeline's span a stage idles (0 without pp)
  double dp = 0, tp = 0, pp = 0, cp = 0, ep = 0;
  double total = 0;
};

struct PlannedLayout {
  Layout layout;
  DeviceMemory memory;
  LinkBytes bytes;
  StepTime time;
  bool fits = true;
  std::string rejected;   // when it does not fit: "zero 1, dp 32: 95.6 GB > 80 GB"
  std::string not_built;  // what the runtime cannot run yet ("2-byte weights and activations"); empty if it can
};

struct Plan {
  std::vector<PlannedLayout> feasible;  // fastest first
  std::vector<PlannedLayout> rejected;  // least memory first
};

// Errors name the field: a model that fails compute::validate or passes the bounds above, counts
// below 1, more devices than max_plan_devices, seq_len above the model's block size, a
// non-positive memory, rate or bandwidth, stage speeds that are one, more than the planner's
// stages, or not positive.
Status check_plan_inputs(const Workload& workload, const Cluster& cluster);

// One layout's figures; the layout must fit the workload's shape (plan_layouts only makes such).
Expected<PlannedLayout> plan_layout(const Workload& workload, const Cluster& cluster, const Layout& layout);

// Every layout: dp · tp · pp · cp = devices, for a model with experts each ep dividing dp and the
// experts (with cp 1), cp at most `most_context_shards` and splitting the
// sequence into 2 cp chunks (ring, and all_to_all where cp divides the heads), tp dividing the heads and at most a
// node's devices and max_planned_shards, pp at most the layers and max_planned_stages, zero 0-3, each recompute mode,
// micro-batches of every power of two (and the whole share) dividing each replica's share of the batch; with pp > 1
// gpipe, 1f1b, zb-h1, and where the layers cut into 2p equal chunks zb-v and (m a multiple of p) interleaved, each with
// v = 2; with stage speeds only pp of their count, the one-chunk schedules each split balanced and by speed. An error
// when no dp divides the global batch.
Expected<Plan> plan_layouts(const Workload& workload, const Cluster& cluster, int most_context_shards = 1);

// "95.6 GB": `digits` significant digits in decimal units, as device memory is sold.
std::string format_bytes(double bytes, int digits = 3);

}  // namespace troupe::schedules
