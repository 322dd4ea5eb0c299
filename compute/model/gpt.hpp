#pragma once
// GPT-2 (pre-LN, learned positions, tied input/output embedding, biases, GELU tanh) written
// only against the Backend interface. Parameters and gradients are two flat buffers described
// by ParameterLayout. Activations are allocated once for the largest (B, T) the caller reserves;
// a smaller forward uses a prefix of each buffer, which is itself a contiguous (B, T, …) tensor.
//
// Backward needs one residual-gradient buffer for the whole depth: it walks the blocks in
// reverse and every block adds its branch's gradient into that buffer in place (see the
// conventions in backend.hpp). Per-block gradient scratch is shared by all blocks.

#include <cstdint>
#include <functional>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::compute {

class GPT {
 public:
  GPT(const GPTConfig& config, Backend& backend, DType dtype = DType::f32);

  const GPTConfig& config() const { return config_; }
  const ParameterLayout& layout() const { return layout_; }
  DType dtype() const { return dtype_; }
  Backend& backend() { return backend_; }

  Tensor& params() { return params_; }  // flat, layout().total() elements
  Tensor& grads() { return grads_; }
  Tensor param(const std::string& name) const;  // a view into params()
  Tensor grad(const std::string& name) const;   // a view into grads()

  // Fills every parameter from its init rule; a pure function of (seed, parameter index).
  void init_parameters(std::uint64_t seed);

  // Allocates activations for batches of up to B sequences of up to T tokens.
  void reserve(int B, int T);

  // tokens (B,T) i32 on the host. With targets: returns the mean cross-entropy loss and keeps
  // what backward needs. Without: computes logits only (see last_logits) and returns NaN.
  double forward(const Tensor& tokens, const Tensor& targets);
  double forward(const Tensor& tokens) { return forward(tokens, Tensor{}); }
  // Logits of the last forward, (B, T, Vp), on the backend's device.
  Tensor last_logits() const;

  void zero_grad();
  // grads += d(loss_scale × mean loss)/dparams for the last forward with targets. With
  // accumulation over k micro-batches, pass loss_scale = 1/k. `layer_done(l)`, when given, runs
  // as soon as layer l's gradients are final (layers finish from the last to the first), so a
  // data-parallel caller can start reducing them while backward goes on below.
  void backward(double loss_scale = 1.0, const std::function<void(int layer)>& layer_done = {});

 private:
  struct LayerActivations {
    Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, att, residual2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu, residual3;
  };
  struct GradScratch {
    Tensor residual, ln, qkv, atty, att, fch, fch_gelu;
  };

  Tensor bt(const Tensor& buffer, std::int64_t width) const;     // prefix as (B, T, width)
  Tensor bhtt(const Tensor& buffer) const;                         // prefix as (B, NH, T, T)
  Tensor bt_only(const Tensor& buffer) const;                      // prefix as (B, T)

  GPTConfig config_;
  Backend& backend_;
  DType dtype_;
  ParameterLayout layout_;
  Tensor params_, grads_;

  int max_B_ = 0, max_T_ = 0;
  int B_ = 0, T_ = 0;  // dims of the last forward
  bool have_targets_ = false;
  Tensor tokens_, targets_;  // device copies, (max_B, max_T) i32
  Tensor encoded_;
  std::vector<LayerActivations> layers_;
  Tensor branch_out_;  // attn.c_proj and mlp.c_proj outputs: only added into the stream
  Tensor lnf_, lnf_mean_, lnf_rstd_, logits_, probs_, losses_;
  GradScratch d_;
};

}  // namespace troupe::compute
