// Causal multi-head self-attention, FlashAttention-2 style, as products (tile_product.hpp) on
// strided slices of qkv: for head h of sequence b, q, k and v are (T, hs) matrices with leading
// dimension 3C that start at columns h*hs, C + h*hs and 2C + h*hs of qkv. Only kᵀ and vᵀ are
// copied out, once per head, as the right operands of q kᵀ and dout vᵀ. The same code runs
// queries against keys held apart (attention_rows_*, for context shards): q, k and v are then any
// strided (Tq, hs) and (Tk, hs) matrices, either causal (same positions) or all keys visible.
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
// (S, P and dP twice); with one chunk (T <= key_block) the one pass does; a caller that knows D
// (rowsum dout * out, over blocks of keys held elsewhere too) gives it and skips that. Query blocks run from
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

// Keys of a chunk that row r of a query block sees: key column j of the chunk is seen from row r
// when j <= r + diagonal (a diagonal of at least the chunk's width leaves every key visible).
inline int visible_keys(int r, int diagonal, int width) { return std::min(width, r + 1 + diagonal); }

// One chunk of the forward's online softmax for the rows of a query block: turns the scores s
// (rows, width) into exp(s - m') in place (masked entries 0), updates the running max m and sum l,
// and, unless this is the row's first chunk, rescales the rows of out accumulated from earlier
// chunks by exp(m - m').
template <typename Real>
TROUPE_SIMD_CLONES void online_softmax_chunk(Real* s, Real* m, Real* l, Real* out, int ld_out, int hs, int rows,
                                             int diagonal, int width, bool first) {
  for (int r = 0; r < rows; ++r) {
    Real* row = s + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r, diagonal, width);
    const Real new_max = std::max(m[r], row_max(row, n));
    const Real sum = exp_shifted_row(row, row, n, new_max);
    std::fill(row + n, row + width, Real(0));
    if (!first) {
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
TROUPE_SIMD_CLONES void probabilities_from_lse(Real* s, Real* D, const Real* dp, const Real* lse, int rows,
                                               int diagonal, int width) {
  for (int r = 0; r < rows; ++r) {
    Real* row = s + static_cast<std::size_t>(r) * width;
    const Real* drow = dp + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r, diagonal, width);
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
TROUPE_SIMD_CLONES void softmax_backward_in_place(Real* dp, const Real* p, const Real* D, int rows, int diagonal,
                                                  int width) {
  for (int r = 0; r < rows; ++r) {
    Real* dr = dp + static_cast<std::size_t>(r) * width;
    const Real* pr = p + static_cast<std::size_t>(r) * width;
    const int n = visible_keys(r, diagonal, width);
    const Real d = D[r];
#pragma omp simd
    for (int j = 0; j < n; ++j) dr[j] = pr[j] * (dr[j] - d);
    std::fill(dr + n, dr + width, Real(0));
  }
}

// One head's q, k and v: (Tq, hs) and (Tk, hs) matrices with leading dimensions ld_q and ld_kv.
template <typename Real>
struct Head {
  const Real* q;
  const Real* k;
  const Real* v;
  int ld_q, ld_kv;
};

template <typename Real>
Head<Real> head_of(const AttentionInputs<Real>& x, int b, int h) {
  return {x.q.head(b, h, x.hs), x.k.head(b, h, x.hs), x.v.head(b, h, x.hs), x.q.ld, x.k.ld};
}

// The keys a query block [r0, r1) visits: up to its last row under the causal mask, all otherwise;
// and the diagonal of the chunk starting at key c0.
template <typename Real>
int keys_end(const AttentionInputs<Real>& x, int r1) {
  return x.mask == KeyMask::causal ? r1 : x.Tk;
}
template <typename Real>
int diagonal_of(const AttentionInputs<Real>& x, int r0, int c0) {
  return x.mask == KeyMask::causal ? r0 - c0 : x.Tk;
}

// One query block's probabilities P and their gradient dP over keys [c0, c0 + width); adds
// rowsum(P * dP) to D unless D is null. kt and vt have leading dimension ldt.
template <typename Real>
void probabilities_and_gradient(Real* p, Real* dp, Real* D, const Head<Real>& x, const Real* kt, const Real* vt,
                                const Real* dout, int ld_dout, const Real* lse, int r0, int rows, int c0, int width,
                                int diagonal, int ldt, int hs, Real scale) {
  const Causal scores{Causal::Zeros::columns_after, diagonal};
  tile_product(rows, width, hs, scale, x.q + static_cast<std::size_t>(r0) * x.ld_q, x.ld_q, 1, kt + c0, ldt, Real(0), p,
               width, scores);
  tile_product(rows, width, hs, Real(1), dout, ld_dout, 1, vt + c0, ldt, Real(0), dp, width, scores);
  probabilities_from_lse(p, D, dp, lse, rows, diagonal, width);
}

// The backward of heads [head_begin, head_end). Given given_D, rowsum(dout * out) of every row, the
// gradients are added onto dq, dk and dv; otherwise the backward fills fill_D with it and writes
// the gradients.
template <typename Real>
void backward_heads(const HeadRows<Real>& dq, const HeadRows<Real>& dk, const HeadRows<Real>& dv, Real* fill_D,
                    const Real* given_D, const HeadRows<const Real>& dout, const Real* lse, int ld_lse,
                    const AttentionInputs<Real>& x, int head_begin, int head_end) {
  const int hs = x.hs;
  const int Tq = x.Tq;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  Tiles<Real>& t = tiles<Real>();
  Real* p = t.p.data();
  Real* dp = t.dp.data();
  const int ldt = unaliased_leading_dimension(x.Tk);
  t.kt.resize(static_cast<std::size_t>(hs) * ldt);
  t.vt.resize(t.kt.size());
  t.qp.resize(static_cast<std::size_t>(hs) * Tq);
  t.kp.resize(static_cast<std::size_t>(hs) * x.Tk);
  const Real* kt = t.kt.data();
  const Real* vt = t.vt.data();
  const Real* qp = t.qp.data();
  const Real* kp = t.kp.data();
  const int last_r0 = (Tq - 1) / query_block * query_block;
  const bool d_given = given_D != nullptr;
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / x.NH, h = bh % x.NH;
    const Head<Real> head = head_of(x, b, h);
    transpose_into(t.kt.data(), ldt, head.k, x.Tk, hs, head.ld_kv);
    transpose_into(t.vt.data(), ldt, head.v, x.Tk, hs, head.ld_kv);
    pack_rows(t.qp.data(), head.q, Tq, hs, head.ld_q);
    pack_rows(t.kp.data(), head.k, x.Tk, hs, head.ld_kv);
    Real* dq_head = dq.head(b, h, hs);
    Real* dk_head = dk.head(b, h, hs);
    Real* dv_head = dv.head(b, h, hs);
    const std::size_t row_offset = static_cast<std::size_t>(bh) * ld_lse;
    const Real* dout_head = dout.head(b, h, hs);
    for (int r0 = last_r0; r0 >= 0; r0 -= query_block) {
      const int rows = std::min(query_block, Tq - r0);
      const int r1 = r0 + rows;
      const int k_end = keys_end(x, r1);
      // The last query block sees every key, so it writes dk and dv and the earlier ones add.
      const Real beta_kv = !d_given && r1 == Tq ? Real(0) : Real(1);
      const Real* d = dout_head + static_cast<std::size_t>(r0) * dout.ld;
      const Real* block_lse = lse + row_offset + r0;
      Real* block_fill_D = d_given ? nullptr : fill_D + row_offset + r0;
      const Real* block_D = d_given ? given_D + row_offset + r0 : block_fill_D;
      const bool one_chunk = k_end <= key_block;
      if (!d_given) {
        std::fill(block_fill_D, block_fill_D + rows, Real(0));
        if (!one_chunk) {
          for (int c0 = 0; c0 < k_end; c0 += key_block) {
            const int width = std::min(key_block, k_end - c0);
            probabilities_and_gradient(p, dp, block_fill_D, head, kt, vt, d, dout.ld, block_lse, r0, rows, c0, width,
                                       diagonal_of(x, r0, c0), ldt, hs, scale);
          }
        }
      }
      for (int c0 = 0; c0 < k_end; c0 += key_block) {
        const int width = std::min(key_block, k_end - c0);
        const int diagonal = diagonal_of(x, r0, c0);
        probabilities_and_gradient(p, dp, one_chunk ? block_fill_D : nullptr, head, kt, vt, d, dout.ld, block_lse, r0,
                                   rows, c0, width, diagonal, ldt, hs, scale);
        const Causal seen_by_query{Causal::Zeros::terms_after, diagonal};
        const Causal seen_from_key{Causal::Zeros::terms_before, -diagonal};
        tile_product(width, hs, rows, Real(1), p, 1, width, d, dout.ld, beta_kv,
                     dv_head + static_cast<std::size_t>(c0) * dv.ld, dv.ld, seen_from_key);
        softmax_backward_in_place(dp, p, block_D, rows, diagonal, width);
        tile_product(rows, hs, width, scale, dp, width, 1, kp + static_cast<std::size_t>(c0) * hs, hs,
                     !d_given && c0 == 0 ? Real(0) : Real(1), dq_head + static_cast<std::size_t>(r0) * dq.ld, dq.ld,
                     seen_by_query);
        tile_product(width, hs, rows, scale, dp, 1, width, qp + static_cast<std::size_t>(r0) * hs, hs, beta_kv,
                     dk_head + static_cast<std::size_t>(c0) * dk.ld, dk.ld, seen_from_key);
      }
    }
  }
}

// q, k and v as slices of qkv (B, T, 3C), causal.
template <typename Real>
AttentionInputs<Real> inputs_of_qkv(const Real* qkv, int T, int C, int NH) {
  const std::ptrdiff_t batch = static_cast<std::ptrdiff_t>(T) * 3 * C;
  return {{qkv, batch, 3 * C}, {qkv + C, batch, 3 * C}, {qkv + 2 * C, batch, 3 * C}, T, T, NH, C / NH, KeyMask::causal};
}

}  // namespace

template <typename Real>
void attention_rows_forward(const HeadRows<Real>& out, Real* lse, int ld_lse, const AttentionInputs<Real>& x,
                            int head_begin, int head_end) {
  const int hs = x.hs;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  Tiles<Real>& t = tiles<Real>();
  Real* s = t.p.data();
  const int ldt = unaliased_leading_dimension(x.Tk);
  t.kt.resize(static_cast<std::size_t>(hs) * ldt);
  t.vp.resize(static_cast<std::size_t>(hs) * x.Tk);
  Real m[query_block];
  Real l[query_block];
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / x.NH, h = bh % x.NH;
    const Head<Real> head = head_of(x, b, h);
    transpose_into(t.kt.data(), ldt, head.k, x.Tk, hs, head.ld_kv);
    pack_rows(t.vp.data(), head.v, x.Tk, hs, head.ld_kv);
    Real* head_out = out.head(b, h, hs);
    Real* head_lse = lse + static_cast<std::size_t>(bh) * ld_lse;
    for (int r0 = 0; r0 < x.Tq; r0 += query_block) {
      const int rows = std::min(query_block, x.Tq - r0);
      const int r1 = r0 + rows;
      const int k_end = keys_end(x, r1);
      Real* o = head_out + static_cast<std::size_t>(r0) * out.ld;
      std::fill(m, m + rows, -std::numeric_limits<Real>::infinity());
      for (int c0 = 0; c0 < k_end; c0 += key_block) {
        const int width = std::min(key_block, k_end - c0);
        const int diagonal = diagonal_of(x, r0, c0);
        tile_product(rows, width, hs, scale, head.q + static_cast<std::size_t>(r0) * head.ld_q, head.ld_q, 1,
                     t.kt.data() + c0, ldt, Real(0), s, width, {Causal::Zeros::columns_after, diagonal});
        online_softmax_chunk(s, m, l, o, out.ld, hs, rows, diagonal, width, c0 == 0);
        tile_product(rows, hs, width, Real(1), s, width, 1, t.vp.data() + static_cast<std::size_t>(c0) * hs, hs,
                     c0 == 0 ? Real(0) : Real(1), o, out.ld, {Causal::Zeros::terms_after, diagonal});
      }
      finish_rows(o, out.ld, head_lse + r0, m, l, hs, rows);
    }
  }
}

