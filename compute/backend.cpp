// Backend's default ops: the composite ones as their parts (a backend may fuse them), the grouped
// products as one product per expert, and the vocabulary-shard ops of a backend that runs no
// tensor shards, which fail loudly: a job refuses tensor shards on such a backend before it
// trains, so reaching one is an internal bug.

#include "compute/backend.hpp"

#include "compute/backend_checks.hpp"

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

namespace {

// fn(e, lo, hi) for each expert e with rows, its rows [lo, hi) of rows grouped by expert.
template <typename Fn>
void for_each_group(std::span<const std::int64_t> rows_of, Fn&& fn) {
  std::int64_t lo = 0;
  for (std::size_t e = 0; e < rows_of.size(); lo += rows_of[e], ++e)
    if (rows_of[e] > 0) fn(static_cast<std::int64_t>(e), lo, lo + rows_of[e]);
}

Tensor rows(const Tensor& buffer, std::int64_t lo, std::int64_t hi, std::int64_t width) {
  return buffer.slice(lo * width, {hi - lo, width});
}

// Expert e's (OC, C) weight, or (OC) bias (undefined where the stacked one is).
Tensor expert_weight(const Tensor& stacked, std::int64_t e) {
  const std::int64_t OC = stacked.dim(1), C = stacked.dim(2);
  return stacked.slice(e * OC * C, {OC, C});
}
Tensor expert_bias(const Tensor& stacked, std::int64_t e) {
  return stacked.defined() ? stacked.slice(e * stacked.dim(1), {stacked.dim(1)}) : Tensor{};
}

}  // namespace

void Backend::grouped_matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                     std::span<const std::int64_t> rows_of) {
  const auto dims = checks::grouped_matmul(out, inp, weight, bias, rows_of, "grouped_matmul_forward");
  for_each_group(rows_of, [&](std::int64_t e, std::int64_t lo, std::int64_t hi) {
    Tensor o = rows(out, lo, hi, dims.OC);
    matmul_forward(o, rows(inp, lo, hi, dims.C), expert_weight(weight, e), expert_bias(bias, e));
  });
}

void Backend::grouped_matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight,
                                            std::span<const std::int64_t> rows_of) {
  const auto dims = checks::grouped_matmul(dout, dinp, weight, Tensor{}, rows_of, "grouped_matmul_backward_input");
  for_each_group(rows_of, [&](std::int64_t e, std::int64_t lo, std::int64_t hi) {
    Tensor d = rows(dinp, lo, hi, dims.C);
    matmul_backward_input(d, rows(dout, lo, hi, dims.OC), expert_weight(weight, e));
  });
}

void Backend::grouped_matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                              std::span<const std::int64_t> rows_of) {
  const auto dims = checks::grouped_matmul(dout, inp, dweight, dbias, rows_of, "grouped_matmul_backward_weights");
  for_each_group(rows_of, [&](std::int64_t e, std::int64_t lo, std::int64_t hi) {
    Tensor dw = expert_weight(dweight, e), db = expert_bias(dbias, e);
    matmul_backward_weights(dw, db, rows(dout, lo, hi, dims.OC), rows(inp, lo, hi, dims.C));
  });
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
