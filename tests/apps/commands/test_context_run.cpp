// Context-parallel jobs as a user runs them: real node processes, each a context shard of a data
// replica, the ring's blocks and the all-to-all's over UCX. Every layout takes the steps of one
// process with the same global batch (tests/apps/one_process_steps.hpp): the loss and gradient
// norm of every one of 20 steps of tiny, the final parameter norm, and the final weights tensor by
// tensor within 1e-5 relative, alone, under ZeRO, with pipeline stages under every schedule (each
// stage's context group its C ranks) and with tensor shards (each shard's heads over the context
// ranks of the same shard), with sequence parallelism too; compressed sums take the steps of data
// replicas with the same compression within a stated tolerance. A checkpoint is written once and
// resumes on another number of shards; a killed shard's process is replaced in place; the trace
// holds every exchange. Layouts context shards do not compose with yet are refused in one line, as
// are a sequence length 2C does not divide and an all-to-all over a C that does not divide the
// heads.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/drill_outcome.hpp"
#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/gpt_config.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// How far a compressed context-sharded run's losses and final parameter norm may stray from data
// replicas' with the same compression, relative (measured on tiny: the printed losses equal, the
// parameter norms within 2e-7 for bf16 and 1e-8 for PowerSGD after 20 steps).
constexpr double compressed_tolerance = 1e-5;

struct ContextLayout {
  std::string name;
  std::vector<std::string> args;
};

void check_layouts(const std::vector<ContextLayout>& layouts) {
  TempDir dir;
  const Run one = run_tiny(dir, "one", {"--train.batch_size", "4"});
  for (const ContextLayout& l : layouts) {
    check_same_steps(run_tiny(dir, "run", l.args), one, l.name);
  }
}

// `troupe drill kill-node` killing node 1 after step 5 of a 12-step tiny run with `layout`: its output,
// checked to pass with the undisturbed run's weights, bitwise, and no node restarted but the lost one.
std::string drilled(const std::vector<std::string>& layout) {
  TempDir dir;
  const ProcessResult r = run_troupe(
      dir,
      with(with({"drill", "kill-node", "--dir", (dir.path() / "drill").string(), "--at-step", "5", "--target", "1"},
                layout),
           tiny_steps(12)),
      std::chrono::seconds(240));
  std::printf("%s", r.out.substr(std::min(r.out.size(), r.out.find("drill kill-node:"))).c_str());
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out,
             Contains("verdict: PASS") &&
                 Contains("final weights equal to an undisturbed run: yes (parameters and AdamW moments, bitwise)"));
  if (!kill_stalled_a_survivor(r.out))
    CHECK_THAT(r.out, Contains("lost node 1") && Contains("survivors kept their processes: yes") &&
                          !Contains("restarting every node"));
  return r.out;
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

TEST_CASE("context shards under ZeRO-1, 2 and 3 take the one-process steps of tiny", "[context][zero]") {
  check_layouts({
      {"cp 2 zero 1", {"--workers", "2", "--context.shards", "2", "--train.batch_size", "4", "--train.zero", "1"}},
      {"cp 2 zero 2", {"--workers", "2", "--context.shards", "2", "--train.batch_size", "4", "--train.zero", "2"}},
      {"cp 2 zero 3", {"--workers", "2", "--context.shards", "2", "--train.batch_size", "4", "--train.zero", "3"}},
  });
}

TEST_CASE("2 data replicas of 2 context shards under ZeRO-3 take the one-process steps of tiny", "[context][zero]") {
  check_layouts({{"dp 2 x cp 2 zero 3",
                  {"--workers", "4", "--context.shards", "2", "--train.batch_size", "2", "--train.zero", "3"}}});
}