template <typename Real>
void attention_rows_backward(const HeadRows<Real>& dq, const HeadRows<Real>& dk, const HeadRows<Real>& dv,
                             const HeadRows<const Real>& dout, const Real* lse, const Real* D, int ld_lse,
                             const AttentionInputs<Real>& x, int head_begin, int head_end) {
  backward_heads(dq, dk, dv, static_cast<Real*>(nullptr), D, dout, lse, ld_lse, x, head_begin, head_end);
}

template <typename Real>
void attention_forward(Real* out, Real* lse, const Real* qkv, int T, int C, int NH, int head_begin, int head_end) {
  attention_rows_forward<Real>({out, static_cast<std::ptrdiff_t>(T) * C, C}, lse, T, inputs_of_qkv(qkv, T, C, NH),
                               head_begin, head_end);
}

namespace {

// Head h of sequence b of qkv (B, T, 3C) as the one head of one sequence: where it lies in f32, or
// widened from bf16 into `tile` (each of the T rows q, k, v side by side, 3 hs wide).
AttentionInputs<float> one_head(StoredInput qkv, int b, int h, int T, int C, int hs, std::vector<float>& tile) {
  const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(b) * T * 3 * C + static_cast<std::ptrdiff_t>(h) * hs;
  if (qkv.f32 != nullptr) {
    const float* q = qkv.f32 + at;
    return {{q, 0, 3 * C}, {q + C, 0, 3 * C}, {q + 2 * C, 0, 3 * C}, T, T, 1, hs, KeyMask::causal};
  }
  tile.resize(static_cast<std::size_t>(T) * 3 * hs);
  for (int t = 0; t < T; ++t) {
    const std::uint16_t* row = qkv.bf16 + at + static_cast<std::ptrdiff_t>(t) * 3 * C;
    float* to = tile.data() + static_cast<std::size_t>(t) * 3 * hs;
    for (int part = 0; part < 3; ++part) widen_bf16_bits(to + part * hs, row + part * C, hs);
  }
  const float* q = tile.data();
  return {{q, 0, 3 * hs}, {q + hs, 0, 3 * hs}, {q + 2 * hs, 0, 3 * hs}, T, T, 1, hs, KeyMask::causal};
}

}  // namespace

