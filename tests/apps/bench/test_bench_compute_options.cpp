#include <catch2/catch.hpp>

#include <string>

#include "apps/bench/bench_commands.hpp"

using namespace troupe;
using namespace troupe::apps;

namespace {

std::string problem(const BenchComputeOptions& options) {
  const Status status = validate(options);
  return status.ok() ? "" : status.error().message;
}

}  // namespace

TEST_CASE("bench compute options are checked before the benchmark runs", "[cli]") {
  BenchComputeOptions options{{"tiny", "small"}};
  CHECK(problem(options) == "");
  options.models = {"tiny", "big"};
  CHECK(problem(options) ==
        "--models: 'big' is not a preset (known: nano, tiny, small, moe-tiny, moe-small, gpt2, gpt2-medium, "
        "gpt2-large, gpt2-xl, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b)");
  options.models = {};
  CHECK(problem(options) ==
        "--models is empty; give one or more of nano, tiny, small, moe-tiny, moe-small, gpt2, gpt2-medium, "
        "gpt2-large, gpt2-xl, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b");
  options.models = {"gpt2"};
  options.batch = 0;
  CHECK(problem(options) == "--batch must be positive, got 0");
  options.batch = 1;
  options.threads = {1, -1};
  CHECK(problem(options) == "--threads must not be negative (0 = all cores), got -1");
  options.threads = {};
  CHECK(problem(options) == "--threads is empty; give one or more counts, e.g. 1,2");
  options.threads = {0, 2};
  options.steps = 0;
  CHECK(problem(options) == "--steps must be positive, got 0");
  options.steps = 1;
  options.warmup = -1;
  CHECK(problem(options) == "--warmup must not be negative, got -1");
  options.warmup = 0;
  options.rounds = 0;
  CHECK(problem(options) == "--rounds must be positive, got 0");
}
