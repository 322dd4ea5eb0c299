#pragma once
// Model FLOPs of training, the numerator of MFU (PaLM's estimate, as nanoGPT uses it): per token,
// 6·N for the forward and backward matmuls of N parameters, plus 12·L·C·T for attention's
// scores and weighted sums over a sequence of T (L layers, C channels). Recomputation and the
// elementwise ops are not counted: MFU credits the model's work, not the implementation's.

#include "compute/model/gpt_config.hpp"

namespace troupe::compute {

// N is every parameter, the embeddings included (the tied wte is the lm head's matmul).
double model_flops_per_token(const GPTConfig& config, int seq_len);

}  // namespace troupe::compute
