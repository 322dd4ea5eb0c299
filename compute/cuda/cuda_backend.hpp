#pragma once
// The CUDA backend: every op of the Backend interface on the current device, enqueued on one
// stream in call order (so ops return at once; a host read, copy() to the cpu or
// sum_of_squares, waits for what came before). Checks shapes and dtypes like the CPU backend
// (backend_checks.hpp), then calls the launchers of kernels/kernels.hpp; GEMMs run on cuBLAS.
//
// It computes in f32 only (f64, for finite differences, stays on the cpu backend). Precision
// (train.precision, precision.hpp):
//   fp32  every op in fp32, GEMMs in fp32 (no TF32): equals the CPU backend to ~1e-6.
//   bf16  mixed precision: each GEMM's operands are rounded to bf16 and multiplied on tensor
//         cores with fp32 accumulation and fp32 output. Parameters (the master weights),
//         gradients, optimizer moments, activations as stored between layers, and every other op
//         (LayerNorm, attention, softmax, GELU, reductions) stay fp32. docs/gpu.md says more.
//
// Attention is flash-style (kernels/attention.cu): att holds one log-sum-exp per query row,
// (B, NH, T), not the (T, T) probabilities, which is the Backend's attention_state_shape.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "compute/backend.hpp"
#include "compute/precision.hpp"

namespace troupe::compute {

class CudaBackend final : public Backend {
 public:
  // A backend on the current device (cudaSetDevice first to choose one); an Error when there is
  // no usable device (see cuda/device.hpp) or its stream or cuBLAS cannot be set up.
  static Expected<std::unique_ptr<CudaBackend>> create(Precision precision);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::cuda; }
  std::string name() const override { return precision_ == Precision::fp32 ? "cuda" : "cuda, bf16 products"; }
  Precision precision() const { return precision_; }
  // The stream every op is enqueued on; a communicator orders its work after it with events.
  cudaStream_t stream() const { return stream_; }
  void synchronize();

  Tensor zeros(Shape shape, DType dtype) override;
  void fill_zero(Tensor& t) override;
  void copy(Tensor& dst, const Tensor& src) override;

  void encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) override;
  void encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) override;
  void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                         const Tensor& bias) override;
  void layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                const Tensor& mean, const Tensor& rstd) override;
  void layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                 const Tensor& mean, const Tensor& rstd) override;
  void matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) override;
  void matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) override;
  void matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) override;
  void attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) override;
  void attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv, const Tensor& att,
                          int n_head) override;
  void gelu_forward(Tensor& out, const Tensor& inp) override;
  void gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) override;
  void bias_backward(Tensor& dbias, const Tensor& dout) override;
  void residual_forward(Tensor& out, const Tensor& a, const Tensor& b) override;
  void crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                            int vocab_size) override;
  void crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) override;

  // All segments in a few multi-tensor launches (kernels/adamw.cu), not one launch per segment.
  void adamw_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, std::span<const AdamWSegment> segments,
                    const AdamWHyper& hyper) override;
  double sum_of_squares(const Tensor& t) override;
  void scale(Tensor& t, float factor) override;

 private:
  // Device memory reused across ops (safe: every op runs on the one stream, in order).
  class Scratch {
   public:
    ~Scratch();
    void* get(std::size_t bytes, cudaStream_t stream);  // grows (after a stream sync), never shrinks

   private:
    void* data_ = nullptr;
    std::size_t bytes_ = 0;
  };
  // A GEMM operand: fp32 as given, or its bf16 copy in the bf16 mode.
  struct Operand {
    const void* data;
    cudaDataType_t type;
  };

  CudaBackend(Precision precision, cudaStream_t stream, cublasHandle_t cublas);
  Operand operand(const Tensor& t, int slot);
  // Column-major C (m, n) = op(A) (m, k) · op(B) (k, n) + beta · C, fp32 C and accumulation.
  void gemm(bool transpose_a, bool transpose_b, int m, int n, int k, Operand a, int lda, Operand b, int ldb, float beta,
            float* c, int ldc);
  // Column-major C_i = alpha · op(A_i) · op(B_i) for `count` matrices at fixed strides; A and B
  // bf16, C fp32 (the bf16 mode's attention).
  void batched_gemm(bool transpose_a, bool transpose_b, int m, int n, int k, float alpha, const std::uint16_t* a,
                    int lda, std::int64_t stride_a, const std::uint16_t* b, int ldb, std::int64_t stride_b, float* c,
                    int ldc, std::int64_t stride_c, std::int64_t count);
  // The bf16 mode's attention: batched GEMMs on tensor cores with the (T, T) scores of a bounded
  // number of heads at a time in scratch (kernels/attention_gemm.cu).
  void attention_forward_bf16(float* out, float* lse, const float* qkv, int B, int T, int C, int NH);
  void attention_backward_bf16(float* dqkv, float* rowdot, const float* dout, const float* qkv, const float* lse, int B,
                               int T, int C, int NH);
  float* column_scratch(std::int64_t floats);

  Precision precision_;
  cudaStream_t stream_;
  cublasHandle_t cublas_;
  Scratch column_scratch_, reduce_scratch_, bf16_scratch_[3], token_order_;
  Scratch attention_heads_, attention_outputs_, attention_scores_[2], attention_probs_;
};

}  // namespace troupe::compute
