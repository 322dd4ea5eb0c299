#include "compute/model/flops.hpp"

#include "compute/model/stage_split.hpp"

namespace troupe::compute {

double model_flops_per_token(const GPTConfig& config, int seq_len) {
  // The whole model as one stage: the parameter count in closed form, without building the layout
  // of every tensor (the layout planner asks for models of millions of layers, to refuse them).
  const double params = static_cast<double>(stage_parameter_count(config, 0, config.n_layer));
  return 6.0 * params + 12.0 * config.n_layer * config.n_embd * static_cast<double>(seq_len);
}

}  // namespace troupe::compute
