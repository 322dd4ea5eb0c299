// Checkpoints as a user meets them: a run killed after a checkpoint and resumed with --resume
// ends bitwise-identical to one that never stopped; a checkpoint written by one grid resumes on
// another (resharding, data position included); a corrupt newest checkpoint is passed over with
// a message; a checkpoint of another model is refused; a full disk is reported at the save that
// meets it, written in the background or not.

#include <catch2/catch.hpp>


#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <thread>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "apps/commands/watched_run.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "support/run_process.hpp"
#include "support/small_disk.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Starts `troupe train args` in `dir`, kills it (and its node processes) with SIGKILL as soon as
// `appears` exists, and returns once it is gone.
void kill_when_present(const TempDir& dir, std::vector<std::string> args, const fs::path& appears) {
  args.insert(args.begin(), TROUPE_BINARY_DIR "/troupe");
  auto run = apps::WatchedRun::start(args, {}, (dir.path() / "killed-run.txt").string());
  REQUIRE(run.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool exited = false;
  while (!fs::exists(appears) && std::chrono::steady_clock::now() < deadline &&
         !(exited = (*run)->wait_exit(std::chrono::milliseconds(0)).has_value()))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!exited) {
    (*run)->kill_all();
    (void)(*run)->wait_exit(std::chrono::seconds(30));
  }
  INFO(file_text(dir.path() / "killed-run.txt"));
  REQUIRE(fs::exists(appears));
  REQUIRE(!exited);  // killed mid-run, not finished
}

}  // namespace

TEST_CASE("a run killed after a checkpoint and resumed ends bitwise-identical to one that never stopped",
          "[checkpoint]") {
  TempDir dir;
  const std::vector<std::string> powersgd{"--train.batch_size", "4", "--comm.compress", "powersgd",
                                          "--comm.compress_start_step", "3"};
  struct Layout {
    std::string shown;
    std::vector<std::string> args;
    std::vector<std::string> compression_kinds;  // PowerSGD's state the checkpoint must hold
  };
  const std::vector<std::string> dp2_residuals{"powersgd_residual_dp0", "powersgd_residual_dp1"};
  const std::vector<std::string> psgd_kinds = with({"powersgd_q"}, dp2_residuals);
  const Layout layouts[] = {
      {"one process", {}, {}},
      {"2 data-parallel workers", {"--workers", "2", "--train.batch_size", "4"}, {}},
      {"2 data-parallel workers, PowerSGD", with({"--workers", "2"}, powersgd), psgd_kinds},
      {"pp 2 x dp 2, PowerSGD", with({"--workers", "4", "--pipeline.stages", "2"}, powersgd), psgd_kinds},
      {"tp 2 x dp 2, PowerSGD", with({"--workers", "4", "--tensor.shards", "2"}, powersgd),
       with({"powersgd_q_tp2"}, dp2_residuals)}};
  for (std::size_t index = 0; index < std::size(layouts); ++index) {
    const Layout& layout = layouts[index];
    const std::string& shown = layout.shown;
    INFO(shown);
    const fs::path whole = dir.path() / ("whole" + std::to_string(index));
    const fs::path broken = dir.path() / ("broken" + std::to_string(index));
    const auto job = with(with(tiny_steps(30), layout.args), {"--checkpoint.every", "10"});
    const ProcessResult straight = run_troupe(dir, with(with({"train"}, job), {"--checkpoint.dir", whole.string()}),
                                              std::chrono::seconds(120));
    REQUIRE(straight.exit_code == 0);

    kill_when_present(dir, with(with({"train"}, job), {"--checkpoint.dir", broken.string()}),
                      checkpoint::step_dir(broken, 10));
    CHECK(!fs::exists(checkpoint::step_dir(broken, 30)));
    const ProcessResult resumed = run_troupe(
        dir, with(with({"train"}, job), {"--checkpoint.dir", broken.string(), "--resume"}), std::chrono::seconds(120));
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains("resumed from " + checkpoint::step_dir(broken, 10).string()) ||
                                Contains("resumed from " + checkpoint::step_dir(broken, 20).string()));
    CHECK(number_after(resumed.out, "param norm") == number_after(straight.out, "param norm"));
    const auto a = checkpoint_values(checkpoint::step_dir(whole, 30));
    const auto b = checkpoint_values(checkpoint::step_dir(broken, 30));
    // A compressed run's residuals (one per rank) and factors are training state like the moments.
    for (const std::string& kind : layout.compression_kinds) CHECK(a.count(kind) == 1);
    for (const auto& [kind, values] : a) {
      INFO(kind);
      CHECK(std::memcmp(values.data(), b.at(kind).data(), values.size() * sizeof(float)) == 0);
    }
    std::printf("%s: killed after step-0000010 appeared, resumed: step 30 state (%zu kinds) bitwise equal "
                "to the run that never stopped (param norm %s)\n",
                shown.c_str(), a.size(), std::to_string(number_after(resumed.out, "param norm")).c_str());
  }
}

