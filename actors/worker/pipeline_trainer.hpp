#pragma once
// One rank's share of pipeline-parallel (× data-parallel) training: it holds the model chunks
// of its pipeline stage and executes that stage's instruction stream (schedules/) for every
// step — the stream decides, this only executes. Activations and their gradients travel as
// point-to-point messages through the comm engine, completing as messages in the worker's
// mailbox: every receive of a step is posted when the step begins (a large message moves only
// once its receive is posted), each send when the stream names it, and a forward or backward
// waits only for its own input (the model docs/schedules.md's simulator assumes).
//
// Step: the stream's forwards and backwards over m micro-batches (micro-batch j of data replica
// d reads the global samples ((step·m + j)·dp + d)·B + [0, B), what one process with batch
// dp·B and m accumulation steps reads), then reduce_grads — the tied embedding's two gradient
// shares summed between the first and last stage, each chunk's gradients summed over its
// data-parallel group, the loss and the squared gradient norm summed over the pipeline — then
// the clip and AdamW on this stage's own parameters. Each chunk is one of the flat buffers of the
// step's ZeRO half (compute/train/zero_step.hpp: the data-parallel sums, the norm's shards, AdamW on
// the shard and the gather, under every ZeRO stage as the replica trainer takes them). So the
// pipeline takes the single process's step, up to float32 rounding of the tied embedding's
// gradient (the same terms, grouped differently).
//
// Under tensor shards (grid.tp > 1) each chunk holds its tensor shard's part of every parameter
// (compute/model/tensor_shard.hpp); the chunk's forward and backward sum their partial results over
// the tp group, each sum posted and waited for as a message like every other collective.
// Activations go between the matching shards of neighbouring stages; the norms count replicated
// parameters once (shard 0's) and sum the shards' squares over the tp group.
//
// Under context shards (setup.context, C ranks: comm::context_group, consecutive places of the dp
// axis at this stage and tensor shard) data replica d is dp places C·d … C·d + C − 1: each reads
// replica d's sequences and its chunks run on the rank's rows of them (compute/model/context_shard.hpp),
// the first stage embedding them at their global positions and the last taking the loss of its
// rows. Activations go to the next stage's rank of the same context place. The loss scale
// 1 / (m · grid.dp) and the dp group's sums then make the replicas' mean gradient as without
// context shards (compute/train/trainer.hpp).
//
// Under DiLoCo (setup.options.islands K, docs/diloco.md) the dp group is the rank's island, n = dp/K
// consecutive places of the dp axis: the step's sums and means go over the island's replicas, and
// island i's replica d reads as replica i·n + d of the job's dp (compute/train/trainer.hpp). The
// outer step runs beside the trainer, on the chunk's parameters (rank_wiring.cpp, outer_syncs.hpp).
//
// A model with experts (docs/moe.md, "Pipeline stages"): a chunk's MoE blocks add their routing
// losses' gradients in its own backward; the step's routing (the losses' share of the model's mean,
// the slots per expert) is added up forward by forward and summed over the pipeline for the step
// line. Under expert shards (setup.experts) the chunk's MoE blocks exchange tokens with the stage's
// ranks of EP consecutive dp places, and its buffer is split by kind: dense runs summed over the dp
// group, its experts' over the stage's expert data-parallel group (compute/train/expert_gradients.hpp).
//
// Under ZeRO-3 each chunk keeps only its dp shard (compute/train/sharded_parameters.hpp): blocks
// are gathered for each micro-batch's forward and backward and their gradients reduce-scattered
// over the stage's dp group as they are done. The unit holding the tied embedding keeps its
// gradient over the step instead, so the two shares are summed between the first and last stage
// before its reduce-scatter, in the order the plain pipeline sums them.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "actors/worker/mailbox_comm.hpp"
#include "checkpoint/run_checkpoints.hpp"
#include "comm/collectives.hpp"
#include "comm/gradient_compressor.hpp"
#include "comm/grid.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/train/dynamic_shares.hpp"
#include "compute/train/expert_gradients.hpp"
#include "compute/train/micro_batch_sum.hpp"
#include "compute/train/sharded_parameters.hpp"
#include "compute/train/trainer.hpp"
#include "compute/train/zero_step.hpp"
#include "monitor/trace.hpp"
#include "monitor/work_progress.hpp"
#include "schedules/schedule.hpp"
#include "schedules/weights_fill.hpp"

