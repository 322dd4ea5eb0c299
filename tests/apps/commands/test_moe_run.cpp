// troupe train with experts as a user runs it (docs/moe.md): moe-tiny trains, its step lines carry
// the routing losses and the experts' load and its loss falls; on two pipeline stages it prints one
// process's step lines and param norm, and its checkpoint resumes in one process; its checkpoint
// resumes and exports with each expert's tensors apart; on two tensor shards it prints one
// process's figures, and their checkpoint resumes in one process.

#include <catch2/catch.hpp>

#include <array>
#include <chrono>
#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;

namespace {

ProcessResult troupe_train(const TempDir& dir, std::vector<std::string> args, std::chrono::seconds timeout) {
  args.insert(args.begin(), {TROUPE_BINARY_DIR "/troupe", "train", "--model.preset", "moe-tiny", "--train.threads", "1",
                             "--sample.tokens", "0"});
  return run_process(args, dir.path().string(), timeout);
}

// Each step line's loss, aux, z and load as printed, and the closing param norm.
struct MoeFigures {
  std::vector<std::string> steps;  // "loss 5.5123 | aux 1.0012 | z 0.412 | load 1.31"
  std::string norm;
};

MoeFigures moe_figures(const ProcessResult& r) {
  MoeFigures f;
  const std::regex line("step +[0-9]+/[0-9]+ \\| (loss [0-9.]+ \\| aux [0-9.]+ \\| z [0-9.]+ \\| load [0-9.]+) \\|");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it)
    f.steps.push_back((*it)[1].str());
  std::smatch m;
  if (std::regex_search(r.out, m, std::regex("param norm ([0-9.]+)"))) f.norm = m[1].str();
  return f;
}

// moe-tiny trained with `args` (batches of 2 × 64, a checkpoint every 3 steps into dir/folder),
// which must succeed.
ProcessResult train_checkpointed(const TempDir& dir, const std::string& folder, std::vector<std::string> args) {
  const std::vector<std::string> common = {"--train.batch_size", "2", "--train.seq_len",    "64",
                                           "--train.val_every",  "0", "--checkpoint.every", "3"};
  args.insert(args.end(), common.begin(), common.end());
  args.insert(args.end(), {"--checkpoint.dir", (dir.path() / folder).string()});
  const ProcessResult r = troupe_train(dir, args, std::chrono::seconds(120));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

}  // namespace

TEST_CASE("moe-tiny trains: its step lines carry aux, z and the experts' load, and the loss falls", "[cli][moe]") {
  TempDir dir;
  const ProcessResult r = troupe_train(dir,
                                       {"--train.steps", "40", "--train.batch_size", "4", "--train.seq_len", "64",
                                        "--train.lr", "3e-3", "--train.warmup_steps", "5", "--train.val_every", "0"},
                                       std::chrono::seconds(300));
  INFO("stdout tail: " << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("experts: 4 in each of 2 MoE blocks (every 2), top-2"));
  const std::regex line(
      "step +([0-9]+)/40 \\| loss ([0-9.]+) \\| aux ([0-9.]+) \\| z ([0-9.]+) \\| load ([0-9.]+) \\|");
  std::vector<double> losses, aux, load;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it) {
    losses.push_back(std::stod((*it)[2].str()));
    aux.push_back(std::stod((*it)[3].str()));
    load.push_back(std::stod((*it)[5].str()));
  }
  REQUIRE(losses.size() == 40);
  std::printf("moe-tiny, 40 steps of 4 x 64: loss %.4f -> %.4f, aux %.4f -> %.4f\n", losses.front(), losses.back(),
              aux.front(), aux.back());
  CHECK(losses.back() < losses.front() - 1.0);
  // E · Σ f_i P_i is about 1 when balanced, E when every token goes to the same experts.
  for (double a : aux) CHECK((a > 0.5 && a <= 4.0));
  // The most loaded of 4 experts over the mean: 1 when even, 4 when one takes every slot.
  for (double l : load) CHECK((l >= 1.0 && l <= 4.0));
}

