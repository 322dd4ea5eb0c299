// Pipeline-parallel jobs as a user runs them: real node processes, one pipeline stage each,
// activations and gradients between them over UCX. Every schedule and split must take the
// steps of one process that accumulates the same micro-batches, and each stage must hold no
// more micro-batches' activations than the schedule checker's bound.

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

struct RunFigures {
  std::string loss, val, norm;  // as printed: equal strings are equal to the printed digits
  std::string peaks;            // "2 1 (the schedule checker's bound: 2 1)"
};

RunFigures run_tiny(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args{"train", "--model.preset", "tiny", "--train.steps", "6", "--train.val_batches", "1",
                                "--sample.tokens", "0", "--train.threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  const std::regex done("final train loss ([0-9.]+) \\| final val loss ([0-9.]+) \\| param norm ([0-9.]+)");
  REQUIRE(std::regex_search(r.out, m, done));
  RunFigures f{m[1], m[2], m[3], ""};
  if (std::regex_search(r.out, m, std::regex("activations held at most, by stage: ([^\\n]*)"))) f.peaks = m[1];
  return f;
}

}  // namespace

TEST_CASE("every pipeline schedule and split takes the steps of one process accumulating its micro-batches",
          "[pipeline]") {
  TempDir dir;
  const RunFigures one_m4 = run_tiny(dir, {"--train.grad_accum", "4"});
  const RunFigures one_m8 = run_tiny(dir, {"--train.grad_accum", "8"});
  struct Layout {
    std::vector<std::string> args;
    const RunFigures* reference;
    std::string peaks;
  };
  const std::vector<Layout> layouts = {
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "1f1b"}, &one_m4, "2 1"},
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "gpipe"}, &one_m4, "4 4"},
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "interleaved", "--pipeline.virtual_stages",
        "2"},
       &one_m4,
       "5 3"},
      // tiny's 4 layers on 3 stages: an uneven split.
      {{"--workers", "3", "--pipeline.stages", "3", "--pipeline.schedule", "1f1b"}, &one_m4, "3 2 1"},
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "1f1b", "--pipeline.microbatches", "8"},
       &one_m8,
       "2 1"},
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "gpipe", "--pipeline.microbatches", "8"},
       &one_m8,
       "8 8"},
  };
  for (const Layout& layout : layouts) {
    const RunFigures f = run_tiny(dir, layout.args);
    std::string shown;
    for (const auto& a : layout.args) shown += a + " ";
    std::printf("%s: loss %s, val %s, param norm %s (one process: %s, %s, %s); activations by stage %s\n",
                shown.c_str(), f.loss.c_str(), f.val.c_str(), f.norm.c_str(), layout.reference->loss.c_str(),
                layout.reference->val.c_str(), layout.reference->norm.c_str(), f.peaks.c_str());
    INFO(shown);
    CHECK(f.loss == layout.reference->loss);
    CHECK(f.val == layout.reference->val);
    CHECK(f.norm == layout.reference->norm);
    CHECK(f.peaks == layout.peaks + " (the schedule checker's bound: " + layout.peaks + ")");
  }
}

TEST_CASE("two data-parallel replicas of a two-stage pipeline take the steps of one process", "[pipeline]") {
  TempDir dir;
  const RunFigures one = run_tiny(dir, {"--train.batch_size", "16", "--train.grad_accum", "4"});
  const RunFigures grid = run_tiny(dir, {"--workers", "4", "--pipeline.stages", "2"});
  std::printf("dp 2 x pp 2: loss %s, param norm %s; one process with batch 16: loss %s, param norm %s\n",
              grid.loss.c_str(), grid.norm.c_str(), one.loss.c_str(), one.norm.c_str());
  CHECK(grid.loss == one.loss);
  CHECK(grid.norm == one.norm);
  CHECK(grid.peaks == "2 1 (the schedule checker's bound: 2 1)");
}

TEST_CASE("pipeline settings that cannot work are refused in one line", "[pipeline][cli]") {
  TempDir dir;
  auto refused = [&](std::vector<std::string> extra, const std::string& expected) {
    std::vector<std::string> args{"train", "--model.preset", "tiny"};
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(30));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(expected));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  refused({"--pipeline.stages", "2"}, "pipeline.stages 2 needs a worker per stage: add --workers 2");
  refused({"--workers", "3", "--pipeline.stages", "2"}, "pipeline.stages 2 does not divide the job's 3 workers");
  refused({"--pipeline.stages", "5"}, "pipeline: ");
  refused({"--pipeline.schedule", "zigzag"}, "pipeline.schedule: unknown pipeline schedule 'zigzag'");
  refused({"--pipeline.stages", "3", "--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2",
           "--pipeline.microbatches", "6"},
          "pipeline: ");
  refused({"--pipeline.stages", "2", "--train.zero", "1"}, "train.zero 1 is not supported with pipeline.stages > 1");
}

TEST_CASE("pipeline.trace writes every stage's ops of every step into one Chrome trace", "[pipeline][trace]") {
  TempDir dir;
  const std::string path = (dir.path() / "run.json").string();
  run_tiny(dir, {"--workers", "2", "--pipeline.stages", "2", "--pipeline.trace", path});
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<std::pair<int, std::string>, int> count;  // (stage, category) → events
  int tracks = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") ++tracks;
    if (e["ph"] == "X") ++count[{e["tid"].get<int>(), e["cat"].get<std::string>()}];
  }
  CHECK(tracks == 2);
  for (int stage : {0, 1}) {
    INFO("stage " << stage);
    // 6 steps x 4 micro-batches (validation passes add only their waits).
    CHECK(count[{stage, "forward"}] == 24);
    CHECK(count[{stage, "backward"}] == 24);
    CHECK(count[{stage, "transfer"}] == 24);  // one send per micro-batch: activations or gradients
    CHECK(count[{stage, "step"}] == 12);      // reduce_grads and optimizer_step per step
  }
}