namespace troupe::actors {

struct PipelineSetup {
  compute::GPTConfig model;
  schedules::Schedule schedule;  // every stage's stream; checked
  std::vector<compute::StageLayers> split;  // the blocks of every virtual stage, in depth order
  int peak_stashed = 1;          // this stage's, from the checker: the activation slots per chunk
  comm::Grid grid;               // dp × pp × tp
  int rank = 0;
  // batch, seq_len, lr, AdamW, clip, seed; grad_accum unused; micro_shares: train.balance's shares
  // by data replica (the schedule runs this replica's share); balance_window > 0: dynamic's window;
  // islands and island: DiLoCo's, the dp axis cut into `islands` groups of consecutive places
  compute::TrainerOptions options;
  compute::ZeroStage zero = compute::ZeroStage::none;  // over the stage's dp group
  bool zero3_reshard = true;
  bool sequence_parallel = false;  // with tp > 1 (compute/model/gpt_stage.hpp)
  comm::CompressionOptions compression;  // with ZeRO 0 or 1 (resolve() checks)
  compute::ContextShardGroup context;    // context shards: this rank's rows of every sequence
  // Expert shards: the stage's ranks of EP consecutive dp places splitting each of its MoE blocks'
  // experts (under ZeRO 0 to 2 and plain sums).
  compute::ExpertGroup experts;
  // A replacement joining in place: a peer's state overwrites the parameters before the first
  // step, so they are not initialised from the seed.
  bool parameters_from_peer = false;
  // train.sync diloco: an outer state laid out as the rank's parameters (outer_syncs.hpp).
  bool outer_state = false;
};

// Whether `stage` is in the group that sums the tied embedding's two shares: the first and the
// last stage of a pipeline, except in ZB-V's V, whose stage 0 holds both ends and sums them itself.
inline bool in_embedding_group(const schedules::Schedule& schedule, int stage) {
  return schedule.stages > 1 && !schedule.v_shape() && (stage == 0 || stage == schedule.stages - 1);
}

// The groups a pipeline rank talks to; `embedding` only where in_embedding_group, `tp` only when
// tp > 1.
struct PipelineGroups {
  comm::Engine& engine;
  comm::Communicator& dp;
  comm::Communicator& pp;
  comm::Communicator* embedding = nullptr;
  comm::Communicator* tp = nullptr;
  // Under expert shards with more than one expert group: the stage's ranks holding this rank's experts.
  comm::Communicator* expert_data = nullptr;
};

class PipelineTrainer {
 public:
  PipelineTrainer(PipelineSetup setup, compute::Backend& backend, PipelineGroups groups, MailboxComm& mailbox,
                  monitor::WorkProgress& progress, std::span<const std::uint16_t> train_tokens,
                  std::span<const std::uint16_t> val_tokens);

  // Every rank returns the same loss (mean over micro-batches and replicas), lr and norm.
  compute::StepResult step();
  // Mean loss over the validation set (compute::Trainer::evaluate's: `batches` global batches of
  // windows, split over the replicas), pushed through the pipeline forward only.
  double evaluate(int batches);
  // Norm of the whole model's parameters (each once), on every rank.
  double param_norm();
  std::int64_t tokens_per_step() const;
  // From now on every op of this stage — forward and backward spans, waits for a message,
  // sends posted, reduce and optimizer — goes into `recorder` as a Chrome trace event on the
  // track (pid replica, tid stage · tp + shard), timed by the machine's monotonic clock in microseconds.
  void record_into(monitor::TraceRecorder& recorder);
  // The track for this rank's work outside the schedule (DiLoCo's outer syncs): the replica's
  // process, a thread after every (stage, shard)'s, in the same order.
  monitor::TraceTrack side_track() const {
    return {replica_, setup_.grid.pp * setup_.grid.tp + stage_ * setup_.grid.tp + shard_};
  }
  // Most micro-batch activations (chunks' slots in use) each stage of this pipeline held at
  // once over all steps so far, by stage; every rank of the pipeline gets the same list.
  std::vector<int> peak_stashed_measured();
  // The idle share of this stage's last step up to its gradient sums: 1 − (forward and backward
  // compute) ÷ (wall time of the schedule), the bubble the simulator predicts plus waits on peers.
  double bubble_fraction() const { return bubble_fraction_; }

