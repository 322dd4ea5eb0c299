// Each op: check shapes and dtypes (backend_checks.hpp, as the CPU backend does), then enqueue
// its kernels (kernels/kernels.hpp) or cuBLAS GEMMs on the backend's stream.
//
// GEMMs. Tensors are row-major and cuBLAS is column-major; a row-major (R, C) matrix is the
// column-major (C, R) one, so each product is taken transposed:
//   out (N,OC) = inp · Wᵀ       →  outᵀ (OC,N) = W_cm(C,OC)ᵀ · inpᵀ        gemm(T, N, OC, N, C)
//   dinp (N,C) = dout · W       →  dinpᵀ (C,N) = W_cm(C,OC) · doutᵀ         gemm(N, N, C, N, OC)
//   dW (OC,C) += doutᵀ · inp    →  dWᵀ (C,OC) += inpᵀ · dout_cm(OC,N)ᵀ      gemm(N, T, C, OC, N)
//
// Attention in the bf16 mode, per (sequence, head) pair, Q K V dO (T,hs) and S P dP dS (T,T):
//   S (T,T) = scale · Q · Kᵀ   →  Sᵀ = K_cm(hs,T)ᵀ · Q_cm(hs,T)            gemm(T, N, T, T, hs)
//   dP = dO · Vᵀ               →  likewise with V and dO                    gemm(T, N, T, T, hs)
//   Y (T,hs) = P · V           →  Yᵀ = V_cm(hs,T) · P_cm(T,T)               gemm(N, N, hs, T, T)
//   dV = Pᵀ · dO               →  dVᵀ = dO_cm(hs,T) · P_cm(T,T)ᵀ            gemm(N, T, hs, T, T)
//   dQ = scale · dS · K        →  dQᵀ = K_cm(hs,T) · dS_cm(T,T)             gemm(N, N, hs, T, T)
//   dK = scale · dSᵀ · Q       →  dKᵀ = Q_cm(hs,T) · dS_cm(T,T)ᵀ            gemm(N, T, hs, T, T)

#include "compute/cuda/cuda_backend.hpp"

#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "compute/backend_checks.hpp"
#include "compute/cuda/cublas_api.hpp"
#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/device.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute {
namespace {

using checks::op_prefix;

// Every tensor defined, on the device, and f32.
void check_f32(const char* op, std::initializer_list<const Tensor*> tensors) {
  const DType dtype = checks::same_device_and_dtype(Device::cuda, op, tensors);
  TROUPE_CHECK(dtype == DType::f32, op_prefix(op) + "the cuda backend computes in f32 (f64 runs on the cpu backend), got " +
                                        (*tensors.begin())->describe());
}

void check_ids(const Tensor& ids, std::int64_t count, const char* op) {
  checks::on_device(ids, Device::cuda, op);
  check_dtype(ids, DType::i32, op);
  checks::numel(ids, count, op);
}

float* f32(const Tensor& t) { return t.data_as<float>(); }

void free_device(void* p) { cudaFree(p); }

// The bf16 mode's attention keeps at most this many bytes of fp32 (T, T) scores at a time (two
// such buffers in backward, and half as much again for each bf16 one): heads go in chunks.
constexpr std::int64_t kAttentionScoreBytes = std::int64_t{256} << 20;

// The sizes the bf16 attention's batched GEMMs work in: heads of hs channels, B·NH (batch, head)
// pairs, each a (T, hs) head and (T, T) scores, `chunk` pairs at a time.
struct AttentionGemmShape {
  int hs;
  float scale;  // 1/√hs
  std::int64_t n, pairs, head, scores, chunk;
};

AttentionGemmShape attention_gemm_shape(int B, int T, int C, int NH) {
  AttentionGemmShape g{};
  g.hs = C / NH;
  g.scale = 1.0f / std::sqrt(static_cast<float>(g.hs));
  g.n = std::int64_t{B} * T * C;
  g.pairs = std::int64_t{B} * NH;
  g.head = std::int64_t{T} * g.hs;
  g.scores = std::int64_t{T} * T;
  const std::int64_t per_pair = g.scores * static_cast<std::int64_t>(sizeof(float));
  g.chunk = std::clamp<std::int64_t>(kAttentionScoreBytes / per_pair, 1, g.pairs);
  return g;
}

}  // namespace

CudaBackend::Scratch::~Scratch() {
  if (data_ != nullptr) cudaFree(data_);
}

