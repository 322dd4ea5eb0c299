#include "compute/model/gpt.hpp"

#include <cmath>
#include <limits>

#include "compute/random.hpp"

namespace troupe::compute {
namespace {

struct BlockTensors {
  Tensor ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b;
};

Tensor view_of(const Tensor& flat, const ParameterLayout& layout, const std::string& name) {
  const auto& v = layout.find(name);
  return flat.slice(v.offset, v.shape);
}

BlockTensors block_tensors(const Tensor& flat, const ParameterLayout& layout, int layer) {
  const std::string p = "h." + std::to_string(layer) + ".";
  auto v = [&](const char* suffix) { return view_of(flat, layout, p + suffix); };
  return {v("ln_1.weight"), v("ln_1.bias"),   v("attn.c_attn.weight"), v("attn.c_attn.bias"),
          v("attn.c_proj.weight"), v("attn.c_proj.bias"), v("ln_2.weight"), v("ln_2.bias"),
          v("mlp.c_fc.weight"), v("mlp.c_fc.bias"), v("mlp.c_proj.weight"), v("mlp.c_proj.bias")};
}

// The tensor's values on the host (itself when it already lives there).
Tensor on_host(Backend& backend, const Tensor& t) {
  if (t.device() == Device::cpu) return t;
  Tensor host = Tensor::zeros(t.shape(), t.dtype());
  backend.copy(host, t);
  return host;
}

}  // namespace

GPT::GPT(const GPTConfig& config, Backend& backend, DType dtype)
    : config_(config), backend_(backend), dtype_(dtype), layout_(config) {
  TROUPE_CHECK(validate(config).ok(), "invalid GPTConfig reached the model");
  TROUPE_CHECK(dtype == DType::f32 || dtype == DType::f64, "GPT parameters are f32 or f64");
  params_ = backend_.zeros({layout_.total()}, dtype_);
  grads_ = backend_.zeros({layout_.total()}, dtype_);
}

Tensor GPT::param(const std::string& name) const { return view_of(params_, layout_, name); }
Tensor GPT::grad(const std::string& name) const { return view_of(grads_, layout_, name); }

void GPT::init_parameters(std::uint64_t seed) {
  Tensor host = Tensor::zeros({layout_.total()}, dtype_);
  for (std::size_t k = 0; k < layout_.views().size(); ++k) {
    const auto& v = layout_.views()[k];
    for (std::int64_t i = 0; i < v.numel(); ++i) {
      double x = v.init_std > 0 ? v.init_std * counter_normal(seed, k, static_cast<std::uint64_t>(i)) : v.init_value;
      if (dtype_ == DType::f32)
        host.data_as<float>()[v.offset + i] = static_cast<float>(x);
      else
        host.data_as<double>()[v.offset + i] = x;
    }
  }
  backend_.copy(params_, host);
}

void GPT::reserve(int B, int T) {
  TROUPE_CHECK(B > 0 && T > 0 && T <= config_.block_size,
               "reserve B=" + std::to_string(B) + " T=" + std::to_string(T));
  if (B <= max_B_ && T <= max_T_) return;
  max_B_ = B;
  max_T_ = T;
  const std::int64_t BT = std::int64_t{B} * T, C = config_.n_embd, NH = config_.n_head, Vp = config_.padded_vocab_size;
  auto z = [&](Shape s) { return backend_.zeros(std::move(s), dtype_); };
  tokens_ = backend_.zeros({B, T}, DType::i32);
  targets_ = backend_.zeros({B, T}, DType::i32);
  encoded_ = z({BT * C});
  layers_.clear();
  for (int l = 0; l < config_.n_layer; ++l) {
    layers_.push_back({z({BT * C}), z({BT}), z({BT}), z({BT * 3 * C}), z({BT * C}), z({B * NH * T * T}), z({BT * C}),
                       z({BT * C}), z({BT}), z({BT}), z({BT * 4 * C}), z({BT * 4 * C}), z({BT * C})});
  }
  branch_out_ = z({BT * C});
  lnf_ = z({BT * C});
  lnf_mean_ = z({BT});
  lnf_rstd_ = z({BT});
  logits_ = z({BT * Vp});
  probs_ = z({BT * Vp});
  losses_ = z({BT});
  d_ = {z({BT * C}), z({BT * C}), z({BT * 3 * C}), z({BT * C}), z({B * NH * T * T}), z({BT * 4 * C}), z({BT * 4 * C})};
}

Tensor GPT::bt(const Tensor& buffer, std::int64_t width) const { return buffer.slice(0, {B_, T_, width}); }
Tensor GPT::bhtt(const Tensor& buffer) const { return buffer.slice(0, {B_, config_.n_head, T_, T_}); }
Tensor GPT::bt_only(const Tensor& buffer) const { return buffer.slice(0, {B_, T_}); }

double GPT::forward(const Tensor& tokens, const Tensor& targets) {
  TROUPE_CHECK(tokens.rank() == 2 && tokens.dtype() == DType::i32, "tokens " + tokens.describe());
  B_ = static_cast<int>(tokens.dim(0));
  T_ = static_cast<int>(tokens.dim(1));
  TROUPE_CHECK(B_ <= max_B_ && T_ <= max_T_, "forward of " + tokens.describe() + " beyond reserve()");
  have_targets_ = targets.defined();
  const std::int64_t C = config_.n_embd, Vp = config_.padded_vocab_size;
  Backend& be = backend_;

  Tensor tok = bt_only(tokens_);
  be.copy(tok, tokens);
  Tensor x = bt(encoded_, C);
  be.encoder_forward(x, tok, param("wte.weight"), param("wpe.weight"));

  Tensor branch = bt(branch_out_, C);
  for (int l = 0; l < config_.n_layer; ++l) {
    BlockTensors w = block_tensors(params_, layout_, l);
    LayerActivations& a = layers_[static_cast<std::size_t>(l)];
    Tensor ln1 = bt(a.ln1, C), ln1_mean = bt_only(a.ln1_mean), ln1_rstd = bt_only(a.ln1_rstd);
    Tensor qkv = bt(a.qkv, 3 * C), atty = bt(a.atty, C), att = bhtt(a.att), residual2 = bt(a.residual2, C);
    Tensor ln2 = bt(a.ln2, C), ln2_mean = bt_only(a.ln2_mean), ln2_rstd = bt_only(a.ln2_rstd);
    Tensor fch = bt(a.fch, 4 * C), fch_gelu = bt(a.fch_gelu, 4 * C), residual3 = bt(a.residual3, C);

    be.layernorm_forward(ln1, ln1_mean, ln1_rstd, x, w.ln1_w, w.ln1_b);
    be.matmul_forward(qkv, ln1, w.attn_w, w.attn_b);
    be.attention_forward(atty, att, qkv, config_.n_head);
    be.matmul_forward(branch, atty, w.proj_w, w.proj_b);
    be.residual_forward(residual2, x, branch);
    be.layernorm_forward(ln2, ln2_mean, ln2_rstd, residual2, w.ln2_w, w.ln2_b);
    be.matmul_forward(fch, ln2, w.fc_w, w.fc_b);
    be.gelu_forward(fch_gelu, fch);
    be.matmul_forward(branch, fch_gelu, w.fcproj_w, w.fcproj_b);
    be.residual_forward(residual3, residual2, branch);
    x = residual3;
  }
  Tensor lnf = bt(lnf_, C), lnf_mean = bt_only(lnf_mean_), lnf_rstd = bt_only(lnf_rstd_);
  be.layernorm_forward(lnf, lnf_mean, lnf_rstd, x, param("ln_f.weight"), param("ln_f.bias"));
  Tensor logits = bt(logits_, Vp);
  be.matmul_forward(logits, lnf, param("wte.weight"), Tensor{});
  if (!have_targets_) return std::numeric_limits<double>::quiet_NaN();

  Tensor tgt = bt_only(targets_), probs = bt(probs_, Vp), losses = bt_only(losses_);
  be.copy(tgt, targets);
  be.crossentropy_forward(losses, probs, logits, tgt, config_.vocab_size);
  Tensor host_losses = on_host(be, losses);
  double sum = 0;
  for (std::int64_t i = 0; i < host_losses.numel(); ++i)
    sum += dtype_ == DType::f32 ? host_losses.data_as<float>()[i] : host_losses.data_as<double>()[i];
  return sum / static_cast<double>(host_losses.numel());
}

Tensor GPT::last_logits() const { return logits_.slice(0, {B_, T_, config_.padded_vocab_size}); }

void GPT::zero_grad() { backend_.fill_zero(grads_); }

void GPT::backward(double loss_scale, const std::function<void(int layer)>& layer_done) {
  TROUPE_CHECK(have_targets_, "backward() needs a forward() with targets");
  const std::int64_t C = config_.n_embd, Vp = config_.padded_vocab_size;
  Backend& be = backend_;
  Tensor tok = bt_only(tokens_), tgt = bt_only(targets_);

  // The logits buffer is free once the probabilities exist; it takes their gradient.
  Tensor dlogits = bt(logits_, Vp);
  be.crossentropy_backward(dlogits, bt(probs_, Vp), tgt, static_cast<float>(loss_scale / (double(B_) * T_)));

  Tensor dresidual = bt(d_.residual, C), dln = bt(d_.ln, C);
  be.fill_zero(dresidual);
  Tensor no_bias;
  Tensor dwte = grad("wte.weight");
  be.matmul_backward(dln, dwte, no_bias, dlogits, bt(lnf_, C), param("wte.weight"));
  Tensor dlnf_w = grad("ln_f.weight"), dlnf_b = grad("ln_f.bias");
  const Tensor& last = config_.n_layer > 0 ? layers_.back().residual3 : encoded_;
  be.layernorm_backward(dresidual, dlnf_w, dlnf_b, dln, bt(last, C), param("ln_f.weight"), bt_only(lnf_mean_),
                        bt_only(lnf_rstd_));

  Tensor dqkv = bt(d_.qkv, 3 * C), datty = bt(d_.atty, C), datt = bhtt(d_.att);
  Tensor dfch = bt(d_.fch, 4 * C), dfch_gelu = bt(d_.fch_gelu, 4 * C);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    BlockTensors w = block_tensors(params_, layout_, l);
    BlockTensors g = block_tensors(grads_, layout_, l);
    const LayerActivations& a = layers_[static_cast<std::size_t>(l)];
    Tensor block_in = bt(l == 0 ? encoded_ : layers_[static_cast<std::size_t>(l - 1)].residual3, C);

    // MLP branch: dresidual is d(residual3), which is also d(mlp output).
    be.matmul_backward(dfch_gelu, g.fcproj_w, g.fcproj_b, dresidual, bt(a.fch_gelu, 4 * C), w.fcproj_w);
    be.gelu_backward(dfch, bt(a.fch, 4 * C), dfch_gelu);
    be.matmul_backward(dln, g.fc_w, g.fc_b, dfch, bt(a.ln2, C), w.fc_w);
    be.layernorm_backward(dresidual, g.ln2_w, g.ln2_b, dln, bt(a.residual2, C), w.ln2_w, bt_only(a.ln2_mean),
                          bt_only(a.ln2_rstd));
    // Attention branch: dresidual is now d(residual2).
    be.matmul_backward(datty, g.proj_w, g.proj_b, dresidual, bt(a.atty, C), w.proj_w);
    be.attention_backward(dqkv, datt, datty, bt(a.qkv, 3 * C), bhtt(a.att), config_.n_head);
    be.matmul_backward(dln, g.attn_w, g.attn_b, dqkv, bt(a.ln1, C), w.attn_w);
    be.layernorm_backward(dresidual, g.ln1_w, g.ln1_b, dln, block_in, w.ln1_w, bt_only(a.ln1_mean),
                          bt_only(a.ln1_rstd));
    if (layer_done) layer_done(l);
  }
  Tensor dwpe = grad("wpe.weight");
  be.encoder_backward(dwte, dwpe, dresidual, tok);
}

}  // namespace troupe::compute