// A compressed sum over a context group's ranks compresses other addends than over data replicas
// (each rank's share of every sequence, not its sequences), with the same sum: bf16 rounds other
// numbers, and PowerSGD's factors and residuals are linear in the addends, so the steps agree
// within rounding, not bit for bit.
TEST_CASE("context shards under bf16 and PowerSGD sums take the steps of 2 data replicas with the same compression",
          "[context][compression]") {
  TempDir dir;
  const Run one = run_tiny(dir, "one", {"--train.batch_size", "4"});
  for (const std::string kind : {"bf16", "powersgd"}) {
    const std::vector<std::string> compressed{"--workers", "2", "--comm.compress", kind, "--comm.compress_start_step",
                                              "1"};
    const Run replicas = run_tiny(dir, "dp", with(compressed, {"--train.batch_size", "2"}));
    const Run shards = run_tiny(dir, "cp", with(compressed, {"--context.shards", "2", "--train.batch_size", "4"}));
    INFO(kind << ": param norm " << shards.param_norm << " vs " << replicas.param_norm
              << " (plain, one process: " << one.param_norm << ")");
    std::printf("cp 2 %s: param norm %.9g, dp 2 %s: %.9g, relative difference %.3g\n", kind.c_str(), shards.param_norm,
                kind.c_str(), replicas.param_norm,
                std::fabs(shards.param_norm - replicas.param_norm) / replicas.param_norm);
    CHECK(shards.param_norm != one.param_norm);  // compressed
    for (std::size_t s = 0; s < replicas.steps.size(); ++s) {
      INFO("step " << s + 1 << ": loss " << shards.steps[s].loss << " vs " << replicas.steps[s].loss);
      CHECK(close(shards.steps[s].loss, replicas.steps[s].loss, compressed_tolerance, 1e-4));
    }
    CHECK(std::fabs(shards.param_norm - replicas.param_norm) <= compressed_tolerance * replicas.param_norm);
  }
}

TEST_CASE("a checkpoint of 2 context shards is written once and resumes on 1 rank and on 4 context shards",
          "[context][checkpoint]") {
  TempDir dir;
  const fs::path saved = dir.path() / "cp2";
  const auto job = with(tiny_steps(8), {"--checkpoint.every", "4", "--checkpoint.dir", saved.string()});
  const ProcessResult undisturbed = run_troupe(
      dir, with(with({"train"}, job), {"--workers", "2", "--context.shards", "2", "--train.batch_size", "4"}),
      std::chrono::seconds(120));
  INFO(undisturbed.out << undisturbed.err);
  REQUIRE(undisturbed.exit_code == 0);
  const double loss = number_after(undisturbed.out, "final train loss");
  const double norm = number_after(undisturbed.out, "param norm");
  REQUIRE(troupe::checkpoint::committed_steps(saved).value() == std::vector<std::int64_t>{8, 4});
  // Both shards hold the same parameters and moments: the first writes them, the second nothing.
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(troupe::checkpoint::step_dir(saved, 4)))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files == std::vector<std::string>{"manifest.json", "rank-00000.safetensors"});

  // The same global batch of 4 sequences per step.
  for (const ContextLayout& l :
       {ContextLayout{"1 rank", {"--train.batch_size", "4"}},
        ContextLayout{"cp 4", {"--workers", "4", "--context.shards", "4", "--train.batch_size", "4"}}}) {
    INFO(l.name);
    const fs::path copy = dir.path() / ("copy" + std::to_string(l.args.size()));
    fs::copy(saved, copy, fs::copy_options::recursive);
    fs::remove_all(troupe::checkpoint::step_dir(copy, 8));
    const auto resume = with(tiny_steps(8), {"--checkpoint.dir", copy.string(), "--resume"});
    const ProcessResult r = run_troupe(dir, with(with({"train"}, resume), l.args), std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("resumed from " + troupe::checkpoint::step_dir(copy, 4).string() + " after step 4"));
    std::printf("saved at cp 2, resumed at step 4 on %s: loss %.4f, param norm %.9g (undisturbed cp 2: %.4f, %.9g)\n",
                l.name.c_str(), number_after(r.out, "final train loss"), number_after(r.out, "param norm"), loss, norm);
    CHECK(number_after(r.out, "final train loss") == Approx(loss).epsilon(1e-4));
    CHECK(number_after(r.out, "param norm") == Approx(norm).epsilon(1e-6));
  }
}

// Every rank of a context group holds the same parameters and moments, so the survivor gives the
// replacement its state; the context group starts its sequence afresh under the recovery's epoch
// on both, as the data-parallel group does.
TEST_CASE(
    "drill kill-node on 2 context shards: only the lost shard's process is started again and takes its state "
    "from the other shard, losing no step",
    "[context][drill]") {
  const std::string out = drilled({"--workers", "2", "--context.shards", "2", "--train.batch_size", "4"});
  if (!kill_stalled_a_survivor(out))
    CHECK_THAT(out, Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        Contains("rank 1 in its node's new process, resumed from rank 0's memory"));
}

