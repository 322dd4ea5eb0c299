#pragma once
// The CPU backend: checks each call's shapes and dtypes, then runs the f32 or f64 kernel of
// compute/cpu/cpu_kernels.hpp. Matmuls run on OpenBLAS with `threads` threads. The other kernels
// that grow with the batch (attention by head, LayerNorm by row or column, GELU, the residual,
// AdamW and the clip's scale by element, bias gradients and GELU's backward with one by column, a
// product's starting rows by row) run on the backend's own team of `threads` threads,
// split so that the result does not depend on the thread count; the attention's per-head GEMMs
// then run on one OpenBLAS thread each. The small or reducing ones (encoder, cross-entropy, the
// sum of squares) run on the calling thread.
//
// Under train.precision bf16 the f32 linear layers' products (matmul_forward, its residual form and
// both backward products) run with bf16 operands and f32 sums (bf16_products.hpp); everything
// else, f64 included, is as under fp32.

#include <initializer_list>
#include <memory>

#include "compute/backend.hpp"
#include "compute/cpu/bf16_products.hpp"

namespace troupe::compute {

namespace cpu {
class ThreadTeam;
}

class CpuBackend final : public Backend {
 public:
  // threads: OpenBLAS threads, 0 = one per hardware thread. Under bf16 the products run on this
  // CPU's BF16 units where they beat its fp32 FMAs (bf16_units_of_this_cpu), else emulated (tests
  // force either to check both paths).
  explicit CpuBackend(int threads, Precision precision = Precision::fp32);
  CpuBackend(int threads, Precision precision, cpu::Bf16Units units);
  ~CpuBackend() override;

  Device device() const override { return Device::cpu; }
  // "cpu", or under bf16 with how it multiplies: "cpu, bf16 products on avx512_core_bf16 (oneDNN)",
  // or "cpu, bf16 products emulated in fp32 (…)" with bf16_emulation_reason().
  std::string name() const override;
  int threads() const { return threads_; }
  Precision precision() const { return precision_; }

  Tensor zeros(Shape shape, DType dtype) override;
  void fill_zero(Tensor& t) override;
  void copy(Tensor& dst, const Tensor& src) override;
  void store(Tensor& stored, const Tensor& values) override;
  // Under bf16: 2 (bf16 copies for the BF16 units) or 4 (emulated: bf16 values kept in f32); else 0.
  std::size_t product_operand_bytes() const override;
  void reserve_product_operands(std::int64_t first, std::int64_t second) override;
  // Under bf16, bf16 for f32 models. layernorm_forward, matmul_forward (without a residual),
  // attention_forward and gelu_forward then write such an output, computed in f32 and rounded to
  // nearest even; the products take one as an operand as it lies (the input of matmul_forward,
  // matmul_residual_forward and matmul_backward_weights); attention_forward and attention_backward
  // read qkv, gelu_forward and gelu_bias_backward their input, widened to f32.
  DType activation_storage_dtype(DType params) const override;

  void encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) override;
  void encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) override;
  void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                         const Tensor& bias) override;
  void layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                const Tensor& mean, const Tensor& rstd) override;
  void layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                 const Tensor& mean, const Tensor& rstd) override;
  void matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) override;
  void matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                               const Tensor& residual) override;
  void matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) override;
  void matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) override;
  // cpu_backend_grouped.cpp: f32 or f64 tensors (under bf16 f32 ones: the products round them).
  void grouped_matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                              std::span<const std::int64_t> rows_of) override;
  void grouped_matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight,
                                     std::span<const std::int64_t> rows_of) override;
  void grouped_matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                       std::span<const std::int64_t> rows_of) override;
  void attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) override;
  void attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv, const Tensor& att,
                          int n_head) override;
  void gelu_forward(Tensor& out, const Tensor& inp) override;
  void gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) override;
  void gelu_bias_backward(Tensor& dinp, Tensor& dbias, const Tensor& inp, const Tensor& dout) override;
  void bias_backward(Tensor& dbias, const Tensor& dout) override;
  void residual_forward(Tensor& out, const Tensor& a, const Tensor& b) override;
  void crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                            int vocab_size) override;
  void crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) override;
  void encoder_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe, int vocab_begin,
                             bool add_positions) override;
  void encoder_shard_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                              int vocab_begin) override;
  void crossentropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets, int vocab_begin,
                                int vocab_size) override;
  void crossentropy_shard_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& all_stats,
                                  int vocab_begin, int vocab_size) override;
  void crossentropy_shard_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, int vocab_begin,
                                   float dloss) override;

  void adamw_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v, std::span<const AdamWSegment> segments,
                    const AdamWHyper& hyper) override;
  double sum_of_squares(const Tensor& t) override;
  void scale(Tensor& t, float factor) override;

 private:
  void linear_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                      int N, int C, int OC, DType dtype);
  // fn(multiply) for the grouped products of operands a and b (cpu_backend_grouped.cpp).
  template <typename Fn>
  void with_grouped_products(DType dtype, const Tensor& a, const Tensor& b, Fn&& fn);
  // The bf16 products, when the precision asks for them and the tensors are f32; else null.
  cpu::Bf16Products* bf16_for(DType dtype) const;
  // The dtype of a product's tensors: `rest` all f32 or all f64, `stored` (the activation
  // operand) of theirs, or bf16 where the bf16 products multiply it.
  DType product_dtype(const char* op, const Tensor& stored, std::initializer_list<const Tensor*> rest) const;

  int threads_;
  Precision precision_;
  std::unique_ptr<cpu::ThreadTeam> team_;
  std::unique_ptr<cpu::Bf16Products> bf16_;  // under bf16 only
};

}  // namespace troupe::compute
