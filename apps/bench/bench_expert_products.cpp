#include "apps/bench/bench_expert_products.hpp"

#include <chrono>
#include <numeric>
#include <random>

#include "apps/bench/bench_figures.hpp"
#include "compute/cpu/cpu_backend.hpp"

namespace troupe::apps {
namespace {

using compute::Tensor;

Tensor random_tensor(compute::Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::zeros(std::move(shape), compute::DType::f32);
  std::uniform_real_distribution<float> uniform(-0.05f, 0.05f);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = uniform(rng);
  return t;
}

}  // namespace

ExpertProductTimes time_expert_products(const compute::GPTConfig& cfg, int threads,
                                        const std::vector<std::int64_t>& rows_of, int iterations) {
  const std::int64_t E = cfg.experts, C = cfg.n_embd, H = cfg.expert_hidden();
  const std::int64_t R = std::accumulate(rows_of.begin(), rows_of.end(), std::int64_t{0});
  std::mt19937 rng(3);
  compute::CpuBackend be(threads);
  const Tensor in = random_tensor({R, C}, rng), dout = random_tensor({R, C}, rng);
  const Tensor fc_w = random_tensor({E, H, C}, rng), fc_b = random_tensor({E, H}, rng);
  const Tensor proj_w = random_tensor({E, C, H}, rng), proj_b = random_tensor({E, C}, rng);
  Tensor hidden = Tensor::zeros({R, H}, compute::DType::f32), out = Tensor::zeros({R, C}, compute::DType::f32);
  Tensor dhidden = Tensor::zeros({R, H}, compute::DType::f32), din = Tensor::zeros({R, C}, compute::DType::f32);
  Tensor dfc_w = Tensor::zeros({E, H, C}, compute::DType::f32), dfc_b = Tensor::zeros({E, H}, compute::DType::f32);
  Tensor dproj_w = Tensor::zeros({E, C, H}, compute::DType::f32), dproj_b = Tensor::zeros({E, C}, compute::DType::f32);

  // The six products of a block's experts, grouped or through Backend's one product per expert.
  auto block = [&](bool grouped) {
    const auto start = std::chrono::steady_clock::now();
    if (grouped) {
      be.grouped_matmul_forward(hidden, in, fc_w, fc_b, rows_of);
      be.grouped_matmul_forward(out, hidden, proj_w, proj_b, rows_of);
      be.grouped_matmul_backward_input(dhidden, dout, proj_w, rows_of);
      be.grouped_matmul_backward_input(din, dhidden, fc_w, rows_of);
      be.grouped_matmul_backward_weights(dproj_w, dproj_b, dout, hidden, rows_of);
      be.grouped_matmul_backward_weights(dfc_w, dfc_b, dhidden, in, rows_of);
    } else {
      be.Backend::grouped_matmul_forward(hidden, in, fc_w, fc_b, rows_of);
      be.Backend::grouped_matmul_forward(out, hidden, proj_w, proj_b, rows_of);
      be.Backend::grouped_matmul_backward_input(dhidden, dout, proj_w, rows_of);
      be.Backend::grouped_matmul_backward_input(din, dhidden, fc_w, rows_of);
      be.Backend::grouped_matmul_backward_weights(dproj_w, dproj_b, dout, hidden, rows_of);
      be.Backend::grouped_matmul_backward_weights(dfc_w, dfc_b, dhidden, in, rows_of);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  block(true);  // warm-up: OpenBLAS' buffers and threads
  block(false);
  std::vector<double> grouped, per_expert;
  for (int i = 0; i < iterations; ++i) {
    // Alternating which goes first, so neither always follows the other's cache state.
    if (i % 2 == 0) {
      grouped.push_back(block(true));
      per_expert.push_back(block(false));
    } else {
      per_expert.push_back(block(false));
      grouped.push_back(block(true));
    }
  }
  return {median(grouped), median(per_expert)};
}

}  // namespace troupe::apps