void* CudaBackend::Scratch::get(std::size_t bytes, cudaStream_t stream) {
  if (bytes > bytes_) {
    TROUPE_CUDA_CHECK(cudaStreamSynchronize(stream));  // earlier ops may still read the old buffer
    if (data_ != nullptr) TROUPE_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    TROUPE_CUDA_CHECK(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
  }
  return data_;
}

Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(Precision precision) {
  auto device = cuda_device();
  if (!device) return device.error();
  cudaStream_t stream = nullptr;
  if (const cudaError_t status = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); status != cudaSuccess)
    return Error{std::string("CUDA backend on ") + *device + ": cudaStreamCreate: " + cudaGetErrorString(status)};
  auto api = cublas_api();
  if (!api) {
    cudaStreamDestroy(stream);
    return Error{std::string("CUDA backend on ") + *device + ": " + api.error().message};
  }
  cublasHandle_t cublas = nullptr;
  if (const cublasStatus_t status = (*api)->create(&cublas); status != CUBLAS_STATUS_SUCCESS) {
    cudaStreamDestroy(stream);
    return Error{std::string("CUDA backend on ") + *device + ": cublasCreate: " + (*api)->status_string(status)};
  }
  TROUPE_CUBLAS_CHECK((*api)->set_stream(cublas, stream));
  return std::unique_ptr<CudaBackend>(new CudaBackend(precision, stream, cublas));
}

CudaBackend::CudaBackend(Precision precision, cudaStream_t stream, cublasHandle_t cublas)
    : precision_(precision), stream_(stream), cublas_(cublas) {}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  cublas().destroy(cublas_);
  cudaStreamDestroy(stream_);
}

void CudaBackend::synchronize() { TROUPE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Tensor CudaBackend::zeros(Shape shape, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = nullptr;
  TROUPE_CUDA_CHECK(cudaMalloc(&p, bytes == 0 ? 256 : bytes));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  return Tensor::adopt(p, std::move(shape), dtype, Device::cuda, free_device);
}

void CudaBackend::fill_zero(Tensor& t) {
  checks::on_device(t, Device::cuda, "fill_zero");
  TROUPE_CUDA_CHECK(cudaMemsetAsync(t.data(), 0, t.nbytes(), stream_));
}

void CudaBackend::copy(Tensor& dst, const Tensor& src) {
  TROUPE_CHECK(dst.defined() && src.defined(), "copy: undefined tensor");
  check_dtype(dst, src.dtype(), "copy");
  checks::numel(dst, src.numel(), "copy");
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), src.nbytes(), cudaMemcpyDefault, stream_));
  // Host memory is the caller's again when copy returns.
  if (dst.device() == Device::cpu || src.device() == Device::cpu) synchronize();
}

void CudaBackend::encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  constexpr const char* op = "encoder_forward";
  check_f32(op, {&out, &wte, &wpe});
  const auto [B, T, C] = checks::encoder(tokens, wte, wpe, out, op);
  check_ids(tokens, std::int64_t{B} * T, op);
  cuda::encoder_forward(f32(out), tokens.data_as<std::int32_t>(), f32(wte), f32(wpe), B, T, C,
                        checks::to_int(wte.dim(0), op), stream_);
}

void CudaBackend::encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  constexpr const char* op = "encoder_backward";
  check_f32(op, {&dout, &dwte, &dwpe});
  const auto [B, T, C] = checks::encoder(tokens, dwte, dwpe, dout, op);
  check_ids(tokens, std::int64_t{B} * T, op);
  const std::int64_t positions = std::int64_t{B} * T;
  cuda::encoder_backward(f32(dwte), f32(dwpe), f32(dout), tokens.data_as<std::int32_t>(), B, T, C,
                         checks::to_int(dwte.dim(0), op),
                         token_order_.get(cuda::encoder_backward_scratch_bytes(positions), stream_), stream_);
}

void CudaBackend::layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                                    const Tensor& bias) {
  constexpr const char* op = "layernorm_forward";
  check_f32(op, {&inp, &out, &mean, &rstd, &weight, &bias});
  const auto [N, C] = checks::layernorm(inp, {&out}, {&mean, &rstd}, {&weight, &bias}, op);
  cuda::layernorm_forward(f32(out), f32(mean), f32(rstd), f32(inp), f32(weight), f32(bias), N, C, stream_);
}