TEST_CASE(
    "drill kill-node on 2 context shards under ZeRO-1: no shard holds the lost moments, so every rank rolls "
    "back in place to the newest checkpoint",
    "[context][drill]") {
  const std::string out =
      drilled({"--workers", "2", "--context.shards", "2", "--train.batch_size", "4", "--train.zero", "1"});
  if (!kill_stalled_a_survivor(out))
    CHECK_THAT(out,
               Contains("recovered from a surviving replica's memory: no (in place by rollback to checkpoint step"));
}

TEST_CASE("drill kill-node on 2 pipeline stages of 2 context shards: the lost rank's process is started again in place",
          "[context][drill]") {
  const std::string out = drilled({"--workers", "4", "--context.shards", "2", "--pipeline.stages", "2",
                                   "--pipeline.microbatches", "2", "--train.batch_size", "2"});
  if (!kill_stalled_a_survivor(out) && replica_holds_newest_step(out))
    CHECK_THAT(
        out, Contains("steps lost: 0\n") && Contains("rank 1 in its node's new process, resumed from rank 0's memory"));
}

TEST_CASE("context shards with pipeline stages or tensor shards under ZeRO take the one-process steps of tiny",
          "[context][zero]") {
  check_layouts({
      {"pp 2 x cp 2 zero 1",
       {"--workers", "4", "--context.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "2", "--train.zero", "1"}},
      {"tp 2 x cp 2 zero 2",
       {"--workers", "4", "--context.shards", "2", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero",
        "2"}},
  });
}

TEST_CASE("pipeline.trace with context shards writes every rank's ring shifts or all-to-alls into one Chrome trace",
          "[context][trace]") {
  TempDir dir;
  const int layers = troupe::compute::gpt_preset("tiny").value().n_layer;
  const long train_steps = 3;
  // Per layer, a training micro-batch's forward and backward and the one validation batch's
  // forward (docs/context-parallel.md's table): C - 1 shifts forward, C backward; 2 all-to-alls
  // forward, 3 backward (q, k and v moved again).
  for (const auto& [method, per_layer] : {std::pair<std::string, long>{"ring", train_steps * 3 + 1},
                                          std::pair<std::string, long>{"all_to_all", train_steps * 5 + 2}}) {
    INFO(method);
    const std::string path = (dir.path() / (method + ".json")).string();
    const ProcessResult r =
        run_troupe(dir,
                   with(with({"train", "--workers", "2", "--context.shards", "2", "--context.method", method,
                              "--train.batch_size", "2", "--pipeline.trace", path},
                             tiny_steps(train_steps)),
                        {"--train.val_batches", "1"}),
                   std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    std::ifstream in(path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    std::map<int, long> events;  // context shard → its exchanges
    std::vector<std::string> tracks;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name") tracks.push_back(e["args"]["name"].get<std::string>());
      if (e["ph"] != "X") continue;
      CHECK(e["pid"] == 0);
      CHECK(e["cat"] == "transfer");
      CHECK(e["name"] == (method == "ring" ? "ring_shift" : "all_to_all"));
      CHECK(std::stol(e["args"]["bytes"].get<std::string>()) > 0);
      ++events[e["tid"].get<int>()];
    }
    CHECK(tracks == std::vector<std::string>{"context shard 0 (rank 0)", "context shard 1 (rank 1)"});
    CHECK(events == std::map<int, long>{{0, layers * per_layer}, {1, layers * per_layer}});
  }
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
      {{"--context.shards", "2", "--fault.elastic", "true"},
       "context.shards > 1 does not work with fault.elastic yet: a context group keeps its 2 ranks, and a shrink or "
       "grow moves single ranks"},
  };
  for (const Refusal& r : refusals) {
    const ProcessResult p = run_troupe(dir, with(with({"train", "--workers", r.workers}, tiny_steps(1)), r.args));
    INFO(p.err);
    CHECK(p.exit_code == 2);
    CHECK_THAT(p.err, Contains(r.line));
    CHECK(std::count(p.err.begin(), p.err.end(), '\n') == 1);
  }
}
