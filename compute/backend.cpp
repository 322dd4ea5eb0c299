// The vocabulary-shard ops a backend has not implemented: a job refuses tensor shards on such a
// backend before it trains, so reaching one is an internal bug.

#include "compute/backend.hpp"

namespace troupe::compute {

void Backend::no_shard_kernels(const char* op) const {
  TROUPE_CHECK(false, std::string(op) + ": the " + name() + " backend has no vocabulary-shard kernels (tensor shards run on cpu)");
}

void Backend::matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                      const Tensor& residual) {
  matmul_forward(out, inp, weight, bias);
  residual_forward(out, residual, out);
}

void Backend::layernorm_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                 const Tensor& weight, const Tensor& mean, const Tensor& rstd) {
  layernorm_backward_input(dinp, dout, inp, weight, mean, rstd);
  layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd);
}

void Backend::matmul_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                              const Tensor& weight) {
  matmul_backward_input(dinp, dout, weight);
  matmul_backward_weights(dweight, dbias, dout, inp);
}

void Backend::gelu_bias_backward(Tensor& dinp, Tensor& dbias, const Tensor& inp, const Tensor& dout) {
  gelu_backward(dinp, inp, dout);
  bias_backward(dbias, dinp);
}

void Backend::encoder_shard_forward(Tensor&, const Tensor&, const Tensor&, const Tensor&, int, bool) {
  no_shard_kernels("encoder_shard_forward");
}

void Backend::encoder_shard_backward(Tensor&, Tensor&, const Tensor&, const Tensor&, int) {
  no_shard_kernels("encoder_shard_backward");
}

void Backend::crossentropy_shard_stats(Tensor&, const Tensor&, const Tensor&, int, int) {
  no_shard_kernels("crossentropy_shard_stats");
}

void Backend::crossentropy_shard_forward(Tensor&, Tensor&, const Tensor&, const Tensor&, int, int) {
  no_shard_kernels("crossentropy_shard_forward");
}

void Backend::crossentropy_shard_backward(Tensor&, const Tensor&, const Tensor&, int, float) {
  no_shard_kernels("crossentropy_shard_backward");
}

}  // namespace troupe::compute
