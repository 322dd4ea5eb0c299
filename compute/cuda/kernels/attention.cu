// Causal self-attention, flash style: the (T, T) probabilities are never stored. Each query row
// keeps the log-sum-exp of its scaled scores (lse); backward recomputes p = exp(s - lse).
//
// Forward, one thread per query row i (q and the output accumulator in registers), the block's
// keys streamed through shared memory a tile at a time, online softmax:
//   s = scale·q·k_j;  if s > m: rescale o and l by exp(m - s), m = s;  p = exp(s - m);  l += p;  o += p·v_j
//   out = o / l,  lse = m + log l
// Backward (FlashAttention-2's equations), with D_i = Σ_j p_ij·(dO_i·v_j) = rowsum(P ∘ dP):
//   query-row kernel: D_i in a first sweep over the keys, then dq_i = scale·Σ_j p_ij (dO_i·v_j - D_i) k_j
//   key-row kernel:   dv_j = Σ_{i≥j} p_ij dO_i,  dk_j = scale·Σ_{i≥j} p_ij (dO_i·v_j - D_i) q_i
// D is recomputed rather than taken as dO·O because the backward is not handed the output.
// Kernels are compiled for head-size bounds 64 and 128 (launch_config.hpp); a smaller head is
// zero-padded to the bound in registers and shared memory, so padding adds nothing to any sum.
// All arithmetic is fp32.

#include <cmath>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

// Where head h of sequence b starts in qkv (B, T, 3C): q at +0, k at +C, v at +2C, rows 3C apart.
struct HeadView {
  const float* base;
  std::int64_t ld;
  int C, hs;
  __device__ HeadView(const float* qkv, int b, int h, int T, int C_, int NH)
      : base(qkv + std::int64_t{b} * T * 3 * C_ + std::int64_t{h} * (C_ / NH)), ld(3LL * C_), C(C_), hs(C_ / NH) {}
  __device__ float q(int t, int d) const { return base[t * ld + d]; }
  __device__ float k(int t, int d) const { return base[t * ld + C + d]; }
  __device__ float v(int t, int d) const { return base[t * ld + 2 * C + d]; }
};

// Keys [k0, k0 + KT) of the head into ks and vs (zero past T and past the head size).
template <int HS, int KT>
__device__ void load_key_tile(float (&ks)[KT][HS], float (&vs)[KT][HS], const HeadView& head, int k0, int T) {
  for (int e = threadIdx.x; e < KT * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS, key = k0 + r;
    const bool in = key < T && d < head.hs;
    ks[r][d] = in ? head.k(key, d) : 0.0f;
    vs[r][d] = in ? head.v(key, d) : 0.0f;
  }
}

template <int HS>
__global__ void __launch_bounds__(kAttentionRows)
    attention_forward_kernel(float* out, float* lse, const float* qkv, int T, int C, int NH, float scale) {
  constexpr int KT = attention_key_tile(HS);
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / NH, h = blockIdx.y % NH;
  const HeadView head(qkv, b, h, T, C, NH);
  const int tile = static_cast<int>(attention_tile_of_block(blockIdx.x, gridDim.x));
  const int i = tile * kAttentionRows + threadIdx.x;
  const bool active = i < T;
  float q[HS], o[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active && d < head.hs ? head.q(i, d) * scale : 0.0f;
    o[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  const int key_end = min(T, (tile + 1) * kAttentionRows);
  for (int k0 = 0; k0 < key_end; k0 += KT) {
    __syncthreads();
    load_key_tile(ks, vs, head, k0, T);
    __syncthreads();
    const int keys = active ? min(KT, i - k0 + 1) : 0;
    for (int r = 0; r < keys; ++r) {
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < HS; ++d) s += q[d] * ks[r][d];
      if (s > m) {
        const float correction = expf(m - s);
        l *= correction;
#pragma unroll
        for (int d = 0; d < HS; ++d) o[d] *= correction;
        m = s;
      }
      const float p = expf(s - m);
      l += p;
#pragma unroll
      for (int d = 0; d < HS; ++d) o[d] += p * vs[r][d];
    }
  }
  if (!active) return;
  float* row = out + (std::int64_t{b} * T + i) * C + std::int64_t{h} * head.hs;
  const float inv = 1.0f / l;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < head.hs) row[d] = o[d] * inv;
  lse[std::int64_t{blockIdx.y} * T + i] = m + logf(l);
}

