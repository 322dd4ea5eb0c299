// The trainer's data-parallel arithmetic on its own: n ranks of micro-batch b, whose gradients
// are summed by sum_gradients, take the same steps as one process with batch n·b. Here the ranks
// are threads summing through shared memory in a fixed order; tests/comm/ runs the same check
// with real processes and UCX collectives.

#include <catch2/catch.hpp>

#include <barrier>
#include <cstring>
#include <thread>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

using namespace troupe::compute;

namespace {

std::vector<std::uint16_t> random_stream(std::size_t n, int vocab) {
  std::vector<std::uint16_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::uint16_t>(hash_combine(17, i) % vocab);
  return s;
}

TrainerOptions base_options() {
  TrainerOptions o;
  o.seq_len = 32;
  o.lr = {1e-3, 1e-4, 1, 4};
  return o;
}

const GPTConfig config{2, 32, 4, 32, 64, 64};

std::vector<float> train(TrainerOptions o, const std::vector<std::uint16_t>& data, int steps,
                         std::vector<double>* losses) {
  CpuBackend backend(1);
  GPT model(config, backend);
  model.init_parameters(5);
  Trainer trainer(model, o, data, data);
  for (int i = 0; i < steps; ++i) {
    double loss = trainer.step().loss;
    if (losses) losses->push_back(loss);
  }
  const float* p = model.params().data_as<float>();
  return {p, p + model.layout().total()};
}

}  // namespace

TEST_CASE("two data-parallel ranks of batch b take the steps of one process of batch 2b", "[model][dp]") {
  const auto data = random_stream(40000, 64);
  const int steps = 4;
  TrainerOptions single = base_options();
  single.batch_size = 4;
  std::vector<double> single_losses;
  const auto reference = train(single, data, steps, &single_losses);

  const std::int64_t total = ParameterLayout(config).total();
  std::vector<float> slots[2] = {std::vector<float>(total), std::vector<float>(total)};
  double loss_slots[2] = {0, 0};
  std::barrier sync(2);
  std::vector<float> result[2];
  std::vector<double> losses[2];
  auto rank_main = [&](int rank) {
    TrainerOptions o = base_options();
    o.batch_size = 2;
    o.data_parallel.rank = rank;
    o.data_parallel.size = 2;
    o.data_parallel.sum_gradients = [&, rank](Tensor& grads) {
      std::memcpy(slots[rank].data(), grads.data(), grads.nbytes());
      sync.arrive_and_wait();
      float* g = grads.data_as<float>();
      for (std::int64_t i = 0; i < total; ++i) g[i] = slots[0][i] + slots[1][i];
      sync.arrive_and_wait();
    };
    o.data_parallel.mean = [&, rank](double x) {
      loss_slots[rank] = x;
      sync.arrive_and_wait();
      double m = (loss_slots[0] + loss_slots[1]) / 2;
      sync.arrive_and_wait();
      return m;
    };
    result[rank] = train(o, data, steps, &losses[rank]);
  };
  std::thread other(rank_main, 1);
  rank_main(0);
  other.join();

  CHECK(std::memcmp(result[0].data(), result[1].data(), result[0].size() * sizeof(float)) == 0);
  double max_diff = 0;
  for (std::size_t i = 0; i < reference.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(reference[i] - result[0][i])));
  INFO("max |single - data parallel| parameter difference after " << steps << " steps: " << max_diff);
  CHECK(max_diff < 1e-5);
  for (int s = 0; s < steps; ++s) CHECK(losses[0][s] == Approx(single_losses[s]).epsilon(1e-5));
}
