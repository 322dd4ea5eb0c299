#pragma once
// The CPU kernels behind CpuBackend, on raw pointers, llm.c style: outputs first, inputs next,
// shapes last (B, T, C, NH, V, Vp; N = rows). CpuBackend checks shapes and dtypes; a kernel
// trusts its arguments. Each is instantiated for float (training) and double (the
// finite-difference checks), in the file named after its layer.
//
// Conventions (backend.hpp is the contract): parameter gradients accumulate with +=,
// activation gradients are written with =, except layernorm_backward's dinp, which is +=.
// Every kernel runs its loops in one fixed order, so equal inputs give bitwise-equal outputs.

#include <cstddef>
#include <cstdint>
#include <span>

#include "compute/adamw_step.hpp"

namespace troupe::compute::cpu {

// encoder.cpp: wte holds rows [vocab_begin, vocab_begin + rows) of the embedding; wpe may be null
// in the forward.
template <typename Real>
void encoder_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe, int B, int T, int C,
                     int vocab_begin, int rows);
template <typename Real>
void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens, int B, int T, int C,
                      int vocab_begin, int rows);

// layernorm.cpp. The backward comes in two parts that may run on different threads: the input's
// gradient row by row, and the parameters' gradients column by column (each a sum over all N rows
// in row order), here over `width` columns of rows `ld` apart.
template <typename Real>
void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight, const Real* bias,
                       std::int64_t N, int C);
template <typename Real>
void layernorm_backward_input(Real* dinp, const Real* dout, const Real* inp, const Real* weight, const Real* mean,
                              const Real* rstd, std::int64_t N, int C);
template <typename Real>
void layernorm_backward_params(Real* dweight, Real* dbias, const Real* dout, const Real* inp, const Real* mean,
                               const Real* rstd, std::int64_t N, int width, int ld);

// matmul.cpp: weight is (OC, C) row-major. The forward is out = inp · weightᵀ, added onto what
// out holds with `accumulate`; start_rows writes what it starts from, residual + bias over `rows`
// rows of OC columns (either may be null, not both), through streaming stores with `streaming`.
// The backward is two products, each a call of its own (dinp; dweight accumulated); the bias
// gradient is a third.
template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int C, int OC, bool accumulate);
template <typename Real>
void start_rows(Real* out, const Real* residual, const Real* bias, int rows, int OC, bool streaming);
template <typename Real>
void matmul_backward_input(Real* dinp, const Real* dout, const Real* weight, int N, int C, int OC);
template <typename Real>
void matmul_backward_weights(Real* dweight, const Real* dout, const Real* inp, int N, int C, int OC);
// The bias gradient alone, over `width` columns of rows `ld` apart (each column a sum over all N
// rows in row order), so column ranges may run on different threads.
template <typename Real>
void matmul_bias_backward(Real* dbias, const Real* dout, int N, int width, int ld);

// attention.cpp: qkv (B, T, 3C), out and dout (B, T, C); lse, the log-sum-exp of each query
// row's scores, and row_dots, the backward's scratch for rowsum(dout * out), are (B, NH, T). A
// call covers heads [head_begin, head_end) of the B * NH, numbered b * NH + h; heads share
// nothing, so ranges of them may run on different threads.
template <typename Real>
void attention_forward(Real* out, Real* lse, const Real* qkv, int T, int C, int NH, int head_begin, int head_end);
template <typename Real>
void attention_backward(Real* dqkv, Real* row_dots, const Real* dout, const Real* qkv, const Real* lse, int T, int C,
                        int NH, int head_begin, int head_end);
// The attention in f32 over qkv and out as a stage may store them (each f32, or bf16 bits: exactly
// one pointer of a pair set). A head at a time: its q, k and v widened into a tile of the thread's
// where qkv is bf16, its output computed into another and rounded to nearest even into its
// columns where out is bf16. The values are attention_forward's and attention_backward's on the
// widened qkv, the outputs rounded; dqkv, dout, lse and row_dots are f32 as there.
struct StoredOutput {
  float* f32 = nullptr;
  std::uint16_t* bf16 = nullptr;
};
struct StoredInput {
  const float* f32 = nullptr;
  const std::uint16_t* bf16 = nullptr;
};
void attention_forward_stored(StoredOutput out, float* lse, StoredInput qkv, int T, int C, int NH, int head_begin,
                              int head_end);
void attention_backward_stored(float* dqkv, float* row_dots, const float* dout, const std::uint16_t* qkv,
                               const float* lse, int T, int C, int NH, int head_begin, int head_end);

