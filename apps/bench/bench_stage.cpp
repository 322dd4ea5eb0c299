#include "apps/bench/bench_stage.hpp"

#include <chrono>

#include "apps/bench/bench_figures.hpp"
#include "compute/model/stage_split.hpp"

namespace troupe::apps {

Expected<std::unique_ptr<BenchStage>> BenchStage::create(comm::Engine& engine, compute::Backend& backend,
                                                         const BenchStageShape& shape,
                                                         const schedules::Schedule& schedule,
                                                         const schedules::CheckReport& check) {
  std::unique_ptr<BenchStage> stage(new BenchStage());
  const int rank = engine.rank();
  const comm::Grid grid{1, shape.stages, 1};
  auto joined = BenchRank::join(engine, comm::dp_group(grid, rank));
  if (!joined) return joined.error();
  stage->rank_ = std::move(*joined);
  auto pp = comm::Communicator::create(engine, comm::pp_group(grid, rank));
  if (!pp) return pp.error();
  stage->pp_ = std::move(*pp);
  if (actors::in_embedding_group(schedule, rank)) {
    auto created = comm::Communicator::create(engine, comm::embedding_group(grid, rank));
    if (!created) return created.error();
    stage->embedding_ = std::move(*created);
  }
  const compute::GPTConfig& cfg = shape.model;
  stage->stream_ =
      bench_tokens(cfg, static_cast<std::size_t>(shape.batch) * cfg.block_size * shape.microbatches * 4 + 1);
  compute::TrainerOptions options;
  options.batch_size = shape.batch;
  options.seq_len = cfg.block_size;
  options.lr = {1e-4, 1e-5, 0, shape.steps};
  auto split = shape.split.empty() ? compute::split_for_pipeline(cfg, shape.stages, schedule.chunks)
                                   : Expected<std::vector<compute::StageLayers>>(shape.split);
  if (!split) return split.error();
  actors::PipelineSetup setup{cfg,  schedule, *split, check.peak_stashed[static_cast<std::size_t>(rank)],
                              grid, rank,     options};
  stage->trainer_ = std::make_unique<actors::PipelineTrainer>(
      std::move(setup), backend,
      actors::PipelineGroups{engine, stage->rank_->group(), *stage->pp_, stage->embedding_.get()},
      stage->rank_->mailbox(), stage->rank_->progress(), stage->stream_, stage->stream_);
  return stage;
}

double BenchStage::timed_step() {
  const auto start = std::chrono::steady_clock::now();
  trainer_->step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace troupe::apps
