#pragma once
// One pipeline stage of GPT-2 (pre-LN, learned positions, tied input/output embedding, biases,
// GELU tanh), written only against the Backend interface: the blocks [first_layer, last_layer),
// plus the embedding on the first stage (first_layer == 0) and ln_f, the tied lm head and the
// cross-entropy loss on the last (last_layer == n_layer). The whole-model GPT (gpt.hpp) is the
// stage that is both, with one slot, so the model has exactly one forward and one backward.
// Which layers each stage gets: stage_split.hpp.
//
// Parameters. A stage owns only its own parameters and gradients, each one flat buffer: its
// contiguous slice [begin, end) of the global ParameterLayout at local offset 0 (global_runs(),
// so a checkpoint or optimizer maps local to global by adding begin), then, on a last stage that
// is not also the first, its own copy of the tied wte.weight for the lm head. The copy starts
// equal to the first stage's because initialisation is a pure function of (seed, global parameter
// index, element). Views are named by the global Hugging Face name ("wte.weight" on the last stage
// is its copy). The first stage's wte gradient holds the embedding lookup's share, the last
// stage's the lm head's; a pipeline caller sums the two tied_embedding_grad() views (Megatron's
// embedding group) before clipping and AdamW, so both copies take the same update and stay equal.
// Under expert shards the slice is of the rank's local layout (layout(): each MoE block's E/EP
// experts in place of all E), and global_runs() say where its experts sit in the whole model's.
//
// Activation slots. Several micro-batches are in flight on one stage (1F1B: stage s of p stashes
// up to p - s, GPipe all m). A slot keeps one micro-batch's activations from its forward to its
// backward; slots are independent (each has its own B, T), so forward(1) may run between
// forward(0) and backward(0). Buffers used only inside one forward or one backward (the branch
// output, logits, per-block gradient scratch) are shared by all slots. Buffers are allocated once
// for the largest (B, T) reserved; a smaller micro-batch uses a prefix of each, which is itself a
// contiguous (B, T, ...) tensor.
//
//   forward(slot, input, targets):  input = tokens (B,T) i32 on the first stage, else the previous
//     stage's output (B,T,C), copied into the slot so the caller may reuse its buffer. The last
//     stage with targets returns the mean loss; every other call returns NaN. output(slot) (B,T,C)
//     is what goes to the next stage; it stays valid until the slot's next forward.
//   backward(slot, output_grad, loss_scale):  on the last stage output_grad is empty and the
//     gradient starts at loss_scale × mean loss (1/k for k accumulated micro-batches); elsewhere it
//     is d(output) from the next stage, which already carries the scale. Parameter gradients are
//     accumulated (+=); input_grad(slot) (B,T,C) = d(input) goes to the previous stage and stays
//     valid until the slot's next backward.
//
// Backward keeps one residual-gradient buffer per slot for the stage's whole depth (it ends as
// input_grad): blocks are walked in reverse and each adds its branch's gradient into the buffer in
// place (see the conventions in backend.hpp).
//
// Recomputation (recompute.hpp): what a slot does not keep lives in one scratch set shared by
// every slot and layer, which backward refills for the block it is about to differentiate. An MoE
// block's routing is each slot's own in every mode (moe_layer.hpp).
//
// Tensor shards (tensor_shard.hpp): given a shard group of T > 1, the stage holds shard s's part of
// each parameter (views() are local shapes, global_runs() say where each element sits in the
// global layout) and sums its partial results over the group as Megatron-LM's paired operators
// do: the embedding's output and each row-parallel output in the forward; the gradient of each
// column-parallel input (the LayerNorm outputs feeding attention, the MLP and the lm head) in the
// backward. The loss is taken over the split vocabulary without ever gathering the logits. Every
// shard of a stage makes the same group calls in the same order. With sequence parallelism
// (Korthikanti et al.) the residual stream, the LayerNorms and their statistics hold only the
// shard's segment of the B·T rows: each sum becomes a reduce-scatter onto the segments, and the
// LayerNorm outputs (and, in backward, the stream's gradient) are all-gathered before the
// column-parallel products and the row-parallel weight gradients that need every row. An MoE
// block's MLP is split as the dense one is (each expert's hidden width over the shards, the
// router replicated: ExpertGroup's slices, expert_exchange.hpp): every shard routes all the rows
// alike and its output, experts and shared expert together, is summed once as a row-parallel one.
//
// Where the parameters live (parameter_source.hpp): by default the stage keeps them all, as
// described above. Given a ParameterSource, it asks the source for each unit (embeddings, a
// block, the tail) just before using it and hands each unit's gradients back once they are
// final; params() and grads() are then only what the source keeps between steps (ZeRO-3's shard).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/context_shard.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/parameter_source.hpp"
#include "compute/model/recompute.hpp"
#include "compute/model/tensor_shard.hpp"
#include "compute/moe/moe_layer.hpp"