TEST_CASE(
    "moe-tiny on two pipeline stages under 1F1B, GPipe and interleaved, and recomputing, prints one process's "
    "losses, routing and param norm",
    "[cli][moe][pipeline]") {
  TempDir dir;
  const std::vector<std::string> common = {"--train.steps",       "4",  "--train.batch_size", "2",
                                           "--train.seq_len",     "64", "--train.val_every",  "0",
                                           "--train.val_batches", "1"};
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), common.begin(), common.end());
    const ProcessResult r = troupe_train(dir, args, std::chrono::seconds(120));
    INFO("stdout tail: " << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return moe_figures(r);
  };
  // The pipeline's 4 micro-batches a step are one process's 4 accumulated ones; moe-tiny's MoE
  // blocks 1 and 3 fall on both stages (and on two chunks of a stage when interleaved).
  const MoeFigures one = run({"--train.grad_accum", "4"});
  REQUIRE(one.steps.size() == 4);
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"--pipeline.schedule", "1f1b"},
        {"--pipeline.schedule", "gpipe"},
        {"--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"},
        {"--pipeline.schedule", "1f1b", "--train.recompute", "full"},
        {"--pipeline.schedule", "gpipe", "--train.recompute", "selective"}}) {
    std::vector<std::string> args = {"--workers", "2", "--pipeline.stages", "2"};
    args.insert(args.end(), layout.begin(), layout.end());
    const MoeFigures staged = run(args);
    INFO(layout[1] << (layout.size() > 2 ? " " + layout[2] + " " + layout[3] : ""));
    CHECK(staged.steps == one.steps);
    CHECK(staged.norm == one.norm);
    std::printf("moe-tiny pp 2 %s: last step %s, param norm %s (one process: %s, %s)\n", layout[1].c_str(),
                staged.steps.back().c_str(), staged.norm.c_str(), one.steps.back().c_str(), one.norm.c_str());
  }
}

TEST_CASE("moe-tiny on 2 context shards, ring and all_to_all, prints one process's loss, aux, z and param norm",
          "[cli][moe][context]") {
  TempDir dir;
  // Each step's loss, aux and z (`load` is rank 0's own rows' under context shards; these three are
  // the micro-batch's), and the param norm.
  struct Figures {
    std::vector<std::array<double, 3>> steps;
    double norm = 0;
  };
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.end(), {"--train.steps", "4", "--train.batch_size", "2", "--train.seq_len", "64",
                             "--train.val_every", "0", "--train.val_batches", "1"});
    const ProcessResult r = troupe_train(dir, args, std::chrono::seconds(120));
    INFO("stdout tail: " << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
    INFO("stderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const MoeFigures printed = moe_figures(r);
    Figures f;
    const std::regex numbers("loss ([0-9.]+) \\| aux ([0-9.]+) \\| z ([0-9.]+)");
    for (const std::string& step : printed.steps) {
      std::smatch m;
      REQUIRE(std::regex_search(step, m, numbers));
      f.steps.push_back({std::stod(m[1]), std::stod(m[2]), std::stod(m[3])});
    }
    REQUIRE(!printed.norm.empty());
    f.norm = std::stod(printed.norm);
    return f;
  };
  const Figures one = run({});
  REQUIRE(one.steps.size() == 4);
  for (const char* method : {"ring", "all_to_all"}) {
    INFO(method);
    const Figures sharded = run({"--workers", "2", "--context.shards", "2", "--context.method", method});
    REQUIRE(sharded.steps.size() == one.steps.size());
    // The gradients are summed over the two shards in another order than one process sums its rows:
    // each figure within one unit of its last printed digit, the norm within 1e-6 relative.
    for (std::size_t i = 0; i < one.steps.size(); ++i) {
      CHECK(std::abs(sharded.steps[i][0] - one.steps[i][0]) <= 1.01e-4);
      CHECK(std::abs(sharded.steps[i][1] - one.steps[i][1]) <= 1.01e-4);
      CHECK(std::abs(sharded.steps[i][2] - one.steps[i][2]) <= 1.01e-3);
    }
    CHECK(std::abs(sharded.norm - one.norm) <= 1e-6 * one.norm);
    std::printf(
        "moe-tiny cp 2 %s: last loss %.4f aux %.4f z %.3f, param norm %.7f (one process: %.4f %.4f %.3f, %.7f)\n",
        method, sharded.steps.back()[0], sharded.steps.back()[1], sharded.steps.back()[2], sharded.norm,
        one.steps.back()[0], one.steps.back()[1], one.steps.back()[2], one.norm);
  }
}