void CudaBackend::layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                           const Tensor& mean, const Tensor& rstd) {
  constexpr const char* op = "layernorm_backward_input";
  check_f32(op, {&inp, &dinp, &dout, &weight, &mean, &rstd});
  const auto [N, C] = checks::layernorm(inp, {&dinp, &dout}, {&mean, &rstd}, {&weight}, op);
  cuda::layernorm_backward_input(f32(dinp), f32(dout), f32(inp), f32(weight), f32(mean), f32(rstd), N, C, stream_);
}

void CudaBackend::layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                            const Tensor& mean, const Tensor& rstd) {
  constexpr const char* op = "layernorm_backward_params";
  check_f32(op, {&inp, &dweight, &dbias, &dout, &mean, &rstd});
  const auto [N, C] = checks::layernorm(inp, {&dout}, {&mean, &rstd}, {&dweight, &dbias}, op);
  cuda::layernorm_backward_params(f32(dweight), f32(dbias), f32(dout), f32(inp), f32(mean), f32(rstd), N, C,
                                  column_scratch(2 * cuda::column_chunks(N) * C), stream_);
}

CudaBackend::Operand CudaBackend::operand(const Tensor& t, int slot) {
  if (precision_ == Precision::fp32) return {t.data(), CUDA_R_32F};
  auto* bf16 = static_cast<std::uint16_t*>(
      bf16_scratch_[slot].get(static_cast<std::size_t>(t.numel()) * sizeof(std::uint16_t), stream_));
  cuda::to_bf16(bf16, f32(t), t.numel(), stream_);
  return {bf16, CUDA_R_16BF};
}

void CudaBackend::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, Operand a, int lda, Operand b, int ldb,
                       float beta, float* c, int ldc) {
  const float one = 1.0f;
  TROUPE_CUBLAS_CHECK(cublas().gemm_ex(cublas_, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, a.data, a.type, lda, b.data,
                                   b.type, ldb, &beta, c, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  constexpr const char* op = "matmul_forward";
  if (bias.defined())
    check_f32(op, {&inp, &out, &weight, &bias});
  else
    check_f32(op, {&inp, &out, &weight});
  const auto [N, C, OC] = checks::matmul(out, inp, weight, bias, op);
  if (N == 0) return;
  if (bias.defined()) cuda::broadcast_rows(f32(out), f32(bias), N, OC, stream_);
  gemm(true, false, OC, N, C, operand(weight, 0), C, operand(inp, 1), C, bias.defined() ? 1.0f : 0.0f, f32(out), OC);
}

void CudaBackend::matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) {
  constexpr const char* op = "matmul_backward_input";
  check_f32(op, {&dinp, &dout, &weight});
  const auto [N, C, OC] = checks::matmul(dout, dinp, weight, Tensor{}, op);
  if (N == 0) return;
  gemm(false, false, C, N, OC, operand(weight, 0), C, operand(dout, 1), OC, 0.0f, f32(dinp), C);
}

void CudaBackend::matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) {
  constexpr const char* op = "matmul_backward_weights";
  if (dbias.defined())
    check_f32(op, {&inp, &dweight, &dbias, &dout});
  else
    check_f32(op, {&inp, &dweight, &dout});
  const auto [N, C, OC] = checks::matmul(dout, inp, dweight, dbias, op);
  if (N == 0) return;
  gemm(false, true, C, OC, N, operand(inp, 2), C, operand(dout, 1), OC, 1.0f, f32(dweight), C);
  if (dbias.defined()) bias_backward(dbias, dout);
}

void CudaBackend::bias_backward(Tensor& dbias, const Tensor& dout) {
  constexpr const char* op = "bias_backward";
  check_f32(op, {&dout, &dbias});
  const auto [N, width] = checks::column_sums(dbias, dout, op);
  if (N == 0) return;
  cuda::add_column_sums(f32(dbias), f32(dout), N, width, column_scratch(cuda::column_chunks(N) * width), stream_);
}

void CudaBackend::attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) {
  constexpr const char* op = "attention_forward";
  check_f32(op, {&qkv, &out, &att});
  const auto [B, T, C] = checks::attention(qkv, out, n_head, op);
  checks::shape(att, attention_state_shape(B, n_head, T), op);
  if (precision_ == Precision::bf16)
    attention_forward_bf16(f32(out), f32(att), f32(qkv), B, T, C, n_head);
  else
    cuda::attention_forward(f32(out), f32(att), f32(qkv), B, T, C, n_head, stream_);
}