namespace troupe::compute {

class GPTStage {
 public:
  // Blocks [first_layer, last_layer), 0 <= first_layer < last_layer <= n_layer. Without a
  // source the stage keeps every parameter itself; a source must outlive the stage. `shards`
  // names this stage's tensor shard and its group (one shard, no group, by default); `context` its
  // context shard (context_shard.hpp; none by default), whose T is the rows the stage runs on;
  // `experts` the expert group whose rank's experts its MoE blocks run (moe_layer.hpp; all of them
  // by default).
  GPTStage(const GPTConfig& config, Backend& backend, int first_layer, int last_layer, DType dtype = DType::f32,
           Recompute recompute = Recompute::none, ParameterSource* source = nullptr, TensorShardGroup shards = {},
           ContextShardGroup context = {}, ExpertGroup experts = {});
  GPTStage(const GPTStage&) = delete;
  GPTStage& operator=(const GPTStage&) = delete;

  // The units of such a stage's flat buffer, in local order (parameter_source.hpp); under expert
  // shards of the local layout of shard `experts`.
  static std::vector<ParameterUnit> parameter_units(const GPTConfig& config, int first_layer, int last_layer,
                                                    TensorShard shard = {}, ExpertShard experts = {});
  // Its views (views() of the stage such arguments make), for a source made before the stage.
  static std::vector<ParameterView> parameter_views(const GPTConfig& config, int first_layer, int last_layer,
                                                    TensorShard shard = {}, ExpertShard experts = {});

  const GPTConfig& config() const { return config_; }
  const ParameterLayout& global_layout() const { return global_layout_; }
  // The whole model's layout as this rank holds it: the global one, or under expert shards the
  // local one of its experts (parameter_layout.hpp).
  const ParameterLayout& layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  Recompute recompute() const { return recompute_; }
  Backend& backend() { return backend_; }
  int first_layer() const { return first_layer_; }
  int last_layer() const { return last_layer_; }
  bool is_first() const { return first_layer_ == 0; }
  bool is_last() const { return last_layer_ == config_.n_layer; }

  // --- parameters ---------------------------------------------------------------------------
  // What this rank keeps: all num_params() elements, or under a source that shards them local
  // [kept_begin(), ...) (ZeRO-3), or its runs (source_->kept_runs(): ZeRO-3 with expert shards).
  Tensor& params() { return source_->kept_parameters(); }
  Tensor& grads() { return source_->kept_gradients(); }
  std::int64_t kept_begin() const { return source_->kept_begin(); }
  std::int64_t num_params() const { return num_params_; }
  // The stage's views in local order, offsets into params()/grads(), global names.
  const std::vector<ParameterView>& views() const { return views_; }
  bool holds(const std::string& name) const { return by_name_.count(name) > 0; }
  // Views by name; throw for a parameter this stage does not hold, or does not keep whole.
  Tensor param(const std::string& name) const;
  Tensor grad(const std::string& name) const;
  // Where local [0, num_params()) sits in the global ParameterLayout, in local order; adjacent
  // runs are merged. With one shard: global [begin, end) of the stage's slice, then on a last
  // stage that is not the first the copy of wte.
  struct Run : GlobalRun {
    bool replicated = false;      // every tensor shard holds these elements (count them once)
    bool embedding_copy = false;  // a last stage's copy of wte (the first stage's are the saved ones)
    // Under expert shards, this rank's experts: the ranks at its place in every expert group hold
    // the same ones (their gradients are summed over those ranks alone, and the first group saves them).
    bool expert_shard = false;
  };
  const std::vector<Run>& global_runs() const { return runs_; }
  TensorShard tensor_shard() const { return shards_.shard; }
  // The context group the stage's rows belong to; not sharded() without one.
  ContextShardGroup context_shard() const { return context_ ? context_->group() : ContextShardGroup{}; }
  // A last stage that is not the first keeps its own wte.weight at local [end - begin, num_params()).
  bool has_embedding_copy() const { return is_last() && !is_first(); }
  // The wte.weight gradient on the first and the last stage: sum them across the two stages
  // before clipping and AdamW (on a stage that is both, it already holds both shares).
  Tensor tied_embedding_grad() const;
  // The unit that holds wte.weight (the first stage's, or a last stage's copy), and its view in
  // a buffer of that unit: where a ZeRO-3 pipeline sums the two shares.
  int tied_embedding_unit() const;
  Tensor tied_embedding_in(const Tensor& unit_buffer) const;

