// Causal multi-head self-attention, FlashAttention-2 style, as products (tile_product.hpp) on
// strided slices of qkv: for head h of sequence b, q, k and v are (T, hs) matrices with leading
// dimension 3C that start at columns h*hs, C + h*hs and 2C + h*hs of qkv. Only kᵀ and vᵀ are
// copied out, once per head, as the right operands of q kᵀ and dout vᵀ.
//
// The state kept for the backward is one log-sum-exp per query row, lse_i = log sum_j exp(s_ij)
// with s = scale * q kᵀ, shaped (B, NH, T): no (T, T) probability matrix is stored per head.
// Probabilities live only in a per-call scratch tile of query_block rows by at most key_block
// columns, which stays in the core's cache.
//
// Work goes by blocks of query_block query rows [r0, r1). Such a block sees only keys [0, r1)
// (causality), which it visits in chunks of at most key_block keys; the chunks stop at r1, so the
// masked upper half is skipped. Inside the diagonal block the products skip what lies past the
// diagonal a register tile at a time; the entries above it that a tile still computes are masked.
//
// Forward, per query block, online softmax over the key chunks [c0, c1):
//   S = scale * q[r0:r1] · k[c0:c1]ᵀ                                   (product)
//   m' = max(m, rowmax S);  P = exp(S - m');  l = l exp(m - m') + rowsum P
//   out[r0:r1] = exp(m - m') out[r0:r1] + P · v[c0:c1]                 (product)
// then out /= l and lse = m + log l. For T <= key_block a block has one chunk and this is the
// plain softmax.
// Backward, per query block, the probabilities recomputed as P = exp(S - lse):
//   dP = dout[r0:r1] · v[c0:c1]ᵀ                                       (product)
//   D = rowsum over all chunks of P * dP (= rowsum dout * out, which the backward is not given)
//   dv[c0:c1] (+)= Pᵀ · dout[r0:r1]                                    (product)
//   dS = P * (dP - D)
//   dq[r0:r1] (+)= scale * dS · k[c0:c1]                               (product)
//   dk[c0:c1] (+)= scale * dSᵀ · q[r0:r1]                              (product)
// D needs every chunk of the row, so when the row spans several chunks a first pass computes it
// (S, P and dP twice); with one chunk (T <= key_block) the one pass does. Query blocks run from
// the last to the first, so the last block, whose chunks cover all T keys, writes dk and dv with
// beta 0 and the earlier ones accumulate onto it.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/softmax_row.hpp"
#include "compute/cpu/tile_product.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {
namespace {

constexpr int query_block = 64;
constexpr int key_block = 1024;
// Every chunk start is then a multiple of query_block at or below r0, so each row of a query
// block has at least one unmasked key in every chunk it visits.
static_assert(key_block % query_block == 0);

// The per-call tiles, reused across calls on a thread: a fresh allocation of this size would be
// mapped and page-faulted on every call. kt and vt hold one head's kᵀ and vᵀ, (hs, T), the
// row-major right operands of S = q kᵀ and dP = dout vᵀ; qp, kp and vp its q, k and v packed,
// (T, hs), the right operands of P · v, dS · k and dSᵀ · q (tile_product.hpp).
template <typename Real>
struct Tiles {
  std::vector<Real> p, dp, kt, vt, qp, kp, vp;
  Tiles() : p(static_cast<std::size_t>(query_block) * key_block), dp(p.size()) {}
};

template <typename Real>
Tiles<Real>& tiles() {
  thread_local Tiles<Real> t;
  return t;
}

// The strided (T, hs) views of one head.
template <typename Real>
struct Head {
  Real* q;
  Real* k;
  Real* v;
};

template <typename Real>
Head<Real> head_of(Real* qkv, int b, int h, int T, int C, int hs) {
  Real* q = qkv + static_cast<std::size_t>(b) * T * 3 * C + static_cast<std::size_t>(h) * hs;
  return {q, q + C, q + 2 * C};
}

// Keys of chunk [c0, c0 + width) that row i sees: those at or below the diagonal.
inline int visible_keys(int i, int c0, int width) { return std::min(width, i + 1 - c0); }

// One chunk of the forward's online softmax for rows r0..r0+rows-1: turns the scores s (rows,
// width) into exp(s - m') in place (masked entries 0), updates the running max m and sum l, and
// rescales the rows of out accumulated from earlier chunks by exp(m - m').
template <typename Real>
TROUPE_SIMD_CLONES void online_softmax_chunk(Real* s, Real* m, Real* l, Real* out, int ld_out, int hs, int r0, int rows,
                                             int c0, int width) {
  for (int r = 0; r < rows; ++r) {
    Real* row = s + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r0 + r, c0, width);
    const Real new_max = std::max(m[r], row_max(row, n));
    const Real sum = exp_shifted_row(row, row, n, new_max);
    std::fill(row + n, row + width, Real(0));
    if (c0 > 0) {
      const Real correction = vexp(m[r] - new_max);
      Real* o = out + static_cast<std::size_t>(r) * ld_out;
#pragma omp simd
      for (int c = 0; c < hs; ++c) o[c] *= correction;
      l[r] = l[r] * correction + sum;
    } else {
      l[r] = sum;
    }
    m[r] = new_max;
  }
}