void CudaBackend::attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv,
                                     const Tensor& att, int n_head) {
  constexpr const char* op = "attention_backward";
  check_f32(op, {&qkv, &dqkv, &datt, &dout, &att});
  const auto [B, T, C] = checks::attention(qkv, dout, n_head, op);
  checks::shape(att, attention_state_shape(B, n_head, T), op);
  check_same_shape(dqkv, qkv, op);
  check_same_shape(datt, att, op);
  if (precision_ == Precision::bf16)
    attention_backward_bf16(f32(dqkv), f32(datt), f32(dout), f32(qkv), f32(att), B, T, C, n_head);
  else
    cuda::attention_backward(f32(dqkv), f32(datt), f32(dout), f32(qkv), f32(att), B, T, C, n_head, stream_);
}

void CudaBackend::batched_gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha,
                               const std::uint16_t* a, int lda, std::int64_t stride_a, const std::uint16_t* b, int ldb,
                               std::int64_t stride_b, float* c, int ldc, std::int64_t stride_c, std::int64_t count) {
  const float zero = 0.0f;
  TROUPE_CUBLAS_CHECK(cublas().gemm_strided_batched_ex(
      cublas_, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a,
      CUDA_R_16BF, lda, stride_a, b, CUDA_R_16BF, ldb, stride_b, &zero, c, CUDA_R_32F, ldc, stride_c,
      static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::attention_forward_bf16(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  if (B == 0 || T == 0) return;
  const auto [hs, scale, n, pairs, head, scores, chunk] = attention_gemm_shape(B, T, C, NH);
  auto* q = static_cast<std::uint16_t*>(attention_heads_.get(3 * n * sizeof(std::uint16_t), stream_));
  std::uint16_t* k = q + n;
  std::uint16_t* v = k + n;
  cuda::attention_split_heads(q, k, v, qkv, B, T, C, NH, stream_);
  auto* y = static_cast<float*>(attention_outputs_.get(n * sizeof(float), stream_));
  auto* s = static_cast<float*>(attention_scores_[0].get(chunk * scores * sizeof(float), stream_));
  auto* p = static_cast<std::uint16_t*>(attention_probs_.get(chunk * scores * sizeof(std::uint16_t), stream_));
  for (std::int64_t first = 0; first < pairs; first += chunk) {
    const std::int64_t count = std::min(chunk, pairs - first), at = first * head;
    batched_gemm(true, false, T, T, hs, scale, k + at, hs, head, q + at, hs, head, s, T, scores, count);
    cuda::attention_causal_softmax(p, lse + first * T, s, count * T, T, stream_);
    batched_gemm(false, false, hs, T, T, 1.0f, v + at, hs, head, p, T, scores, y + at, hs, head, count);
  }
  cuda::attention_merge_heads(out, C, y, B, T, C, NH, stream_);
}

void CudaBackend::attention_backward_bf16(float* dqkv, float* rowdot, const float* dout, const float* qkv,
                                          const float* lse, int B, int T, int C, int NH) {
  if (B == 0 || T == 0) return;
  const auto [hs, scale, n, pairs, head, scores, chunk] = attention_gemm_shape(B, T, C, NH);
  auto* q = static_cast<std::uint16_t*>(attention_heads_.get(4 * n * sizeof(std::uint16_t), stream_));
  std::uint16_t* k = q + n;
  std::uint16_t* v = k + n;
  std::uint16_t* dy = v + n;
  cuda::attention_split_heads(q, k, v, qkv, B, T, C, NH, stream_);
  cuda::attention_heads_of(dy, dout, B, T, C, NH, stream_);
  auto* dq = static_cast<float*>(attention_outputs_.get(3 * n * sizeof(float), stream_));
  float* dk = dq + n;
  float* dv = dk + n;
  auto* s = static_cast<float*>(attention_scores_[0].get(chunk * scores * sizeof(float), stream_));
  auto* dp = static_cast<float*>(attention_scores_[1].get(chunk * scores * sizeof(float), stream_));
  auto* p = static_cast<std::uint16_t*>(attention_probs_.get(2 * chunk * scores * sizeof(std::uint16_t), stream_));
  std::uint16_t* ds = p + chunk * scores;
  for (std::int64_t first = 0; first < pairs; first += chunk) {
    const std::int64_t count = std::min(chunk, pairs - first), at = first * head;
    batched_gemm(true, false, T, T, hs, scale, k + at, hs, head, q + at, hs, head, s, T, scores, count);
    batched_gemm(true, false, T, T, hs, 1.0f, v + at, hs, head, dy + at, hs, head, dp, T, scores, count);
    cuda::attention_causal_softmax_backward(p, ds, rowdot + first * T, s, dp, lse + first * T, count * T, T, stream_);
    batched_gemm(false, true, hs, T, T, 1.0f, dy + at, hs, head, p, T, scores, dv + at, hs, head, count);
    batched_gemm(false, false, hs, T, T, scale, k + at, hs, head, ds, T, scores, dq + at, hs, head, count);
    batched_gemm(false, true, hs, T, T, scale, q + at, hs, head, ds, T, scores, dk + at, hs, head, count);
  }
  cuda::attention_merge_heads(dqkv, 3LL * C, dq, B, T, C, NH, stream_);
  cuda::attention_merge_heads(dqkv + C, 3LL * C, dk, B, T, C, NH, stream_);
  cuda::attention_merge_heads(dqkv + 2 * C, 3LL * C, dv, B, T, C, NH, stream_);
}

void CudaBackend::gelu_forward(Tensor& out, const Tensor& inp) {
  constexpr const char* op = "gelu_forward";
  check_f32(op, {&inp, &out});
  check_same_shape(out, inp, op);
  cuda::gelu_forward(f32(out), f32(inp), inp.numel(), stream_);
}

void CudaBackend::gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  constexpr const char* op = "gelu_backward";
  check_f32(op, {&inp, &dinp, &dout});
  check_same_shape(dinp, inp, op);
  check_same_shape(dout, inp, op);
  cuda::gelu_backward(f32(dinp), f32(inp), f32(dout), inp.numel(), stream_);
}

void CudaBackend::residual_forward(Tensor& out, const Tensor& a, const Tensor& b) {
  constexpr const char* op = "residual_forward";
  check_f32(op, {&a, &b, &out});
  check_same_shape(a, b, op);
  check_same_shape(out, a, op);
  cuda::residual_forward(f32(out), f32(a), f32(b), a.numel(), stream_);
}

void CudaBackend::crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                                       int vocab_size) {
  constexpr const char* op = "crossentropy_forward";
  check_f32(op, {&logits, &probs, &losses});
  const auto [N, Vp] = checks::crossentropy_forward(losses, probs, logits, vocab_size, op);
  check_ids(targets, N, op);
  cuda::crossentropy_forward(f32(losses), f32(probs), f32(logits), targets.data_as<std::int32_t>(), N, vocab_size, Vp,
                             stream_);
}

void CudaBackend::crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) {
  constexpr const char* op = "crossentropy_backward";
  check_f32(op, {&probs, &dlogits});
  const auto [N, Vp] = checks::crossentropy_backward(dlogits, probs, op);
  check_ids(targets, N, op);
  cuda::crossentropy_backward(f32(dlogits), f32(probs), targets.data_as<std::int32_t>(), dloss, N, Vp, stream_);
}

