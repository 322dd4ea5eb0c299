// Token + position embedding. The backward scatters into dwte row by row in (b, t) order,
// never in parallel, so tokens that repeat accumulate in a fixed order (deterministic). wte holds
// the rows [vocab_begin, vocab_begin + rows) of the embedding: all of them, or a tensor shard's,
// where a token outside the shard looks up zeros and scatters nothing. Without wpe (null) the
// forward leaves out the position term (a shard other than the first adds none, so the sum over
// the shards adds it once).

#include <algorithm>
#include <cstddef>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void encoder_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe, int B,
                                        int T, int C, int vocab_begin, int rows) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      Real* o = out + (static_cast<std::size_t>(b) * T + t) * C;
      const int row = tokens[b * T + t] - vocab_begin;
      const bool held = 0 <= row && row < rows;
      const Real* w = wte + static_cast<std::size_t>(held ? row : 0) * C;
      const Real* p = wpe ? wpe + static_cast<std::size_t>(t) * C : nullptr;
      if (held && p) {
#pragma omp simd
        for (int c = 0; c < C; ++c) o[c] = w[c] + p[c];
      } else if (held) {
        std::copy(w, w + C, o);
      } else if (p) {
        std::copy(p, p + C, o);
      } else {
        std::fill(o, o + C, Real(0));
      }
    }
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens, int B,
                                         int T, int C, int vocab_begin, int rows) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const Real* d = dout + (static_cast<std::size_t>(b) * T + t) * C;
      Real* dp = dwpe + static_cast<std::size_t>(t) * C;
      const int row = tokens[b * T + t] - vocab_begin;
      if (0 <= row && row < rows) {
        Real* dw = dwte + static_cast<std::size_t>(row) * C;
#pragma omp simd
        for (int c = 0; c < C; ++c) {
          dw[c] += d[c];
          dp[c] += d[c];
        }
      } else {
#pragma omp simd
        for (int c = 0; c < C; ++c) dp[c] += d[c];
      }
    }
  }
}

template void encoder_forward<float>(float*, const std::int32_t*, const float*, const float*, int, int, int, int, int);
template void encoder_forward<double>(double*, const std::int32_t*, const double*, const double*, int, int, int, int,
                                      int);
template void encoder_backward<float>(float*, float*, const float*, const std::int32_t*, int, int, int, int, int);
template void encoder_backward<double>(double*, double*, const double*, const std::int32_t*, int, int, int, int, int);

}  // namespace troupe::compute::cpu