TEST_CASE(
    "moe-tiny on 2 tensor shards, with and without sequence parallelism, prints one process's losses, routing and "
    "param norm, and its checkpoint resumes in one process",
    "[cli][moe][tensor]") {
  TempDir dir;
  // Each step's loss, aux, z and load, and the param norm: the shards sum the experts' partial
  // outputs and the gates' gradients in another order than one process adds them.
  struct Figures {
    std::vector<std::array<double, 4>> steps;
    double norm = 0;
  };
  auto figures = [](const ProcessResult& r) {
    const MoeFigures printed = moe_figures(r);
    Figures f;
    const std::regex numbers("loss ([0-9.]+) \\| aux ([0-9.]+) \\| z ([0-9.]+) \\| load ([0-9.]+)");
    for (const std::string& step : printed.steps) {
      std::smatch m;
      REQUIRE(std::regex_search(step, m, numbers));
      f.steps.push_back({std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4])});
    }
    REQUIRE(!printed.norm.empty());
    f.norm = std::stod(printed.norm);
    return f;
  };
  // Each figure within one unit of its last printed digit; the norm, of a run ending where `want`
  // ends, within 1e-6 relative.
  auto check_same = [](const Figures& got, const Figures& want, std::size_t first) {
    REQUIRE(want.steps.size() >= first + got.steps.size());
    for (std::size_t i = 0; i < got.steps.size(); ++i) {
      const std::array<double, 4>& a = got.steps[i];
      const std::array<double, 4>& b = want.steps[first + i];
      CHECK(std::abs(a[0] - b[0]) <= 1.01e-4);
      CHECK(std::abs(a[1] - b[1]) <= 1.01e-4);
      CHECK(std::abs(a[2] - b[2]) <= 1.01e-3);
      CHECK(std::abs(a[3] - b[3]) <= 1.01e-2);
    }
    if (first + got.steps.size() == want.steps.size()) CHECK(std::abs(got.norm - want.norm) <= 1e-6 * want.norm);
  };
  auto run = [&](const std::string& folder, std::vector<std::string> args) {
    return figures(train_checkpointed(dir, folder, std::move(args)));
  };
  const Figures one = run("one", {"--train.steps", "6"});
  REQUIRE(one.steps.size() == 6);
  const Figures split = run("split", {"--train.steps", "6", "--workers", "2", "--tensor.shards", "2"});
  check_same(split, one, 0);
  const Figures sequence = run("sequence", {"--train.steps", "3", "--workers", "2", "--tensor.shards", "2",
                                            "--tensor.sequence_parallel", "true"});
  check_same(sequence, one, 0);
  // The run above stopped at step 3: its checkpoint, written by two shards, resumes in one process.
  const Figures resumed = run("sequence", {"--train.steps", "6", "--resume"});
  REQUIRE(resumed.steps.size() == 3);
  check_same(resumed, one, 3);
  std::printf(
      "moe-tiny tp 2: last step loss %.4f aux %.4f z %.3f load %.2f, param norm %.7f (one process: %.4f %.4f "
      "%.3f %.2f, %.7f)\n",
      split.steps.back()[0], split.steps.back()[1], split.steps.back()[2], split.steps.back()[3], split.norm,
      one.steps.back()[0], one.steps.back()[1], one.steps.back()[2], one.steps.back()[3], one.norm);
}

