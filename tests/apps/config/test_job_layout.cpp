// A job as the layout planner sees it, and a planner layout written back as config keys: what the
// memory check plans for the job's own layout and how it words another.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/config/job_layout.hpp"
#include "apps/config/resolve.hpp"
#include "apps/resolved_job.hpp"

using namespace troupe::apps;
using troupe::compute::ZeroStage;
using troupe::schedules::ScheduleKind;
using troupe::test::resolved;

TEST_CASE("a data-parallel job's layout: every rank a replica, train.grad_accum micro-batches", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  config.train.batch_size = 4;
  config.train.grad_accum = 3;
  config.train.zero = ZeroStage::gradients;
  config.train.recompute = troupe::compute::Recompute::selective;
  const auto job = resolved(config);
  const auto layout = job_layout(job, 4);
  CHECK(layout.dp == 4);
  CHECK(layout.pp == 1);
  CHECK(layout.tp == 1);
  CHECK(layout.zero == ZeroStage::gradients);
  CHECK(layout.recompute == troupe::compute::Recompute::selective);
  CHECK(layout.micro_batch == 4);
  CHECK(layout.microbatches == 3);
  const auto workload = job_workload(job, 4);
  CHECK(workload.global_batch == 4 * 4 * 3);
  CHECK(workload.seq_len == job.config.train.seq_len);
  CHECK(workload.precision == troupe::schedules::Precision::fp32);
}

TEST_CASE("a pipelined job's layout: pipeline.stages of the ranks, pipeline.microbatches per step", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "small";
  config.pipeline.stages = 2;
  config.pipeline.microbatches = 4;
  config.pipeline.schedule = ScheduleKind::interleaved;
  config.pipeline.virtual_stages = 3;
  const auto layout = job_layout(resolved(config), 4);
  CHECK(layout.dp == 2);
  CHECK(layout.pp == 2);
  CHECK(layout.microbatches == 4);
  CHECK(layout.schedule == ScheduleKind::interleaved);
  CHECK(layout.chunks == 3);
}

TEST_CASE("a layout written as keys: only the keys that change, in key-table order", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "small";
  config.train.batch_size = 8;
  config.train.grad_accum = 2;
  const auto job = resolved(config);
  auto layout = job_layout(job, 2);
  CHECK(changed_layout_keys(config, with_layout(config, layout)).empty());

  layout.zero = ZeroStage::optimizer_state;
  layout.recompute = troupe::compute::Recompute::full;
  CHECK(changed_layout_keys(config, with_layout(config, layout)) ==
        std::vector<std::string>{"train.zero 1", "train.recompute full"});

  // Onto a pipeline: the micro-batches move from train.grad_accum to pipeline.microbatches.
  troupe::schedules::Layout piped{1, 1, 2, ZeroStage::none, troupe::compute::Recompute::none, 4, 8, ScheduleKind::gpipe,
                                  1};
  const auto piped_config = with_layout(config, piped);
  CHECK(changed_layout_keys(config, piped_config) ==
        std::vector<std::string>{"train.batch_size 4", "train.grad_accum 1", "pipeline.stages 2",
                                 "pipeline.microbatches 8", "pipeline.schedule gpipe"});
  CHECK(resolve(piped_config).ok());
}

TEST_CASE("the job's ranks as a cluster: its hosts as nodes when they hold equal shares", "[config]") {
  const auto even = job_cluster({4, 2, 2}, 1e9);
  CHECK(even.nodes == 2);
  CHECK(even.devices_per_node == 2);
  CHECK(even.device_memory == 1e9);
  const auto uneven = job_cluster({3, 2, 1}, 1e9);
  CHECK(uneven.nodes == 1);
  CHECK(uneven.devices_per_node == 3);
}
