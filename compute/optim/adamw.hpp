#pragma once
// AdamW with decoupled weight decay (Loshchilov & Hutter), applied per parameter view so
// biases and LayerNorm parameters are never decayed. It owns the moment estimates for one
// range [begin, end) of the flat parameter buffer: the whole model in a single process, a
// rank's shard under ZeRO. Views that cross the range edges are clipped to it. Each view in the
// range becomes one segment, built once; a step is one backend call over all of them.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::compute {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
};

class AdamW {
 public:
  // `views` place the parameters in a flat buffer of `total` elements (a model's layout, or a
  // pipeline stage's own buffer). The params and grads given to step() hold that buffer from
  // `buffer_begin` on: 0 for the whole buffer, `begin` for a ZeRO-3 rank that keeps only its range.
  AdamW(Backend& backend, std::span<const ParameterView> views, std::int64_t total, DType dtype, AdamWOptions options,
        std::int64_t begin, std::int64_t end, std::int64_t buffer_begin = 0);
  AdamW(Backend& backend, const ParameterLayout& layout, DType dtype, AdamWOptions options, std::int64_t begin,
        std::int64_t end, std::int64_t buffer_begin = 0)
      : AdamW(backend, layout.views(), layout.total(), dtype, options, begin, end, buffer_begin) {}
  AdamW(Backend& backend, const ParameterLayout& layout, DType dtype, AdamWOptions options)
      : AdamW(backend, layout, dtype, options, 0, layout.total()) {}

  // params and grads are the flat buffers from buffer_begin; only [begin, end) is read or written.
  void step(Tensor& params, const Tensor& grads, double lr);
  long steps_taken() const { return step_; }

  // What a checkpoint saves and restores: the moments of the flat range [begin, end) (each
  // end − begin elements) and the step count behind the bias correction.
  std::pair<std::int64_t, std::int64_t> range() const { return {begin_, begin_ + m_.numel()}; }
  Tensor& first_moments() { return m_; }
  Tensor& second_moments() { return v_; }
  void set_steps_taken(long steps) { step_ = steps; }

 private:
  Backend& backend_;
  AdamWOptions options_;
  std::int64_t begin_;
  // The views in [begin, end), clipped to it; their moments sit at offset − begin in m_ and v_.
  std::vector<AdamWSegment> segments_;
  Tensor m_, v_;  // (end - begin) elements each
  long step_ = 0;
};

}  // namespace troupe::compute