  // This rank's parameters and AdamW moments as global flat ranges, for checkpoints: each chunk's
  // runs (compute/model/gpt_stage.hpp), a last stage's copy of the tied wte.weight restored but
  // never saved (its values and moments equal the first stage's). Replica 0 of each stage saves
  // (each replica its shard under ZeRO-3); replicated parameters of tensor shards only shard 0.
  // Under PowerSGD also Q and this replica's residuals, mapped the same way. Under DiLoCo island 0
  // writes (its replica 0, or under ZeRO its replicas' moment shards), and `like_parameters` (state
  // laid out as the rank's parameters, its chunks' one after another: the outer state) is held and
  // saved as they are.
  struct LikeParameters {
    std::string kind;
    float* data = nullptr;
  };
  std::vector<checkpoint::HeldRange> held_state(const std::vector<LikeParameters>& like_parameters = {});
  // The rank's parameters as DiLoCo's outer step reads and writes them: one buffer, its chunks' one
  // after another. A rank of one chunk holds them so (chunk_parameters); one of several chunks
  // (interleaved, ZB-V) copies them into such a buffer and back.
  int chunk_count() const { return static_cast<int>(chunks_.size()); }
  compute::GPTStage& chunk_stage(int chunk) { return *chunks_.at(static_cast<std::size_t>(chunk)).stage; }
  compute::Tensor& chunk_parameters();  // a rank of one chunk
  // Where chunk_parameters() starts in the chunk's buffer: 0, or a ZeRO-3 shard's begin.
  std::int64_t chunk_kept_begin() const;
  std::int64_t parameter_count() const;
  void gather_parameters(compute::Tensor& flat) const;
  void scatter_parameters(const compute::Tensor& flat);
  long steps_taken() const { return steps_; }
  // Continues after `steps` steps (state restored into held_state()'s buffers).
  void resume_at(long steps);
  // An in-place recovery of `epoch` (in_place_recovery.hpp): forgets the step in flight (its
  // arrivals, activation slots and sends, which the mailbox gave up) and sends activations and
  // gradients under the epoch's id from now on, so that no late message of the abandoned step
  // matches one of the step done again. Its groups are renewed by the recovery itself.
  void renew(int epoch);
  // Forgets the step given up part-way, once its collectives have ended: the compressor's started
  // sums and ZeRO-3's gathered units.
  void abandon_step();
  // The compressor of this stage's data-parallel sums; null when they are plain. Under expert shards
  // that of its experts' sums over their own group too (null where the rank sums none).
  const std::shared_ptr<comm::GradientCompressor>& compressor() const { return compressor_; }
  const std::shared_ptr<comm::GradientCompressor>& expert_compressor() const { return expert_compressor_; }
  // Under train.balance: the replicas' shares of the step's micro-batches the next step takes,
  // and (dynamic) each replica's mean seconds per micro-batch they were decided from.
  const std::vector<int>& micro_shares() const { return dynamic_ ? dynamic_->shares() : setup_.options.micro_shares; }
  std::vector<double> seconds_per_micro_batch() const;

