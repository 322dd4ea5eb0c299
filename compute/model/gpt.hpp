#pragma once
// GPT-2 as one process runs it: the pipeline stage that covers every layer (first and last at
// once, so it owns the whole ParameterLayout with no embedding copy) with one activation slot.
// Everything it computes is GPTStage's forward and backward (gpt_stage.hpp), so a pipeline of
// stages and this model run the same kernels in the same order.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compute/model/gpt_stage.hpp"

namespace troupe::compute {

class GPT {
 public:
  // A source (parameter_source.hpp) keeps the parameters instead of the model: ZeRO-3's shard.
  // Under context shards (context_shard.hpp) the model runs on its rank's rows of each sequence;
  // under expert shards (compute/moe/expert_exchange.hpp) its MoE blocks run the rank's experts.
  GPT(const GPTConfig& config, Backend& backend, DType dtype = DType::f32, Recompute recompute = Recompute::none,
      ParameterSource* source = nullptr, ContextShardGroup context = {}, ExpertGroup experts = {})
      : stage_(config, backend, 0, config.n_layer, dtype, recompute, source, {}, context, experts) {}

  static std::vector<ParameterUnit> parameter_units(const GPTConfig& config, ExpertShard experts = {}) {
    return GPTStage::parameter_units(config, 0, config.n_layer, {}, experts);
  }

  const GPTConfig& config() const { return stage_.config(); }
  // As this rank holds it: under expert shards its experts alone (parameter_layout.hpp).
  const ParameterLayout& layout() const { return stage_.layout(); }
  DType dtype() const { return stage_.dtype(); }
  Backend& backend() { return stage_.backend(); }
  GPTStage& stage() { return stage_; }

  // Flat: layout().total() elements, or under a sharding source the part this rank keeps,
  // global [kept_begin(), kept_begin() + params().numel()).
  Tensor& params() { return stage_.params(); }
  Tensor& grads() { return stage_.grads(); }
  std::int64_t kept_begin() const { return stage_.kept_begin(); }
  Tensor param(const std::string& name) const { return stage_.param(name); }  // a view into params()
  Tensor grad(const std::string& name) const { return stage_.grad(name); }    // a view into grads()

  // Fills every parameter from its init rule; a pure function of (seed, parameter index).
  void init_parameters(std::uint64_t seed) { stage_.init_parameters(seed); }

  // Allocates activations for batches of up to B sequences of up to T tokens.
  void reserve(int B, int T) { stage_.reserve(B, T, 1); }

  // tokens (B,T) i32 on the host. With targets: returns the mean cross-entropy loss and keeps
  // what backward needs. Without: computes logits only (see last_logits) and returns NaN.
  // `layer_starting(l)`, when given, runs before layer l's forward (GPTStage::forward).
  double forward(const Tensor& tokens, const Tensor& targets, const std::function<void(int layer)>& layer_starting = {}) {
    return stage_.forward(0, tokens, targets, layer_starting);
  }
  double forward(const Tensor& tokens) { return forward(tokens, Tensor{}); }
  // Logits of the last forward, (B, T, Vp), on the backend's device.
  Tensor last_logits() const { return stage_.logits(); }

  void zero_grad() { stage_.zero_grad(); }
  // grads += d(loss_scale × mean loss)/dparams for the last forward with targets. With
  // accumulation over k micro-batches, pass loss_scale = 1/k. `layer_done(l)`, when given, runs
  // as soon as layer l's gradients are final (layers finish from the last to the first), so a
  // data-parallel caller can start reducing them while backward goes on below.
  void backward(double loss_scale = 1.0, const std::function<void(int layer)>& layer_done = {}) {
    stage_.backward(0, Tensor{}, loss_scale, layer_done);
  }

 private:
  GPTStage stage_;
};

}  // namespace troupe::compute
