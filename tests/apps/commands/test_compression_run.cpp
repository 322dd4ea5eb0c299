// Gradient compression in real data-parallel jobs (node processes over loopback), alone and over
// each pipeline stage's and tensor shard's data-parallel group: before the start step the steps
// are those of plain sums bit for bit; after it every supported layout trains, close to the plain
// run but not equal to it (the sums were compressed).

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

struct RunEnd {
  std::string loss, norm;  // as printed
};

// `troupe train` of tiny for 6 steps on the workers `extra` asks for (2 unless it names --workers).
RunEnd run_workers(const TempDir& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> args{"train", "--model.preset",  "tiny", "--train.steps",   "6", "--train.val_batches",
                                "1",     "--sample.tokens", "0",    "--train.threads", "1", "--train.batch_size",
                                "8"};
  if (std::find(extra.begin(), extra.end(), "--workers") == extra.end()) args.insert(args.end(), {"--workers", "2"});
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult run = run_troupe(dir, args, std::chrono::seconds(120));
  INFO("stdout: " << run.out << "\nstderr: " << run.err);
  REQUIRE(run.exit_code == 0);
  std::smatch loss, norm;
  REQUIRE(std::regex_search(run.out, loss, std::regex("final train loss ([0-9.]+)")));
  REQUIRE(std::regex_search(run.out, norm, std::regex("param norm ([0-9.]+)")));
  return {loss[1].str(), norm[1].str()};
}

}  // namespace

TEST_CASE("compressed data-parallel runs equal plain sums before the start step, and train after it",
          "[dp][compression]") {
  TempDir dir;
  for (const char* zero : {"0", "1"}) {
    const RunEnd plain = run_workers(dir, {"--train.zero", zero});
    for (const char* kind : {"bf16", "powersgd"}) {
      INFO("train.zero " << zero << ", comm.compress " << kind);
      const RunEnd late =
          run_workers(dir, {"--train.zero", zero, "--comm.compress", kind, "--comm.compress_start_step", "6"});
      CHECK(late.loss == plain.loss);
      CHECK(late.norm == plain.norm);
      const RunEnd compressed =
          run_workers(dir, {"--train.zero", zero, "--comm.compress", kind, "--comm.compress_start_step", "1"});
      std::printf("train.zero %s, %s from step 1: loss %s, param norm %s | plain: loss %s, param norm %s\n", zero, kind,
                  compressed.loss.c_str(), compressed.norm.c_str(), plain.loss.c_str(), plain.norm.c_str());
      CHECK(compressed.norm != plain.norm);
      CHECK(std::stod(compressed.loss) == Approx(std::stod(plain.loss)).margin(0.05));
    }
  }
  const RunEnd plain_zero2 = run_workers(dir, {"--train.zero", "2"});
  const RunEnd bf16_zero2 =
      run_workers(dir, {"--train.zero", "2", "--comm.compress", "bf16", "--comm.compress_start_step", "1"});
  CHECK(bf16_zero2.norm != plain_zero2.norm);
  CHECK(std::stod(bf16_zero2.loss) == Approx(std::stod(plain_zero2.loss)).margin(0.05));
}

TEST_CASE("a compression the layout cannot serve is refused with one line", "[dp][compression]") {
  TempDir dir;
  const ProcessResult run = run_troupe(
      dir, {"train", "--model.preset", "tiny", "--workers", "2", "--train.zero", "2", "--comm.compress", "powersgd"});
  CHECK(run.exit_code == 2);
  CHECK_THAT(run.err, Contains("comm.compress powersgd does not work with train.zero 2"));
}

TEST_CASE(
    "bf16 and PowerSGD sums over each tensor shard's and pipeline stage's data-parallel group: plain before the "
    "start step, training after it",
    "[dp][compression][tp][pipeline][slow]") {
  TempDir dir;
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"--workers", "4", "--tensor.shards", "2"},
        std::vector<std::string>{"--workers", "4", "--pipeline.stages", "2"}}) {
    const RunEnd plain = run_workers(dir, layout);
    for (const char* kind : {"bf16", "powersgd"}) {
      INFO(layout[2] << " 2, comm.compress " << kind);
      std::vector<std::string> late = layout, early = layout;
      late.insert(late.end(), {"--comm.compress", kind, "--comm.compress_start_step", "6"});
      early.insert(early.end(), {"--comm.compress", kind, "--comm.compress_start_step", "1"});
      const RunEnd not_yet = run_workers(dir, late);
      CHECK(not_yet.loss == plain.loss);
      CHECK(not_yet.norm == plain.norm);
      const RunEnd compressed = run_workers(dir, early);
      std::printf("%s 2 x dp 2, %s from step 1: loss %s, param norm %s | plain: loss %s, param norm %s\n",
                  layout[2].c_str(), kind, compressed.loss.c_str(), compressed.norm.c_str(), plain.loss.c_str(),
                  plain.norm.c_str());
      CHECK(compressed.norm != plain.norm);
      CHECK(std::stod(compressed.loss) == Approx(std::stod(plain.loss)).margin(0.05));
    }
  }
}

TEST_CASE(
    "a PowerSGD checkpoint of tp 2 x dp 2 resumes on 2 data-parallel workers: the residuals carry over, Q starts "
    "afresh and the log says so",
    "[dp][compression][tp][checkpoint]") {
  TempDir dir;
  const std::string saved = (dir.path() / "tp2").string();
  const std::vector<std::string> compressed{"--train.batch_size", "4", "--comm.compress", "powersgd",
                                            "--comm.compress_start_step", "1", "--checkpoint.dir", saved};
  const auto job = [&](long steps, const std::vector<std::string>& layout) {
    return with(with(with({"train"}, tiny_steps(steps)), compressed), layout);
  };
  const ProcessResult sharded =
      run_troupe(dir, job(4, {"--workers", "4", "--tensor.shards", "2"}), std::chrono::seconds(120));
  INFO(sharded.out << sharded.err);
  REQUIRE(sharded.exit_code == 0);
  const ProcessResult resumed = run_troupe(dir, job(6, {"--workers", "2", "--resume"}), std::chrono::seconds(120));
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.out, Contains("resumed from"));
  // Q fits only the tensor split that made it (powersgd_q_tp2); the residuals are element-wise.
  CHECK_THAT(resumed.out + resumed.err, Contains("holds no 'powersgd_q' state"));
  CHECK_THAT(resumed.out + resumed.err, !Contains("holds no 'powersgd_residual_dp"));
}
