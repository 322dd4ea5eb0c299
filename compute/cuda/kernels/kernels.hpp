#pragma once
// Launchers of the CUDA kernels, on raw device pointers, llm.c style: outputs first, inputs next,
// shapes last. CudaBackend checks shapes; a launcher trusts its arguments, enqueues on `stream`
// and returns at once. Each launcher lives in the .cu file of its layer, beside its kernels; the
// launch geometry comes from ../launch_config.hpp. Everything computes in fp32 (bf16 enters only
// through to_bf16, for the GEMM operands of the bf16 mode), reductions in fp32 or double as noted.
//
// Token and target ids are trusted to lie in [0, V): CudaBackend cannot check device memory
// without a sync. A kernel that meets an id outside writes NaN where the id would have been
// used (out rows, losses) and skips its gradient, so a bad id shows up as a NaN loss instead of
// a stray write.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "compute/adamw_step.hpp"

namespace troupe::compute::cuda {

// encoder.cu
void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                     int V, cudaStream_t stream);
// dwte += each token's positions, summed in position order (the CPU backend's sum, bit for bit),
// dwpe += sum over b (in order). scratch holds encoder_backward_scratch_bytes(B · T) bytes.
std::size_t encoder_backward_scratch_bytes(std::int64_t positions);
void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int B, int T, int C,
                      int V, void* scratch, cudaStream_t stream);

// layernorm.cu; column_scratch holds 2 · column_chunks(N) · C floats.
void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, int C, cudaStream_t stream);
// The backward's halves: dinp += … (B), and dweight += …, dbias += … (W).
void layernorm_backward_input(float* dinp, const float* dout, const float* inp, const float* weight, const float* mean,
                              const float* rstd, std::int64_t N, int C, cudaStream_t stream);
void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp, const float* mean,
                               const float* rstd, std::int64_t N, int C, float* column_scratch, cudaStream_t stream);

// attention.cu: flash attention, no (T, T) matrix. lse (B, NH, T) keeps each query row's
// log-sum-exp of its scaled scores; backward recomputes the probabilities from it. rowdot
// (B, NH, T) is backward scratch: rowsum(P ∘ dP) per query row. head size C/NH <= 128.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, cudaStream_t stream);
void attention_backward(float* dqkv, float* rowdot, const float* dout, const float* qkv, const float* lse, int B, int T,
                        int C, int NH, cudaStream_t stream);

// attention_gemm.cu: the bf16 mode's attention, whose products are batched cuBLAS GEMMs
// (cuda_backend.cpp); here the head layout changes and the causal softmax, fp32 arithmetic.
// Head buffers are (B, NH, T, hs) bf16; score rows (pairs·T of them, T long) are fp32 in, bf16 out.
// qkv (B, T, 3C) → q, k, v.
void attention_split_heads(std::uint16_t* q, std::uint16_t* k, std::uint16_t* v, const float* qkv, int B, int T, int C,
                           int NH, cudaStream_t stream);
// x (B, T, C) → out.
void attention_heads_of(std::uint16_t* out, const float* x, int B, int T, int C, int NH, cudaStream_t stream);
// heads (B, NH, T, hs) fp32 → the (B, T, C) columns of out, rows ld apart.
void attention_merge_heads(float* out, std::int64_t ld, const float* heads, int B, int T, int C, int NH,
                           cudaStream_t stream);
// P = exp(S - lse) on and below the diagonal, 0 above; lse per row. S holds scaled scores.
void attention_causal_softmax(std::uint16_t* P, float* lse, const float* S, std::int64_t rows, int T,
                              cudaStream_t stream);
// P as forward, D = rowsum(P ∘ dP), dS = P ∘ (dP - D).
void attention_causal_softmax_backward(std::uint16_t* P, std::uint16_t* dS, float* D, const float* S, const float* dP,
                                       const float* lse, std::int64_t rows, int T, cudaStream_t stream);

// elementwise.cu
// out (N, OC) rows = bias: the GEMM then accumulates onto it (beta = 1), as the CPU backend does.
void broadcast_rows(float* out, const float* bias, std::int64_t N, int OC, cudaStream_t stream);
void gelu_forward(float* out, const float* inp, std::int64_t n, cudaStream_t stream);
void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n, cudaStream_t stream);
void residual_forward(float* out, const float* a, const float* b, std::int64_t n, cudaStream_t stream);
void scale(float* x, std::int64_t n, float factor, cudaStream_t stream);
// bf16 bits, rounded to nearest even.
void to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t stream);

// crossentropy.cu: logits, probs, dlogits (N, Vp); probs may be logits.
void crossentropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                          std::int64_t N, int V, int Vp, cudaStream_t stream);
void crossentropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, float dloss,
                           std::int64_t N, int Vp, cudaStream_t stream);

// adamw.cu: one step over `segment_count` segments (host memory) of the flat buffers params and
// grads (at param_offset) and m and v (at moment_offset), fp32 master weights and moments. One
// fused sweep per element, all segments in a few multi-tensor launches.
void adamw_update(float* params, const float* grads, float* m, float* v, const AdamWSegment* segments,
                  std::size_t segment_count, const AdamWHyper& hyper, cudaStream_t stream);

// reductions.cu
// dbias += column sums of dout (N, OC); column_scratch holds column_chunks(N) · OC floats.
void add_column_sums(float* dbias, const float* dout, std::int64_t N, int OC, float* column_scratch,
                     cudaStream_t stream);
// *result = sum of x² accumulated in double; partials holds reduce_blocks(n) doubles.
void sum_of_squares(double* result, const float* x, std::int64_t n, double* partials, cudaStream_t stream);

}  // namespace troupe::compute::cuda