TEST_CASE("moe-tiny's checkpoint of two pipeline stages resumes in one process on the one-process run's losses",
          "[cli][moe][pipeline][checkpoint]") {
  TempDir dir;
  auto run = [&](const std::string& folder, std::vector<std::string> args) {
    return train_checkpointed(dir, folder, std::move(args));
  };
  const MoeFigures straight = moe_figures(run("straight", {"--train.steps", "6", "--train.grad_accum", "4"}));
  run("staged", {"--train.steps", "3", "--workers", "2", "--pipeline.stages", "2"});
  const ProcessResult again = run("staged", {"--train.steps", "6", "--train.grad_accum", "4", "--resume"});
  CHECK_THAT(again.out, Contains("resumed from"));
  const MoeFigures resumed = moe_figures(again);
  REQUIRE(straight.steps.size() == 6);
  REQUIRE(resumed.steps.size() == 3);
  for (int i = 0; i < 3; ++i)
    CHECK(resumed.steps[static_cast<std::size_t>(i)] == straight.steps[static_cast<std::size_t>(3 + i)]);
  CHECK(resumed.norm == straight.norm);
}

TEST_CASE(
    "moe-tiny resumed from its step-3 checkpoint prints the uninterrupted run's step-6 loss, and exports each expert "
    "apart",
    "[cli][moe][checkpoint]") {
  TempDir dir;
  auto run = [&](const std::string& folder, std::vector<std::string> args) {
    return train_checkpointed(dir, folder, std::move(args)).out;
  };
  const std::regex last("step +6/6 \\| loss ([0-9.]+) \\|");
  std::smatch whole, resumed;
  const std::string straight = run("straight", {"--train.steps", "6"});
  REQUIRE(std::regex_search(straight, whole, last));
  run("stopped", {"--train.steps", "3"});
  const std::string again = run("stopped", {"--train.steps", "6", "--resume"});
  CHECK_THAT(again, Contains("resumed from"));
  REQUIRE(std::regex_search(again, resumed, last));
  CHECK(resumed[1].str() == whole[1].str());

  const ProcessResult exported =
      run_process({TROUPE_BINARY_DIR "/troupe", "export", "--checkpoint", (dir.path() / "stopped").string(), "--out",
                   (dir.path() / "model.safetensors").string()},
                  dir.path().string(), std::chrono::seconds(60));
  INFO("export: " << exported.out << exported.err);
  CHECK(exported.exit_code == 0);
  // moe-tiny: 4 blocks, 16 tensors per block with 2 + 4 + 4 tensors of the embeddings and ln_f,
  // its 2 MoE blocks each 4 stacked expert tensors split over 4 experts.
  const std::size_t tensors =
      troupe::compute::ParameterLayout(troupe::compute::gpt_preset("moe-tiny").value()).views().size() +
      2 * 4 * (4 - 1);
  CHECK_THAT(exported.out, Contains(std::to_string(tensors) + " tensors, ") &&
                               Contains("GPT-2 safetensors with 4 experts a MoE block, one tensor each of step 6"));
  auto file = troupe::checkpoint::SafetensorsFile::open(dir.path() / "model.safetensors");
  REQUIRE(file.ok());
  std::set<std::string> names;
  for (const auto& t : file->tensors()) names.insert(t.name);
  CHECK(names.size() == tensors);
  for (const char* name : {"h.1.mlp.router.weight", "h.1.mlp.experts.0.c_fc.weight", "h.3.mlp.experts.3.c_proj.bias",
                           "h.0.mlp.c_fc.weight", "h.2.mlp.c_proj.weight"})
    CHECK(names.contains(name));

  const ProcessResult hf =
      run_process({TROUPE_BINARY_DIR "/troupe", "export", "--checkpoint", (dir.path() / "stopped").string(), "--format",
                   "hf", "--out", (dir.path() / "hf").string()},
                  dir.path().string(), std::chrono::seconds(60));
  CHECK(hf.exit_code == 2);
  CHECK(hf.err ==
        "troupe: error: --format hf: a model with experts (model.experts 4) has no Hugging Face class to load it; "
        "--format safetensors writes its tensors\n");
}
