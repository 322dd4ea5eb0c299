// train.sync diloco on islands of other layouts than one whole-model replica, as a user runs them:
// ZeRO 1 and 2 over an island's replicas, tensor shards (each shard's slice synced with the same
// shard of the other islands) and context shards (each holding the whole model), against the same job under ZeRO 0 and
// the one-process simulation of the islands (compute::train_islands), and their checkpoints resumed.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/diloco_islands.hpp"
#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::test;

namespace {

// The job of `file` (two islands, a global batch of 8 sequences) on four workers in `layout` (keys
// last; `shape` names it in the job's layout line), checkpointed after step 4 and the last into
// `to`: its final weights.
std::vector<float> four_workers(const TempDir& dir, const std::string& file, const std::vector<std::string>& layout,
                                const std::string& shape, const std::filesystem::path& to) {
  const ProcessResult r = run_troupe(
      dir,
      with({"train", "--config", file, "--workers", "4", "--checkpoint.dir", to.string(), "--checkpoint.every", "4"},
           layout),
      std::chrono::seconds(180));
  INFO(to.filename() << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(shape) && Catch::Contains("diloco: outer step 3 after step 7"));
  return kind_at(to, 7, "param");
}

// Two islands of two replicas of batch 2 under train.zero `zero`.
std::vector<float> zero_islands(const TempDir& dir, const std::string& file, const std::string& zero,
                                const std::filesystem::path& to) {
  return four_workers(dir, file, {"--train.batch_size", "2", "--train.zero", zero}, "2 island(s) of 2", to);
}

// Two islands of one replica of two tensor shards (`extra` keys last).
std::vector<float> tensor_shards(const TempDir& dir, const std::string& file, const std::filesystem::path& to,
                                 const std::vector<std::string>& extra = {}) {
  return four_workers(dir, file, with({"--tensor.shards", "2"}, extra), "x 2 tensor shards", to);
}

// Two islands of one replica of two pipeline stages, 2 micro-batches of `file`'s batch (1f1b unless
// `extra` keys say otherwise).
std::vector<float> pipeline_stages(const TempDir& dir, const std::string& file, const std::filesystem::path& to,
                                   const std::vector<std::string>& extra = {}) {
  return four_workers(
      dir, file, with({"--pipeline.stages", "2", "--pipeline.microbatches", "2", "--train.grad_accum", "1"}, extra),
      "2 island(s) of 1", to);
}

// The pipeline's trace under DiLoCo (docs/formats/chrome-trace.md): beside the tracks of each
// stage's ops (tid = stage), a track of the stage's outer syncs (tid = 2 + stage) in each replica's
// process, holding its syncs, which land after steps 3, 6 and 7.
void check_outer_sync_tracks(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<std::pair<int, int>, std::string> names;
  std::map<std::pair<int, int>, std::vector<std::string>> landed;  // track → each sync's landing step
  for (const auto& e : doc["traceEvents"]) {
    const std::pair<int, int> track{e["pid"].get<int>(), e["tid"].get<int>()};
    if (e["ph"] == "M" && e["name"] == "thread_name") names[track] = e["args"]["name"].get<std::string>();
    if (e["ph"] == "X" && e["cat"] == "sync")
      landed[track].push_back(e["args"]["landed_after_step"].get<std::string>());
  }
  CHECK(landed.size() == 4);
  for (int replica : {0, 1})
    for (int stage : {0, 1}) {
      const int rank = replica + 2 * stage;  // the grid's rank order: dp fastest, then the stage
      INFO("replica " << replica << ", stage " << stage);
      CHECK(names[{replica, stage}] == "stage " + std::to_string(stage) + " (rank " + std::to_string(rank) + ")");
      CHECK(names[{replica, 2 + stage}] ==
            "stage " + std::to_string(stage) + " outer syncs (rank " + std::to_string(rank) + ")");
      CHECK(landed[{replica, 2 + stage}] == std::vector<std::string>{"3", "6", "7"});
    }
}

// Two islands of one replica of two context shards by `method` (ring or all_to_all).
std::vector<float> context_shards(const TempDir& dir, const std::string& file, const std::string& method,
                                  const std::filesystem::path& to) {
  return four_workers(dir, file, {"--context.shards", "2", "--context.method", method},
                      "2 context shards (" + method + ")", to);
}

// The checkpoint after step 4 in `saved`, resumed by two processes of whole replicas, ends with the
// weights of `file`'s islands simulated from that saved state (island 0's inner state and the outer
// state, its parts assembled into the whole model's).
void check_resumes_as_simulated(const TempDir& dir, const std::filesystem::path& saved, const std::string& file) {
  INFO("resumed from " << saved.filename());
  const std::filesystem::path resumed = dir.path() / (saved.filename().string() + "-resumed");
  resume(dir, saved, 4, resumed, file, 2, 100);
  CHECK(same_bits(kind_at(resumed, 7, "param"), simulated_from(file, saved, 4)));
}

// The final weights of `saved` (step 7) against `simulated` islands of one whole replica: the
// weights within 1e-5 tensor by tensor (the tolerance of the layouts against one process), the
// outer momentum, a sum of differences of the weights that weighs their rounding more, within 1e-4.
void check_as_simulated(const std::filesystem::path& saved, const Simulated& simulated, const std::string& what) {
  const std::vector<float> real = kind_at(saved, 7, "param");
  std::string where, momentum_where;
  const double worst = worst_tensor(real, simulated.weights, where);
  const double momentum = worst_tensor(kind_at(saved, 7, "outer_momentum"), simulated.momentum, momentum_where);
  std::printf(
      "diloco, %s against the one-process simulation after 7 steps: worst tensor %s, relative difference %.3g; "
      "outer momentum's worst %s, %.3g\n",
      what.c_str(), where.c_str(), worst, momentum_where.c_str(), momentum);
  CHECK(worst < 1e-5);
  CHECK(momentum < 1e-4);
  CHECK(max_difference(real, simulated.start) > 1e-3);
}

// A job of two islands, a global batch of 8 sequences, 7 steps at H 4 in 2 fragments 2 steps apart,
// each applied `overlap` steps after its sync: fragment 1 synced after steps 2 and 6, fragment 0
// after step 4, and every fragment after the last step, 7.
// Each island one replica of `batch_size` sequences a micro-batch.
std::string streaming_file(const TempDir& dir, int overlap, int batch_size = 4) {
  return dir.write("streaming-" + std::to_string(overlap) + "-" + std::to_string(batch_size) + ".toml",
                   "[model]\npreset = \"tiny\"\n[train]\nsteps = 7\nbatch_size = " + std::to_string(batch_size) +
                       "\nseq_len = 64\nthreads = 1\nval_every = 0\nval_batches = 1\nsync = \"diloco\"\nislands = "
                       "2\ngrad_accum = " +
                       std::to_string(4 / batch_size) + "\ndiloco_steps = 4\ndiloco_fragments = 2\ndiloco_overlap = " +
                       std::to_string(overlap) + "\n[sample]\ntokens = 0\n");
}

// `file` on four workers in `layout`, checkpointed into `to`; its log names the fragments.
void run_streaming(const TempDir& dir, const std::string& file, const std::vector<std::string>& layout,
                   const std::filesystem::path& to) {
  const ProcessResult r =
      run_troupe(dir, with({"train", "--config", file, "--workers", "4", "--checkpoint.dir", to.string()}, layout),
                 std::chrono::seconds(180));
  INFO(to.filename() << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("outer step every 4 steps in 2 fragments, 2 steps apart") &&
                        Catch::Contains(") after step 7: pseudo-gradients of"));
}

}  // namespace

