#pragma once
// What one AdamW step tells a backend: the hyper-parameters, and the segments of the flat
// parameter buffer it updates (Backend::adamw_update). A header of its own, in C++17, because the
// CUDA kernels (compiled as C++17 by nvcc) need these structs but not the Backend interface.

#include <cstdint>

namespace troupe::compute {

struct AdamWHyper {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled: p -= lr * wd * p, on the segments that decay
  long step = 1;              // 1-based, for bias correction
};

// One run of parameters in an AdamW step: `count` elements from `param_offset` in the
// parameter and gradient buffers, whose moments lie from `moment_offset` in m and v. The two
// offsets differ because an optimizer keeps moments for its own range of the flat buffer only
// (a ZeRO shard), while params and grads are whole.
struct AdamWSegment {
  std::int64_t param_offset = 0;
  std::int64_t moment_offset = 0;
  std::int64_t count = 0;
  bool decay = false;  // weight decay applies (matrices and embeddings; never biases or LayerNorm)
};

}  // namespace troupe::compute
