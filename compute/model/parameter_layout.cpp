#include "compute/model/parameter_layout.hpp"

#include <cmath>

namespace troupe::compute {

ParameterLayout::ParameterLayout(const GPTConfig& cfg, ExpertShard experts)
    : experts_(experts), config_(cfg), n_layer_(cfg.n_layer) {
  TROUPE_CHECK(experts.count == 1 || (cfg.experts > 0 && cfg.experts % experts.count == 0 && experts.index >= 0 &&
                                      experts.index < experts.count),
               "expert shard " + std::to_string(experts.index) + " of " + std::to_string(experts.count) + " over " +
                   std::to_string(cfg.experts) + " experts");
  const std::int64_t C = cfg.n_embd;
  // GPT-2's init: N(0, 0.02), with the projections that write into the residual stream scaled
  // by 1/sqrt(2L) so the stream's variance does not grow with depth.
  const double std_w = 0.02;
  const double std_proj = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  add("wte.weight", {cfg.padded_vocab_size, C}, true, std_w);
  add("wpe.weight", {cfg.block_size, C}, true, std_w);
  layer_end_.push_back(total_);  // where layer 0 begins
  for (int l = 0; l < cfg.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C}, false, 0.0, 1.0);
    add(p + "ln_1.bias", {C}, false, 0.0);
    add(p + "attn.c_attn.weight", {3 * C, C}, true, std_w);
    add(p + "attn.c_attn.bias", {3 * C}, false, 0.0);
    add(p + "attn.c_proj.weight", {C, C}, true, std_proj);
    add(p + "attn.c_proj.bias", {C}, false, 0.0);
    add(p + "ln_2.weight", {C}, false, 0.0, 1.0);
    add(p + "ln_2.bias", {C}, false, 0.0);
    if (cfg.is_moe_layer(l)) {
      // The MoE MLP (compute/moe/moe_layer.hpp): the router, then the E experts stacked along a
      // first axis, then the shared expert; every expert starts as a dense MLP does.
      const std::int64_t E = cfg.experts, H = cfg.expert_hidden();
      add(p + "mlp.router.weight", {E, C}, true, std_w);
      add_experts(p + "mlp.experts.c_fc.weight", {E, H, C}, true, std_w);
      add_experts(p + "mlp.experts.c_fc.bias", {E, H}, false, 0.0);
      add_experts(p + "mlp.experts.c_proj.weight", {E, C, H}, true, std_proj);
      add_experts(p + "mlp.experts.c_proj.bias", {E, C}, false, 0.0);
      if (cfg.shared_experts > 0) {
        add(p + "mlp.shared_expert.c_fc.weight", {H, C}, true, std_w);
        add(p + "mlp.shared_expert.c_fc.bias", {H}, false, 0.0);
        add(p + "mlp.shared_expert.c_proj.weight", {C, H}, true, std_proj);
        add(p + "mlp.shared_expert.c_proj.bias", {C}, false, 0.0);
      }
    } else {
      add(p + "mlp.c_fc.weight", {4 * C, C}, true, std_w);
      add(p + "mlp.c_fc.bias", {4 * C}, false, 0.0);
      add(p + "mlp.c_proj.weight", {C, 4 * C}, true, std_proj);
      add(p + "mlp.c_proj.bias", {C}, false, 0.0);
    }
    layer_end_.push_back(total_);
  }
  add("ln_f.weight", {C}, false, 0.0, 1.0);
  add("ln_f.bias", {C}, false, 0.0);
}

void ParameterLayout::add(std::string name, Shape shape, bool decay, double init_std, double init_value) {
  ParameterView v{std::move(name), total_, std::move(shape), decay, init_std, init_value};
  v.global_offset = global_total_;
  total_ += v.numel();
  global_total_ += v.numel();
  views_.push_back(std::move(v));
}

void ParameterLayout::add_experts(std::string name, Shape shape, bool decay, double init_std) {
  const std::int64_t whole = shape_numel(shape), per_shard = whole / experts_.count;
  shape[0] /= experts_.count;
  ParameterView v{std::move(name), total_, std::move(shape), decay, init_std};
  v.expert = true;
  v.global_offset = global_total_ + experts_.index * per_shard;
  total_ += per_shard;
  global_total_ += whole;
  views_.push_back(std::move(v));
}

const ParameterView& ParameterLayout::find(const std::string& name) const {
  for (const auto& v : views_)
    if (v.name == name) return v;
  TROUPE_CHECK(false, "no parameter named '" + name + "'");
}

std::pair<std::int64_t, std::int64_t> ParameterLayout::layer_range(int layer) const {
  TROUPE_CHECK(layer >= 0 && layer < n_layer_, "layer " + std::to_string(layer));
  const auto at = static_cast<std::size_t>(layer);
  return {layer_end_[at], layer_end_[at + 1]};
}

std::int64_t ParameterLayout::active() const {
  const auto expert = static_cast<std::int64_t>(config_.expert_parameters());
  return global_total_ - std::int64_t{config_.moe_layers()} * (config_.experts - config_.top_k) * expert;
}

}  // namespace troupe::compute
