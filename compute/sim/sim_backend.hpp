#pragma once
// The sim backend (train.backend sim): every op takes the time its FLOPs and bytes would take on
// the modelled device (sim_options.hpp), the larger of the two as a roofline has it, and does no
// arithmetic. Its floating-point tensors of Tensor::token_bytes_from bytes or more (below it a
// tensor costs less as memory than as a mapping of its own) are token tensors
// (compute/tensor.hpp): shape and dtype, no memory, messages of their size alone, so a rank of a
// 13B model costs kilobytes; copies into them and fills of them only take their time. The others
// (token ids, targets, losses, the few small tensors) are ordinary zero-filled CPU tensors that
// nothing but copies, the comm engine and the data loader write. A sim run's losses and norms are
// therefore 0; what is real is the runtime around the ops: the schedule's order, the messages and
// the control plane (docs/scale.md).

#include "compute/backend.hpp"
#include "compute/sim/modelled_clock.hpp"
#include "compute/sim/sim_options.hpp"

namespace troupe::compute {

class SimBackend final : public Backend {
 public:
  explicit SimBackend(const SimOptions& options) : options_(options) {}

  Device device() const override { return Device::cpu; }
  std::string name() const override { return "sim"; }
  // The modelled seconds of every op so far.
  double modelled_seconds() const { return clock_.total_seconds(); }

  Tensor zeros(Shape shape, DType dtype) override;
  void fill_zero(Tensor& t) override;
  Tensor message_buffer(Shape shape, DType dtype) override { return zeros(std::move(shape), dtype); }
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
  void matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                               const Tensor& residual) override;
  void matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) override;
  void matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) override;
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
  // Charges an op of `flops` floating-point operations moving `bytes` through memory.
  void charge(double flops, double bytes);

  SimOptions options_;
  ModelledClock clock_;
};

}  // namespace troupe::compute
