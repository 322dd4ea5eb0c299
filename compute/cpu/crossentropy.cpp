// Softmax cross-entropy over the first V of Vp logit columns, fused per row. The loss is taken
// as log(sum) - (logit[target] - max) rather than -log(probs[target]), which is the same
// number but stays finite when the target's probability underflows. Padded columns get
// probability 0, and therefore gradient 0 in the backward without a special case.
//
// A vocabulary shard (model/tensor_shard.hpp) holds columns [vocab_begin, vocab_begin + Vs) and
// never the whole row: it takes per row its max m, its sum of exp(x - m) and the target's logit
// (0 when another shard holds it), the shards swap these, and each combines them into the row's
// max M = max m, sum = Σ sum_s·exp(m_s - M) and target logit (exactly one shard's is not 0).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/softmax_row.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_forward(Real* losses, Real* probs, const Real* logits, const std::int32_t* targets,
                                             std::int64_t N, int V, int Vp) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = logits + static_cast<std::size_t>(i) * Vp;
    Real* p = probs + static_cast<std::size_t>(i) * Vp;
    const Real max = row_max(x, V);
    const Real target_shifted = x[targets[i]] - max;  // read before probs (which may be logits) is written
    const Real sum = softmax_row(p, x, V, max);
    std::fill(p + V, p + Vp, Real(0));
    losses[i] = std::log(sum) - target_shifted;
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_backward(Real* dlogits, const Real* probs, const std::int32_t* targets, Real dloss,
                                              std::int64_t N, int Vp, int vocab_begin) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* p = probs + static_cast<std::size_t>(i) * Vp;
    Real* d = dlogits + static_cast<std::size_t>(i) * Vp;
#pragma omp simd
    for (int j = 0; j < Vp; ++j) d[j] = p[j] * dloss;
    const int target = targets[i] - vocab_begin;
    if (0 <= target && target < Vp) d[target] -= dloss;
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_shard_stats(Real* stats, const Real* logits, const std::int32_t* targets,
                                                 std::int64_t N, int Vs, int vocab_begin, int V) {
  const int real = std::clamp(V - vocab_begin, 0, Vs);
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = logits + static_cast<std::size_t>(i) * Vs;
    Real* s = stats + static_cast<std::size_t>(i) * 3;
    const int target = targets[i] - vocab_begin;
    if (real == 0) {
      s[0] = -std::numeric_limits<Real>::infinity();
      s[1] = 0;
    } else {
      const Real max = row_max(x, real);
      Real sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < real; ++j) sum += vexp(x[j] - max);
      s[0] = max;
      s[1] = sum;
    }
    s[2] = 0 <= target && target < real ? x[target] : Real(0);
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_shard_forward(Real* losses, Real* probs, const Real* logits, const Real* all_stats,
                                                   int S, std::int64_t N, int Vs, int vocab_begin, int V) {
  const int real = std::clamp(V - vocab_begin, 0, Vs);
  for (std::int64_t i = 0; i < N; ++i) {
    Real max = -std::numeric_limits<Real>::infinity(), target = 0;
    for (int s = 0; s < S; ++s) {
      const Real* st = all_stats + (static_cast<std::size_t>(s) * N + i) * 3;
      max = std::max(max, st[0]);
      target += st[2];
    }
    Real sum = 0;
    for (int s = 0; s < S; ++s) {
      const Real* st = all_stats + (static_cast<std::size_t>(s) * N + i) * 3;
      if (st[1] > 0) sum += st[1] * std::exp(st[0] - max);
    }
    const Real* x = logits + static_cast<std::size_t>(i) * Vs;
    Real* p = probs + static_cast<std::size_t>(i) * Vs;
    const Real scale = Real(1) / sum;
#pragma omp simd
    for (int j = 0; j < real; ++j) p[j] = vexp(x[j] - max) * scale;
    std::fill(p + real, p + Vs, Real(0));
    losses[i] = std::log(sum) - (target - max);
  }
}

template void crossentropy_forward<float>(float*, float*, const float*, const std::int32_t*, std::int64_t, int, int);
template void crossentropy_forward<double>(double*, double*, const double*, const std::int32_t*, std::int64_t, int,
                                           int);
template void crossentropy_backward<float>(float*, const float*, const std::int32_t*, float, std::int64_t, int, int);
template void crossentropy_backward<double>(double*, const double*, const std::int32_t*, double, std::int64_t, int,
                                            int);
template void crossentropy_shard_stats<float>(float*, const float*, const std::int32_t*, std::int64_t, int, int, int);
template void crossentropy_shard_stats<double>(double*, const double*, const std::int32_t*, std::int64_t, int, int,
                                               int);
template void crossentropy_shard_forward<float>(float*, float*, const float*, const float*, int, std::int64_t, int,
                                                int, int);
template void crossentropy_shard_forward<double>(double*, double*, const double*, const double*, int, std::int64_t,
                                                 int, int, int);

}  // namespace troupe::compute::cpu
