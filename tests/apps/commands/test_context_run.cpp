// Context-parallel jobs as a user runs them: real node processes, each a context shard of a data
// replica, the ring's blocks and the all-to-all's over UCX. Every layout takes the steps of one
// process with the same global batch (tests/apps/one_process_steps.hpp): the loss and gradient
// norm of every one of 20 steps of tiny, the final parameter norm, and the final weights tensor by
// tensor within 1e-5 relative, also with pipeline stages under every schedule (each stage's context
// group its C ranks) and with tensor shards (each shard's heads over the context ranks of the same
// shard), with sequence parallelism too. Layouts context shards do not compose with yet are refused in one line, as are
// a sequence length 2C does not divide and an all-to-all over a C that does not divide the heads.

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

struct Layout {
  std::string name;
  std::vector<std::string> args;
};

void check_layouts(const std::vector<Layout>& layouts) {
  TempDir dir;
  const Run one = run_tiny(dir, "one", {"--train.batch_size", "4"});
  for (const Layout& l : layouts) {
    std::vector<std::string> args = with(l.args, {"--fault.recovery", "restart"});
    check_same_steps(run_tiny(dir, "run", args), one, l.name);
  }
}

}  // namespace

TEST_CASE("context shards take the one-process steps of tiny: ring and all_to_all over 2 ranks", "[context]") {
  check_layouts({
      {"cp 2 ring", {"--workers", "2", "--context.shards", "2", "--train.batch_size", "4"}},
      {"cp 2 all_to_all",
       {"--workers", "2", "--context.shards", "2", "--context.method", "all_to_all", "--train.batch_size", "4"}},
  });
}

TEST_CASE("context shards take the one-process steps of tiny: 4 ranks, and 2 data replicas of 2", "[context][slow]") {
  check_layouts({
      {"cp 4 ring", {"--workers", "4", "--context.shards", "4", "--train.batch_size", "4"}},
      {"cp 4 all_to_all",
       {"--workers", "4", "--context.shards", "4", "--context.method", "all_to_all", "--train.batch_size", "4"}},
      {"dp 2 x cp 2 ring, accum 2",
       {"--workers", "4", "--context.shards", "2", "--train.batch_size", "1", "--train.grad_accum", "2"}},
  });
}

TEST_CASE("context shards with pipeline stages take the one-process steps of tiny: 1f1b ring and zb-v all_to_all",
          "[context]") {
  const std::vector<std::string> pp2{"--workers",          "4", "--context.shards",        "2",
                                     "--pipeline.stages",  "2", "--pipeline.microbatches", "2",
                                     "--train.batch_size", "2"};
  check_layouts({
      {"pp 2 x cp 2 1f1b ring", with(pp2, {"--pipeline.schedule", "1f1b"})},
      {"pp 2 x cp 2 zb-v all_to_all",
       with(pp2, {"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2", "--context.method", "all_to_all"})},
  });
}

TEST_CASE(
    "context shards with pipeline stages take the one-process steps of tiny: gpipe, interleaved, zb-h1, and "
    "dp 2 x pp 2 x cp 2",
    "[context][slow]") {
  const std::vector<std::string> pp2{"--workers",          "4", "--context.shards",        "2",
                                     "--pipeline.stages",  "2", "--pipeline.microbatches", "2",
                                     "--train.batch_size", "2"};
  check_layouts({
      {"pp 2 x cp 2 gpipe all_to_all", with(pp2, {"--pipeline.schedule", "gpipe", "--context.method", "all_to_all"})},
      {"pp 2 x cp 2 interleaved v 2 ring",
       with(pp2, {"--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"})},
      {"pp 2 x cp 2 zb-h1 ring", with(pp2, {"--pipeline.schedule", "zb-h1"})},
      {"dp 2 x pp 2 x cp 2 1f1b ring (8 ranks)",
       {"--workers", "8", "--context.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "1"}},
  });
}

TEST_CASE(
    "context shards with tensor shards take the one-process steps of tiny: ring, and all_to_all with sequence "
    "parallelism",
    "[context]") {
  const std::vector<std::string> tp2{"--workers",       "4", "--context.shards",   "2",
                                     "--tensor.shards", "2", "--train.batch_size", "4"};
  check_layouts({
      {"tp 2 x cp 2 ring", tp2},
      {"tp 2 x cp 2 all_to_all sequence parallel",
       with(tp2, {"--context.method", "all_to_all", "--tensor.sequence_parallel", "true"})},
  });
}

TEST_CASE(
    "context shards with tensor shards and pipeline stages take the one-process steps of tiny: pp 2 x tp 2 x "
    "cp 2, and tp 2 x cp 2 sequence parallel with accumulation and recompute",
    "[context][slow]") {
  check_layouts({
      {"pp 2 x tp 2 x cp 2 1f1b ring sequence parallel (8 ranks)",
       {"--workers", "8", "--context.shards", "2", "--tensor.shards", "2", "--pipeline.stages", "2",
        "--pipeline.microbatches", "2", "--train.batch_size", "2", "--tensor.sequence_parallel", "true"}},
      {"tp 2 x cp 2 ring sequence parallel, accum 2, full recompute",
       {"--workers", "4", "--context.shards", "2", "--tensor.shards", "2", "--train.batch_size", "2",
        "--train.grad_accum", "2", "--tensor.sequence_parallel", "true", "--train.recompute", "full"}},
  });
}

TEST_CASE("context shards refuse what they do not compose with yet, and bad shapes, in one line", "[context]") {
  TempDir dir;
  struct Refusal {
    std::vector<std::string> args;
    std::string line;
    std::string workers = "2";
  };
  const std::vector<Refusal> refusals{
      {{"--context.shards", "3"},
       "train.seq_len 128 does not split into 2 x context.shards = 6 equal chunks (the causal load-balanced split; "
       "train.seq_len 0 is model.block_size)"},
      {{"--context.shards", "8", "--context.method", "all_to_all"},
       "context.method all_to_all needs context.shards 8 to divide model.n_head 4"},
      {{"--context.shards", "2", "--train.backend", "cuda"},
       "context.shards > 1 works with train.backend cpu only so far: context attention runs on the CPU kernels (got "
       "'cuda')"},
      {{"--context.shards", "2", "--tensor.shards", "4", "--context.method", "all_to_all"},
       "context.method all_to_all needs context.shards 2 to divide a tensor shard's heads, model.n_head 4 / "
       "tensor.shards 4 = 1",
       "8"},
      {{"--context.shards", "4", "--tensor.shards", "4", "--tensor.sequence_parallel", "true", "--train.seq_len", "24"},
       "tensor.sequence_parallel splits a context shard's train.seq_len 24 / context.shards 4 = 6 rows over "
       "tensor.shards 4, which does not divide them",
       "16"},
      {{"--context.shards", "2", "--train.zero", "1"},
       "context.shards > 1 works with train.zero 0 and comm.compress none only so far"},
      {{"--context.shards", "2"},
       "context.shards > 1 recovers by restarting only so far: add --fault.recovery restart"},
  };
  for (const Refusal& r : refusals) {
    const ProcessResult p = run_troupe(dir, with(with({"train", "--workers", r.workers}, tiny_steps(1)), r.args));
    INFO(p.err);
    CHECK(p.exit_code == 2);
    CHECK_THAT(p.err, Contains(r.line));
    CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  }
}
