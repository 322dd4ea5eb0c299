// GPTStage's mixture-of-experts blocks: the MLP half of a block that config().is_moe_layer() names
// runs compute/moe/moe_layer.hpp over the block's ln_2 output (gpt_stage.hpp).

#include <algorithm>
#include <numeric>
#include <span>

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

GPTStage::MoERouting GPTStage::moe_routing(int slot) const {
  const Slot& s = slot_at(slot);
  MoERouting routing;
  routing.experts = config_.experts;
  // The whole model's blocks, each at its place: a pipeline stage's ranks add theirs up.
  routing.slots.assign(static_cast<std::size_t>(config_.moe_layers() * config_.experts), 0);
  int blocks = 0;
  for (int l = first_layer_; l < last_layer_; ++l) {
    const LayerActivations& a = s.layers[static_cast<std::size_t>(l - first_layer_)];
    if (!a.moe) continue;
    routing.aux += a.moe->plan.aux_loss;
    routing.z += a.moe->plan.z_loss;
    const auto first = static_cast<std::size_t>(config_.moe_layers_in(0, l) * config_.experts);
    for (int e = 0; e < config_.experts; ++e) routing.slots[first + static_cast<std::size_t>(e)] = a.moe->plan.count(e);
    ++blocks;
  }
  if (blocks > 0) {
    routing.aux /= blocks;
    routing.z /= blocks;
  }
  return routing;
}

void GPTStage::MoERouting::add(const MoERouting& other, double weight) {
  aux += weight * other.aux;
  z += weight * other.z;
  if (slots.empty()) {
    experts = other.experts;
    slots.assign(other.slots.size(), 0);
  }
  TROUPE_CHECK(experts == other.experts && slots.size() == other.slots.size(),
               "adding the routing of another model's MoE blocks");
  for (std::size_t i = 0; i < slots.size(); ++i) slots[i] += other.slots[i];
}

double GPTStage::MoERouting::load_imbalance() const {
  double worst = 0;
  for (std::size_t first = 0; experts > 0 && first < slots.size(); first += static_cast<std::size_t>(experts)) {
    const auto block = std::span(slots).subspan(first, static_cast<std::size_t>(experts));
    const double total = static_cast<double>(std::accumulate(block.begin(), block.end(), std::int64_t{0}));
    if (total > 0)
      worst = std::max(worst, static_cast<double>(*std::max_element(block.begin(), block.end())) * experts / total);
  }
  return worst;
}

MoEShape GPTStage::moe_shape() const {
  // Under tensor shards each expert's hidden width is the shard's slice of it, as a dense MLP's.
  return {config_.experts, config_.top_k, config_.shared_experts > 0, config_.n_embd, expert_width_, experts_.shards()};
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

Tensor GPTStage::moe_mlp_forward(const Dims& d, int layer, const Tensor& p, const LayerActivations& a, MoEPass pass) {
  const std::int64_t C = config_.n_embd;
  Tensor out = d.bt(shared_.moe_out, C);
  moe_forward(backend_, out, *a.moe, d.bt(a.ln2, C), moe_weights(p, layer), config_.top_k, experts_, pass);
  if (pass == MoEPass::rerun) return {};  // the block's output is kept: the next block's input
  // Under tensor shards out is this slice's partial sum over all rows: the stream takes the rank's.
  return sum_rows(d, out);
}

void GPTStage::moe_mlp_backward(const Dims& d, int layer, const Tensor& p, const Tensor& unit_grad,
                                const LayerActivations& a, const Tensor& dout, Tensor& dln, double loss_scale) {
  MoEWeights grads = moe_weights(unit_grad, layer);
  moe_backward(backend_, dln, grads, shared_.moe, dout, *a.moe, d.bt(a.ln2, config_.n_embd), moe_weights(p, layer),
               loss_scale * moe_aux_coef_, loss_scale * moe_z_coef_, experts_);
}

// The split backward's halves (gpt_stage_weights.cpp): B makes the routing losses' gradients and
// runs both exchanges; W, on this rank alone, reads the block's MLP input (ln_2's output) and the
// forward's state, which a full recompute's W makes again first from what B kept.
void GPTStage::moe_mlp_backward_input(const Dims& d, int layer, const Tensor& p, const LayerActivations& a,
                                      const Tensor& dout, Tensor& dln, double loss_scale, MoEWeightInputs& keep) {
  moe_backward_input(backend_, dln, keep, shared_.moe, dout, *a.moe, moe_weights(p, layer), loss_scale * moe_aux_coef_,
                     loss_scale * moe_z_coef_, experts_);
}

void GPTStage::moe_mlp_rerun_for_weights(const Dims& d, int layer, const Tensor& p, const LayerActivations& a,
                                         const MoEWeightInputs& kept) {
  moe_rerun_for_weights(backend_, *a.moe, kept, d.bt(a.ln2, config_.n_embd), moe_weights(p, layer), experts_);
}

void GPTStage::moe_mlp_backward_weights(const Dims& d, int layer, const Tensor& unit_grad, const LayerActivations& a,
                                        const MoEWeightInputs& kept) {
  MoEWeights grads = moe_weights(unit_grad, layer);
  moe_backward_weights(backend_, grads, kept, *a.moe, d.bt(a.ln2, config_.n_embd), experts_);
}

}  // namespace troupe::compute