  // Fills every parameter from its init rule, a pure function of (seed, global parameter index).
  void init_parameters(std::uint64_t seed);
  void zero_grad();

  // --- mixture of experts (gpt_stage_moe.cpp) ------------------------------------------------
  // A model with experts (GPTConfig::is_moe_layer) runs without tensor shards, and with context
  // shards without expert shards: the stage refuses the rest. Under context shards its routing
  // losses are each micro-batch's over the context group (moe_router.hpp). Under a recompute its MoE blocks keep what
  // moe_layer.hpp says. Its loss adds, per MoE block of the stage, aux × the load-balancing loss and z × the router
  // z-loss (compute/moe/moe_router.hpp); both 0 until set. Their gradients are the stage's own: backward adds them in
  // each MoE block, under the backward's loss_scale, whichever stage holds the block.
  void set_moe_loss_coefficients(double aux, double z);
  // The expert group the MoE blocks run their share of the experts in; not sharded() without one.
  const ExpertGroup& expert_group() const { return experts_; }
  // The MoE blocks' losses, and where their tokens went.
  struct MoERouting {
    double aux = 0, z = 0;  // means over the stage's MoE blocks; 0 without any
    int experts = 0;
    // Token-slots of this rank's tokens routed to each expert, block by block in layer order over
    // the whole model's MoE blocks: slots[b · experts + e] (a block's slots sum to its tokens ×
    // top_k; a block another pipeline stage holds has none here).
    std::vector<std::int64_t> slots;
    // Adds another micro-batch's: its losses times `weight`, its slots whole.
    void add(const MoERouting& other, double weight);
    // The most loaded expert's slots over the mean, in the block where that is largest: 1 when
    // even, `experts` when a block sends every slot to one expert; 0 without MoE blocks.
    double load_imbalance() const;
  };
  // Of the slot's latest forward.
  MoERouting moe_routing(int slot) const;

  // --- micro-batches ------------------------------------------------------------------------
  // Room for `slots` micro-batches of up to B sequences of up to T tokens. Growing reallocates,
  // which drops what the slots held.
  // With `keep_for_weights`, each slot also holds what backward_input keeps for backward_weights.
  void reserve(int B, int T, int slots = 1, bool keep_for_weights = false);
  int slots() const { return static_cast<int>(slots_.size()); }
  // Bytes of every activation buffer reserve() allocated: the slots' and the scratch they share.
  // Under tensor shards the per-shard widths (C/T, 4C/T, Vp/T) size them.
  std::int64_t activation_bytes() const { return activation_bytes_; }

  // `layer_starting(l)`, when given, runs before global layer l's forward: where a caller may give
  // up the micro-batch (by throwing) without waiting for the rest of the forward.
  double forward(int slot, const Tensor& input, const Tensor& targets = Tensor{},
                 const std::function<void(int layer)>& layer_starting = {});
  Tensor output(int slot) const;  // (B,T,C) on the backend's device
  // Last stage: logits (B,T,Vp) of the latest forward (any slot); the buffer is shared by all
  // slots and a backward overwrites it with the logits' gradient.
  Tensor logits() const;

  // `layer_done(l)`, when given, runs as soon as global layer l's gradients are final (from the
  // stage's last layer down to its first), so a data-parallel caller can start reducing them.
  void backward(int slot, const Tensor& output_grad, double loss_scale = 1.0,
                const std::function<void(int layer)>& layer_done = {});
  Tensor input_grad(int slot) const;  // (B,T,C); on the first stage, d(embedding output)