// out /= l and lse = m + log l, for one query block's rows.
template <typename Real>
TROUPE_SIMD_CLONES void finish_rows(Real* out, int ld_out, Real* lse, const Real* m, const Real* l, int hs, int rows) {
  for (int r = 0; r < rows; ++r) {
    const Real inv = Real(1) / l[r];
    Real* o = out + static_cast<std::size_t>(r) * ld_out;
#pragma omp simd
    for (int c = 0; c < hs; ++c) o[c] *= inv;
    lse[r] = m[r] + std::log(l[r]);
  }
}

// The scores s (rows, width) become the probabilities exp(s - lse) in place, masked entries 0;
// in the same sweep rowsum(P * dP) is added to D unless D is null.
template <typename Real>
TROUPE_SIMD_CLONES void probabilities_from_lse(Real* s, Real* D, const Real* dp, const Real* lse, int r0, int rows,
                                               int c0, int width) {
  for (int r = 0; r < rows; ++r) {
    Real* row = s + static_cast<std::size_t>(r) * width;
    const Real* drow = dp + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r0 + r, c0, width);
    const Real shift = lse[r];
    Real dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; ++j) {
      const Real p = vexp(row[j] - shift);
      row[j] = p;
      dot += p * drow[j];
    }
    std::fill(row + n, row + width, Real(0));
    if (D != nullptr) D[r] += dot;
  }
}

// dP becomes dS = P * (dP - D) in place, masked entries 0 (the product that made dP may have left
// them unwritten).
template <typename Real>
TROUPE_SIMD_CLONES void softmax_backward_in_place(Real* dp, const Real* p, const Real* D, int r0, int rows, int c0,
                                                  int width) {
  for (int r = 0; r < rows; ++r) {
    Real* dr = dp + static_cast<std::size_t>(r) * width;
    const Real* pr = p + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r0 + r, c0, width);
    const Real d = D[r];
#pragma omp simd
    for (int j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - d);
    std::fill(dr + n, dr + width, Real(0));
  }
}

// One query block's probabilities P and their gradient dP over keys [c0, c0 + width); adds
// rowsum(P * dP) to D unless D is null. kt and vt have leading dimension ldt.
template <typename Real>
void probabilities_and_gradient(Real* p, Real* dp, Real* D, const Head<const Real>& x, const Real* kt, const Real* vt,
                                const Real* dout, const Real* lse, int r0, int rows, int c0, int width, int ldt,
                                int C, int hs, Real scale) {
  const int ld = 3 * C;
  const Causal scores{Causal::Zeros::columns_after, r0 - c0};
  tile_product(rows, width, hs, scale, x.q + static_cast<std::size_t>(r0) * ld, ld, 1, kt + c0, ldt, Real(0), p, width,
               scores);
  tile_product(rows, width, hs, Real(1), dout, C, 1, vt + c0, ldt, Real(0), dp, width, scores);
  probabilities_from_lse(p, D, dp, lse, r0, rows, c0, width);
}

}  // namespace

template <typename Real>
void attention_forward(Real* out, Real* lse, const Real* qkv, int T, int C, int NH, int head_begin, int head_end) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  Tiles<Real>& t = tiles<Real>();
  Real* s = t.p.data();
  const int ldt = unaliased_leading_dimension(T);
  t.kt.resize(static_cast<std::size_t>(hs) * ldt);
  t.vp.resize(static_cast<std::size_t>(hs) * T);
  Real m[query_block];
  Real l[query_block];
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const Head<const Real> x = head_of(qkv, b, h, T, C, hs);
    transpose_into(t.kt.data(), ldt, x.k, T, hs, ld);
    pack_rows(t.vp.data(), x.v, T, hs, ld);
    Real* head_out = out + static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
    Real* head_lse = lse + (static_cast<std::size_t>(b) * NH + h) * T;
    for (int r0 = 0; r0 < T; r0 += query_block) {
      const int rows = std::min(query_block, T - r0);
      const int r1 = r0 + rows;
      Real* o = head_out + static_cast<std::size_t>(r0) * C;
      std::fill(m, m + rows, -std::numeric_limits<Real>::infinity());
      for (int c0 = 0; c0 < r1; c0 += key_block) {
        const int width = std::min(key_block, r1 - c0);
        tile_product(rows, width, hs, scale, x.q + static_cast<std::size_t>(r0) * ld, ld, 1, t.kt.data() + c0, ldt,
                     Real(0), s, width, {Causal::Zeros::columns_after, r0 - c0});
        online_softmax_chunk(s, m, l, o, C, hs, r0, rows, c0, width);
        tile_product(rows, hs, width, Real(1), s, width, 1, t.vp.data() + static_cast<std::size_t>(c0) * hs, hs,
                     c0 == 0 ? Real(0) : Real(1), o, C, {Causal::Zeros::terms_after, r0 - c0});
      }
      finish_rows(o, C, head_lse + r0, m, l, hs, rows);
    }
  }
}