 private:
  struct Chunk {
    std::unique_ptr<compute::ShardedParameters> source;  // ZeRO-3; before the stage, which uses it
    std::unique_ptr<compute::GPTStage> stage;
    std::int64_t compressed_at = 0;  // the chunk's buffer in the compressor's: the chunks' one after another
    std::vector<int> free_slots;
    std::vector<std::vector<MailboxComm::Operation>> slot_sends;  // sends reading each slot's buffers
    // The step's micro-batch gradients summed as the replica trainer sums them (not under ZeRO-3),
    // and how many of this step's backwards the chunk has run.
    std::unique_ptr<compute::MicroBatchSum> micro_batches;
    int backwards = 0;
    // Under expert shards, or holding an embedding tied to another chunk's (below ZeRO 3): the
    // chunk's runs (by kind, the tied embedding one of its own), each a buffer of the step's.
    std::optional<compute::ExpertGradients> runs;
    // The chunk's buffers in the ZeRO step from first_buffer on, and where each starts in its own.
    int first_buffer = 0;
    std::vector<std::int64_t> buffer_begins;
  };
  struct InFlight {
    MailboxComm::Operation op = 0;
    compute::Tensor buffer;
    int from_rank = 0;
  };

  void post_receive(const schedules::Instruction& instruction);
  void run(const schedules::Instruction& instruction, double& loss_sum);
  void reduce_gradients();
  int take_slot(Chunk& chunk);
  // A (micro-batch, chunk)'s activations are done with (its backward, or its W): one fewer in use,
  // and its slot back to the chunk when `free_now` (else its send_grad frees it).
  void release_slot(Chunk& chunk, std::pair<int, int> pair, bool free_now);
  comm::MessageKey key_of(const schedules::Instruction& instruction) const;
  int rank_of_stage(int stage) const;
  void wait(MailboxComm::Operation op, const std::string& what);
  // An F's or B's wait for its input: under fills_waits_with_weights_, while the input is still in
  // flight, the stream's next W runs first if its B has run (schedules/simulator.hpp models it).
  void wait_for_input(MailboxComm::Operation op, const std::string& what);
  // Sum of squares of this stage's parameters or its summed gradients, the embedding copy left out
  // and replicated tensor-shard parameters counted once (summed over the stage's dp group where each
  // replica holds a shard, under tensor shards over the tp group: each holds a part).
  double own_sum_of_squares(bool gradients);
  // Under ZeRO-3 with expert shards or tied cuts: what a chunk laid out as `views` keeps, a segment
  // of each run of a kind (ended at `cuts` too) over its group as the ZeRO step cuts it
  // (compute/train/expert_gradients.hpp).
  std::vector<compute::RunShards> zero3_runs(std::span<const compute::ParameterView> views,
                                             std::span<const std::int64_t> cuts);
  // Where the runs of a chunk laid out as `views` (the model's first and last layers when `first`
  // and `last`) must end besides between kinds: around the embedding it shares with another chunk
  // (the first chunk's wte, the last one's copy). Summed, and under ZeRO-3 kept and gathered, as a
  // run of its own, it meets the data-parallel ring in the same order on both (a run of the same
  // size is cut into the same segments), so the two copies stay equal bit for bit with 3 or more
  // replicas too; empty where nothing is tied, and under DiLoCo with ZeRO-3 (whose outer state
  // follows one kept run a chunk, docs/architecture.md).
  std::vector<std::int64_t> tied_cuts(std::span<const compute::ParameterView> views, bool first, bool last) const;
  double sum_over(comm::Communicator& group, double value, const char* what);
  // The replica's routing over the whole model: this rank's step's (routing_) summed over the pipeline.
  compute::GPTStage::MoERouting pipeline_routing();
  // train.balance dynamic: every replica's seconds per micro-batch this step, the slowest of its
  // stages and shards (each rank's compute over its micro-batches), the same on every rank; the
  // shares change when DynamicShares decides so. Returns this replica's time.
  double observe_speeds(compute::StepResult& result);
  // This replica's schedule, activation slots, micro-batch sums and token buffers for `shares`
  // (taken at a step boundary, before the step's receives are posted).
  void take_shares(const std::vector<int>& shares);
  std::string op_name(char kind, const schedules::Instruction& ins) const;
  std::string arrival_text(const char* what, const schedules::Instruction& ins, int from_rank) const;
  void trace(const char* category, std::string name, double start_us, const schedules::Instruction* ins = nullptr);
  // This rank's trace track: a process per replica, a thread per (stage, shard) in grid order.
  monitor::TraceTrack track() const { return {replica_, stage_ * setup_.grid.tp + shard_}; }
  // The chunks' sums and gathers over the tp group, each waited for as it is posted.
  compute::TensorShardGroup shard_group();
  // The chunks' parameters in local shapes for PowerSGD, each at its chunk's compressed_at, Q
  // drawn from each one's global offset: all of them, or the dense or the experts' alone.
  enum class TensorKinds { all, dense, experts };
  std::vector<comm::GradientTensor> compressed_tensors(TensorKinds kinds) const;