  // Backward split in two, for zero-bubble pipelines (schedules/generate.hpp). backward_input (B)
  // is backward() without any parameter gradient: it leaves input_grad(slot) and keeps in the slot
  // the gradients each layer's weight gradients need (the output gradient of every linear layer
  // and LayerNorm; an MoE block's as moe_backward_input says, its expert exchanges included).
  // backward_weights (W), any time before the slot's next forward, adds the slot's parameter
  // gradients from them and calls layer_done as backward() does; it makes no group calls of its
  // own except a full recompute's forward up to each block's MLP (which under expert shards
  // exchanges nothing: an MoE block's experts rerun on the rows B kept). B then W adds what backward() adds,
  // bit for bit when the gradients start from zero for each micro-batch, as the pipeline's
  // (micro_batch_sum.hpp); the fused GELU-bias sum then lands whole. The slots must have been
  // reserved with keep_for_weights.
  void backward_input(int slot, const Tensor& output_grad, double loss_scale = 1.0);
  void backward_weights(int slot, const std::function<void(int layer)>& layer_done = {});
  // Forgets every slot's owed W: a step abandoned between a B and its W (a recovery takes the
  // step again from its first forward).
  void abandon_weights();
  // Bytes reserve() set aside for what B keeps for W, over all slots (part of activation_bytes()).
  std::int64_t weight_input_bytes() const { return weight_input_bytes_; }

  // What output() and input_grad() hold for a micro-batch of B × T: (B, T, C), or under sequence
  // parallelism this shard's segment of the B·T rows shaped (B, T / T_shards, C). A later stage's
  // forward takes that shape.
  Shape stream_shape(int B, int T) const;
  // Under sequence parallelism each shard's LayerNorm gradients (ln_1, ln_2, ln_f) cover only its
  // rows: a caller sums these views over the shard group before clipping. Empty otherwise.
  std::vector<Tensor> sequence_partial_grads() const;

 private:
  struct LayerActivations {
    Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, residual3;
    std::shared_ptr<MoEActivations> moe;  // an MoE block's MLP state, in place of fch and fch_gelu
  };
  // What B keeps for a block's W: each linear layer's and LayerNorm's output gradient (all B·T
  // rows for the products, the stream's rows for the LayerNorms), and the MLP fc bias's share. An
  // MoE block keeps its MLP's in `moe` instead of the first three (moe_layer.hpp).
  struct WeightInputs {
    Tensor dresidual3, dfch, dfc_bias, dln2, dresidual2, dqkv, dln1;
    MoEWeightInputs moe;
  };
  struct Slot {
    int B = 0, T = 0;  // of the slot's latest forward
    bool forwarded = false;
    bool have_targets = false;
    Tensor tokens;   // first stage: device copy (B,T) i32, for the embedding's backward
    Tensor targets;  // last stage: device copy (B,T) i32
    Tensor input;    // the embedding's output on the first stage, else a copy of the received input
    Tensor dinput;   // the residual-stream gradient during backward, d(input) after it
    std::vector<LayerActivations> layers;   // one per local layer
    Tensor lnf, lnf_mean, lnf_rstd, probs;  // last stage
    // Between backward_input and backward_weights (reserved with keep_for_weights).
    bool weights_owed = false;
    double loss_scale = 1.0;
    std::vector<WeightInputs> kept;  // one per local layer
    Tensor dlnf;                     // last stage: ln_f's output gradient
    Tensor dembedding;               // first stage under sequence parallelism: the gathered d(input)
  };
  struct Shared {
    LayerActivations recomputed;  // what slots do not keep (selective: att, fch_gelu; full: all)
    Tensor branch_out;      // under tensor shards, a shard's attn.c_proj or mlp.c_proj partial product
    Tensor logits, losses;  // last stage; logits take their own gradient in backward
    Tensor loss_stats;      // last stage under tensor shards: every shard's (B,T,3) cross-entropy stats
    // Per-block gradient scratch. Where slots keep the residual stream in a narrower dtype
    // (StoredDtypes::residual), the forward sums residual2 in dln and residual3 in dfch_gelu
    // (stream_sums), which the backward alone uses otherwise.
    Tensor dln, datt, dfch_gelu;  // d(qkv), d(atty) and d(fch) reuse buffers (see backward)
    MoEScratch moe;               // the MoE blocks' backward scratch
    Tensor moe_out;               // an MoE block's MLP output, before it joins the stream
  };