void CudaBackend::adamw_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                               std::span<const AdamWSegment> segments, const AdamWHyper& hyper) {
  constexpr const char* op = "adamw_update";
  check_f32(op, {&params, &grads, &m, &v});
  checks::adamw(params, grads, m, v, segments, hyper, op);
  cuda::adamw_update(f32(params), f32(grads), f32(m), f32(v), segments.data(), segments.size(), hyper, stream_);
}

double CudaBackend::sum_of_squares(const Tensor& t) {
  check_f32("sum_of_squares", {&t});
  auto* partials = static_cast<double*>(
      reduce_scratch_.get((static_cast<std::size_t>(cuda::kMaxReduceBlocks) + 1) * sizeof(double), stream_));
  double* result = partials + cuda::kMaxReduceBlocks;
  cuda::sum_of_squares(result, f32(t), t.numel(), partials, stream_);
  double host = 0;
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(&host, result, sizeof host, cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return host;
}

void CudaBackend::scale(Tensor& t, float factor) {
  check_f32("scale", {&t});
  cuda::scale(f32(t), t.numel(), factor, stream_);
}

float* CudaBackend::column_scratch(std::int64_t floats) {
  return static_cast<float*>(column_scratch_.get(static_cast<std::size_t>(floats) * sizeof(float), stream_));
}

}  // namespace troupe::compute