// Inside an island ZeRO shards over the island's replicas; after each step's all-gather every rank
// holds the whole weights the outer step reads. ZeRO-1 does plain data parallelism's arithmetic
// element for element; ZeRO-2 sums by reduce-scatter and takes the clip norm from the shards', so
// it agrees to rounding. Under ZeRO-3 each rank keeps its shard of the weights alone and takes the
// outer step on it, summed with the same shard of the other island. Replicas of batch 2 add their
// gradients in another order than the simulation's islands of one replica of batch 4: to rounding too.
TEST_CASE(
    "diloco: islands of two replicas under ZeRO 1 take ZeRO 0's steps and write island 0's moments bit for "
    "bit, and under ZeRO 0 to 3 end within 1e-5 of the one-process simulation",
    "[diloco][zero]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string file = resume_file(dir, 2);  // 7 steps, H 3: syncs after steps 3, 6 and 7
  std::map<std::string, fs::path> saved;
  for (const std::string zero : {"0", "1", "2", "3"}) {
    saved[zero] = dir.path() / ("zero" + zero);
    zero_islands(dir, file, zero, saved[zero]);
  }
  for (long step : {4L, 7L})
    for (const char* kind : {"param", "adam_m", "adam_v", "outer_sync", "outer_momentum"}) {
      INFO("step " << step << " " << kind);
      CHECK(same_bits(kind_at(saved["1"], step, kind), kind_at(saved["0"], step, kind)));
    }
  const Simulated simulated = simulate(file, 7);
  CHECK(simulated.syncs == 3);
  for (const std::string zero : {"0", "2", "3"}) {
    const double worst = max_difference(kind_at(saved[zero], 7, "param"), simulated.weights);
    std::string where;
    // The outer momentum, a sum of differences of the weights, weighs their rounding more.
    const double momentum = worst_tensor(kind_at(saved[zero], 7, "outer_momentum"), simulated.momentum, where);
    std::printf(
        "diloco, 2 islands x dp 2 under ZeRO %s against the one-process simulation: max weight difference "
        "after 7 steps %.3g; outer momentum's worst tensor %s, relative difference %.3g\n",
        zero.c_str(), worst, where.c_str(), momentum);
    CHECK(worst < 1e-5);
    CHECK(momentum < 1e-4);
  }
  CHECK(max_difference(kind_at(saved["3"], 7, "param"), simulated.start) > 1e-3);
}

