// Tensor-parallel jobs as a user runs them: real node processes, each a tensor shard (with data
// replicas and pipeline stages around them), the shards' sums and gathers over UCX. Every layout
// must take the steps of one process with the same global batch: the loss and gradient norm of
// every step, the final parameter norm, and the final weights tensor by tensor within 1e-5
// relative. Checkpoints written on one grid resume on others, an export from tensor shards equals
// the one-process export, and bad layouts are refused with one line.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/checkpoint_parameters.hpp"
#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

// The float values after a safetensors file's header, and the header's bytes.
struct SafetensorsValues {
  std::string header;
  std::vector<float> values;

  explicit SafetensorsValues(const std::filesystem::path& path) {
    const std::string bytes = file_text(path);
    REQUIRE(bytes.size() >= 8);
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    REQUIRE(8 + length <= bytes.size());
    header = bytes.substr(8, length);
    values.resize((bytes.size() - 8 - length) / sizeof(float));
    std::memcpy(values.data(), bytes.data() + 8 + length, values.size() * sizeof(float));
  }
};

struct ShardLayout {
  std::string name;
  std::vector<std::string> args;
};

// Every layout's run of tiny takes the steps of one process of batch 8.
void check_layouts_against_one_process(const std::vector<ShardLayout>& layouts) {
  TempDir dir;
  const Run one = run_tiny(dir, "one", {"--train.batch_size", "8"});
  for (const ShardLayout& l : layouts) check_same_steps(run_tiny(dir, "run", l.args), one, l.name);
}

}  // namespace

