#include "apps/bench/bench_rank.hpp"

#include <chrono>

#include "actors/actor_system_setup.hpp"
#include "apps/bench/bench_figures.hpp"
#include "comm/grid.hpp"

namespace troupe::apps {

BenchRank::BenchRank()
    : config_(std::make_unique<actors::TroupeConfig>()),
      system_(std::make_unique<caf::actor_system>(*config_)),
      worker_(*system_),
      mailbox_(worker_.ptr()) {}

Expected<std::unique_ptr<BenchRank>> BenchRank::join(comm::Engine& engine, comm::Group group) {
  std::unique_ptr<BenchRank> rank(new BenchRank());
  auto communicator = comm::Communicator::create(engine, std::move(group));
  if (!communicator) return communicator.error();
  rank->group_ = std::move(*communicator);
  return rank;
}

Expected<std::unique_ptr<BenchRank>> BenchRank::join(comm::Engine& engine, int processes) {
  comm::Group group{comm::dp_group_id, {}};
  for (int r = 0; r < processes; ++r) group.ranks.push_back(r);
  return join(engine, std::move(group));
}

namespace {

compute::GPT& initialised(compute::GPT& model) {
  model.init_parameters(1);
  return model;
}

}  // namespace

compute::TrainerOptions bench_trainer_options(const compute::GPTConfig& cfg, int batch, int steps,
                                              compute::DataParallel data_parallel, MoELossCoefficients moe) {
  compute::TrainerOptions options;
  options.moe_aux_coef = moe.aux;
  options.moe_z_coef = moe.z;
  options.batch_size = batch;
  options.seq_len = cfg.block_size;
  options.lr = {1e-4, 1e-5, 0, steps};
  options.data_parallel = std::move(data_parallel);
  return options;
}

BenchTraining::BenchTraining(compute::Backend& backend, const compute::GPTConfig& cfg, int batch, int steps,
                             const std::vector<std::uint16_t>& stream, compute::DataParallel data_parallel,
                             compute::ContextShardGroup context, compute::ExpertGroup experts, MoELossCoefficients moe)
    : model_(cfg, backend, compute::DType::f32, compute::Recompute::none, nullptr, context, experts),
      trainer_(initialised(model_), bench_trainer_options(cfg, batch, steps, std::move(data_parallel), moe), stream,
               stream) {}

BenchTraining::BenchTraining(compute::Backend& backend, const compute::GPTConfig& cfg, compute::TrainerOptions options,
                             const std::vector<std::uint16_t>& stream)
    : model_(cfg, backend, compute::DType::f32, options.recompute),
      trainer_(initialised(model_), std::move(options), stream, stream) {}

Expected<std::vector<comm::LocalRankResult>> run_bench_ranks(int ranks, const RankFigures& figures,
                                                             const comm::RankPlacement& place) {
  return comm::run_local_ranks(
      ranks,
      [&](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        auto report = figures(engine);
        if (!report) return report.error();
        return pack_figures(*report);
      },
      std::chrono::minutes(60), place);
}

Expected<std::vector<comm::LocalRankResult>> run_lead_and_followers(int followers, const LeadFigures& lead,
                                                                    const FollowerFigures& follow) {
  return run_bench_ranks(followers + 1, [&](comm::Engine& engine) -> Expected<std::vector<double>> {
    auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
    if (!backend) return backend.error();
    if (engine.rank() == followers) return lead(**backend);
    return follow(engine, **backend);
  });
}

double BenchTraining::timed_step() {
  const auto start = std::chrono::steady_clock::now();
  trainer_.step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace troupe::apps