void attention_forward_stored(StoredOutput out, float* lse, StoredInput qkv, int T, int C, int NH, int head_begin,
                              int head_end) {
  const int hs = C / NH;
  thread_local std::vector<float> head_qkv, head_out;
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const AttentionInputs<float> head = one_head(qkv, b, h, T, C, hs, head_qkv);
    const std::ptrdiff_t at = static_cast<std::ptrdiff_t>(b) * T * C + static_cast<std::ptrdiff_t>(h) * hs;
    float* const head_lse = lse + static_cast<std::size_t>(bh) * T;
    if (out.f32 != nullptr) {
      attention_rows_forward<float>({out.f32 + at, 0, C}, head_lse, T, head, 0, 1);
      continue;
    }
    // The same products as into out's rows, only hs apart instead of C.
    head_out.resize(static_cast<std::size_t>(T) * hs);
    attention_rows_forward<float>({head_out.data(), 0, hs}, head_lse, T, head, 0, 1);
    for (int t = 0; t < T; ++t)
      round_to_bf16_bits(out.bf16 + at + static_cast<std::ptrdiff_t>(t) * C,
                         head_out.data() + static_cast<std::size_t>(t) * hs, hs);
  }
}

void attention_backward_stored(float* dqkv, float* row_dots, const float* dout, const std::uint16_t* qkv,
                               const float* lse, int T, int C, int NH, int head_begin, int head_end) {
  const int hs = C / NH;
  thread_local std::vector<float> head_qkv;
  for (int bh = head_begin; bh < head_end; ++bh) {
    const int b = bh / NH, h = bh % NH;
    const AttentionInputs<float> head = one_head({nullptr, qkv}, b, h, T, C, hs, head_qkv);
    float* const dq = dqkv + static_cast<std::ptrdiff_t>(b) * T * 3 * C + static_cast<std::ptrdiff_t>(h) * hs;
    const float* const head_dout = dout + static_cast<std::ptrdiff_t>(b) * T * C + static_cast<std::ptrdiff_t>(h) * hs;
    const std::size_t rows = static_cast<std::size_t>(bh) * T;
    backward_heads<float>({dq, 0, 3 * C}, {dq + C, 0, 3 * C}, {dq + 2 * C, 0, 3 * C}, row_dots + rows, nullptr,
                          {head_dout, 0, C}, lse + rows, T, head, 0, 1);
  }
}

