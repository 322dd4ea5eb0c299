// GPTStage's mixture-of-experts blocks: the MLP half of a block that config().is_moe_layer() names
// runs compute/moe/moe_layer.hpp over the block's ln_2 output (gpt_stage.hpp).

#include "compute/model/gpt_stage.hpp"
#include "compute/model/gpt_stage_dims.hpp"

namespace troupe::compute {
namespace {

// An MoE block's views after ln_2.bias (parameter_layout.cpp): the router, the stacked experts'
// four, then the shared expert's four.
constexpr std::size_t kRouter = 8, kExperts = 9, kShared = 13;

}  // namespace

void GPTStage::set_moe_loss_coefficients(double aux, double z) {
  moe_aux_coef_ = aux;
  moe_z_coef_ = z;
}

GPTStage::MoELosses GPTStage::moe_losses(int slot) const {
  const Slot& s = slot_at(slot);
  MoELosses losses;
  int blocks = 0;
  for (const LayerActivations& a : s.layers) {
    if (!a.moe) continue;
    losses.aux += a.moe->plan.aux_loss;
    losses.z += a.moe->plan.z_loss;
    ++blocks;
  }
  if (blocks > 0) {
    losses.aux /= blocks;
    losses.z /= blocks;
  }
  return losses;
}

MoEShape GPTStage::moe_shape() const {
  return {config_.experts,  config_.top_k, config_.shared_experts > 0, config_.n_embd, 4 * std::int64_t{config_.n_embd},
          experts_.shards()};
}

MoEWeights GPTStage::moe_weights(const Tensor& unit_buffer, int layer) const {
  const std::size_t k = block_view(layer);
  auto v = [&](std::size_t i) { return in_unit(unit_buffer, k + i); };
  MoEWeights w{v(kRouter), v(kExperts), v(kExperts + 1), v(kExperts + 2), v(kExperts + 3)};
  if (config_.shared_experts > 0) {
    w.shared_fc_w = v(kShared);
    w.shared_fc_b = v(kShared + 1);
    w.shared_proj_w = v(kShared + 2);
    w.shared_proj_b = v(kShared + 3);
  }
  return w;
}

void GPTStage::moe_mlp_forward(const Dims& d, int layer, const Tensor& p, const LayerActivations& a) {
  const std::int64_t C = config_.n_embd;
  Tensor out = d.bt(shared_.moe_out, C), residual3 = d.stream(a.residual3, C);
  moe_forward(backend_, out, *a.moe, d.bt(a.ln2, C), moe_weights(p, layer), config_.top_k, experts_);
  backend_.residual_forward(residual3, d.stream(a.residual2, C), out);
}

void GPTStage::moe_mlp_backward(const Dims& d, int layer, const Tensor& p, const Tensor& unit_grad,
                                const LayerActivations& a, const Tensor& dout, Tensor& dln, double loss_scale) {
  MoEWeights grads = moe_weights(unit_grad, layer);
  moe_backward(backend_, dln, grads, shared_.moe, dout, *a.moe, d.bt(a.ln2, config_.n_embd), moe_weights(p, layer),
               loss_scale * moe_aux_coef_, loss_scale * moe_z_coef_, experts_);
}

}  // namespace troupe::compute
