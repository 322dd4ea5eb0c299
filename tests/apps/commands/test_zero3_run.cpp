// ZeRO-3 as a user runs it: real node processes over UCX, each keeping only its shard of the
// parameters, gradients and AdamW moments and gathering each block before use. Its steps are
// ZeRO-2's bit for bit (each element is summed in the same ring order) and ZeRO-0's to rounding;
// its checkpoints resume on any grid; a lost node goes back to the newest checkpoint.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_train(long steps) { return with({"train"}, tiny_steps(steps)); }

using Values = std::map<std::string, std::vector<float>>;

// Every value of every kind in the newest checkpoint under `dir`.
Values newest_checkpoint_values(const fs::path& dir) {
  auto steps = checkpoint::committed_steps(dir);
  REQUIRE(steps.ok());
  REQUIRE(!steps->empty());
  return checkpoint_values(checkpoint::step_dir(dir, steps->front()));
}

// Trains `args` with a checkpoint at the end; its final loss line and saved state.
struct Trained {
  std::string out;
  Values values;
};

Trained train(const TempDir& dir, const std::string& name, std::vector<std::string> args, long steps) {
  const fs::path saved = dir.path() / name;
  args = with(std::move(args), {"--checkpoint.dir", saved.string(), "--checkpoint.every", std::to_string(steps)});
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
  INFO(name << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return {r.out, newest_checkpoint_values(saved)};
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ‖a − b‖ / ‖b‖.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return std::sqrt(diff / norm);
}

}  // namespace

TEST_CASE("ZeRO-3 on 2 and 4 workers takes ZeRO-2's steps bit for bit and ZeRO-0's to 1e-6 over 20 steps", "[zero3]") {
  TempDir dir;
  const long steps = 20;
  for (int workers : {2, 4}) {
    INFO(workers << " workers");
    // The same global batch of 8 sequences.
    const auto job = with(tiny_train(steps),
                          {"--workers", std::to_string(workers), "--train.batch_size", std::to_string(8 / workers)});
    const std::string w = std::to_string(workers);
    const Trained zero0 = train(dir, "zero0-" + w, with(job, {"--train.zero", "0"}), steps);
    const Trained zero2 = train(dir, "zero2-" + w, with(job, {"--train.zero", "2"}), steps);
    const Trained zero3 = train(dir, "zero3-" + w, with(job, {"--train.zero", "3"}), steps);
    for (const char* kind : {"param", "adam_m", "adam_v"}) {
      INFO(kind);
      CHECK(bitwise_equal(zero3.values.at(kind), zero2.values.at(kind)));
    }
    const double params = relative_difference(zero3.values.at("param"), zero0.values.at("param"));
    const double loss0 = number_after(zero0.out, "final train loss"),
                 loss3 = number_after(zero3.out, "final train loss");
    std::printf("dp %d, %ld steps: ZeRO-3 against ZeRO-0: parameters %.3g relative, final loss %.6f against %.6f\n",
                workers, steps, params, loss3, loss0);
    CHECK(params <= 1e-6);
    CHECK(loss3 == Approx(loss0).epsilon(1e-6));
  }
}

TEST_CASE("ZeRO-3 keeping gathered blocks for backward, with accumulation and full recompute, steps as ZeRO-0 does",
          "[zero3]") {
  TempDir dir;
  const long steps = 20;
  const auto job = with(tiny_train(steps), {"--workers", "4", "--train.batch_size", "1", "--train.grad_accum", "2"});
  const Trained zero0 = train(dir, "zero0", with(job, {"--train.zero", "0"}), steps);
  const Trained zero3 =
      train(dir, "zero3",
            with(job, {"--train.zero", "3", "--train.zero3_reshard", "false", "--train.recompute", "full"}), steps);
  // Accumulation reduce-scatters each micro-batch's gradient and adds the sums: another order.
  const double params = relative_difference(zero3.values.at("param"), zero0.values.at("param"));
  std::printf("dp 4 x accum 2, %ld steps, ZeRO-3 without reshard, full recompute, against ZeRO-0: %.3g relative\n",
              steps, params);
  CHECK(params <= 1e-6);
}

