#pragma once
// A Backend that forwards every op to another and, while timing is on, waits for each op to
// finish and adds its wall time to the op's total: where a step's time goes, for `bench gpu` and
// `bench compute --profile`. On a GPU, waiting after every op removes the overlap of launches
// with work, so the totals add up to a little more than a pipelined step; on the CPU an op is
// done when it returns and the wait is nothing. With timing off it only forwards. The time is
// read from `clock` (seconds, any origin): the wall clock by default, the modelled one over the
// sim backend (`bench sim-check`).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compute/backend.hpp"

namespace troupe::apps {

class OpTimingBackend final : public compute::Backend {
 public:
  OpTimingBackend(compute::Backend& inner, std::function<void()> synchronize,
                  std::function<double()> clock = wall_seconds)
      : inner_(inner), synchronize_(std::move(synchronize)), clock_(std::move(clock)) {}
  static double wall_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  void set_timing(bool on) { timing_ = on; }
  // Seconds per op name, summed since the last clear().
  const std::map<std::string, double>& seconds() const { return seconds_; }
  void clear() { seconds_.clear(); }

  compute::Device device() const override { return inner_.device(); }
  std::string name() const override { return inner_.name(); }
  compute::Tensor zeros(compute::Shape shape, compute::DType dtype) override {
    return inner_.zeros(std::move(shape), dtype);
  }
  compute::Tensor message_buffer(compute::Shape shape, compute::DType dtype) override {
    return inner_.message_buffer(std::move(shape), dtype);
  }
  std::size_t product_operand_bytes() const override { return inner_.product_operand_bytes(); }
  void reserve_product_operands(std::int64_t first, std::int64_t second) override {
    inner_.reserve_product_operands(first, second);
  }
  compute::DType activation_storage_dtype(compute::DType params) const override {
    return inner_.activation_storage_dtype(params);
  }
  void fill_zero(compute::Tensor& t) override {
    timed("fill_zero", [&] { inner_.fill_zero(t); });
  }
  void copy(compute::Tensor& dst, const compute::Tensor& src) override {
    timed("copy", [&] { inner_.copy(dst, src); });
  }
  void store(compute::Tensor& stored, const compute::Tensor& values) override {
    timed("store", [&] { inner_.store(stored, values); });
  }
  void encoder_forward(compute::Tensor& out, const compute::Tensor& tokens, const compute::Tensor& wte,
                       const compute::Tensor& wpe) override {
    timed("encoder_forward", [&] { inner_.encoder_forward(out, tokens, wte, wpe); });
  }
  void encoder_backward(compute::Tensor& dwte, compute::Tensor& dwpe, const compute::Tensor& dout,
                        const compute::Tensor& tokens) override {
    timed("encoder_backward", [&] { inner_.encoder_backward(dwte, dwpe, dout, tokens); });
  }
  void layernorm_forward(compute::Tensor& out, compute::Tensor& mean, compute::Tensor& rstd,
                         const compute::Tensor& inp, const compute::Tensor& weight,
                         const compute::Tensor& bias) override {
    timed("layernorm_forward", [&] { inner_.layernorm_forward(out, mean, rstd, inp, weight, bias); });
  }
  void layernorm_backward_input(compute::Tensor& dinp, const compute::Tensor& dout, const compute::Tensor& inp,
                                const compute::Tensor& weight, const compute::Tensor& mean,
                                const compute::Tensor& rstd) override {
    timed("layernorm_backward_input", [&] { inner_.layernorm_backward_input(dinp, dout, inp, weight, mean, rstd); });
  }
  void layernorm_backward_params(compute::Tensor& dweight, compute::Tensor& dbias, const compute::Tensor& dout,
                                 const compute::Tensor& inp, const compute::Tensor& mean,
                                 const compute::Tensor& rstd) override {
    timed("layernorm_backward_params",
          [&] { inner_.layernorm_backward_params(dweight, dbias, dout, inp, mean, rstd); });
  }
  void matmul_forward(compute::Tensor& out, const compute::Tensor& inp, const compute::Tensor& weight,
                      const compute::Tensor& bias) override {
    timed("matmul_forward", [&] { inner_.matmul_forward(out, inp, weight, bias); });
  }
  void matmul_residual_forward(compute::Tensor& out, const compute::Tensor& inp, const compute::Tensor& weight,
                               const compute::Tensor& bias, const compute::Tensor& residual) override {
    timed("matmul_residual_forward", [&] { inner_.matmul_residual_forward(out, inp, weight, bias, residual); });
  }
  void matmul_backward_input(compute::Tensor& dinp, const compute::Tensor& dout,
                             const compute::Tensor& weight) override {
    timed("matmul_backward_input", [&] { inner_.matmul_backward_input(dinp, dout, weight); });
  }
  void matmul_backward_weights(compute::Tensor& dweight, compute::Tensor& dbias, const compute::Tensor& dout,
                               const compute::Tensor& inp) override {
    timed("matmul_backward_weights", [&] { inner_.matmul_backward_weights(dweight, dbias, dout, inp); });
  }
  void grouped_matmul_forward(compute::Tensor& out, const compute::Tensor& inp, const compute::Tensor& weight,
                              const compute::Tensor& bias, std::span<const std::int64_t> rows_of) override {
    timed("grouped_matmul_forward", [&] { inner_.grouped_matmul_forward(out, inp, weight, bias, rows_of); });
  }
  void grouped_matmul_backward_input(compute::Tensor& dinp, const compute::Tensor& dout, const compute::Tensor& weight,
                                     std::span<const std::int64_t> rows_of) override {
    timed("grouped_matmul_backward_input", [&] { inner_.grouped_matmul_backward_input(dinp, dout, weight, rows_of); });
  }
  void grouped_matmul_backward_weights(compute::Tensor& dweight, compute::Tensor& dbias, const compute::Tensor& dout,
                                       const compute::Tensor& inp, std::span<const std::int64_t> rows_of) override {
    timed("grouped_matmul_backward_weights",
          [&] { inner_.grouped_matmul_backward_weights(dweight, dbias, dout, inp, rows_of); });
  }
  compute::Shape attention_state_shape(std::int64_t B, std::int64_t n_head, std::int64_t T) const override {
    return inner_.attention_state_shape(B, n_head, T);
  }
  void attention_forward(compute::Tensor& out, compute::Tensor& att, const compute::Tensor& qkv, int n_head) override {
    timed("attention_forward", [&] { inner_.attention_forward(out, att, qkv, n_head); });
  }
  void attention_backward(compute::Tensor& dqkv, compute::Tensor& datt, const compute::Tensor& dout,
                          const compute::Tensor& qkv, const compute::Tensor& att, int n_head) override {
    timed("attention_backward", [&] { inner_.attention_backward(dqkv, datt, dout, qkv, att, n_head); });
  }
  void gelu_forward(compute::Tensor& out, const compute::Tensor& inp) override {
    timed("gelu_forward", [&] { inner_.gelu_forward(out, inp); });
  }
  void gelu_backward(compute::Tensor& dinp, const compute::Tensor& inp, const compute::Tensor& dout) override {
    timed("gelu_backward", [&] { inner_.gelu_backward(dinp, inp, dout); });
  }
  void gelu_bias_backward(compute::Tensor& dinp, compute::Tensor& dbias, const compute::Tensor& inp,
                          const compute::Tensor& dout) override {
    timed("gelu_bias_backward", [&] { inner_.gelu_bias_backward(dinp, dbias, inp, dout); });
  }
  void bias_backward(compute::Tensor& dbias, const compute::Tensor& dout) override {
    timed("bias_backward", [&] { inner_.bias_backward(dbias, dout); });
  }
  void residual_forward(compute::Tensor& out, const compute::Tensor& a, const compute::Tensor& b) override {
    timed("residual_forward", [&] { inner_.residual_forward(out, a, b); });
  }
  void crossentropy_forward(compute::Tensor& losses, compute::Tensor& probs, const compute::Tensor& logits,
                            const compute::Tensor& targets, int vocab_size) override {
    timed("crossentropy_forward", [&] { inner_.crossentropy_forward(losses, probs, logits, targets, vocab_size); });
  }
  void crossentropy_backward(compute::Tensor& dlogits, const compute::Tensor& probs, const compute::Tensor& targets,
                             float dloss) override {
    timed("crossentropy_backward", [&] { inner_.crossentropy_backward(dlogits, probs, targets, dloss); });
  }
  void adamw_update(compute::Tensor& params, const compute::Tensor& grads, compute::Tensor& m, compute::Tensor& v,
                    std::span<const compute::AdamWSegment> segments, const compute::AdamWHyper& hyper) override {
    timed("adamw_update", [&] { inner_.adamw_update(params, grads, m, v, segments, hyper); });
  }
  double sum_of_squares(const compute::Tensor& t) override {
    double result = 0;
    timed("sum_of_squares", [&] { result = inner_.sum_of_squares(t); });
    return result;
  }
  void scale(compute::Tensor& t, float factor) override {
    timed("scale", [&] { inner_.scale(t, factor); });
  }

