// The `small` preset trained for a few steps on the GPU follows the CPU run's loss curve: the
// fp32 backend to 1e-4 relative (summation order differs, and differences grow over steps), the
// bf16 backend to 1e-2. Same data, seed, schedule and clipping on both. The GPU repeats itself
// bit for bit, fp32 and bf16: no kernel adds in an order that varies from run to run (the
// embedding backward sums a repeated token's positions in order). Activation recomputation on the
// GPU therefore equals the GPU's own run without it exactly: the same kernels on the same inputs.

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "compute/model/gpt.hpp"
#include "compute/model/recompute.hpp"
#include "compute/train/trainer.hpp"
#include "gpu/gpu_support.hpp"

namespace troupe::tests {
namespace {

std::vector<double> loss_curve(compute::Backend& backend, int steps,
                               compute::Recompute recompute = compute::Recompute::none) {
  const compute::GPTConfig config = *compute::gpt_preset("small");
  std::vector<std::uint16_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint16_t>(compute::splitmix64(i) % 7 * 31 % config.vocab_size);  // learnable
  compute::GPT model(config, backend, compute::DType::f32, recompute);
  model.init_parameters(1);
  compute::TrainerOptions options;
  options.batch_size = 4;
  options.seq_len = 64;
  options.lr = {1e-3, 1e-4, 1, steps};
  compute::Trainer trainer(model, options, tokens, tokens);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.step().loss);
  return losses;
}

}  // namespace

TEST_CASE("small trained on the gpu follows the cpu's loss curve", "[gpu]") {
  constexpr int kSteps = 8;
  compute::CpuBackend cpu(0);
  const std::vector<double> reference = loss_curve(cpu, kSteps);
  REQUIRE(reference.back() < reference.front());  // the run learns, so the comparison means something
  const auto precision = GENERATE(compute::Precision::fp32, compute::Precision::bf16);
  auto gpu = cuda_backend(precision);
  const double tolerance = precision == compute::Precision::fp32 ? 1e-4 : 1e-2;
  const std::vector<double> got = loss_curve(*gpu, kSteps);
  for (int i = 0; i < kSteps; ++i) {
    INFO(gpu->name() << " step " << i << ": gpu " << got[i] << ", cpu " << reference[i]);
    REQUIRE(std::abs(got[i] - reference[i]) <= tolerance * reference[i]);
  }
}

TEST_CASE("the gpu repeats a run bit for bit, fp32 and bf16", "[gpu]") {
  constexpr int kSteps = 8;
  const auto precision = GENERATE(compute::Precision::fp32, compute::Precision::bf16);
  auto gpu = cuda_backend(precision);
  const std::vector<double> first = loss_curve(*gpu, kSteps), second = loss_curve(*gpu, kSteps);
  for (int i = 0; i < kSteps; ++i) {
    INFO(gpu->name() << " step " << i << ": " << second[i] << ", the first run " << first[i]);
    REQUIRE(second[i] == first[i]);
  }
}

TEST_CASE("recompute selective and full on the gpu equal the gpu's run that keeps every activation", "[gpu]") {
  constexpr int kSteps = 8;
  auto gpu = cuda_backend(compute::Precision::fp32);
  const std::vector<double> kept = loss_curve(*gpu, kSteps);
  const auto recompute = GENERATE(compute::Recompute::selective, compute::Recompute::full);
  const std::vector<double> redone = loss_curve(*gpu, kSteps, recompute);
  for (int i = 0; i < kSteps; ++i) {
    INFO(compute::recompute_name(recompute) << " step " << i << ": " << redone[i] << ", kept " << kept[i]);
    REQUIRE(redone[i] == kept[i]);
  }
}

}  // namespace troupe::tests
