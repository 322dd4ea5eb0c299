// Pipeline-parallel jobs as a user runs them: real node processes, one pipeline stage each,
// activations and gradients between them over UCX. Every schedule and split must take the
// steps of one process that accumulates the same micro-batches, and each stage must hold no
// more micro-batches' activations than the schedule checker's bound.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/checkpoint_parameters.hpp"
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

TEST_CASE("small: every schedule on 2 and 3 stages ends with the single process's parameters, tensor by tensor",
          "[pipeline][checkpoint][slow]") {
  TempDir dir;
  // small's 6 layers at a short sequence, one sequence per micro-batch: cheap enough to run
  // every layout. Parameters come from each run's final checkpoint.
  auto run = [&](const std::string& name, long steps, std::vector<std::string> extra) {
    std::vector<std::string> args{"train", "--model.preset", "small", "--train.steps", std::to_string(steps),
                                  "--train.batch_size", "1", "--train.seq_len", "32", "--train.val_batches", "1",
                                  "--train.val_every", "0", "--sample.tokens", "0", "--train.threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    return parameters_after_run(dir, args, name, steps);
  };
  const troupe::compute::ParameterLayout layout(troupe::compute::gpt_preset("small").value());
  struct Layout {
    int stages, microbatches;
    std::string schedule;
    int virtual_stages;
    std::string name() const {
      return "p" + std::to_string(stages) + "-m" + std::to_string(microbatches) + "-" + schedule +
             (virtual_stages > 1 ? "-v" + std::to_string(virtual_stages) : "");
    }
    std::vector<std::string> args() const {
      return {"--workers", std::to_string(stages), "--pipeline.stages", std::to_string(stages),
              "--pipeline.microbatches", std::to_string(microbatches), "--pipeline.schedule", schedule,
              "--pipeline.virtual_stages", std::to_string(virtual_stages)};
    }
  };

  SECTION("two steps: equal within float32 rounding") {
    const long steps = 2;
    std::map<int, std::vector<float>> one;  // by micro-batches accumulated
    for (int m : {4, 6, 8}) one[m] = run("one-m" + std::to_string(m), steps, {"--train.grad_accum", std::to_string(m)});
    // Interleaving needs the 6 layers divisible by p·v and m a multiple of p: v = 3 on 2 stages,
    // v = 2 and m = 6 on 3.
    const std::vector<Layout> layouts{{2, 4, "1f1b", 1}, {2, 4, "gpipe", 1}, {2, 4, "interleaved", 3},
                                      {2, 8, "1f1b", 1}, {2, 8, "gpipe", 1}, {2, 8, "interleaved", 3},
                                      {3, 4, "1f1b", 1}, {3, 4, "gpipe", 1}, {3, 8, "1f1b", 1},
                                      {3, 8, "gpipe", 1}, {3, 6, "interleaved", 2}};
    for (const Layout& l : layouts) {
      const ParameterComparison c = compare_parameters(layout, run(l.name(), steps, l.args()), one.at(l.microbatches));
      std::printf("%s, %ld steps: %d of %d tensors bitwise equal to one process accumulating %d micro-batches; largest "
                  "difference %.3g (in %s)\n",
                  l.name().c_str(), steps, c.bitwise, c.tensors, l.microbatches, c.largest, c.largest_in.c_str());
      INFO(l.name());
      CHECK(c.largest <= 2e-6);
    }
  }
  SECTION("one step without clipping: bitwise equal except the tied embedding") {
    // Only wte.weight's gradient sums its two shares (embedding lookup, lm head) in another order;
    // with clipping on, the norm is summed over stages in another order too, which moves every
    // tensor by a rounding step.
    const std::vector<std::string> no_clip{"--train.grad_clip", "0"};
    auto with_no_clip = [&](std::vector<std::string> args) {
      args.insert(args.end(), no_clip.begin(), no_clip.end());
      return args;
    };
    std::map<int, std::vector<float>> one;
    for (int m : {4, 6, 8})
      one[m] = run("noclip-one-m" + std::to_string(m), 1, with_no_clip({"--train.grad_accum", std::to_string(m)}));
    for (const Layout& l : {Layout{2, 4, "1f1b", 1}, Layout{2, 8, "gpipe", 1}, Layout{2, 4, "interleaved", 3},
                            Layout{3, 8, "1f1b", 1}, Layout{3, 6, "interleaved", 2}}) {
      const ParameterComparison c =
          compare_parameters(layout, run("noclip-" + l.name(), 1, with_no_clip(l.args())), one.at(l.microbatches));
      std::printf("%s, 1 step, no clipping: %d of %d tensors bitwise equal; the other: %s (largest difference %.3g)\n",
                  l.name().c_str(), c.bitwise, c.tensors, c.largest_in.c_str(), c.largest);
      INFO(l.name());
      CHECK(c.bitwise == c.tensors - 1);
      CHECK((c.largest_in == "wte.weight" || c.largest == 0));
    }
  }
}

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
  std::printf(
      "dp 2 x pp 2: loss %s, val %s, param norm %s; one process with batch 16: loss %s, val %s, param norm %s\n",
      grid.loss.c_str(), grid.val.c_str(), grid.norm.c_str(), one.loss.c_str(), one.val.c_str(), one.norm.c_str());
  CHECK(grid.loss == one.loss);
  CHECK(grid.val == one.val);  // the same validation windows, half on each replica
  CHECK(grid.norm == one.norm);
  CHECK(grid.peaks == "2 1 (the schedule checker's bound: 2 1)");
}