  // The dtypes a slot stores its activations in, other than the LayerNorm statistics and the
  // attention state (Backend::activation_storage_dtype): bf16 under the CPU's bf16 products, else
  // dtype_. `residual` is that of the residual2 and residual3 a block keeps for its LayerNorms'
  // backward, other than the stage's output (the last block's residual3, always dtype_): the sums
  // themselves are made in dtype_ (stream_sums).
  struct StoredDtypes {
    DType ln1, qkv, atty, ln2, fch, fch_gelu, lnf, residual;
  };
  StoredDtypes stored_dtypes() const;

  Tensor view(const Tensor& flat, std::size_t index) const {
    return flat.slice(views_[index].offset, views_[index].shape);
  }
  // View `index` inside the buffer of the unit that holds it (what the source's use() returned).
  Tensor in_unit(const Tensor& unit_buffer, std::size_t index) const {
    const ParameterUnit& u = units_[static_cast<std::size_t>(unit_of_view_[index])];
    return unit_buffer.slice(views_[index].offset - u.begin, views_[index].shape);
  }
  int block_unit(int layer) const { return (is_first() ? 1 : 0) + (layer - first_layer_); }
  struct Dims;  // one micro-batch's shapes (gpt_stage.cpp)
  Dims dims(int B, int T) const;
  // The residual stream's segments: the shard count under sequence parallelism, else 1.
  int stream_segments() const { return shards_.sequence_parallel ? shards_.shard.count : 1; }
  // A row-parallel product's (or a column-parallel input gradient's) partial sums over all B·T
  // rows, summed over the shards: in place, returning this rank's stream rows of the sum (all of
  // them; under sequence parallelism its segment, by a reduce-scatter).
  Tensor sum_rows(const Dims& d, const Tensor& full);
  // Under sequence parallelism: every rank's rows of `full`, each written by its rank, gathered.
  void gather_rows(const Tensor& full);
  // All B·T rows of the stream gradient `rows` (itself, or gathered into scratch).
  Tensor gathered_stream(const Dims& d, const Tensor& rows);
  // The bias a row-parallel product adds: shard 0's, so the sum over the shards holds it once.
  Tensor bias_once(const Tensor& bias) const { return shards_.shard.index == 0 ? bias : Tensor{}; }
  // out = residual + inp · weightᵀ + bias, a block's branch (attention's or the MLP's output
  // projection) added into the stream: one fused call on an unsplit rank; under tensor shards
  // each shard's partial product goes through the branch scratch to be summed over the shards.
  void add_branch(const Dims& d, Tensor& out, const Tensor& residual, const Tensor& inp, const Tensor& weight,
                  const Tensor& bias);
  // Attention of global layer `layer` and the embedding: the backend's, or through the context
  // group under context shards (gpt_stage_context.cpp).
  void attend(int layer, Tensor& out, Tensor& att, const Tensor& qkv);
  void attend_backward(int layer, Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv, const Tensor& att);
  void embed(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe);
  void embed_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens);
  // The whole flat buffer kept here, for the by-name views.
  const Tensor& whole(const Tensor& kept, const std::string& name) const;
  // How far block_forward runs: the whole block; up to the GELU output, all a block's backward
  // reads (a full recompute), where an MoE block reruns its MLP on the routing a.moe kept
  // (MoEPass::rerun); up to the MLP's input (ln_2's output), where a full recompute's W reruns an
  // MoE block's experts from the rows its B kept, without the exchanges.
  enum class BlockRun { whole, to_mlp_hidden, to_mlp_input };
  // Global layer l's forward from x (B,T,C) into a's buffers, with the block's unit `p`; it returns
  // the block's output in dtype_ (the next block's x: residual3, or where a keeps that narrower,
  // the sum stream_sums made). Short of the whole block it leaves residual3 alone and returns none.
  Tensor block_forward(int layer, const Tensor& p, const LayerActivations& a, const Tensor& x, int B, int T,
                       BlockRun run = BlockRun::whole);
  // Where block_forward makes a's residual sums in dtype_: a's own buffers, or where a keeps one in
  // a narrower dtype, the shared scratch (Shared), from which store() rounds it into a's.
  struct StreamSums {
    Tensor residual2, residual3;
  };
  StreamSums stream_sums(const Dims& d, const LayerActivations& a) const;
  // backward() and backward_input(): with `split`, no parameter gradient, and the slot keeps
  // what backward_weights reads.
  void backward_pass(int slot, const Tensor& output_grad, double loss_scale,
                     const std::function<void(int layer)>& layer_done, bool split);
  // The last stage's d(logits) of the slot's micro-batch, into the shared logits buffer (free once
  // the probabilities exist), scaled by the slot's loss_scale: B's and, again, W's.
  Tensor logits_gradient(const Dims& d, const Slot& s);
  // The slot's buffers for what B keeps for W (gpt_stage_weights.cpp).
  void reserve_weight_inputs(Slot& s, const std::function<Tensor(std::int64_t)>& allocate);
  Slot& slot_at(int slot);
  const Slot& slot_at(int slot) const;
  // The view index of global layer l's ln_1.weight: its block's first view.
  std::size_t block_view(int layer) const { return block_first_[static_cast<std::size_t>(layer - first_layer_)]; }
  // MoE blocks (gpt_stage_moe.cpp): the layer's shape, its weights (or gradients) in a unit's
  // buffer, the MLP's forward (this rank's rows of its output, which the caller adds into the
  // stream; none for MoEPass::rerun) and its backward into dln = d(ln2).
  MoEShape moe_shape() const;
  MoEWeights moe_weights(const Tensor& unit_buffer, int layer) const;
  Tensor moe_mlp_forward(const Dims& d, int layer, const Tensor& p, const LayerActivations& a, MoEPass pass);
  void moe_mlp_backward(const Dims& d, int layer, const Tensor& p, const Tensor& unit_grad, const LayerActivations& a,
                        const Tensor& dout, Tensor& dln, double loss_scale);
  // The MLP's backward split (B, W) for a zero-bubble pipeline: B writes dln and keeps in `keep`
  // what W reads; W adds the MLP's parameter gradients, after a full recompute's W has made the
  // experts' and the shared expert's hidden rows again (moe_mlp_rerun_for_weights).
  void moe_mlp_backward_input(const Dims& d, int layer, const Tensor& p, const LayerActivations& a, const Tensor& dout,
                              Tensor& dln, double loss_scale, MoEWeightInputs& keep);
  void moe_mlp_rerun_for_weights(const Dims& d, int layer, const Tensor& p, const LayerActivations& a,
                                 const MoEWeightInputs& kept);
  void moe_mlp_backward_weights(const Dims& d, int layer, const Tensor& unit_grad, const LayerActivations& a,
                                const MoEWeightInputs& kept);