TEST_CASE(
    "diloco: a checkpoint of two islands of two ZeRO-1 or ZeRO-3 replicas resumes on two islands of one from the "
    "outer state and island 0's moments saved",
    "[diloco][zero][checkpoint]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string two = resume_file(dir, 2);
  for (const std::string zero : {"1", "3"}) {
    INFO("train.zero " << zero);
    const fs::path saved = dir.path() / ("zero" + zero);
    zero_islands(dir, two, zero, saved);
    // Island 0's shards of the moments (under ZeRO-3 of the weights and the outer state too) are
    // assembled; the outer state is a momentum of one sync.
    check_resumes_as_simulated(dir, saved, two);
  }
}

// Each tensor shard takes the outer step on its slice of the weights, summed with the same shard of
// the other island: the islands' weights are those of two islands of one whole replica, to the
// rounding that tensor shards' sums add (the tolerance the tensor-shard layouts keep against one
// process, tensor by tensor).
TEST_CASE(
    "diloco: two islands of two tensor shards end with the weights of the one-process simulation of two islands "
    "within 1e-5, with and without sequence parallelism",
    "[diloco][tensor]") {
  TempDir dir;
  const std::string file = resume_file(dir, 2);  // 7 steps, H 3: syncs after steps 3, 6 and 7
  const Simulated simulated = simulate(file, 7);
  for (const bool sequence_parallel : {false, true}) {
    const std::string name = sequence_parallel ? "tp2-sp" : "tp2";
    tensor_shards(dir, file, dir.path() / name,
                  sequence_parallel ? std::vector<std::string>{"--tensor.sequence_parallel", "true"}
                                    : std::vector<std::string>{});
    check_as_simulated(dir.path() / name, simulated,
                       std::string("2 islands x tp 2") + (sequence_parallel ? " (sequence parallel)" : ""));
  }
}

// Each stage takes the outer step on its blocks, summed with the same stage of the other island
// (the last stage's copy of the tied embedding from the same values as the first's): the islands'
// weights are those of two islands of one whole replica, to the rounding of the embedding's two
// gradient shares summed between the stages.
TEST_CASE(
    "diloco: two islands of two pipeline stages end with the weights of the one-process simulation of two "
    "islands within 1e-5, and their trace holds each stage's outer syncs beside its ops",
    "[diloco][pipeline]") {
  TempDir dir;
  // Islands of one replica of 2 micro-batches of 2 sequences: the simulation's trainers accumulate
  // 2 micro-batches of 2, and read what the pipeline's replicas read.
  const std::string file = resume_file(dir, 2, 2);
  const Simulated simulated = simulate(file, 7);
  const std::string trace = dir.file("pp2-trace.json");
  const std::vector<float> real = pipeline_stages(dir, file, dir.path() / "pp2", {"--pipeline.trace", trace});
  check_outer_sync_tracks(trace);
  std::string where;
  const double worst = worst_tensor(real, simulated.weights, where);
  std::printf(
      "diloco, 2 islands x pp 2 against the one-process simulation after 7 steps: worst tensor %s, relative "
      "difference %.3g\n",
      where.c_str(), worst);
  CHECK(worst < 1e-5);
  CHECK(max_difference(real, simulated.start) > 1e-3);
}

