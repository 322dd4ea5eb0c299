// The sim backend's ops (sim_backend.hpp): each one's FLOPs and bytes from its tensors' shapes.

#include "compute/sim/sim_backend.hpp"

#include <algorithm>
#include <cstring>

namespace troupe::compute {
namespace {

double bytes_of(const Tensor& t) { return t.defined() ? static_cast<double>(t.nbytes()) : 0.0; }

template <typename... Tensors>
double bytes_of(const Tensor& first, const Tensors&... rest) {
  return (bytes_of(first) + ... + bytes_of(rest));
}

double elements(const Tensor& t) { return static_cast<double>(t.numel()); }

// Rows and width of a linear layer's input (rows, C) against its weight (OC, C).
double product_flops(const Tensor& inp, const Tensor& weight) {
  const double rows = elements(inp) / static_cast<double>(inp.dim(-1));
  return 2.0 * rows * elements(weight);
}

// Causal attention over qkv (B, T, 3C): QKᵀ and PV over the lower triangle, 2·B·T²·C each half.
double attention_flops(const Tensor& qkv) {
  const double b = static_cast<double>(qkv.dim(0));
  const double t = static_cast<double>(qkv.dim(1));
  const double c = static_cast<double>(qkv.dim(2)) / 3.0;
  return 2.0 * b * t * t * c;
}

}  // namespace

void SimBackend::charge(double flops, double bytes) {
  clock_.spend(std::max(flops / options_.flops, bytes / options_.memory_bandwidth));
}

Tensor SimBackend::zeros(Shape shape, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (dtype == DType::i32 || bytes < Tensor::token_bytes_from) return Tensor::zeros(std::move(shape), dtype);
  return Tensor::token(std::move(shape), dtype);
}

void SimBackend::fill_zero(Tensor& t) {
  if (!t.is_token()) std::memset(t.data(), 0, t.nbytes());
  charge(0, bytes_of(t));
}

void SimBackend::copy(Tensor& dst, const Tensor& src) {
  TROUPE_CHECK(dst.numel() == src.numel() && dst.dtype() == src.dtype(),
               "copy: " + dst.describe() + " from " + src.describe());
  if (!dst.is_token()) std::memcpy(dst.data(), src.data(), src.nbytes());
  charge(0, bytes_of(dst, src));
}

void SimBackend::encoder_forward(Tensor& out, const Tensor& tokens, const Tensor&, const Tensor&) {
  charge(elements(out), 2 * bytes_of(out) + bytes_of(tokens));
}

void SimBackend::encoder_backward(Tensor&, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  // The scatter into dwte touches one row a token: as many bytes as dout again.
  charge(2 * elements(dout), 3 * bytes_of(dout) + bytes_of(tokens) + bytes_of(dwpe));
}

void SimBackend::layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                                   const Tensor& bias) {
  charge(8 * elements(inp), bytes_of(out, mean, rstd, inp, weight, bias));
}

void SimBackend::layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                          const Tensor& mean, const Tensor& rstd) {
  charge(8 * elements(inp), bytes_of(dinp, dout, inp, weight, mean, rstd) + bytes_of(dinp));
}

void SimBackend::layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                           const Tensor& mean, const Tensor& rstd) {
  charge(4 * elements(inp), bytes_of(dweight, dbias, dout, inp, mean, rstd) + bytes_of(dweight, dbias));
}

void SimBackend::matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  charge(product_flops(inp, weight), bytes_of(out, inp, weight, bias));
}

void SimBackend::matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                         const Tensor& residual) {
  charge(product_flops(inp, weight) + elements(out), bytes_of(out, inp, weight, bias, residual));
}

void SimBackend::matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) {
  charge(product_flops(dinp, weight), bytes_of(dinp, dout, weight));
}

void SimBackend::matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) {
  charge(product_flops(inp, dweight) + (dbias.defined() ? elements(dout) : 0),
         2 * bytes_of(dweight) + bytes_of(dout, inp, dbias));
}

void SimBackend::attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int) {
  charge(attention_flops(qkv), bytes_of(out, att, qkv));
}

void SimBackend::attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv,
                                    const Tensor& att, int) {
  // The backward recomputes the probabilities (flash-style), then forms dV, dP, dQ and dK.
  charge(2.5 * attention_flops(qkv), bytes_of(dqkv, datt, dout, qkv, att));
}

void SimBackend::gelu_forward(Tensor& out, const Tensor& inp) { charge(8 * elements(inp), bytes_of(out, inp)); }

void SimBackend::gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  charge(16 * elements(inp), bytes_of(dinp, inp, dout));
}

void SimBackend::gelu_bias_backward(Tensor& dinp, Tensor& dbias, const Tensor& inp, const Tensor& dout) {
  charge(17 * elements(inp), bytes_of(dinp, inp, dout) + 2 * bytes_of(dbias));
}

void SimBackend::bias_backward(Tensor& dbias, const Tensor& dout) {
  charge(elements(dout), bytes_of(dout) + 2 * bytes_of(dbias));
}

void SimBackend::residual_forward(Tensor& out, const Tensor& a, const Tensor& b) {
  charge(elements(out), bytes_of(out, a, b));
}

void SimBackend::crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets, int) {
  charge(4 * elements(logits), bytes_of(losses, probs, logits, targets));
}

void SimBackend::crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float) {
  charge(2 * elements(probs), bytes_of(dlogits, probs, targets));
}

void SimBackend::encoder_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe, int,
                                       bool) {
  encoder_forward(out, tokens, wte, wpe);
}

void SimBackend::encoder_shard_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens, int) {
  encoder_backward(dwte, dwpe, dout, tokens);
}

void SimBackend::crossentropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets, int, int) {
  charge(3 * elements(logits), bytes_of(stats, logits, targets));
}

void SimBackend::crossentropy_shard_forward(Tensor& losses, Tensor& probs, const Tensor& logits,
                                            const Tensor& all_stats, int, int) {
  charge(2 * elements(logits), bytes_of(losses, probs, logits, all_stats));
}

void SimBackend::crossentropy_shard_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, int, float) {
  crossentropy_backward(dlogits, probs, targets, 0);
}

void SimBackend::adamw_update(Tensor& params, const Tensor&, Tensor& m, Tensor&, std::span<const AdamWSegment> segments,
                              const AdamWHyper&) {
  double count = 0;
  for (const AdamWSegment& segment : segments) count += static_cast<double>(segment.count);
  // Reads parameter, gradient and both moments; writes the parameter and both moments back.
  const double element_bytes =
      3 * static_cast<double>(dtype_size(params.dtype())) + 4 * static_cast<double>(dtype_size(m.dtype()));
  charge(12 * count, count * element_bytes);
}

double SimBackend::sum_of_squares(const Tensor& t) {
  charge(2 * elements(t), bytes_of(t));
  return 0;
}

void SimBackend::scale(Tensor& t, float) { charge(elements(t), 2 * bytes_of(t)); }

}  // namespace troupe::compute
