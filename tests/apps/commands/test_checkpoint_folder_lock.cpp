// One job per checkpoint folder, with real jobs: while one trains into a folder, another job on it
// is refused before any work with one line naming the holder, and a reader (export) is not; once
// the holder is gone (SIGKILLed, or exited), the next job takes the folder.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <regex>

#include "apps/line_match.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/folder_lock.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;
using std::chrono::seconds;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> tiny_train(long steps, const fs::path& folder) {
  return {"train", "--model.preset", "tiny", "--train.steps", std::to_string(steps), "--train.val_batches", "1",
          "--sample.tokens", "0", "--train.threads", "1", "--train.val_every", "0", "--train.log_every", "1",
          "--checkpoint.every", "2", "--checkpoint.dir", folder.string()};
}

std::vector<std::string> with_workers(std::vector<std::string> args) {
  args.insert(args.begin() + 1, {"--workers", "2", "--train.batch_size", "4"});
  return args;
}

}  // namespace

TEST_CASE("a second job on a checkpoint folder in use is refused naming the holder, and a new job takes the folder "
          "after the holder is killed or exits",
          "[checkpoint]") {
  TempDir dir;
  const fs::path folder = dir.path() / "ckpt";
  std::vector<std::string> holder_args = with_workers(tiny_train(100000, folder));
  holder_args.insert(holder_args.begin(), TROUPE_BINARY_DIR "/troupe");
  auto holder = apps::WatchedRun::start(holder_args, {}, (dir.path() / "holder.txt").string());
  REQUIRE(holder.ok());
  INFO(file_text(dir.path() / "holder.txt"));
  REQUIRE((*holder)->wait_for_line(matching("step-0000002 committed"), seconds(120)));

  const std::string named = "checkpoint folder " + folder.string() + " is in use by another job (pid " +
                            std::to_string((*holder)->pid()) + " on host ";
  const ProcessResult refused = check_rejected_in(dir, with_workers(tiny_train(4, folder)), named);
  CHECK_THAT(refused.err, Contains("--workers 2") && Contains("give this job another checkpoint.dir"));
  check_rejected_in(dir, tiny_train(4, folder), named);
  // A reader needs no lock.
  const ProcessResult exported = run_troupe(dir, {"export", "--checkpoint", folder.string(), "--out", "w.safetensors"});
  INFO(exported.err);
  CHECK(exported.exit_code == 0);

  (*holder)->kill_all();
  REQUIRE((*holder)->wait_exit(seconds(30)));
  const ProcessResult after_kill = run_troupe(dir, with_workers(tiny_train(2, folder)), seconds(120));
  INFO(after_kill.out << after_kill.err);
  CHECK(after_kill.exit_code == 0);
  CHECK_THAT(after_kill.out + after_kill.err,
             Contains("took over " + checkpoint::lock_path(folder).string() + " from a job that is gone (pid " +
                      std::to_string((*holder)->pid()) + " on host "));
  CHECK_FALSE(fs::exists(checkpoint::lock_path(folder)));

  const ProcessResult after_exit = run_troupe(dir, tiny_train(2, folder), seconds(120));
  INFO(after_exit.out << after_exit.err);
  CHECK(after_exit.exit_code == 0);
  CHECK_THAT(after_exit.out + after_exit.err, !Contains("took over"));
}