TEST_CASE("a ZeRO-3 checkpoint of dp 2 resumes on one process without ZeRO and on dp 4 with ZeRO-3", "[zero3]") {
  TempDir dir;
  const fs::path saved = dir.path() / "zero3";
  const auto job = with(tiny_train(8), {"--checkpoint.every", "4", "--checkpoint.dir", saved.string()});
  const ProcessResult undisturbed = run_troupe(
      dir, with(job, {"--workers", "2", "--train.batch_size", "4", "--train.zero", "3"}), std::chrono::seconds(120));
  INFO(undisturbed.out << undisturbed.err);
  REQUIRE(undisturbed.exit_code == 0);
  const double norm = number_after(undisturbed.out, "param norm");
  REQUIRE(checkpoint::committed_steps(saved).value() == std::vector<std::int64_t>{8, 4});

  struct Grid {
    std::string name;
    std::vector<std::string> args;
  };
  for (const Grid& grid : {Grid{"1 process, ZeRO 0", {"--train.batch_size", "8"}},
                           Grid{"dp 4, ZeRO 3", {"--workers", "4", "--train.batch_size", "2", "--train.zero", "3"}}}) {
    INFO(grid.name);
    const fs::path copy = dir.path() / ("copy" + std::to_string(grid.args.size()));
    fs::copy(saved, copy, fs::copy_options::recursive);
    fs::remove_all(checkpoint::step_dir(copy, 8));
    const auto resume = with(tiny_train(8), {"--checkpoint.dir", copy.string(), "--resume"});
    const ProcessResult r = run_troupe(dir, with(resume, grid.args), std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("resumed from " + checkpoint::step_dir(copy, 4).string() + " after step 4"));
    std::printf("saved at dp 2 (ZeRO 3), resumed at step 4 on %s: param norm %.9g (undisturbed: %.9g)\n",
                grid.name.c_str(), number_after(r.out, "param norm"), norm);
    CHECK(number_after(r.out, "param norm") == Approx(norm).epsilon(1e-6));
  }
}

TEST_CASE(
    "a model whose training state exceeds each process's memory limit trains under ZeRO-3 on 4 ranks, equal "
    "to the unsharded run",
    "[zero3]") {
  TempDir dir;
  const std::string script = TROUPE_SOURCE_DIR "/tests/scripts/run_in_memory_cgroup.sh";
  // 10.6 M parameters: 170 MB of parameters, gradients and AdamW moments in one process.
  const std::vector<std::string> model{"--model.n_layer",    "6",  "--model.n_embd",     "384", "--model.n_head", "6",
                                       "--model.block_size", "64", "--model.vocab_size", "256"};
  const auto job = with(with(tiny_train(6), model), {"--train.batch_size", "4"});
  const std::string limit = std::to_string(140 * 1024 * 1024);

  const ProcessResult free_run = run_troupe(dir, job, std::chrono::seconds(120));
  INFO("one process, no limit:\n" << free_run.out << free_run.err);
  REQUIRE(free_run.exit_code == 0);

  // The same process under the limit is killed for memory: its state does not fit.
  std::string one_process = TROUPE_BINARY_DIR "/troupe";
  for (const std::string& arg : job) one_process += " " + arg;
  const ProcessResult limited = run_process({"/bin/bash", script, limit, "one-process", one_process},
                                            dir.path().string(), std::chrono::seconds(120));
  if (limited.exit_code == 77) {
    std::printf("SKIPPED (needs a writable memory cgroup): %s\n", limited.err.c_str());
    WARN("SKIPPED (needs a writable memory cgroup): " << limited.err);
    return;
  }
  INFO("one process under " << limit << " bytes:\n" << limited.out << limited.err);
  CHECK(limited.exit_code == 137);

  // Told the limit, train refuses plain data parallelism on 4 ranks and names ZeRO-3 (ZeRO-2 keeps the
  // whole gradient buffer and does not fit either).
  const ProcessResult refused = run_troupe(
      dir, with(with(tiny_train(6), model), {"--workers", "4", "--train.batch_size", "1", "--memory-limit", limit}),
      std::chrono::seconds(60));
  INFO("plain data parallelism under --memory-limit:\n" << refused.out << refused.err);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Contains("train.zero 3 would fit"));

  // Four node processes, each in a cgroup of its own with the same limit, one sequence each.
  const std::string hosts =
      dir.write("hosts", "memhost-0 slots=1\nmemhost-1 slots=1\nmemhost-2 slots=1\nmemhost-3 slots=1\n");
  auto sharded_job = with(with(tiny_train(6), model), {"--train.batch_size", "1", "--train.zero", "3"});
  sharded_job[0] = "launch";
  sharded_job =
      with(sharded_job, {"--hostfile", hosts, "--launcher", "bash " + script + " " + limit + " {host} {command}"});
  const ProcessResult sharded = run_troupe(dir, sharded_job, std::chrono::seconds(180));
  INFO("ZeRO-3 on 4 ranks:\n" << sharded.out << sharded.err);
  REQUIRE(sharded.exit_code == 0);
  CHECK_THAT(sharded.out, Contains("job finished: all 4 nodes done"));
  const double loss = number_after(sharded.out, "final train loss"),
               reference = number_after(free_run.out, "final train loss");
  std::printf(
      "ZeRO-3, 4 ranks under %s bytes each: final loss %.6f, param norm %.9g; one process without a limit: "
      "%.6f, %.9g\n",
      limit.c_str(), loss, number_after(sharded.out, "param norm"), reference,
      number_after(free_run.out, "param norm"));
  CHECK(loss == Approx(reference).epsilon(1e-5));
  CHECK(number_after(sharded.out, "param norm") == Approx(number_after(free_run.out, "param norm")).epsilon(1e-5));
}

