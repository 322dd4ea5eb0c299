#include "compute/model/flops.hpp"

namespace troupe::compute {

ModelFlops model_flops(const GPTConfig& config, int seq_len) {
  const double C = config.n_embd;
  return {config.n_layer, 6 * 12 * C * C, 6 * C * (double(seq_len) + 1), 6 * double(config.vocab_size) * C};
}

double model_flops_per_token(const GPTConfig& config, int seq_len) { return model_flops(config, seq_len).total(); }

}  // namespace troupe::compute
