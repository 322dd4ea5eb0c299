#include "compute/model/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "compute/moe/moe_layer.hpp"

namespace troupe::compute {
namespace {

// Parameters of blocks [first, last), the embeddings on a first stage, ln_f (and a last stage's
// own wte copy) on a last one: stage_parameter_count's rule, in double, as one of `shards` shards
// holds them (a block's LayerNorms and row-parallel biases, 6C, and wpe and ln_f are whole), with
// an MoE block's E/EP experts on a rank of `expert_shards` EP, each expert's slice of them.
double stage_parameters(const GPTConfig& c, int first, int last, int shards = 1, int expert_shards = 1) {
  const double C = c.n_embd, T = shards, wte = double(c.padded_vocab_size) * C / T;
  const double per_layer = (12 * C * C + 7 * C) / T + 6 * C;
  double n =
      per_layer * (last - first) + c.moe_block_extra_parameters(expert_shards, shards) * c.moe_layers_in(first, last);
  if (first == 0) n += wte + double(c.block_size) * C;
  if (last == c.n_layer) n += 2 * C + (first == 0 ? 0 : wte);
  return n;
}

// An MoE block's shape on such a stage: each expert's hidden width split over the tensor shards.
MoEShape moe_shape(const GPTConfig& c, const StageFootprint& s) {
  return {c.experts, c.top_k, c.shared_experts > 0, c.n_embd, c.expert_hidden() / s.shards, s.expert_shards};
}

}  // namespace

// Per micro-batch of N = B·T rows, a shard's widths A = C/t (attention), M = 4C/t (MLP), Vs (vocabulary):
//   product            first operand: forward, d(input), d(weight)    second operand: forward, d(input), d(weight)
//   qkv                N·C,  N·3A, N·3A                                3A·C, 3A·C, N·C
//   attention proj     N·A,  N·C,  N·C                                 C·A,  C·A,  N·A
//   c_fc               N·C,  N·M,  N·M                                 M·C,  M·C,  N·C
//   c_proj             N·M,  N·C,  N·C                                 C·M,  C·M,  N·M
//   lm head (last)     N·C,  N·Vs, N·Vs                                Vs·C, Vs·C, N·C
// and an MoE block's experts (H = GPTConfig::expert_hidden / t, a shard's slice) over up to
// R = MoEShape::expert_rows(N) rows: R·H and H·C, R·H.
ProductOperands largest_product_operands(const GPTConfig& c, const StageFootprint& s) {
  const double N = double(s.B) * s.T, C = c.n_embd, M = 4 * C / s.shards, A = C / s.shards;
  const double Vs = s.last_layer == c.n_layer ? c.padded_vocab_size / double(s.shards) : 0;
  ProductOperands most{N * std::max({C, 3 * A, M, Vs}), std::max({M * C, 3 * A * C, N * std::max(C, M), Vs * C})};
  if (c.moe_layers_in(s.first_layer, s.last_layer) > 0) {
    const MoEShape moe = moe_shape(c, s);
    const double rows_by_hidden = double(moe.expert_rows(std::int64_t(N))) * double(moe.H);
    most.first = std::max(most.first, rows_by_hidden);
    most.second = std::max({most.second, rows_by_hidden, double(moe.H) * C});
  }
  return most;
}

MemoryEstimate estimate_training_memory(const GPTConfig& c, const StageFootprint& s) {
  const bool first = s.first_layer == 0, last = s.last_layer == c.n_layer;
  const double BT = double(s.B) * s.T, C = c.n_embd, layers = s.last_layer - s.first_layer, shards = s.shards;
  const double Vs = c.padded_vocab_size / shards;                        // the shard's vocabulary columns
  const double att = double(s.B) * c.n_head * s.T / shards;             // one log-sum-exp per query row and head
  const double bytes = double(s.element_bytes), token_bytes = 4;  // token ids are i32

  // GPTStage::reserve: per layer ln1, residual2, ln2 and residual3 (C wide each), qkv, atty, fch
  // and fch_gelu (12 C wide in all, split over the shards), four per-token statistics and the
  // attention state. What recomputation does not keep per layer, every layer's slots share once.
  const double block = 4 * BT * C + 12 * BT * C / shards + 4 * BT + att;
  double per_layer = block, recomputed = 0;
  if (s.recompute == Recompute::selective) {
    recomputed = 4 * BT * C / shards + att;  // fch_gelu and the attention state
    per_layer = block - recomputed;
  } else if (s.recompute == Recompute::full) {
    recomputed = block - BT * C;  // rerun up to the GELU output: no residual3
    per_layer = BT * C;           // residual3, the next block's input
  }
  // An MoE block keeps its MLP's state (moe_layer.hpp) in place of what a dense block keeps of fch
  // and fch_gelu (both split over the shards, as the experts' hidden width is): all of it; all
  // but the GELU outputs, shared once (selective); none of it, one state shared (full). The routing
  // each keeps on the host (12 bytes a token-slot) is left out, as the trainer's batch buffers are.
  const MoEShape moe = moe_shape(c, s);
  const double moe_layers = c.moe_layers_in(s.first_layer, s.last_layer);
  if (moe_layers > 0) {
    // The shared set holds a dense block's MLP buffers only for a dense block of the stage.
    if (moe_layers == layers && s.recompute == Recompute::selective) recomputed -= 4 * BT * C / shards;
    if (moe_layers == layers && s.recompute == Recompute::full) recomputed -= 8 * BT * C / shards;
    const double state = double(moe_activation_elements(moe, std::int64_t(BT))),
                 gelu = double(moe_gelu_elements(moe, std::int64_t(BT)));
    double dense_mlp = 8 * BT * C / shards, moe_kept = state, moe_shared = 0;
    if (s.recompute == Recompute::selective) {
      dense_mlp = 4 * BT * C / shards;
      moe_kept = state - gelu;
      moe_shared = gelu;
    } else if (s.recompute == Recompute::full) {
      dense_mlp = moe_kept = 0;
      moe_shared = state;
    }
    per_layer -= moe_layers / layers * (dense_mlp - moe_kept);
    recomputed += moe_shared;
  }
  double per_slot = layers * per_layer + 2 * BT * C;  // + input and dinput
  if (last) per_slot += BT * C + 2 * BT + BT * Vs;    // ln_f and its statistics, probabilities
  if (s.keep_for_weights) {
    // GPTStage::reserve_weight_inputs: per layer d of both residual branches and both LayerNorm
    // outputs (C wide each), d of the MLP input and of qkv, the fc bias share; d(ln_f) on a last stage.
    // An MoE block keeps its MLP's own (moe_layer.hpp) in place of d(residual3), d(fch) and the bias share.
    const double M = 4 * C / shards, A = C / shards;
    const double dense_mlp = BT * (C + M) + M,
                 moe_mlp = double(moe_weight_input_elements(moe, std::int64_t(BT), s.recompute == Recompute::full));
    per_slot += layers * (BT * (3 * C + 3 * A) + dense_mlp) + (last ? BT * C : 0);
    if (moe_layers > 0) per_slot += moe_layers * (moe_mlp - dense_mlp);
  }
  // Per-block gradient scratch: dln, dfch_gelu (which d(fch), d(qkv) and d(atty) reuse, and where
  // the residual stream is kept narrower, the forward's residual3 sums) and the attention state's
  // gradient; under tensor shards also the branch output the shards sum.
  const bool residual_stored = s.stored_activation_bytes != s.element_bytes && s.recompute != Recompute::full;
  const double dfch_gelu = std::max(4 * BT * C / shards, residual_stored ? BT * C : 0.0);
  double shared = (shards > 1 ? 2 : 1) * BT * C + dfch_gelu + att + recomputed;
  if (last) shared += BT * Vs + BT + (shards > 1 ? 3 * BT * shards : 0);  // logits, losses, the shards' loss stats
  if (c.experts > 0) shared += double(moe_scratch_elements(moe, std::int64_t(BT))) + BT * C;  // and the MLP's output
  const double token_buffers = s.slots * BT * ((first ? 1 : 0) + (last ? 1 : 0));
  // Of the above, what is stored at stored_activation_bytes (GPTStage::stored_dtypes): per block
  // ln1, qkv, atty, ln2 (not beside MoE blocks), and a dense block's fch and fch_gelu, kept per slot
  // or shared as recomputation says, and but for a full recompute its residual2 and residual3 (not
  // the stage's output); ln_f per slot on a last stage.
  const double dense_layers = layers - moe_layers, mlp_hidden = 4 * BT * C / shards;
  const double attention_half = BT * C + 4 * BT * C / shards + (moe_layers > 0 ? 0 : BT * C);
  double kept_stored = 0, shared_stored = 0;
  if (s.recompute == Recompute::none) {
    kept_stored = layers * attention_half + dense_layers * 2 * mlp_hidden;
  } else if (s.recompute == Recompute::selective) {  // the GELU output shared
    kept_stored = layers * attention_half + dense_layers * mlp_hidden;
    shared_stored = dense_layers > 0 ? mlp_hidden : 0;
  } else {
    shared_stored = attention_half + (dense_layers > 0 ? 2 * mlp_hidden : 0);
  }
  if (residual_stored) kept_stored += (2 * layers - 1) * BT * C;
  if (last) kept_stored += BT * C;
  const double stored_elements = s.slots * kept_stored + shared_stored;

  MemoryEstimate estimate;
  estimate.parameter_bytes = 4 * stage_parameters(c, s.first_layer, s.last_layer, s.shards, s.expert_shards) * bytes;
  const ProductOperands operands = largest_product_operands(c, s);
  estimate.activation_bytes = (s.slots * per_slot + shared - stored_elements) * bytes +
                              stored_elements * double(s.stored_activation_bytes) + token_buffers * token_bytes +
                              (operands.first + operands.second) * double(s.operand_bytes);
  return estimate;
}

Status check_element_counts(const GPTConfig& c, int B, int T) {
  // 2^62 leaves room for the sums and doublings of counts that the model computes in int64.
  constexpr double most = 4611686018427387904.0;
  const double BT = double(B) * T;
  const double largest =
      std::max({stage_parameters(c, 0, c.n_layer), BT * c.padded_vocab_size, BT * c.n_head * double(T),
                BT * 4 * double(c.n_embd) * (c.experts > 0 ? c.top_k : 1)});
  if (largest < most) return Status::success();
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", largest);
  return Error{"model.n_layer " + std::to_string(c.n_layer) + ", model.n_embd " + std::to_string(c.n_embd) +
               ", model.vocab_size " + std::to_string(c.vocab_size) + ", train.batch_size " + std::to_string(B) +
               " and train.seq_len " + std::to_string(T) + " make a tensor of " + count +
               " elements, more than a 64-bit count holds"};
}

}  // namespace troupe::compute