TEST_CASE(
    "ZeRO-3 with pipeline stages: dp 2 x pp 2 under GPipe, 1F1B and interleaved steps as ZeRO-0 does, and its "
    "checkpoint resumes on one process",
    "[zero3][pipeline]") {
  TempDir dir;
  const long steps = 20;
  // 8 sequences per step on every grid: 2 replicas x 4 micro-batches of 1.
  const auto job = with(tiny_train(steps), {"--workers", "4", "--pipeline.stages", "2", "--pipeline.microbatches", "4",
                                            "--train.batch_size", "1"});
  const Trained zero0 = train(dir, "pp-zero0", with(job, {"--train.zero", "0"}), steps);
  struct Schedule {
    std::string name;
    std::vector<std::string> args;
  };
  for (const Schedule& schedule :
       {Schedule{"gpipe", {"--pipeline.schedule", "gpipe"}},
        Schedule{"1f1b, blocks kept for backward", {"--pipeline.schedule", "1f1b", "--train.zero3_reshard", "false"}},
        Schedule{"interleaved", {"--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"}}}) {
    INFO(schedule.name);
    const Trained zero3 = train(dir, "pp-zero3-" + std::to_string(schedule.args.size()) + schedule.args[1],
                                with(with(job, schedule.args), {"--train.zero", "3"}), steps);
    for (const char* kind : {"param", "adam_m", "adam_v"}) {
      const double difference = relative_difference(zero3.values.at(kind), zero0.values.at(kind));
      std::printf("dp 2 x pp 2 %s, %ld steps, ZeRO-3 against ZeRO-0: %s %.3g relative\n", schedule.name.c_str(), steps,
                  kind, difference);
      CHECK(difference <= 1e-6);
    }
  }

  const fs::path saved = dir.path() / "pp-zero3-2gpipe";
  const fs::path copy = dir.path() / "resume-one";
  fs::copy(saved, copy, fs::copy_options::recursive);
  const auto resume =
      with(tiny_train(steps + 2), {"--checkpoint.dir", copy.string(), "--resume", "--train.batch_size", "8"});
  const ProcessResult r = run_troupe(dir, resume, std::chrono::seconds(120));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("resumed from " + checkpoint::step_dir(copy, steps).string()));
}