template <typename Real>
void attention_backward(Real* dqkv, Real* row_dots, const Real* dout, const Real* qkv, const Real* lse, int T, int C,
                        int NH, int head_begin, int head_end) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  Tiles<Real>& t = tiles<Real>();
  Real* p = t.p.data();
  Real* dp = t.dp.data();
  const int ldt = unaliased_leading_dimension(T);
  t.kt.resize(static_cast<std::size_t>(hs) * ldt);
  t.vt.resize(t.kt.size());
  t.qp.resize(static_cast<std::size_t>(hs) * T);
  t.kp.resize(t.qp.size());
  const Real* kt = t.kt.data();
  const Real* vt = t.vt.data();
  const Real* qp = t.qp.data();
  const Real* kp = t.kp.data();
  const int last_r0 = (T - 1) / query_block * query_block;
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const Head<const Real> x = head_of(qkv, b, h, T, C, hs);
    transpose_into(t.kt.data(), ldt, x.k, T, hs, ld);
    transpose_into(t.vt.data(), ldt, x.v, T, hs, ld);
    pack_rows(t.qp.data(), x.q, T, hs, ld);
    pack_rows(t.kp.data(), x.k, T, hs, ld);
    const Head<Real> dx = head_of(dqkv, b, h, T, C, hs);
    const std::size_t row_offset = (static_cast<std::size_t>(b) * NH + h) * T;
    const Real* head_dout = dout + static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
    for (int r0 = last_r0; r0 >= 0; r0 -= query_block) {
      const int rows = std::min(query_block, T - r0);
      const int r1 = r0 + rows;
      const Real beta_kv = r1 == T ? Real(0) : Real(1);
      const Real* d = head_dout + static_cast<std::size_t>(r0) * C;
      const Real* block_lse = lse + row_offset + r0;
      Real* D = row_dots + row_offset + r0;
      std::fill(D, D + rows, Real(0));
      const bool one_chunk = r1 <= key_block;
      if (!one_chunk) {
        for (int c0 = 0; c0 < r1; c0 += key_block) {
          const int width = std::min(key_block, r1 - c0);
          probabilities_and_gradient(p, dp, D, x, kt, vt, d, block_lse, r0, rows, c0, width, ldt, C, hs, scale);
        }
      }
      for (int c0 = 0; c0 < r1; c0 += key_block) {
        const int width = std::min(key_block, r1 - c0);
        probabilities_and_gradient(p, dp, one_chunk ? D : nullptr, x, kt, vt, d, block_lse, r0, rows, c0, width, ldt, C,
                                   hs, scale);
        const Causal seen_by_query{Causal::Zeros::terms_after, r0 - c0};
        const Causal seen_from_key{Causal::Zeros::terms_before, c0 - r0};
        tile_product(width, hs, rows, Real(1), p, 1, width, d, C, beta_kv, dx.v + static_cast<std::size_t>(c0) * ld, ld,
                     seen_from_key);
        softmax_backward_in_place(dp, p, D, r0, rows, c0, width);
        tile_product(rows, hs, width, scale, dp, width, 1, kp + static_cast<std::size_t>(c0) * hs, hs,
                     c0 == 0 ? Real(0) : Real(1), dx.q + static_cast<std::size_t>(r0) * ld, ld, seen_by_query);
        tile_product(width, hs, rows, scale, dp, 1, width, qp + static_cast<std::size_t>(r0) * hs, hs, beta_kv,
                     dx.k + static_cast<std::size_t>(c0) * ld, ld, seen_from_key);
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int, int);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*, int, int, int, int,
                                        int);
template void attention_backward<double>(double*, double*, const double*, const double*, const double*, int, int, int,
                                         int, int);

}  // namespace troupe::compute::cpu