template <int HS>
__global__ void __launch_bounds__(kAttentionRows)
    attention_backward_query_kernel(float* dqkv, float* rowdot, const float* dout, const float* qkv, const float* lse,
                                    int T, int C, int NH, float scale) {
  constexpr int KT = attention_key_tile(HS);
  __shared__ float ks[KT][HS];
  __shared__ float vs[KT][HS];
  const int b = blockIdx.y / NH, h = blockIdx.y % NH;
  const HeadView head(qkv, b, h, T, C, NH);
  const int tile = static_cast<int>(attention_tile_of_block(blockIdx.x, gridDim.x));
  const int i = tile * kAttentionRows + threadIdx.x;
  const bool active = i < T;
  const std::int64_t out_offset = (std::int64_t{b} * T + i) * C + std::int64_t{h} * head.hs;
  float q[HS], g[HS], dq[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    q[d] = active && d < head.hs ? head.q(i, d) * scale : 0.0f;
    g[d] = active && d < head.hs ? dout[out_offset + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float row_lse = active ? lse[std::int64_t{blockIdx.y} * T + i] : 0.0f;
  const int key_end = min(T, (tile + 1) * kAttentionRows);
  float D = 0.0f;
  for (int sweep = 0; sweep < 2; ++sweep) {  // 0: D, 1: dq (needs the whole row's D)
    for (int k0 = 0; k0 < key_end; k0 += KT) {
      __syncthreads();
      load_key_tile(ks, vs, head, k0, T);
      __syncthreads();
      const int keys = active ? min(KT, i - k0 + 1) : 0;
      for (int r = 0; r < keys; ++r) {
        float s = 0.0f, dp = 0.0f;
#pragma unroll
        for (int d = 0; d < HS; ++d) {
          s += q[d] * ks[r][d];
          dp += g[d] * vs[r][d];
        }
        const float p = expf(s - row_lse);
        if (sweep == 0) {
          D += p * dp;
        } else {
          const float ds = p * (dp - D);
#pragma unroll
          for (int d = 0; d < HS; ++d) dq[d] += ds * ks[r][d];
        }
      }
    }
  }
  if (!active) return;
  float* row = dqkv + (std::int64_t{b} * T + i) * 3 * C + std::int64_t{h} * head.hs;
#pragma unroll
  for (int d = 0; d < HS; ++d)
    if (d < head.hs) row[d] = dq[d] * scale;
  rowdot[std::int64_t{blockIdx.y} * T + i] = D;
}

template <int HS>
__global__ void __launch_bounds__(attention_key_rows(HS))
    attention_backward_key_kernel(float* dqkv, const float* dout, const float* qkv, const float* lse,
                                  const float* rowdot, int T, int C, int NH, float scale) {
  constexpr int KR = attention_key_rows(HS), QT = attention_query_tile(HS), PITCH = HS + 1;  // PITCH: no bank conflicts
  extern __shared__ float shared[];
  float* dks = shared;           // [KR][PITCH]
  float* dvs = dks + KR * PITCH;  // [KR][PITCH]
  float* qs = dvs + KR * PITCH;   // [QT][HS], scaled
  float* gs = qs + QT * HS;       // [QT][HS], dO
  float* ls = gs + QT * HS;       // [QT], lse
  float* Ds = ls + QT;            // [QT], rowdot
  const int b = blockIdx.y / NH, h = blockIdx.y % NH;
  const HeadView head(qkv, b, h, T, C, NH);
  const int j = blockIdx.x * KR + threadIdx.x;
  const bool active = j < T;
  float k[HS], v[HS];
#pragma unroll
  for (int d = 0; d < HS; ++d) {
    k[d] = active && d < head.hs ? head.k(j, d) : 0.0f;
    v[d] = active && d < head.hs ? head.v(j, d) : 0.0f;
  }
  float* dk = dks + threadIdx.x * PITCH;
  float* dv = dvs + threadIdx.x * PITCH;
  for (int d = 0; d < HS; ++d) dk[d] = dv[d] = 0.0f;
  const std::int64_t stat_offset = std::int64_t{blockIdx.y} * T;
  for (int i0 = blockIdx.x * KR; i0 < T; i0 += QT) {  // queries before the block's first key see none of it
    __syncthreads();
    for (int e = threadIdx.x; e < QT * HS; e += blockDim.x) {
      const int r = e / HS, d = e % HS, i = i0 + r;
      const bool in = i < T && d < head.hs;
      qs[e] = in ? head.q(i, d) * scale : 0.0f;
      gs[e] = in ? dout[(std::int64_t{b} * T + i) * C + std::int64_t{h} * head.hs + d] : 0.0f;
    }
    for (int r = threadIdx.x; r < QT; r += blockDim.x) {
      ls[r] = i0 + r < T ? lse[stat_offset + i0 + r] : 0.0f;
      Ds[r] = i0 + r < T ? rowdot[stat_offset + i0 + r] : 0.0f;
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < QT; ++r) {
      const int i = i0 + r;
      if (i < j || i >= T) continue;
      const float* qr = qs + r * HS;
      const float* gr = gs + r * HS;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        s += qr[d] * k[d];
        dp += gr[d] * v[d];
      }
      const float p = expf(s - ls[r]);
      const float ds = p * (dp - Ds[r]);
#pragma unroll
      for (int d = 0; d < HS; ++d) {
        dv[d] += p * gr[d];
        dk[d] += ds * qr[d];  // qr is scaled, so this is already scale·Σ ds·q
      }
    }
  }
  if (!active) return;
  float* row = dqkv + (std::int64_t{b} * T + j) * 3 * C + std::int64_t{h} * head.hs;
  for (int d = 0; d < head.hs; ++d) {
    row[C + d] = dk[d];
    row[2 * C + d] = dv[d];
  }
}

struct AttentionLaunch {
  int bound;
  float scale;
  dim3 query_grid, key_grid;
};

AttentionLaunch plan(int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int bound = attention_head_bound(hs);
  TROUPE_CHECK(bound != 0, "attention: head size " + std::to_string(hs) + " is above the kernels' 128");
  TROUPE_CHECK(std::int64_t{B} * NH <= 65535, "attention: B·NH = " + std::to_string(std::int64_t{B} * NH) +
                                                  " exceeds the grid's y extent");
  const auto heads = static_cast<unsigned>(B * NH);
  return {bound, 1.0f / std::sqrt(static_cast<float>(hs)),
          dim3(static_cast<unsigned>(attention_row_blocks(T, kAttentionRows)), heads),
          dim3(static_cast<unsigned>(attention_row_blocks(T, attention_key_rows(bound))), heads)};
}

template <int HS>
void backward(const AttentionLaunch& l, float* dqkv, float* rowdot, const float* dout, const float* qkv,
              const float* lse, int T, int C, int NH, cudaStream_t stream) {
  attention_backward_query_kernel<HS>
      <<<l.query_grid, kAttentionRows, 0, stream>>>(dqkv, rowdot, dout, qkv, lse, T, C, NH, l.scale);
  TROUPE_CUDA_LAUNCHED();
  attention_backward_key_kernel<HS>
      <<<l.key_grid, attention_key_rows(HS), static_cast<std::size_t>(attention_dkdv_shared_bytes(HS)), stream>>>(
          dqkv, dout, qkv, lse, rowdot, T, C, NH, l.scale);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, cudaStream_t stream) {
  if (B == 0 || T == 0) return;
  const AttentionLaunch l = plan(B, T, C, NH);
  if (l.bound == 64)
    attention_forward_kernel<64><<<l.query_grid, kAttentionRows, 0, stream>>>(out, lse, qkv, T, C, NH, l.scale);
  else
    attention_forward_kernel<128><<<l.query_grid, kAttentionRows, 0, stream>>>(out, lse, qkv, T, C, NH, l.scale);
  TROUPE_CUDA_LAUNCHED();
}

void attention_backward(float* dqkv, float* rowdot, const float* dout, const float* qkv, const float* lse, int B, int T,
                        int C, int NH, cudaStream_t stream) {
  if (B == 0 || T == 0) return;
  const AttentionLaunch l = plan(B, T, C, NH);
  if (l.bound == 64)
    backward<64>(l, dqkv, rowdot, dout, qkv, lse, T, C, NH, stream);
  else
    backward<128>(l, dqkv, rowdot, dout, qkv, lse, T, C, NH, stream);
}

}  // namespace troupe::compute::cuda