TEST_CASE(
    "tensor shards alone and with data replicas, pipeline stages, ZeRO-2 and 3 and sequence parallelism take "
    "the one-process steps of tiny",
    "[tensor]") {
  check_layouts_against_one_process({
      {"tp 2", {"--workers", "2", "--tensor.shards", "2", "--train.batch_size", "8"}},
      {"dp 2 x tp 2", {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4"}},
      {"tp 2 x pp 2 (1f1b)",
       {"--workers", "4", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "4"}},
      {"dp 2 x tp 2 x pp 2 (8 ranks)",
       {"--workers", "8", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "2"}},
      {"dp 2 x tp 2 ZeRO-3",
       {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero", "3"}},
      {"dp 2 x tp 2 ZeRO-2 sequence parallel",
       {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero", "2",
        "--tensor.sequence_parallel", "true"}},
  });
}

TEST_CASE(
    "tensor shards with interleaving, accumulation, recompute, ZeRO-1 and sequence parallelism on every axis take "
    "the one-process steps of tiny",
    "[tensor][slow]") {
  check_layouts_against_one_process({
      {"tp 4", {"--workers", "4", "--tensor.shards", "4", "--train.batch_size", "8"}},
      {"tp 2 x pp 2 interleaved v 2",
       {"--workers", "4", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.schedule", "interleaved",
        "--pipeline.virtual_stages", "2", "--pipeline.microbatches", "2", "--train.batch_size", "4"}},
      {"tp 2, accum 2, full recompute",
       {"--workers", "2", "--tensor.shards", "2", "--train.batch_size", "4", "--train.grad_accum", "2",
        "--train.recompute", "full"}},
      {"dp 2 x tp 2 ZeRO-1",
       {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero", "1"}},
      {"dp 2 x pp 2 ZeRO-2",
       {"--workers", "4", "--pipeline.stages", "2", "--pipeline.microbatches", "2", "--train.batch_size", "2",
        "--train.zero", "2"}},
      {"dp 2 x tp 2 x pp 2 ZeRO-1 (8 ranks)",
       {"--workers", "8", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "2", "--train.zero", "1"}},
      {"tp 2 sequence parallel",
       {"--workers", "2", "--tensor.shards", "2", "--train.batch_size", "8", "--tensor.sequence_parallel", "true"}},
      {"dp 2 x tp 2 sequence parallel",
       {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--tensor.sequence_parallel", "true"}},
      {"tp 2 x pp 2 sequence parallel",
       {"--workers", "4", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "4", "--tensor.sequence_parallel", "true"}},
      {"dp 2 x tp 2 x pp 2 sequence parallel (8 ranks)",
       {"--workers", "8", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "2", "--tensor.sequence_parallel", "true"}},
      {"tp 4 sequence parallel, full recompute",
       {"--workers", "4", "--tensor.shards", "4", "--train.batch_size", "8", "--tensor.sequence_parallel", "true",
        "--train.recompute", "full"}},
  });
}

TEST_CASE("a dp 2 x tp 2 checkpoint resumes on one process, on tp 4, on dp 2 x tp 2 under ZeRO-2 and on pp 2 x tp 2 "
          "with the weights of the undisturbed run, and exports as one process's does",
          "[tensor][checkpoint]") {
  TempDir dir;
  auto train = [&](const std::filesystem::path& folder, long until, std::vector<std::string> layout,
                   bool resume) {
    std::vector<std::string> args = with(with({"train"}, tiny_steps(until)), layout);
    args = with(args, {"--checkpoint.dir", folder.string(), "--checkpoint.every", "5"});
    if (resume) args.push_back("--resume");
    const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
    INFO(folder << " stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    if (resume) CHECK_THAT(r.out, Contains("resumed from") && Contains("after step 5"));
    return r;
  };
  const std::vector<std::string> dp2_tp2{"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4"};
  const std::filesystem::path undisturbed = dir.path() / "undisturbed", one_folder = dir.path() / "one";
  train(undisturbed, 10, dp2_tp2, false);
  train(one_folder, 10, {"--train.batch_size", "8"}, false);
  const auto reference = checkpoint_values(undisturbed / "step-0000010");

  struct Target {
    std::string name;
    std::vector<std::string> args;
  };
  int resumed_runs = 0;
  for (const Target& t : {Target{"one process", {"--train.batch_size", "8"}},
                          Target{"tp 4", {"--workers", "4", "--tensor.shards", "4", "--train.batch_size", "8"}},
                          Target{"dp 2 x tp 2 ZeRO-2",
                                 {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero",
                                  "2"}},
                          Target{"pp 2 x tp 2",
                                 {"--workers", "4", "--tensor.shards", "2", "--pipeline.stages", "2",
                                  "--pipeline.microbatches", "2", "--train.batch_size", "4"}}}) {
    const std::filesystem::path folder = dir.path() / ("resumed-" + std::to_string(resumed_runs++));
    std::filesystem::create_directories(folder);
    std::filesystem::copy(undisturbed / "step-0000005", folder / "step-0000005",
                          std::filesystem::copy_options::recursive);
    train(folder, 10, t.args, true);
    const auto resumed = checkpoint_values(folder / "step-0000010");
    for (const char* kind : {"param", "adam_m", "adam_v"}) {
      std::string where;
      const double worst = worst_tensor(resumed.at(kind), reference.at(kind), where);
      std::printf("dp 2 x tp 2 checkpoint of step 5 resumed on %s: %s after step 10 within %.3g of the undisturbed "
                  "run's (worst: %s)\n",
                  t.name.c_str(), kind, worst, where.c_str());
      INFO(t.name << ", " << kind << ", worst tensor " << where);
      CHECK(worst <= 1e-5);
    }
  }

  auto export_of = [&](const std::filesystem::path& folder, const std::string& out) {
    const ProcessResult r =
        run_troupe(dir, {"export", "--checkpoint", (folder / "step-0000010").string(), "--out", out});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return SafetensorsValues(dir.path() / out);
  };
  const SafetensorsValues sharded = export_of(undisturbed, "tp.safetensors");
  const SafetensorsValues whole = export_of(one_folder, "one.safetensors");
  REQUIRE(sharded.header == whole.header);
  REQUIRE(sharded.values.size() == whole.values.size());
  // Tensor by tensor, |difference| / |values| as vector norms, the key bias's third left out as above.
  const nlohmann::json header = nlohmann::json::parse(whole.header);
  const std::int64_t C = troupe::compute::gpt_preset("tiny")->n_embd;
  double worst = 0;
  std::string worst_name;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const auto offsets = entry.at("data_offsets").get<std::vector<std::int64_t>>();
    const bool key_bias = name.find("attn.c_attn.bias") != std::string::npos;
    double diff = 0, scale = 0;
    for (std::int64_t i = offsets[0] / 4; i < offsets[1] / 4; ++i) {
      if (key_bias && (i - offsets[0] / 4) / C == 1) continue;
      const double x = sharded.values[i], y = whole.values[i];
      diff += (x - y) * (x - y);
      scale += y * y;
    }
    if (std::sqrt(diff / scale) > worst) {
      worst = std::sqrt(diff / scale);
      worst_name = name;
    }
  }
  std::printf("export of dp 2 x tp 2 against one process: each tensor within %.3g (worst: %s)\n",
              worst, worst_name.c_str());
  CHECK(worst <= 1e-6);
}

TEST_CASE("tensor shards that do not divide the workers, the heads, the vocabulary or the sequence, or that run "
          "without workers or on a GPU backend, are refused with one line",
          "[tensor]") {
  TempDir dir;
  auto refused = [&](std::vector<std::string> layout, const std::string& what) {
    check_rejected_in(dir, with(with({"train"}, tiny_steps(2)), layout), what);
  };
  refused({"--workers", "3", "--tensor.shards", "2"},
          "pipeline.stages 1 × tensor.shards 2 does not divide the job's 3 workers (workers = data-parallel replicas x "
          "stages x shards)");
  refused({"--workers", "3", "--tensor.shards", "3"}, "tensor.shards 3 does not divide model.n_head (4)");
  refused({"--workers", "8", "--tensor.shards", "8"}, "tensor.shards 8 does not divide model.n_head (4)");
  refused({"--tensor.shards", "2"}, "pipeline.stages 1 × tensor.shards 2 needs a worker per shard: add --workers 2");
  refused({"--tensor.shards", "2", "--pipeline.stages", "2"},
          "pipeline.stages 2 × tensor.shards 2 needs a worker per shard of every stage: add --workers 4");
  refused({"--workers", "2", "--tensor.shards", "2", "--train.backend", "cuda"},
          "tensor.shards > 1 works with train.backend cpu only so far");
  refused({"--workers", "2", "--tensor.shards", "0"}, "tensor.shards must be at least 1, got 0");
  refused({"--workers", "2", "--tensor.sequence_parallel", "true"}, "tensor.sequence_parallel needs tensor.shards > 1");
  refused({"--workers", "4", "--tensor.shards", "4", "--tensor.sequence_parallel", "true", "--train.seq_len", "30"},
          "tensor.sequence_parallel splits train.seq_len 30 over tensor.shards 4, which does not divide it");
  refused({"--workers", "4", "--tensor.shards", "2", "--tensor.sequence_parallel", "true", "--train.zero", "3"},
          "train.zero 3 is not supported with tensor.sequence_parallel yet; use 0");
}

TEST_CASE("a node holding two shards fails under fault.recovery restart, and the other node's two shards both write "
          "the rescue snapshot before their node stops: no step is lost",
          "[tensor][drill]") {
  TempDir dir;
  dir.write("hosts", "localhost slots=2\nlocalhost slots=2\n");
  std::vector<std::string> args{"/usr/bin/env", "TROUPE_DRILL_THROW_AT=2:5", TROUPE_BINARY_DIR "/troupe", "launch",
                                "--hostfile", "hosts"};
  args = with(with(args, tiny_steps(12)), {"--tensor.shards", "2", "--train.batch_size", "4", "--checkpoint.dir", "ck",
                                           "--checkpoint.every", "100", "--fault.recovery", "restart"});
  const ProcessResult r = run_process(args, dir.path().string(), std::chrono::seconds(180));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Contains("asking rank(s) 0, 1 for a rescue snapshot") &&
                                Contains("rank 0 saved its memory of step 4") &&
                                Contains("rank 1 saved its memory of step 4") &&
                                Contains("rescue snapshot of step 4 written") && Contains("recovery.replica=1"));
}