 private:
  template <typename F>
  void timed(const char* op, F&& run) {
    if (!timing_) {
      run();
      return;
    }
    synchronize_();  // nothing earlier counts against this op
    const double start = clock_();
    run();
    synchronize_();
    seconds_[op] += clock_() - start;
  }

  compute::Backend& inner_;
  std::function<void()> synchronize_;
  std::function<double()> clock_;
  bool timing_ = false;
  std::map<std::string, double> seconds_;
};

// Prints the timed ops of one step, largest first, each with its share of the step: the table
// `bench gpu` and `bench compute --profile` print. `step_seconds` is the whole step's wall time
// (the same step); what the ops do not cover is the trainer's own work (batch, loss, bookkeeping).
inline void print_op_times(const std::map<std::string, double>& seconds, double step_seconds) {
  std::vector<std::pair<std::string, double>> ops(seconds.begin(), seconds.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  double op_total = 0;
  for (const auto& [name, s] : ops) op_total += s;
  std::printf("time per op, one step timed op by op (%.1f ms in ops, %.1f ms the step):\n", op_total * 1e3,
              step_seconds * 1e3);
  for (const auto& [name, s] : ops)
    std::printf("  %-22s %9.2f ms  %5.1f%%\n", name.c_str(), s * 1e3, 100.0 * s / step_seconds);
  std::printf("  %-22s %9.2f ms  %5.1f%%\n", "(outside the ops)", (step_seconds - op_total) * 1e3,
              100.0 * (step_seconds - op_total) / step_seconds);
}

}  // namespace troupe::apps
