#include "compute/model/flops.hpp"

namespace troupe::compute {

ModelFlops model_flops(const GPTConfig& config, int seq_len) {
  const double C = config.n_embd;
  const double moe_block = 6 * (config.experts * C + (config.top_k + config.shared_experts - 1) * 8 * C * C);
  return {config.n_layer, 6 * 12 * C * C, 6 * C * (double(seq_len) + 1), 6 * double(config.vocab_size) * C,
          config.moe_layers() * moe_block};
}

double model_flops_per_token(const GPTConfig& config, int seq_len) { return model_flops(config, seq_len).total(); }

}  // namespace troupe::compute