// The same attention between query rows and key/value rows held apart, for context shards (a
// rank's queries against a block of keys that came around the ring). Head h of row t of sequence b
// starts at data + b * batch + t * ld + h * hs of a HeadRows; lse and D hold one value per query
// row, row (b * NH + h) of them ld_lse apart. KeyMask::causal takes query row t and key row t to be
// the same position (Tq == Tk); KeyMask::none lets every query see every key (keys that lie wholly
// before the queries). The forward writes out and lse; the backward, given the log-sum-exp and
// D = rowsum(dout * out) of the rows' full softmax (all blocks), adds onto dq, dk and dv.
enum class KeyMask { causal, none };
template <typename Real>
struct HeadRows {
  Real* data;
  std::ptrdiff_t batch;
  int ld;
  Real* head(int b, int h, int hs) const { return data + b * batch + static_cast<std::ptrdiff_t>(h) * hs; }
};
template <typename Real>
struct AttentionInputs {
  HeadRows<const Real> q, k, v;
  int Tq, Tk, NH, hs;
  KeyMask mask;
};
template <typename Real>
void attention_rows_forward(const HeadRows<Real>& out, Real* lse, int ld_lse, const AttentionInputs<Real>& x,
                            int head_begin, int head_end);
template <typename Real>
void attention_rows_backward(const HeadRows<Real>& dq, const HeadRows<Real>& dk, const HeadRows<Real>& dv,
                             const HeadRows<const Real>& dout, const Real* lse, const Real* D, int ld_lse,
                             const AttentionInputs<Real>& x, int head_begin, int head_end);

// gelu.cpp. The forward and the fused backward also read an input stored in bf16 (In =
// std::uint16_t, its bits, with Real = float), widened to f32 as they read it.
template <typename Real, typename In>
void gelu_forward(Real* out, const In* inp, std::int64_t n);
template <typename Real>
void gelu_backward(Real* dinp, const Real* inp, const Real* dout, std::int64_t n);
// gelu_backward over columns [begin, end) of N rows `width` apart, with dbias[c] += dinp[i][c] over
// the rows in row order (as matmul_bias_backward sums them).
template <typename Real, typename In>
void gelu_bias_backward(Real* dinp, Real* dbias, const In* inp, const Real* dout, int N, int width, int begin, int end);

// crossentropy.cpp: logits, probs and dlogits are (N, Vp); only the first V columns are real. The
// backward's columns start at vocab_begin (0, or a vocabulary shard's first).
template <typename Real>
void crossentropy_forward(Real* losses, Real* probs, const Real* logits, const std::int32_t* targets, std::int64_t N,
                          int V, int Vp);
template <typename Real>
void crossentropy_backward(Real* dlogits, const Real* probs, const std::int32_t* targets, Real dloss, std::int64_t N,
                           int Vp, int vocab_begin);
// A vocabulary shard's columns [vocab_begin, vocab_begin + Vs) of (N, Vp) logits, of which those
// below V are real: stats (N, 3) per row; then, with all S shards' stats (S, N, 3), the loss and
// the shard's probabilities.
template <typename Real>
void crossentropy_shard_stats(Real* stats, const Real* logits, const std::int32_t* targets, std::int64_t N, int Vs,
                              int vocab_begin, int V);
template <typename Real>
void crossentropy_shard_forward(Real* losses, Real* probs, const Real* logits, const Real* all_stats, int S,
                                std::int64_t N, int Vs, int vocab_begin, int V);

// adamw.cpp: one step over each segment; segments index the flat params and grads
// (param_offset) and m and v (moment_offset). A call covers elements [begin, end) of the
// segments laid end to end, so ranges of them may run on different threads.
template <typename Real>
void adamw_update(Real* params, const Real* grads, Real* m, Real* v, std::span<const AdamWSegment> segments,
                  const AdamWHyper& hyper, std::int64_t begin, std::int64_t end);
// The number of elements the segments hold, laid end to end.
std::int64_t adamw_elements(std::span<const AdamWSegment> segments);

// elementwise.cpp
template <typename Real>
void residual_forward(Real* out, const Real* a, const Real* b, std::int64_t n);
template <typename Real>
void scale(Real* x, std::int64_t n, Real factor);
// Zeros over `bytes` bytes through streaming stores.
void stream_zero(void* data, std::size_t bytes);
template <typename Real>
double sum_of_squares(const Real* x, std::int64_t n);
// bf16 as bits: n f32 values rounded to nearest even (compute/cuda/bf16.hpp's rounding), and n
// bf16 values widened to f32 (exact).
void round_to_bf16_bits(std::uint16_t* out, const float* in, std::int64_t n);
void widen_bf16_bits(float* out, const std::uint16_t* in, std::int64_t n);

}  // namespace troupe::compute::cpu
