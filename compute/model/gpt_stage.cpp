#include "compute/model/gpt_stage.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compute/memory_ledger.hpp"
#include "compute/model/gpt_stage_dims.hpp"
#include "compute/model/memory_estimate.hpp"

namespace troupe::compute {
namespace {

// The tensor's values on the host (itself when it already lives there).
Tensor on_host(Backend& backend, const Tensor& t) {
  if (t.device() == Device::cpu) return t;
  Tensor host = Tensor::zeros(t.shape(), t.dtype());
  backend.copy(host, t);
  return host;
}

}  // namespace

void GPTStage::reserve(int B, int T, int slots, bool keep_for_weights) {
  TROUPE_CHECK(B > 0 && T > 0 && T <= config_.block_size && slots > 0 && T % stream_segments() == 0,
               "reserve B=" + std::to_string(B) + " T=" + std::to_string(T) + " slots=" + std::to_string(slots));
  if (B <= max_B_ && T <= max_T_ && slots <= this->slots() && (keep_for_weights_ || !keep_for_weights)) return;
  keep_for_weights_ = keep_for_weights_ || keep_for_weights;
  MemoryScope scope(MemoryKind::activations);
  // Never shrink what an earlier caller reserved (the trainer, then generate with B = 1).
  max_B_ = std::max(B, max_B_);
  max_T_ = std::max(T, max_T_);
  slots = std::max(slots, this->slots());
  // The residual stream's buffers hold this rank's rows: BTs of the BT.
  const std::int64_t BTs = std::int64_t{max_B_} * (max_T_ / stream_segments());
  const std::int64_t BT = std::int64_t{max_B_} * max_T_, C = config_.n_embd, A = attn_width_, M = mlp_width_,
                     Vs = vocab_width_, att = shape_numel(backend_.attention_state_shape(max_B_, heads_, max_T_));
  activation_bytes_ = 0;
  weight_input_bytes_ = 0;
  auto allocate = [&](Shape shape, DType dtype) {
    Tensor t = backend_.zeros(std::move(shape), dtype);
    activation_bytes_ += static_cast<std::int64_t>(t.nbytes());
    return t;
  };
  auto z = [&](Shape s) { return allocate(std::move(s), dtype_); };
  // What the slots keep of a block, but for the residual stream and the statistics, in the
  // backend's stored dtype (stored_dtypes()).
  const StoredDtypes stored = stored_dtypes();
  // A block's buffers, taking each one `shared` defines instead of allocating it.
  // `with_output` false: no residual3, for the block a full recompute reruns only up to what its
  // backward reads.
  auto allocate_moe = [&](std::int64_t numel) { return z({numel}); };
  // An MoE block (`moe`) keeps its MLP's state (moe_layer.hpp, below) in place of fch and fch_gelu.
  // `output`: residual3 is the stage's output (the last block's), kept in dtype_ whatever the stored dtypes.
  auto block_buffers = [&](const LayerActivations& shared, bool with_output, bool moe = false, bool output = false) {
    auto own = [&](const Tensor& t, std::int64_t numel, DType dtype) {
      return t.defined() ? t : allocate({numel}, dtype);
    };
    auto mlp = [&](const Tensor& t, DType dtype) { return moe ? Tensor{} : own(t, BT * M, dtype); };
    const LayerActivations& h = shared;
    return LayerActivations{own(h.ln1, BT * C, stored.ln1),
                            own(h.ln1_mean, BTs, dtype_),
                            own(h.ln1_rstd, BTs, dtype_),
                            own(h.qkv, BT * 3 * A, stored.qkv),
                            own(h.atty, BT * A, stored.atty),
                            own(h.att, att, dtype_),
                            own(h.residual2, BTs * C, stored.residual),
                            own(h.ln2, BT * C, stored.ln2),
                            own(h.ln2_mean, BTs, dtype_),
                            own(h.ln2_rstd, BTs, dtype_),
                            mlp(h.fch, stored.fch),
                            mlp(h.fch_gelu, stored.fch_gelu),
                            with_output ? own(h.residual3, BTs * C, output ? dtype_ : stored.residual) : Tensor{}};
  };
  shared_ = Shared{};
  LayerActivations not_kept;  // the slots' views of shared_.recomputed
  // An MoE block's MLP state not kept (moe_layer.hpp): the GELU outputs, or all but the routing.
  const int moe_blocks = config_.moe_layers_in(first_layer_, last_layer_);
  const bool dense_blocks = moe_blocks < last_layer_ - first_layer_;
  if (recompute_ == Recompute::selective) {
    shared_.recomputed.att = z({att});
    if (dense_blocks) shared_.recomputed.fch_gelu = allocate({BT * M}, stored.fch_gelu);
    if (moe_blocks > 0)
      shared_.recomputed.moe = std::make_shared<MoEActivations>(make_moe_gelu_outputs(moe_shape(), BT, allocate_moe));
    not_kept = shared_.recomputed;
  } else if (recompute_ == Recompute::full) {
    shared_.recomputed = block_buffers({}, false, !dense_blocks);
    if (moe_blocks > 0)
      shared_.recomputed.moe = std::make_shared<MoEActivations>(make_moe_activations(moe_shape(), BT, allocate_moe));
    not_kept = shared_.recomputed;  // without residual3: the next block's input, or the stage's output
  }
  const MoEActivations no_moe_shared;
  const MoEActivations& moe_not_kept = not_kept.moe ? *not_kept.moe : no_moe_shared;
  slots_.assign(static_cast<std::size_t>(slots), Slot{});
  for (Slot& s : slots_) {
    if (is_first()) s.tokens = allocate({max_B_, max_T_}, DType::i32);
    if (is_last()) s.targets = allocate({max_B_, max_T_}, DType::i32);
    s.input = z({BTs * C});
    for (int l = first_layer_; l < last_layer_; ++l) {
      s.layers.push_back(block_buffers(not_kept, true, config_.is_moe_layer(l), l + 1 == last_layer_));
      if (config_.is_moe_layer(l))
        s.layers.back().moe =
            std::make_shared<MoEActivations>(make_moe_activations(moe_shape(), BT, allocate_moe, moe_not_kept));
    }
    if (is_last()) {
      s.lnf = allocate({BT * C}, stored.lnf);
      s.lnf_mean = z({BTs});
      s.lnf_rstd = z({BTs});
      s.probs = z({BT * Vs});
    }
    s.dinput = z({BTs * C});
    if (keep_for_weights_) reserve_weight_inputs(s, [&](std::int64_t numel) { return z({numel}); });
  }
  logits_B_ = logits_T_ = 0;
  if (shards_.split()) shared_.branch_out = z({BT * C});
  if (is_last()) {
    shared_.logits = z({BT * Vs});
    shared_.losses = z({BT});
    if (shards_.split()) shared_.loss_stats = z({shards_.shard.count * BT * 3});
  }
  shared_.dln = z({BT * C});
  shared_.datt = z({att});
  // Also the forward's residual3 sums where slots keep residual3 narrower (stream_sums).
  shared_.dfch_gelu = z({std::max(BT * M, stored.residual == dtype_ ? 0 : BTs * C)});
  if (config_.experts > 0) {
    shared_.moe = make_moe_scratch(moe_shape(), BT, allocate_moe);
    shared_.moe_out = z({BT * C});
  }
  // The copies a backend's products may take of their operands (bf16 on the CPU), counted as activations.
  StageFootprint footprint{first_layer_, last_layer_, max_B_, max_T_, slots};
  footprint.shards = shards_.shard.count;
  if (config_.experts > 0) footprint.expert_shards = moe_shape().expert_shards;
  const ProductOperands operands = largest_product_operands(config_, footprint);
  backend_.reserve_product_operands(static_cast<std::int64_t>(operands.first),
                                    static_cast<std::int64_t>(operands.second));
}

GPTStage::StoredDtypes GPTStage::stored_dtypes() const {
  const DType stored = backend_.activation_storage_dtype(dtype_);
  // A full recompute reruns a block from the residual3 before it: kept as summed, the rerun makes
  // the forward's values again.
  const DType residual = recompute_ == Recompute::full ? dtype_ : stored;
  StoredDtypes dtypes{stored, stored, stored, stored, stored, stored, stored, residual};
  // An MoE block's dispatch copies ln_2's rows to its experts as they are, in the parameters'
  // dtype; under context shards the context group exchanges qkv and writes the attention's output
  // in it too.
  if (config_.moe_layers_in(first_layer_, last_layer_) > 0) dtypes.ln2 = dtype_;
  if (context_) dtypes.qkv = dtypes.atty = dtype_;
  return dtypes;
}

Tensor GPTStage::sum_rows(const Dims& d, const Tensor& full) {
  if (!shards_.sequence_parallel) {
    if (shards_.split()) shards_.all_reduce(full);
    return full;
  }
  shards_.reduce_scatter(full);
  return d.own(full, full.dim(2));
}

void GPTStage::add_branch(const Dims& d, Tensor& out, const Tensor& residual, const Tensor& inp, const Tensor& weight,
                          const Tensor& bias) {
  if (!shards_.split()) {
    backend_.matmul_residual_forward(out, inp, weight, bias, residual);
    return;
  }
  Tensor branch = d.bt(shared_.branch_out, config_.n_embd);
  backend_.matmul_forward(branch, inp, weight, bias_once(bias));
  backend_.residual_forward(out, residual, sum_rows(d, branch));
}

void GPTStage::gather_rows(const Tensor& full) {
  if (shards_.sequence_parallel) shards_.all_gather(full);
}

Tensor GPTStage::gathered_stream(const Dims& d, const Tensor& rows) {
  if (!shards_.sequence_parallel) return rows;
  Tensor full = d.bt(shared_.branch_out, config_.n_embd);
  Tensor own = d.own(full, config_.n_embd);
  backend_.copy(own, rows);
  shards_.all_gather(full);
  return full;
}

// One micro-batch's shapes over buffers allocated for (max_B, max_T): the prefix of a buffer is
// itself a contiguous (B, T, ...) tensor. The residual stream (the stage's input, the residuals,
// the LayerNorm statistics and the gradient it carries) holds this rank's rows of the flattened
// B·T: all of them, or under sequence parallelism segment `seg` of `segments` equal ones, shaped
// (B, T/segments, ·) so the micro-batch's B and T stay readable from it.
GPTStage::Dims GPTStage::dims(int B, int T) const {
  Dims d{B, T, backend_.attention_state_shape(B, heads_, T)};
  if (shards_.sequence_parallel) {
    d.segments = shards_.shard.count;
    d.seg = shards_.shard.index;
  }
  return d;
}

GPTStage::Slot& GPTStage::slot_at(int slot) {
  TROUPE_CHECK(0 <= slot && slot < slots(),
               "slot " + std::to_string(slot) + " of " + std::to_string(slots()) + " reserved");
  return slots_[static_cast<std::size_t>(slot)];
}

const GPTStage::Slot& GPTStage::slot_at(int slot) const {
  TROUPE_CHECK(0 <= slot && slot < slots(),
               "slot " + std::to_string(slot) + " of " + std::to_string(slots()) + " reserved");
  return slots_[static_cast<std::size_t>(slot)];
}

GPTStage::StreamSums GPTStage::stream_sums(const Dims& d, const LayerActivations& a) const {
  const std::int64_t C = config_.n_embd;
  auto sum_of = [&](const Tensor& kept, const Tensor& scratch) {
    if (!kept.defined()) return Tensor{};
    return d.stream(kept.dtype() == dtype_ ? kept : scratch, C);
  };
  return {sum_of(a.residual2, shared_.dln), sum_of(a.residual3, shared_.dfch_gelu)};
}

Tensor GPTStage::block_forward(int layer, const Tensor& p, const LayerActivations& a, const Tensor& x, int B, int T,
                               BlockRun run) {
  const std::int64_t C = config_.n_embd, A = attn_width_, M = mlp_width_;
  const Dims d = dims(B, T);
  const std::size_t k = block_view(layer);
  auto w = [&](std::size_t i) { return in_unit(p, k + i); };
  Backend& be = backend_;
  // The LayerNorm outputs hold all rows: each rank normalises its own, then they are gathered.
  Tensor ln1 = d.bt(a.ln1, C), ln1_mean = d.stream_only(a.ln1_mean), ln1_rstd = d.stream_only(a.ln1_rstd);
  Tensor qkv = d.bt(a.qkv, 3 * A), atty = d.bt(a.atty, A), att = d.bhtt(a.att);
  Tensor ln2 = d.bt(a.ln2, C), ln2_mean = d.stream_only(a.ln2_mean), ln2_rstd = d.stream_only(a.ln2_rstd);
  const StreamSums sums = stream_sums(d, a);
  // What a keeps of a sum, where that is not the sum itself.
  auto keep = [&](const Tensor& kept, const Tensor& sum) {
    Tensor to = d.stream(kept, C);
    if (to.data() != sum.data()) be.store(to, sum);
  };

  Tensor ln1_own = d.own(ln1, C);
  be.layernorm_forward(ln1_own, ln1_mean, ln1_rstd, x, w(0), w(1));
  gather_rows(ln1);
  be.matmul_forward(qkv, ln1, w(2), w(3));
  attend(layer, atty, att, qkv);
  Tensor residual2 = sums.residual2;
  add_branch(d, residual2, x, atty, w(4), w(5));
  keep(a.residual2, residual2);
  Tensor ln2_own = d.own(ln2, C);
  be.layernorm_forward(ln2_own, ln2_mean, ln2_rstd, residual2, w(6), w(7));
  gather_rows(ln2);
  if (run == BlockRun::to_mlp_input) return {};
  Tensor residual3 = sums.residual3;
  if (config_.is_moe_layer(layer)) {
    const Tensor mlp_out = moe_mlp_forward(d, layer, p, a, run == BlockRun::whole ? MoEPass::forward : MoEPass::rerun);
    if (run != BlockRun::whole) return {};
    be.residual_forward(residual3, residual2, mlp_out);
  } else {
    Tensor fch = d.bt(a.fch, M), fch_gelu = d.bt(a.fch_gelu, M);
    be.matmul_forward(fch, ln2, w(8), w(9));
    be.gelu_forward(fch_gelu, fch);
    if (run != BlockRun::whole) return {};
    add_branch(d, residual3, residual2, fch_gelu, w(10), w(11));
  }
  keep(a.residual3, residual3);
  return residual3;
}

double GPTStage::forward(int slot, const Tensor& input, const Tensor& targets,
                         const std::function<void(int layer)>& layer_starting) {
  Slot& s = slot_at(slot);
  if (context_) context_->use_slot(slot);
  const std::int64_t C = config_.n_embd, Vs = vocab_width_;
  if (is_first())
    TROUPE_CHECK(input.rank() == 2 && input.dtype() == DType::i32, "first stage input " + input.describe());
  else
    TROUPE_CHECK(input.rank() == 3 && input.dim(2) == C && input.dtype() == dtype_, "stage input " + input.describe());
  TROUPE_CHECK(!targets.defined() || is_last(), "targets given to a stage that is not the last");
  s.B = static_cast<int>(input.dim(0));
  // A later stage's input is its rows of the stream: (B, T/T_shards, C) under sequence parallelism.
  s.T = static_cast<int>(input.dim(1)) * (is_first() ? 1 : stream_segments());
  TROUPE_CHECK(s.B <= max_B_ && s.T <= max_T_, "forward of " + input.describe() + " beyond reserve()");
  TROUPE_CHECK(!targets.defined() || (targets.rank() == 2 && targets.dim(0) == s.B && targets.dim(1) == s.T),
               "targets " + targets.describe() + " for input " + input.describe());
  TROUPE_CHECK(s.T % stream_segments() == 0, "sequence length " + std::to_string(s.T) + " over " +
                                                 std::to_string(stream_segments()) + " sequence-parallel shards");
  s.forwarded = true;
  s.have_targets = targets.defined();
  const Dims d = dims(s.B, s.T);
  Backend& be = backend_;

  Tensor x = d.stream(s.input, C);
  // A whole model's lm head reads wte again: its embeddings stay in use until the end.
  Tensor front;
  if (is_first()) {
    front = source_->use(front_unit_, block_unit(first_layer_));
    Tensor tok = d.bt_only(s.tokens);
    be.copy(tok, input);
    if (shards_.split()) {
      // Each shard looks up the tokens it holds; the sum over the shards is the embedding.
      Tensor lookup = shards_.sequence_parallel ? d.bt(shared_.branch_out, C) : x;
      embed(lookup, tok, in_unit(front, wte_), in_unit(front, wpe_));
      const Tensor rows = sum_rows(d, lookup);
      if (rows.data() != x.data()) be.copy(x, rows);
    } else {
      embed(x, tok, in_unit(front, wte_), in_unit(front, wpe_));
    }
    if (!is_last()) source_->done_with(front_unit_, Reuse::none);
  } else {
    be.copy(x, input);
  }

  for (int l = first_layer_; l < last_layer_; ++l) {
    const LayerActivations& a = s.layers[static_cast<std::size_t>(l - first_layer_)];
    const int unit = block_unit(l);
    const int next = l + 1 < last_layer_ ? unit + 1 : tail_unit_;
    if (layer_starting) layer_starting(l);
    x = block_forward(l, source_->use(unit, next), a, x, s.B, s.T);
    source_->done_with(unit, Reuse::in_backward);
  }
  if (!is_last()) return std::numeric_limits<double>::quiet_NaN();

  const Tensor tail = source_->use(tail_unit_, -1);
  const Tensor& wte_holder = is_first() ? front : tail;
  Tensor lnf = d.bt(s.lnf, C), lnf_mean = d.stream_only(s.lnf_mean), lnf_rstd = d.stream_only(s.lnf_rstd);
  Tensor lnf_own = d.own(lnf, C);
  be.layernorm_forward(lnf_own, lnf_mean, lnf_rstd, x, in_unit(tail, lnf_w_), in_unit(tail, lnf_b_));
  gather_rows(lnf);
  Tensor logits = d.bt(shared_.logits, Vs);
  logits_B_ = s.B;
  logits_T_ = s.T;
  be.matmul_forward(logits, lnf, in_unit(wte_holder, wte_), Tensor{});
  // Only a forward with targets has a backward, which starts at the tail and the lm head.
  const Reuse head = s.have_targets ? Reuse::first_in_backward : Reuse::none;
  source_->done_with(tail_unit_, head);
  if (is_first()) source_->done_with(front_unit_, head);
  if (!s.have_targets) return std::numeric_limits<double>::quiet_NaN();

  Tensor tgt = d.bt_only(s.targets), probs = d.bt(s.probs, Vs), losses = d.bt_only(shared_.losses);
  be.copy(tgt, targets);
  if (shards_.split()) {
    // Each shard's (max, sum of exp, target logit) per row, swapped: never the logits themselves.
    const std::int64_t BT3 = std::int64_t{s.B} * s.T * 3;
    Tensor all_stats = shared_.loss_stats.slice(0, {shards_.shard.count, s.B, s.T, 3});
    Tensor own = shared_.loss_stats.slice(shards_.shard.index * BT3, {s.B, s.T, 3});
    be.crossentropy_shard_stats(own, logits, tgt, vocab_begin_, config_.vocab_size);
    shards_.all_gather(all_stats);
    be.crossentropy_shard_forward(losses, probs, logits, all_stats, vocab_begin_, config_.vocab_size);
  } else {
    be.crossentropy_forward(losses, probs, logits, tgt, config_.vocab_size);
  }
  Tensor host_losses = on_host(be, losses);
  double sum = 0;
  for (std::int64_t i = 0; i < host_losses.numel(); ++i)
    sum += dtype_ == DType::f32 ? host_losses.data_as<float>()[i] : host_losses.data_as<double>()[i];
  return sum / static_cast<double>(host_losses.numel());
}

Tensor GPTStage::output(int slot) const {
  const Slot& s = slot_at(slot);
  TROUPE_CHECK(s.forwarded, "output of slot " + std::to_string(slot) + " before its forward");
  return s.layers.back().residual3.slice(0, {s.B, s.T / stream_segments(), config_.n_embd});
}

Tensor GPTStage::logits() const {
  TROUPE_CHECK(is_last(), "only the last stage computes logits");
  TROUPE_CHECK(logits_B_ > 0, "logits before any forward");
  return shared_.logits.slice(0, {logits_B_, logits_T_, vocab_width_});
}

void GPTStage::backward(int slot, const Tensor& output_grad, double loss_scale,
                        const std::function<void(int layer)>& layer_done) {
  backward_pass(slot, output_grad, loss_scale, layer_done, false);
}

void GPTStage::backward_input(int slot, const Tensor& output_grad, double loss_scale) {
  TROUPE_CHECK(keep_for_weights_, "backward_input() needs slots reserved with keep_for_weights");
  backward_pass(slot, output_grad, loss_scale, {}, true);
}

void GPTStage::backward_pass(int slot, const Tensor& output_grad, double loss_scale,
                             const std::function<void(int layer)>& layer_done, bool split) {
  Slot& s = slot_at(slot);
  if (context_) context_->use_slot(slot);
  TROUPE_CHECK(s.forwarded && (s.have_targets || !is_last()),
               is_last() ? "backward() needs a forward() with targets" : "backward() needs a forward()");
  TROUPE_CHECK(!s.weights_owed, "backward of slot " + std::to_string(slot) + " before its backward_weights()");
  s.weights_owed = split;
  s.loss_scale = loss_scale;
  const std::int64_t C = config_.n_embd, A = attn_width_, M = mlp_width_;
  const Dims d = dims(s.B, s.T);
  Backend& be = backend_;

  Tensor dresidual = d.stream(s.dinput, C), dln = d.bt(shared_.dln, C);
  // The first stage's embedding gradients are final only after the encoder's backward; on a
  // whole model the lm head adds its share to them first.
  // B of a split backward reads parameters only; the gradients are W's (backward_weights).
  Tensor front_grad;
  if (is_first() && !split) front_grad = source_->gradient(front_unit_);
  if (is_last()) {
    TROUPE_CHECK(!output_grad.defined(), "the last stage's gradient starts at its loss, not at an output gradient");
    const int last_block = block_unit(last_layer_ - 1);
    const Tensor tail = source_->use(tail_unit_, is_first() ? front_unit_ : last_block);
    Tensor tail_grad = split ? Tensor{} : source_->gradient(tail_unit_);
    const Tensor wte_holder = is_first() ? source_->use(front_unit_, last_block) : tail;
    Tensor dlogits = logits_gradient(d, s);
    be.fill_zero(dresidual);
    const Tensor lnf_out_grad = [&] {
      if (split) {
        be.matmul_backward_input(dln, dlogits, in_unit(wte_holder, wte_));
        return sum_rows(d, dln);
      }
      Tensor no_bias, dwte = in_unit(is_first() ? front_grad : tail_grad, wte_);
      be.matmul_backward(dln, dwte, no_bias, dlogits, d.bt(s.lnf, C), in_unit(wte_holder, wte_));
      return sum_rows(d, dln);
    }();
    const Tensor lnf_in = d.stream(s.layers.back().residual3, C);
    if (split) {
      be.layernorm_backward_input(dresidual, lnf_out_grad, lnf_in, in_unit(tail, lnf_w_), d.stream_only(s.lnf_mean),
                                  d.stream_only(s.lnf_rstd));
      Tensor kept = d.stream(s.dlnf, C);
      be.copy(kept, lnf_out_grad);
    } else {
      Tensor dlnf_w = in_unit(tail_grad, lnf_w_), dlnf_b = in_unit(tail_grad, lnf_b_);
      be.layernorm_backward(dresidual, dlnf_w, dlnf_b, lnf_out_grad, lnf_in, in_unit(tail, lnf_w_),
                            d.stream_only(s.lnf_mean), d.stream_only(s.lnf_rstd));
    }
    if (is_first()) source_->done_with(front_unit_, Reuse::none);
    source_->done_with(tail_unit_, Reuse::none);
    if (!split) source_->gradient_done(tail_unit_);
  } else {
    TROUPE_CHECK(output_grad.rank() == 3 && output_grad.dim(0) == s.B && output_grad.dim(1) == d.local_T() &&
                     output_grad.dim(2) == C && output_grad.dtype() == dtype_,
                 "output gradient " + output_grad.describe() + " for a micro-batch of (" + std::to_string(s.B) + ", " +
                     std::to_string(s.T) + ")");
    be.copy(dresidual, output_grad);
  }

  // Scratch reused once its last reader is done: d(fch) overwrites d(GELU output) in place (GELU's
  // backward reads each element once, then writes it), and d(qkv) and d(atty) go there too (the
  // MLP's backward is over by then; 3C + C of its 4C), so a block's backward needs no buffer of
  // its own for any of the three.
  const std::int64_t BTA = std::int64_t{s.B} * s.T * A;
  Tensor dfch_gelu = d.bt(shared_.dfch_gelu, M), dqkv = d.bt(shared_.dfch_gelu, 3 * A);
  Tensor datty = shared_.dfch_gelu.slice(3 * BTA, {s.B, s.T, A}), datt = d.bhtt(shared_.datt);
  for (int l = last_layer_ - 1; l >= first_layer_; --l) {
    const std::size_t local = static_cast<std::size_t>(l - first_layer_);
    const std::size_t k = block_view(l);
    const int unit = block_unit(l);
    const Tensor p = source_->use(unit, l > first_layer_ ? unit - 1 : -1);
    const Tensor unit_grad = split ? Tensor{} : source_->gradient(unit);
    auto w = [&](std::size_t i) { return in_unit(p, k + i); };
    const bool moe = config_.is_moe_layer(l);
    Tensor g[kBlockTensors];  // an MoE block's first 8: its MLP's are moe_weights(unit_grad, l)
    if (!split)
      for (std::size_t i = 0; i < (moe ? 8 : kBlockTensors); ++i) g[i] = in_unit(unit_grad, k + i);
    Tensor block_in = d.stream(local == 0 ? s.input : s.layers[local - 1].residual3, C);
    // Under a recompute the slot's buffers that are not kept are views of shared_.recomputed; an
    // MoE block's routing is still the slot's own.
    const LayerActivations& a = s.layers[local];
    if (recompute_ == Recompute::full) block_forward(l, p, a, block_in, s.B, s.T, BlockRun::to_mlp_hidden);
    if (recompute_ == Recompute::selective && moe) {
      moe_refill_gelu(be, *a.moe, moe_shape().H, experts_);
    } else if (recompute_ == Recompute::selective) {
      Tensor fch_gelu = d.bt(a.fch_gelu, M);
      be.gelu_forward(fch_gelu, d.bt(a.fch, M));
    }
    // What B keeps for this block's W: the products' output gradients are written straight into
    // it where backward writes scratch, the rest copied as they are made.
    const WeightInputs* keep = split ? &s.kept[local] : nullptr;
    auto kept = [&](const Tensor& buffer, const Tensor& like) { return buffer.slice(0, like.shape()); };
    auto linear = [&](Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                      const Tensor& weight) {
      if (split)
        be.matmul_backward_input(dinp, dout, weight);
      else
        be.matmul_backward(dinp, dweight, dbias, dout, inp, weight);
    };
    auto norm = [&](Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                    const Tensor& mean, const Tensor& rstd, const Tensor& keep_to) {
      if (!split) {
        be.layernorm_backward(dresidual, dweight, dbias, dout, inp, weight, mean, rstd);
        return;
      }
      be.layernorm_backward_input(dresidual, dout, inp, weight, mean, rstd);
      Tensor to = kept(keep_to, dout);
      be.copy(to, dout);
    };
    auto gathered = [&](const Tensor* keep_to) {
      const Tensor full = gathered_stream(d, dresidual);
      if (keep_to == nullptr) return full;
      Tensor to = kept(*keep_to, full);
      be.copy(to, full);
      return to;
    };

    // MLP branch: dresidual is d(residual3), which is also d(mlp output) (all rows of it under
    // sequence parallelism, gathered).
    if (moe && split) {
      moe_mlp_backward_input(d, l, p, a, gathered(nullptr), dln, s.loss_scale, s.kept[local].moe);
    } else if (moe) {
      moe_mlp_backward(d, l, p, unit_grad, a, gathered(nullptr), dln, s.loss_scale);
    } else {
      linear(dfch_gelu, g[10], g[11], gathered(split ? &keep->dresidual3 : nullptr), d.bt(a.fch_gelu, M), w(10));
      // The fc bias's gradient is summed as GELU's backward writes d(fch), not in a second read of
      // it; B sums it into the slot's own buffer and writes d(fch) where W finds it.
      Tensor dfch = split ? kept(keep->dfch, dfch_gelu) : dfch_gelu;
      Tensor dfc_bias = g[9];
      if (split) {
        dfc_bias = keep->dfc_bias;
        be.fill_zero(dfc_bias);
      }
      be.gelu_bias_backward(dfch, dfc_bias, d.bt(a.fch, M), dfch_gelu);
      Tensor summed_already;
      linear(dln, g[8], summed_already, dfch, d.bt(a.ln2, C), w(8));
    }
    norm(g[6], g[7], sum_rows(d, dln), d.stream(a.residual2, C), w(6), d.stream_only(a.ln2_mean),
         d.stream_only(a.ln2_rstd), split ? keep->dln2 : Tensor{});
    // Attention branch: dresidual is now d(residual2). A selective recompute refills the
    // attention state; its output lands in datty, which the next call overwrites.
    if (recompute_ == Recompute::selective) {
      Tensor att = d.bhtt(a.att);
      attend(l, datty, att, d.bt(a.qkv, 3 * A));
    }
    linear(datty, g[4], g[5], gathered(split ? &keep->dresidual2 : nullptr), d.bt(a.atty, A), w(4));
    Tensor dqkv_to = split ? kept(keep->dqkv, dqkv) : dqkv;
    attend_backward(l, dqkv_to, datt, datty, d.bt(a.qkv, 3 * A), d.bhtt(a.att));
    linear(dln, g[2], g[3], dqkv_to, d.bt(a.ln1, C), w(2));
    norm(g[0], g[1], sum_rows(d, dln), block_in, w(0), d.stream_only(a.ln1_mean), d.stream_only(a.ln1_rstd),
         split ? keep->dln1 : Tensor{});
    source_->done_with(unit, Reuse::none);
    if (split) continue;
    source_->gradient_done(unit);
    if (layer_done) layer_done(l);
  }
  if (!is_first()) return;
  if (split) {
    // W's embedding gradient reads d(input): the slot's own rows, or all of them gathered now.
    if (shards_.sequence_parallel) {
      const Tensor full = gathered_stream(d, dresidual);
      Tensor to = s.dembedding.slice(0, full.shape());
      be.copy(to, full);
    }
    return;
  }
  Tensor dwte = in_unit(front_grad, wte_), dwpe = in_unit(front_grad, wpe_);
  embed_backward(dwte, dwpe, shards_.split() ? gathered_stream(d, dresidual) : dresidual, d.bt_only(s.tokens));
  source_->gradient_done(front_unit_);
}

Shape GPTStage::stream_shape(int B, int T) const { return {B, T / stream_segments(), config_.n_embd}; }

std::vector<Tensor> GPTStage::sequence_partial_grads() const {
  std::vector<Tensor> partial;
  if (!shards_.sequence_parallel) return partial;
  const Tensor& grads = whole(source_->kept_gradients(), "the LayerNorm gradients");
  for (std::size_t i = 0; i < views_.size(); ++i) {
    const std::string& name = views_[i].name;
    if (name.find("ln_") != std::string::npos) partial.push_back(view(grads, i));
  }
  return partial;
}

Tensor GPTStage::input_grad(int slot) const {
  const Slot& s = slot_at(slot);
  TROUPE_CHECK(s.forwarded, "input gradient of slot " + std::to_string(slot) + " before its forward");
  return s.dinput.slice(0, {s.B, s.T / stream_segments(), config_.n_embd});
}

}  // namespace troupe::compute