  GPTConfig config_;
  TensorShardGroup shards_;
  std::unique_ptr<ContextLayers> context_;  // under context shards
  // This shard's widths: attention (C/T over NH/T heads), MLP (4C/T), vocabulary columns (Vp/T)
  // starting at vocab_begin_.
  int heads_ = 0, attn_width_ = 0, mlp_width_ = 0, expert_width_ = 0, vocab_width_ = 0, vocab_begin_ = 0;
  Backend& backend_;
  DType dtype_;
  Recompute recompute_;
  int first_layer_, last_layer_;
  ParameterLayout global_layout_;
  ParameterLayout layout_;  // the rank's: its experts alone under expert shards
  std::int64_t num_params_ = 0;
  std::vector<ParameterView> views_;     // local offsets and shapes
  std::vector<std::vector<GlobalRun>> view_runs_;  // views_[i]'s runs, local offsets from its start
  std::vector<Run> runs_;
  std::vector<std::size_t> init_index_;  // views_[i]'s index in the layout (local and global alike): its init stream
  std::unordered_map<std::string, std::size_t> by_name_;
  std::size_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;  // indices into views_
  std::vector<std::size_t> block_first_;                   // each local block's ln_1.weight, an index into views_
  double moe_aux_coef_ = 0, moe_z_coef_ = 0;
  ExpertGroup experts_;
  std::vector<ParameterUnit> units_;
  std::vector<int> unit_of_view_;          // views_[i] lies in units_[unit_of_view_[i]]
  int front_unit_ = -1, tail_unit_ = -1;   // the embeddings (first stage), what follows the blocks (last)
  std::unique_ptr<ResidentParameters> resident_;  // when no source was given
  ParameterSource* source_;

  int max_B_ = 0, max_T_ = 0;
  std::int64_t activation_bytes_ = 0;
  std::int64_t weight_input_bytes_ = 0;
  bool keep_for_weights_ = false;
  std::vector<Slot> slots_;
  Shared shared_;
  int logits_B_ = 0, logits_T_ = 0;  // dims of the forward that last wrote shared_.logits
};

}  // namespace troupe::compute