// With 3 replicas the data-parallel ring adds three shares, whose order depends on where an
// element lies in the summed buffer: the first stage's wte and the last stage's copy are summed (and
// under ZeRO-3 kept and gathered) as runs of their own, so they stay equal, and a run resumed from a
// checkpoint (which keeps the first's) goes on bit for bit. Summed inside the stages' whole buffers,
// the copy drifted a rounding away and the resumed run's files differed.
TEST_CASE("three replicas of a two-stage pipeline resume from a checkpoint to the straight run's bits, ZeRO 0 to 3",
          "[pipeline][checkpoint]") {
  TempDir dir;
  for (const std::string zero : {"0", "1", "2", "3"}) {
    INFO("train.zero " << zero);
    const std::filesystem::path straight = dir.path() / ("straight" + zero), resumed = dir.path() / ("resumed" + zero);
    auto run = [&](const std::filesystem::path& ck, bool resume) {
      std::vector<std::string> args{
          "train", "--model.preset",    "tiny",     "--train.steps",     "3",  "--train.batch_size",
          "2",     "--train.seq_len",   "64",       "--train.val_every", "0",  "--train.val_batches",
          "1",     "--sample.tokens",   "0",        "--train.threads",   "1",  "--workers",
          "6",     "--pipeline.stages", "2",        "--train.zero",      zero, "--checkpoint.every",
          "1",     "--checkpoint.dir",  ck.string()};
      if (resume) args.push_back("--resume");
      const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
      INFO("stdout: " << r.out << "\nstderr: " << r.err);
      REQUIRE(r.exit_code == 0);
      if (resume) CHECK_THAT(r.out, Contains("resumed from"));
    };
    run(straight, false);
    std::filesystem::create_directories(resumed);
    std::filesystem::copy(straight / "step-0000001", resumed / "step-0000001",
                          std::filesystem::copy_options::recursive);
    run(resumed, true);
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(straight / "step-0000003")) {
      if (entry.path().extension() != ".safetensors") continue;
      ++files;
      std::ifstream a(entry.path(), std::ios::binary),
          b(resumed / "step-0000003" / entry.path().filename(), std::ios::binary);
      const std::string bytes_a((std::istreambuf_iterator<char>(a)), {}),
          bytes_b((std::istreambuf_iterator<char>(b)), {});
      INFO(entry.path().filename().string());
      CHECK(bytes_a == bytes_b);
    }
    CHECK(files >= 2);
  }
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
  refused({"--pipeline.schedule", "zigzag"},
          "pipeline.schedule: expected gpipe, 1f1b, interleaved, zb-h1 or zb-v, got 'zigzag'");
  refused({"--pipeline.stages", "3", "--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2",
           "--pipeline.microbatches", "6"},
          "pipeline: ");
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