TEST_CASE("a checkpoint written by 2 data-parallel workers resumes on 1 worker and on dp 2 x pp 2", "[checkpoint]") {
  TempDir dir;
  const fs::path saved = dir.path() / "dp2";
  // ZeRO 1: each worker writes its shard of the moments, so the reader must assemble them.
  const auto job = with(tiny_steps(8), {"--checkpoint.every", "4", "--checkpoint.dir", saved.string()});
  const ProcessResult undisturbed =
      run_troupe(dir, with(with({"train"}, job), {"--workers", "2", "--train.batch_size", "4", "--train.zero", "1"}),
                 std::chrono::seconds(120));
  REQUIRE(undisturbed.exit_code == 0);
  const double loss = number_after(undisturbed.out, "final train loss");
  const double norm = number_after(undisturbed.out, "param norm");
  REQUIRE(checkpoint::committed_steps(saved).value() == std::vector<std::int64_t>{8, 4});

  struct Grid {
    std::string name;
    std::vector<std::string> args;
  };
  // The same global batch of 8 sequences per step on every grid.
  for (const Grid& grid : {Grid{"1 worker", {"--train.batch_size", "8"}},
                           Grid{"dp 2 x pp 2", {"--workers", "4", "--pipeline.stages", "2",
                                                "--pipeline.microbatches", "4", "--train.batch_size", "1"}}}) {
    INFO(grid.name);
    const fs::path copy = dir.path() / ("copy" + std::to_string(grid.args.size()));
    fs::copy(saved, copy, fs::copy_options::recursive);
    fs::remove_all(checkpoint::step_dir(copy, 8));
    const auto resume = with(tiny_steps(8), {"--checkpoint.dir", copy.string(), "--resume"});
    const ProcessResult r = run_troupe(dir, with(with({"train"}, resume), grid.args), std::chrono::seconds(120));
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("resumed from " + checkpoint::step_dir(copy, 4).string() + " after step 4"));
    std::printf("saved at dp 2 (ZeRO 1), resumed at step 4 on %s: loss %.4f, param norm %.9g (undisturbed dp 2: %.4f, "
                "%.9g)\n",
                grid.name.c_str(), number_after(r.out, "final train loss"), number_after(r.out, "param norm"), loss,
                norm);
    CHECK(number_after(r.out, "final train loss") == Approx(loss).epsilon(1e-3));
    CHECK(number_after(r.out, "param norm") == Approx(norm).epsilon(1e-6));
  }
}

TEST_CASE("resume passes over a corrupt newest checkpoint, saying so, and refuses another model or batch",
          "[checkpoint]") {
  TempDir dir;
  const fs::path saved = dir.path() / "ckpt";
  const auto job = with(tiny_steps(4), {"--checkpoint.every", "2", "--checkpoint.dir", saved.string()});
  REQUIRE(run_troupe(dir, with({"train"}, job), std::chrono::seconds(60)).exit_code == 0);

  const fs::path shard = checkpoint::step_dir(saved, 4) / checkpoint::shard_file_name(0);
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(shard) / 2));
    file.put('\x5a');
  }
  const ProcessResult fallback = run_troupe(dir, with(with({"train"}, job), {"--resume"}), std::chrono::seconds(60));
  INFO(fallback.out << fallback.err);
  REQUIRE(fallback.exit_code == 0);
  CHECK_THAT(fallback.out, Contains("skipped step-0000004") && Contains("hash") &&
                               Contains("resumed from " + checkpoint::step_dir(saved, 2).string() + " after step 2"));

  const ProcessResult other_model = run_troupe(
      dir, with(with({"train"}, job), {"--resume", "--model.n_layer", "2"}), std::chrono::seconds(60));
  CHECK(other_model.exit_code == 2);
  CHECK_THAT(other_model.err, Contains("checkpoint was written for n_layer 4, this model has 2"));

  const ProcessResult other_batch = run_troupe(
      dir, with(with({"train"}, job), {"--resume", "--train.batch_size", "3"}), std::chrono::seconds(60));
  CHECK(other_batch.exit_code == 2);
  CHECK_THAT(other_batch.err, Contains("this job's global batch is 3 sequences per step"));

  const ProcessResult no_dir = run_troupe(dir, with(with({"train"}, tiny_steps(4)), {"--resume"}));
  CHECK(no_dir.exit_code == 2);
  CHECK_THAT(no_dir.err, Contains("checkpoint.resume (--resume) needs checkpoint.dir"));
}

TEST_CASE("a full disk is reported with its path and the system's words before the next save, and the job ends "
          "non-zero at once, sync or async",
          "[checkpoint]") {
  TempDir dir;
  const bool async = GENERATE(false, true);
  INFO("checkpoint.async " << async);
  // A 2 MB disk takes the lock file and the logs, not one shard of tiny (several MB).
  SmallDisk disk(2 * 1024 * 1024);
  const fs::path saved = disk.path() / "ckpt";
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult r = run_troupe(
      dir,
      with(with({"train", "--workers", "2", "--train.batch_size", "4"}, tiny_steps(6)),
           {"--checkpoint.dir", saved.string(), "--checkpoint.every", "2", "--checkpoint.async", async ? "true" : "false",
            "--fault.max_restarts", "0"}),
      std::chrono::seconds(300));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string output = r.out + r.err;
  INFO(output);
  REQUIRE(!r.timed_out);
  CHECK(r.exit_code == 1);
  // A writer that waited out the coordinator's 120 s commit timeout once would be past this.
  CHECK(seconds < 60);
  const std::size_t first_report = output.find("checkpoint after step 2 failed: ");
  REQUIRE(first_report != std::string::npos);
  const std::string report = output.substr(first_report, output.find('\n', first_report) - first_report);
  CHECK_THAT(report, Contains("No space left on device") &&
                         Contains((checkpoint::staging_dir(saved, 2) / "rank-0000").string()));
  // Within one save interval: before any rank meets the next save.
  CHECK(first_report < output.find("checkpoint after step 4 failed: "));
  CHECK_THAT(r.err, Contains("the last checkpoint failed: ") && Contains("No space left on device"));
}
