#include "apps/commands/bench_rank.hpp"

#include "actors/actor_system_setup.hpp"
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

}  // namespace troupe::apps
