#include "compute/model/flops.hpp"

namespace troupe::compute {

ModelFlops model_flops(const GPTConfig& config, int seq_len) {
  const double C = config.n_embd;
  // Beyond a dense block: the router, and top_k + shared experts' products (2·C·H multiply-adds a
  // token each) in place of the dense MLP's 8C².
  const double moe_block =
      6 * (config.experts * C + (config.top_k + config.shared_experts) * 2 * C * double(config.expert_hidden()) -
           8 * C * C);
  return {config.n_layer, 6 * 12 * C * C, 6 * C * (double(seq_len) + 1), 6 * double(config.vocab_size) * C,
          config.moe_layers() * moe_block};
}

double model_flops_per_token(const GPTConfig& config, int seq_len) { return model_flops(config, seq_len).total(); }

}  // namespace troupe::compute