template <typename Real>
void attention_backward(Real* dqkv, Real* row_dots, const Real* dout, const Real* qkv, const Real* lse, int T, int C,
                        int NH, int head_begin, int head_end) {
  const std::ptrdiff_t batch = static_cast<std::ptrdiff_t>(T) * 3 * C;
  backward_heads<Real>({dqkv, batch, 3 * C}, {dqkv + C, batch, 3 * C}, {dqkv + 2 * C, batch, 3 * C}, row_dots, nullptr,
                       {dout, static_cast<std::ptrdiff_t>(T) * C, C}, lse, T, inputs_of_qkv(qkv, T, C, NH), head_begin,
                       head_end);
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int, int);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*, int, int, int, int,
                                        int);
template void attention_backward<double>(double*, double*, const double*, const double*, const double*, int, int, int,
                                         int, int);

template void attention_rows_forward<float>(const HeadRows<float>&, float*, int, const AttentionInputs<float>&, int,
                                            int);
template void attention_rows_forward<double>(const HeadRows<double>&, double*, int, const AttentionInputs<double>&, int,
                                             int);
template void attention_rows_backward<float>(const HeadRows<float>&, const HeadRows<float>&, const HeadRows<float>&,
                                             const HeadRows<const float>&, const float*, const float*, int,
                                             const AttentionInputs<float>&, int, int);
template void attention_rows_backward<double>(const HeadRows<double>&, const HeadRows<double>&, const HeadRows<double>&,
                                              const HeadRows<const double>&, const double*, const double*, int,
                                              const AttentionInputs<double>&, int, int);

}  // namespace troupe::compute::cpu