// A context group's ranks hold the whole model and sum its gradient inside their island; each takes
// the outer step on the whole buffer with the rank at its place in the other island, so the group's
// ranks stay equal. Against two islands of one whole replica the difference is the rounding of the
// attention split over the positions (its online softmax over blocks, its sums of gradients).
TEST_CASE(
    "diloco: two islands of two context shards, ring and all-to-all, end with the weights of the one-process "
    "simulation of two islands within 1e-5, and resume on two islands of one whole replica",
    "[diloco][context][checkpoint]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string file = resume_file(dir, 2);  // 7 steps, H 3: syncs after steps 3, 6 and 7
  const Simulated simulated = simulate(file, 7);
  for (const std::string method : {"ring", "all_to_all"}) {
    const fs::path saved = dir.path() / ("cp2-" + method);
    context_shards(dir, file, method, saved);
    check_as_simulated(saved, simulated, "2 islands x cp 2 (" + method + ")");
  }
  // One copy of the model and its outer state, written once.
  check_resumes_as_simulated(dir, dir.path() / "cp2-ring", file);
}

// A stage of two model chunks syncs them as one buffer, the chunks' parameters one after another
// (under ZB-V stage 0's chunks hold both the embedding and the head's copy of it). The schedules
// sum each parameter's gradient in 1F1B's order, so the weights are those of the islands of
// one-chunk stages above, against the simulation to the same rounding.
TEST_CASE(
    "diloco: two islands of two pipeline stages of two chunks each, interleaved and ZB-V, end with the weights of "
    "the one-process simulation within 1e-5, and their checkpoint resumes on two islands of one whole replica",
    "[diloco][pipeline][checkpoint]") {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string file = resume_file(dir, 2, 2);
  const Simulated simulated = simulate(file, 7);
  for (const std::string schedule : {"interleaved", "zb-v"}) {
    const fs::path saved = dir.path() / schedule;
    const std::vector<float> real =
        pipeline_stages(dir, file, saved, {"--pipeline.schedule", schedule, "--pipeline.virtual_stages", "2"});
    std::string where;
    const double worst = worst_tensor(real, simulated.weights, where);
    std::printf(
        "diloco, 2 islands x pp 2 %s (2 chunks a stage) against the one-process simulation after 7 steps: worst "
        "tensor %s, relative difference %.3g\n",
        schedule.c_str(), where.c_str(), worst);
    CHECK(worst < 1e-5);
    CHECK(max_difference(real, simulated.start) > 1e-3);
    check_resumes_as_simulated(dir, saved, file);
  }
}

TEST_CASE(
    "diloco: a checkpoint of two islands of two tensor shards, or of two pipeline stages, assembles the parts' outer "
    "state and resumes on two islands of one whole replica from it",
    "[diloco][tensor][pipeline][checkpoint]") {
  TempDir dir;
  // The pipeline's islands read 2 micro-batches of 2 sequences, as the resumed replicas accumulate.
  const std::string tensor_file = resume_file(dir, 2), pipeline_file = resume_file(dir, 2, 2);
  tensor_shards(dir, tensor_file, dir.path() / "tp2");
  pipeline_stages(dir, pipeline_file, dir.path() / "pp2");
  // The parts' outer state assembled into the whole model's (the last stage's copy of the tied
  // embedding not written).
  for (const auto& [saved, file] : {std::pair{dir.path() / "tp2", tensor_file}, {dir.path() / "pp2", pipeline_file}})
    check_resumes_as_simulated(dir, saved, file);
}

