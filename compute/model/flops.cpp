#include "compute/model/flops.hpp"

#include "compute/model/parameter_layout.hpp"

namespace troupe::compute {

double model_flops_per_token(const GPTConfig& config, int seq_len) {
  const double params = static_cast<double>(ParameterLayout(config).total());
  return 6.0 * params + 12.0 * config.n_layer * config.n_embd * static_cast<double>(seq_len);
}

}  // namespace troupe::compute
