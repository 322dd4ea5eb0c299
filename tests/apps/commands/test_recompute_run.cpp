// train.recompute as a user runs it: one process, data-parallel replicas and pipeline stages, and a
// model with experts alone and on expert shards, end with weights bitwise equal to the same run
// that keeps every activation, and a mode that does not exist is refused in one line.

#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

constexpr long kRecomputeSteps = 4;

// The final parameters of `preset` trained kRecomputeSteps steps with `extra` arguments.
std::vector<float> trained(const TempDir& dir, const std::string& name, std::vector<std::string> extra,
                           const std::string& preset = "tiny") {
  const auto out = dir.path() / name;
  std::vector<std::string> args{"train",
                                "--model.preset",
                                preset,
                                "--train.steps",
                                std::to_string(kRecomputeSteps),
                                "--train.val_batches",
                                "1",
                                "--sample.tokens",
                                "0",
                                "--train.threads",
                                "1",
                                "--checkpoint.dir",
                                out.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
  INFO(name << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return final_parameters(out, kRecomputeSteps);
}

}  // namespace

TEST_CASE("recompute selective and full end with the weights of keeping every activation, bitwise",
          "[recompute]") {
  TempDir dir;
  struct Layout {
    std::string name;
    std::vector<std::string> args;
  };
  const std::vector<Layout> layouts = {
      {"one-process", {}},
      {"dp2", {"--workers", "2"}},
      {"pp2", {"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "1f1b"}},
  };
  for (const Layout& layout : layouts) {
    const std::vector<float> kept = trained(dir, layout.name + "-none", layout.args);
    for (const std::string mode : {"selective", "full"}) {
      std::vector<std::string> args = layout.args;
      args.insert(args.end(), {"--train.recompute", mode});
      INFO(layout.name << " with train.recompute " << mode);
      const std::vector<float> redone = trained(dir, layout.name + "-" + mode, args);
      REQUIRE(redone.size() == kept.size());
      CHECK(std::memcmp(redone.data(), kept.data(), kept.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE(
    "recompute selective and full with experts end with the weights of keeping every activation, bitwise, alone "
    "and on 2 expert shards",
    "[recompute][moe]") {
  TempDir dir;
  const std::vector<std::string> small_batch = {"--train.batch_size", "2", "--train.seq_len", "64"};
  for (const bool sharded : {false, true}) {
    std::vector<std::string> layout = small_batch;
    if (sharded) layout.insert(layout.end(), {"--workers", "2", "--expert.shards", "2"});
    const std::string name = sharded ? "moe-ep2" : "moe";
    const std::vector<float> kept = trained(dir, name + "-none", layout, "moe-tiny");
    for (const std::string mode : {"selective", "full"}) {
      std::vector<std::string> args = layout;
      args.insert(args.end(), {"--train.recompute", mode});
      INFO(name << " with train.recompute " << mode);
      const std::vector<float> redone = trained(dir, name + "-" + mode, args, "moe-tiny");
      REQUIRE(redone.size() == kept.size());
      CHECK(std::memcmp(redone.data(), kept.data(), kept.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("train.recompute that is no mode is refused in one line", "[recompute][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--train.recompute", "partial"},
                    "train.recompute: expected none, selective or full, got 'partial'");
}