// Streaming under ZeRO-3: each rank keeps its shard's part of each fragment (empty where the shard
// holds none of it) and syncs it with the same shard of the other island, on the fragment's
// schedule and overlap. Every element takes the outer step alone, so the shards' steps are
// ZeRO-2's whole-buffer ones, and ZeRO-3's inner steps are ZeRO-2's at one micro-batch a step: bit
// for bit. The last step's landing mixes each island's weights with the outer ones, so the islands'
// final weights differ: equal bits also say the checkpoint holds island 0's alone.
TEST_CASE(
    "diloco: streaming fragments with overlap on islands of two ZeRO-3 shards, of whole models or of tensor shards, "
    "take ZeRO-2's steps bit for bit and end within 1e-5 of the one-process simulation",
    "[diloco][zero][tensor]") {
  TempDir dir;
  const std::string file = streaming_file(dir, 1);
  std::map<std::string, std::filesystem::path> saved;
  for (const std::string zero : {"2", "3"}) {
    saved[zero] = dir.path() / ("zero" + zero);
    run_streaming(dir, file, {"--train.batch_size", "2", "--train.zero", zero}, saved[zero]);
  }
  // The same of two tensor shards: a shard of each tensor shard's buffer, whose fragments are runs
  // of that buffer.
  for (const std::string zero : {"2", "3"}) {
    saved["tp" + zero] = dir.path() / ("tp2-zero" + zero);
    const ProcessResult r =
        run_troupe(dir,
                   {"train", "--config", file, "--workers", "8", "--tensor.shards", "2", "--train.batch_size", "2",
                    "--train.zero", zero, "--checkpoint.dir", saved["tp" + zero].string()},
                   std::chrono::seconds(180));
    INFO("tensor shards, train.zero " << zero << " stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("outer step every 4 steps in 2 fragments, 2 steps apart"));
  }
  for (const char* kind : {"param", "outer_sync", "outer_momentum"})
    for (const std::string layout : {"", "tp"}) {
      INFO(kind << " " << layout);
      CHECK(same_bits(kind_at(saved[layout + "3"], 7, kind), kind_at(saved[layout + "2"], 7, kind)));
    }
  const Simulated simulated = simulate(file, 7);
  CHECK(simulated.syncs == 4);
  check_as_simulated(saved["3"], simulated, "streaming, 2 islands x dp 2 under ZeRO 3, overlap 1");
  check_as_simulated(saved["tp3"], simulated, "streaming, 2 islands x dp 2 x tp 2 under ZeRO 3, overlap 1");
}

// A tensor shard's buffer holds each unit's slices in the model's order, so each fragment's slices
// are one run of it, synced with the same shard of the other island; the overlapped sum stays in
// flight across the next step's tensor all-reduces.
TEST_CASE(
    "diloco: streaming fragments with overlap on islands of two tensor shards end within 1e-5 of the one-process "
    "simulation",
    "[diloco][tensor]") {
  TempDir dir;
  const std::string file = streaming_file(dir, 1);
  run_streaming(dir, file, {"--tensor.shards", "2"}, dir.path() / "tp2");
  const Simulated simulated = simulate(file, 7);
  CHECK(simulated.syncs == 4);
  check_as_simulated(dir.path() / "tp2", simulated, "streaming, 2 islands x tp 2, overlap 1");
}

// A stage keeps its part of each fragment as one run (fragment 0's blocks and the embeddings on the
// first stage; the last fragment's blocks and ln_f on the last), and the last stage its copy of the
// tied embedding as one more run on fragment 0's schedule, so both copies take the same outer steps.
// A stage of two chunks (interleaved, ZB-V's V) keeps a run of each fragment in each chunk: tiny's
// 4 blocks one a chunk, so with two fragments of two blocks each stage holds a block of each
// fragment (interleaved: blocks 0 and 2, 1 and 3; ZB-V: 0 and 3, 1 and 2).
TEST_CASE(
    "diloco: streaming fragments with overlap on islands of two pipeline stages, 1f1b, zb-h1, interleaved and zb-v, "
    "end within 1e-5 of the one-process simulation",
    "[diloco][pipeline]") {
  TempDir dir;
  // The stages' islands read 2 micro-batches of 2 sequences, as the simulated replicas accumulate.
  const std::string file = streaming_file(dir, 1, 2);
  const Simulated simulated = simulate(file, 7);
  CHECK(simulated.syncs == 4);
  for (const std::string schedule : {"1f1b", "zb-h1", "interleaved", "zb-v"}) {
    const std::filesystem::path saved = dir.path() / schedule;
    const bool chunks = schedule == "interleaved" || schedule == "zb-v";
    run_streaming(dir, file,
                  {"--pipeline.stages", "2", "--pipeline.microbatches", "2", "--train.grad_accum", "1",
                   "--pipeline.schedule", schedule, "--pipeline.virtual_stages", chunks ? "2" : "1"},
                  saved);
    check_as_simulated(saved, simulated, "streaming, 2 islands x pp 2 " + schedule + ", overlap 1");
  }
}

// Under ZeRO-3 every rank of every island keeps a shard of its island's weights; the checkpoint
// holds island 0's alone (its ranks are the writers the commit waits for), so each range is
// written once and the checkpoint resumes as island 0's state.
TEST_CASE(
    "diloco: a checkpoint of two islands of two ZeRO-3 replicas of two tensor shards is island 0's state, written "
    "once, and resumes on two islands of one whole replica",
    "[diloco][tensor][zero][checkpoint]") {
  TempDir dir;
  // Each simulated island one replica of 2 micro-batches of 2, as the two replicas of batch 2 read.
  const std::string file = resume_file(dir, 2, 2);
  const std::filesystem::path saved = dir.path() / "tp2-zero3";
  const ProcessResult r =
      run_troupe(dir,
                 {"train", "--config", file, "--workers", "8", "--tensor.shards", "2", "--train.zero", "3",
                  "--train.grad_accum", "1", "--checkpoint.dir", saved.string(), "--checkpoint.every", "4"},
                 std::chrono::seconds(180));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("x 2 tensor shards") && !Catch::Contains("checkpoint after step"));
  check_resumes_as_simulated(dir, saved, file);
}
