// Sizes that cannot fit this machine's memory are refused before anything is allocated, by the
// single process and by the job process of --workers alike: one line naming the keys, the
// estimate and the machine's figure, exit 2. A run that allocated first would not end within
// the timeout or would be killed; the refusal must come first.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/config/memory_fit.hpp"
#include "apps/config/resolve.hpp"
#include "apps/run_troupe.hpp"

using namespace troupe::test;
using troupe::compute::Recompute;

namespace {

const std::vector<std::pair<std::string, std::string>> sizes_that_cannot_fit{
    {"train.batch_size", "1000000"}, {"model.block_size", "100000000"}, {"model.n_embd", "1048576"},
    {"model.n_layer", "100000"},     {"model.n_layer", "2147483647"}};

}  // namespace

TEST_CASE("sizes that cannot fit are refused with one line before any allocation, with and without workers", "[cli]") {
  TempDir dir;
  for (const auto& [key, value] : sizes_that_cannot_fit) {
    // block_size reaches the estimate as train.seq_len, which defaults to it.
    const std::string named = key == "model.block_size" ? "train.seq_len " + value : key + " " + value;
    for (const std::vector<std::string>& start : {std::vector<std::string>{"train"},
                                                  std::vector<std::string>{"train", "--workers", "2"}}) {
      std::vector<std::string> args = start;
      args.insert(args.end(), {"--model.preset", "tiny", "--" + key, value});
      const ProcessResult refused = check_rejected_in(dir, args, named);
      CHECK_THAT(refused.err, Catch::Contains("need about") && Catch::Contains("is available (") &&
                                  Catch::Contains("of parameters, gradients and AdamW moments"));
    }
  }
}

TEST_CASE("a model size whose products overflow 64 bits is refused by resolve", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  config.model.n_embd = 2147483646;
  config.model.n_head = 2;
  const auto resolved = troupe::apps::resolve(config);
  REQUIRE_FALSE(resolved.ok());
  CHECK_THAT(resolved.error().message,
             Catch::Contains("model.n_embd 2147483646") && Catch::Contains("more than a 64-bit count holds"));
}

TEST_CASE("a worker's estimate covers the whole model, or its largest pipeline stage with every micro-batch", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  auto whole = troupe::apps::resolve(config);
  REQUIRE(whole.ok());
  const auto one = troupe::apps::worker_memory(*whole, Recompute::none);
  CHECK(one.parameter_bytes > 0);
  CHECK(troupe::apps::check_memory_fit(*whole, 1).ok());

  config.pipeline.stages = 2;
  config.pipeline.microbatches = 4;
  auto staged = troupe::apps::resolve(config);
  REQUIRE(staged.ok());
  const auto stage = troupe::apps::worker_memory(*staged, Recompute::none);
  CHECK(stage.parameter_bytes < one.parameter_bytes);
  CHECK(stage.activation_bytes > one.activation_bytes);  // four micro-batches in flight, half the layers each
}

TEST_CASE("a refusal names train.recompute full when that would fit, and only then", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "small";
  config.train.batch_size = 64;
  auto job = troupe::apps::resolve(config);
  REQUIRE(job.ok());
  const double none = troupe::apps::worker_memory(*job, Recompute::none).total();
  const double full = troupe::apps::worker_memory(*job, Recompute::full).total();
  REQUIRE(full < none / 2);
  const double between = (none + full) / 2;
  CHECK(troupe::apps::check_memory_fit(*job, 1, none, "test").ok());
  const auto hinted = troupe::apps::check_memory_fit(*job, 1, between, "test");
  REQUIRE_FALSE(hinted.ok());
  CHECK_THAT(hinted.error().message,
             Catch::Contains("is available (test); with train.recompute full they would need about"));
  const auto too_small = troupe::apps::check_memory_fit(*job, 1, full / 2, "test");
  REQUIRE_FALSE(too_small.ok());
  CHECK_THAT(too_small.error().message, !Catch::Contains("train.recompute"));

  config.train.recompute = "full";
  auto recomputing = troupe::apps::resolve(config);
  REQUIRE(recomputing.ok());
  CHECK(troupe::apps::check_memory_fit(*recomputing, 1, between, "test").ok());
}
