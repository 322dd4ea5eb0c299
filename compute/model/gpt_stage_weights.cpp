// GPTStage's split backward, its weight half (W) and what B keeps for it: gpt_stage.hpp.

#include "compute/memory_ledger.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/gpt_stage_dims.hpp"

namespace troupe::compute {

void GPTStage::reserve_weight_inputs(Slot& s, const std::function<Tensor(std::int64_t)>& allocate) {
  const std::int64_t BTs = std::int64_t{max_B_} * (max_T_ / stream_segments());
  const std::int64_t BT = std::int64_t{max_B_} * max_T_, C = config_.n_embd, A = attn_width_, M = mlp_width_;
  auto z = [&](std::int64_t numel) {
    Tensor t = allocate(numel);
    weight_input_bytes_ += static_cast<std::int64_t>(t.nbytes());
    return t;
  };
  s.kept.clear();
  for (int l = first_layer_; l < last_layer_; ++l) {
    if (!config_.is_moe_layer(l)) {
      s.kept.push_back(WeightInputs{z(BT * C), z(BT * M), z(M), z(BTs * C), z(BT * C), z(BT * 3 * A), z(BTs * C)});
      continue;
    }
    // A full recompute's W finds the rows the experts ran only here: under expert shards they are
    // other ranks' tokens.
    WeightInputs moe{Tensor{}, Tensor{}, Tensor{}, z(BTs * C), z(BT * C), z(BT * 3 * A), z(BTs * C)};
    moe.moe = make_moe_weight_inputs(moe_shape(), BT, z, recompute_ == Recompute::full);
    s.kept.push_back(std::move(moe));
  }
  if (is_last()) s.dlnf = z(BTs * C);
  if (is_first() && shards_.sequence_parallel) s.dembedding = z(BT * C);
}

Tensor GPTStage::logits_gradient(const Dims& d, const Slot& s) {
  const std::int64_t Vs = vocab_width_;
  Tensor dlogits = d.bt(shared_.logits, Vs);
  const auto dloss = static_cast<float>(s.loss_scale / (double(s.B) * s.T));
  if (shards_.split())
    backend_.crossentropy_shard_backward(dlogits, d.bt(s.probs, Vs), d.bt_only(s.targets), vocab_begin_, dloss);
  else
    backend_.crossentropy_backward(dlogits, d.bt(s.probs, Vs), d.bt_only(s.targets), dloss);
  return dlogits;
}

void GPTStage::abandon_weights() {
  for (Slot& s : slots_) s.weights_owed = false;
}

// The parameter gradients backward() adds, in its order (the head, the blocks from the last, the
// embeddings), each from what B kept and the slot's activations; the one product a slot does not
// keep, d(logits), is computed again from the probabilities.
void GPTStage::backward_weights(int slot, const std::function<void(int layer)>& layer_done) {
  Slot& s = slot_at(slot);
  TROUPE_CHECK(s.weights_owed, "backward_weights of slot " + std::to_string(slot) + " without its backward_input");
  s.weights_owed = false;
  const std::int64_t C = config_.n_embd, A = attn_width_, M = mlp_width_;
  const Dims d = dims(s.B, s.T);
  Backend& be = backend_;
  Tensor no_bias;
  Tensor front_grad;
  if (is_first()) front_grad = source_->gradient(front_unit_);
  if (is_last()) {
    Tensor tail_grad = source_->gradient(tail_unit_);
    Tensor dwte = in_unit(is_first() ? front_grad : tail_grad, wte_);
    be.matmul_backward_weights(dwte, no_bias, logits_gradient(d, s), d.bt(s.lnf, C));
    Tensor dlnf_w = in_unit(tail_grad, lnf_w_), dlnf_b = in_unit(tail_grad, lnf_b_);
    be.layernorm_backward_params(dlnf_w, dlnf_b, d.stream(s.dlnf, C), d.stream(s.layers.back().residual3, C),
                                 d.stream_only(s.lnf_mean), d.stream_only(s.lnf_rstd));
    source_->gradient_done(tail_unit_);
  }
  for (int l = last_layer_ - 1; l >= first_layer_; --l) {
    const std::size_t local = static_cast<std::size_t>(l - first_layer_);
    const std::size_t k = block_view(l);
    const int unit = block_unit(l);
    const Tensor unit_grad = source_->gradient(unit);
    const bool moe = config_.is_moe_layer(l);
    Tensor g[kBlockTensors];  // an MoE block's first 8: its MLP's are moe_weights(unit_grad, l)
    for (std::size_t i = 0; i < (moe ? 8 : kBlockTensors); ++i) g[i] = in_unit(unit_grad, k + i);
    const Tensor block_in = d.stream(local == 0 ? s.input : s.layers[local - 1].residual3, C);
    // What a recompute dropped is made again exactly as B made it; the slot's buffers that are not
    // kept are views of shared_.recomputed, an MoE block's routing the slot's own.
    const LayerActivations& a = s.layers[local];
    const WeightInputs& keep = s.kept[local];
    if (recompute_ == Recompute::full) {
      const Tensor p = source_->use(unit, -1);
      block_forward(l, p, a, block_in, s.B, s.T, moe ? BlockRun::to_mlp_input : BlockRun::to_mlp_hidden);
      if (moe) moe_mlp_rerun_for_weights(d, l, p, a, keep.moe);
      source_->done_with(unit, Reuse::none);
    } else if (recompute_ == Recompute::selective && moe) {
      moe_refill_gelu(be, *a.moe, moe_shape().H, experts_);
    } else if (recompute_ == Recompute::selective) {
      Tensor fch_gelu = d.bt(a.fch_gelu, M);
      be.gelu_forward(fch_gelu, d.bt(a.fch, M));
    }
    if (moe) {
      moe_mlp_backward_weights(d, l, unit_grad, a, keep.moe);
    } else {
      be.matmul_backward_weights(g[10], g[11], d.bt(keep.dresidual3, C), d.bt(a.fch_gelu, M));
      be.residual_forward(g[9], g[9], keep.dfc_bias);
      be.matmul_backward_weights(g[8], no_bias, d.bt(keep.dfch, M), d.bt(a.ln2, C));
    }
    be.layernorm_backward_params(g[6], g[7], d.stream(keep.dln2, C), d.stream(a.residual2, C),
                                 d.stream_only(a.ln2_mean), d.stream_only(a.ln2_rstd));
    be.matmul_backward_weights(g[4], g[5], d.bt(keep.dresidual2, C), d.bt(a.atty, A));
    be.matmul_backward_weights(g[2], g[3], d.bt(keep.dqkv, 3 * A), d.bt(a.ln1, C));
    be.layernorm_backward_params(g[0], g[1], d.stream(keep.dln1, C), block_in, d.stream_only(a.ln1_mean),
                                 d.stream_only(a.ln1_rstd));
    source_->gradient_done(unit);
    if (layer_done) layer_done(l);
  }
  if (!is_first()) return;
  Tensor dwte = in_unit(front_grad, wte_), dwpe = in_unit(front_grad, wpe_);
  embed_backward(dwte, dwpe, shards_.sequence_parallel ? d.bt(s.dembedding, C) : d.stream(s.dinput, C),
                 d.bt_only(s.tokens));
  source_->gradient_done(front_unit_);
}

}  // namespace troupe::compute
