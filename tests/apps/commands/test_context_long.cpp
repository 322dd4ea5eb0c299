// Long sequences with context shards as a user runs them: a 16384-token window (model.block_size
// 16384, beyond every preset) trains on two context shards of a tiny-width model, the window
// sampler and the validation windows taking T from the job; a corpus too short for one window is
// refused in one line naming it; and a sequence that one rank's --memory-limit refuses without
// context shards is refused in one line naming the context layout that fits, which then trains
// under the same limit.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "apps/config/byte_size.hpp"
#include "apps/config/job_layout.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/resolve.hpp"
#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "schedules/layout_plan.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

// A model narrow enough that a long sequence trains in seconds: its attention and its byte
// vocabulary's logits are most of its memory.
std::vector<std::string> narrow_model(int T, int layers, int channels, int heads) {
  return {"--model.preset",     "tiny",
          "--model.n_layer",    std::to_string(layers),
          "--model.n_embd",     std::to_string(channels),
          "--model.n_head",     std::to_string(heads),
          "--model.block_size", std::to_string(T),
          "--train.batch_size", "1",
          "--train.seq_len",    "0"};
}

// What the planner says a rank of `args`' job on `ranks` needs, runtime included.
double planned_need(const std::vector<std::string>& keys, int ranks) {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  for (std::size_t i = 0; i + 1 < keys.size(); i += 2) {
    const std::string key = keys[i].substr(2), value = keys[i + 1];
    if (key == "model.n_layer") config.model.n_layer = std::stoi(value);
    if (key == "model.n_embd") config.model.n_embd = std::stoi(value);
    if (key == "model.n_head") config.model.n_head = std::stoi(value);
    if (key == "model.block_size") config.model.block_size = std::stoi(value);
    if (key == "train.batch_size") config.train.batch_size = std::stoi(value);
    if (key == "train.grad_accum") config.train.grad_accum = std::stoi(value);
    if (key == "context.shards") config.context.shards = std::stoi(value);
  }
  auto job = troupe::apps::resolve(config);
  REQUIRE(job.ok());
  const troupe::apps::JobRanks where{ranks, 1, ranks};
  auto planned =
      troupe::schedules::plan_layout(troupe::apps::job_workload(*job, ranks), troupe::apps::job_cluster(where, 1e12),
                                     troupe::apps::job_layout(*job, ranks));
  REQUIRE(planned.ok());
  return planned->memory.total() + troupe::apps::runtime_bytes_per_rank(job->config.train.backend);
}

}  // namespace

TEST_CASE("a 16384-token sequence trains on two context shards of a narrow model", "[context][long][slow]") {
  TempDir dir;
  std::vector<std::string> args = with({"train", "--workers", "2"}, tiny_steps(2));
  args = with(args, narrow_model(16384, 1, 16, 2));
  // A step of 16384 tokens takes seconds; on a loaded machine a node starved that long would be
  // counted lost at the default heartbeat timeout.
  args = with(args, {"--context.shards", "2", "--train.val_every", "2", "--train.log_every", "1",
                     "--fault.heartbeat_timeout", "300"});
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(300));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(occurrences(r.out, " | loss ") == 2);
  const double val = number_after(r.out, "final val loss");
  CHECK(std::isfinite(val));
  CHECK(val > 0);
}

TEST_CASE("a corpus shorter than one long window is refused in one line naming it", "[context][long]") {
  TempDir dir;
  const std::string corpus = dir.write("short.txt", std::string(20000, 'a'));
  std::vector<std::string> args = with({"train"}, tiny_steps(1));
  args = with(args, narrow_model(16384, 1, 16, 2));
  args = with(args, {"--data.corpus", corpus});
  const ProcessResult r = run_troupe(dir, args);
  INFO("stderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(corpus) && Contains("too short: 20000 bytes of text, at least"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("a sequence one rank's memory refuses names the context layout that fits, which trains under the limit",
          "[context][memory]") {
  // One head: no tensor shards, no all-to-all; the vocabulary's logits and probabilities are most of
  // the activations, which recompute does not touch and only splitting the sequence halves.
  const std::vector<std::string> model = narrow_model(4096, 2, 32, 1);
  const std::vector<std::string> context = {"--train.grad_accum", "2", "--context.shards", "2"};
  const double fits = planned_need(with(model, context), 2);
  const double whole = planned_need(model, 2);
  REQUIRE(whole > fits + (8 << 20));
  const std::string limit = std::to_string(static_cast<long long>(fits + (1 << 20)));

  TempDir dir;
  std::vector<std::string> args = with({"train", "--workers", "2", "--memory-limit", limit}, tiny_steps(2));
  args = with(args, model);
  const ProcessResult refused = run_troupe(dir, args);
  INFO("stderr: " << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  CHECK_THAT(refused.err,
             Contains("train.seq_len 4096 as zero 0, dp 2, micro-batch 1 x 1, recompute none on 2 ranks") &&
                 Contains("; train.grad_accum 2 with context.shards 2 would fit (about " +
                          troupe::apps::format_binary_size(fits) + " per rank)"));

  const ProcessResult trained = run_troupe(dir, with(args, context), std::chrono::seconds(180));
  INFO("stdout: " << trained.out << "\nstderr: " << trained.err);
  CHECK(trained.exit_code == 0);
  CHECK_THAT(trained.out, Contains("final val loss"));
}