  PipelineSetup setup_;
  compute::Backend& backend_;
  PipelineGroups groups_;
  MailboxComm& mailbox_;
  monitor::WorkProgress& progress_;
  std::span<const std::uint16_t> train_tokens_, val_tokens_;
  compute::WindowSampler sampler_;
  // The micro-batch's (B, T) token ids, read whole and cut into this rank's rows under context shards.
  void fill_rows(int micro, const std::function<void(compute::Tensor&, compute::Tensor&)>& fill);

  int stage_ = 0, replica_ = 0, shard_ = 0;
  int group_replicas_ = 1;  // the dp group's places: grid.dp, or under DiLoCo the island's
  // Under context shards: the data replica in the group (its place / C), their count, and the rows a
  // chunk runs on.
  int data_replica_ = 0, data_replicas_ = 1, rows_ = 0;
  int group_micro_batches_ = 1;                   // the step's micro-batches over every data replica
  compute::Tensor whole_inputs_, whole_targets_;  // (B, T) before the cut, under context shards
  std::vector<Chunk> chunks_;
  std::map<std::pair<int, int>, int> slot_of_;       // (micro-batch, chunk) → slot
  std::map<std::pair<int, int>, InFlight> arriving_;  // (micro-batch, chunk·2 + gradient) → receive
  std::map<int, compute::Tensor> handed_gradients_;   // micro-batch → the gradient across a V's bottom
  std::vector<compute::Tensor> inputs_, targets_;     // per micro-batch, (B, rows_) i32 on the host
  long steps_ = 0;
  std::shared_ptr<comm::GradientCompressor> compressor_;  // data-parallel sums; null: plain
  std::shared_ptr<comm::GradientCompressor> expert_compressor_;  // its experts' sums; null: plain or none
  compute::Tensor other_experts_residuals_;  // zeros: PowerSGD's residuals of the experts the rank does not hold
  compute::DataParallel data_parallel_;                   // the stage's dp group's hooks, through the compressor if any
  compute::DataParallel expert_data_;  // under expert shards: its expert data-parallel group's (alone: none)
  std::unique_ptr<compute::ZeroStep> zero_;               // every chunk's buffer, over data_parallel_
  std::uint16_t evaluations_ = 0;
  std::uint16_t transfer_group_id_ = comm::pp_group_id;  // point-to-point keys' group: renewed per epoch
  int in_use_ = 0, peak_in_use_ = 0;
  double busy_us_ = 0;  // forward and backward compute in the step so far (ZeRO-3's waits taken out)
  // A model with experts: the step's routing of this stage's MoE blocks, added up forward by forward.
  compute::GPTStage::MoERouting routing_;
  // train.balance dynamic: the shares' decision, the same on every rank (compute/train/dynamic_shares.hpp).
  std::optional<compute::DynamicShares> dynamic_;
  double bubble_fraction_ = 0;
  monitor::TraceRecorder* trace_ = nullptr;
  // A split backward's W runs early only where it talks to no other rank (no tensor or context
  // shards, no ZeRO-3 gathers, no experts): the ranks' collectives then keep one order, whenever
  // each W runs. Ws keep their order among themselves, so every gradient is the same sum.
  bool fills_waits_with_weights_ = false;
  std::size_t at_ = 0;                             // the stream's instruction running now
  std::optional<schedules::WeightsFill> weights_;  // this step's: the Ws run before their place
};

}  // namespace troupe::actors
