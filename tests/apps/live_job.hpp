#pragma once
// A 2-node tiny job running in the background, as the shell and elastic-grow tests drive it: its
// control port and token, one-shot shell commands against it, the drain and rejoin they share, and
// the bitwise comparison of its last checkpoint with an undisturbed run's.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "apps/line_match.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

namespace troupe::test {

// A tiny job of `steps` steps, checkpoints in `checkpoints`, as LiveJob runs it: on 2 local
// workers, or as `start` says (a host file); `extra` last, over the keys set here.
inline std::vector<std::string> tiny_job_args(long steps, const std::string& checkpoints,
                                              const std::vector<std::string>& start = {"train", "--workers", "2"},
                                              const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args{TROUPE_BINARY_DIR "/troupe"};
  args.insert(args.end(), start.begin(), start.end());
  args.insert(args.end(), {"--model.preset",
                           "tiny",
                           "--train.steps",
                           std::to_string(steps),
                           "--train.threads",
                           "1",
                           "--sample.tokens",
                           "0",
                           "--train.val_every",
                           "0",
                           "--train.val_batches",
                           "1",
                           "--train.log_every",
                           "10",
                           "--checkpoint.dir",
                           checkpoints,
                           "--checkpoint.every",
                           "100000",
                           "--fault.heartbeat_seconds",
                           "0.2"});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Everything `run` printed so far, one line each.
inline std::string output_of(const troupe::apps::WatchedRun& run) {
  std::string text;
  for (const auto& line : run.lines()) text += line.text + "\n";
  return text;
}

// A 2-node tiny job in the background with checkpoints in dir/ck and its token file under dir.
struct LiveJob {
  std::unique_ptr<troupe::apps::WatchedRun> run;
  std::string control;  // HOST:PORT of the monitor
  int control_port = 0;
  int job_port = 0;  // the job supervisor's
  std::string token_file;

  // `prefix` runs the job through another program, e.g. prlimit; `start` and `extra` as
  // tiny_job_args takes them.
  LiveJob(const TempDir& dir, long steps, std::vector<std::string> prefix = {},
          const std::vector<std::string>& start = {"train", "--workers", "2"},
          const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = tiny_job_args(steps, dir.file("ck"), start, extra);
    argv.insert(argv.begin(), prefix.begin(), prefix.end());
    auto started =
        troupe::apps::WatchedRun::start(argv, {"XDG_RUNTIME_DIR=" + dir.path().string()}, dir.file("job.log"));
    REQUIRE(started);
    run = std::move(*started);
    auto banner =
        run->wait_for_line(matching("monitor: troupe shell (127\\.0\\.0\\.1:(\\d+)) \\(the job's token is in (.+)\\)"),
                           std::chrono::seconds(30));
    REQUIRE(banner);
    std::smatch m;
    REQUIRE(std::regex_search(banner->text, m,
                              std::regex("troupe shell (127\\.0\\.0\\.1:(\\d+)) \\(the job's token is in (.+)\\)")));
    control = m[1].str();
    control_port = std::stoi(m[2].str());
    token_file = m[3].str();
    auto supervisor = run->wait_for_line(matching("job supervisor on 127\\.0\\.0\\.1:(\\d+)"), std::chrono::seconds(5));
    REQUIRE(supervisor);
    REQUIRE(std::regex_search(supervisor->text, m, std::regex("on 127\\.0\\.0\\.1:(\\d+)")));
    job_port = std::stoi(m[1].str());
    INFO(output_of(*run));
    REQUIRE(run->wait_for_line(matching("step +10/"), std::chrono::seconds(60)));
  }
  ~LiveJob() {
    if (run) run->kill_all();
  }
  std::string log() const { return output_of(*run); }
};

inline ProcessResult shell_c(const TempDir& dir, const LiveJob& job, const std::string& command,
                             std::vector<std::string> extra = {}) {
  std::vector<std::string> args{
      "/usr/bin/env", "XDG_RUNTIME_DIR=" + dir.path().string(), TROUPE_BINARY_DIR "/troupe", "shell", job.control, "-c",
      command};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_process(args, dir.path().string(), std::chrono::seconds(60));
}

// `line` typed into `troupe shell` through a pipe (stdin and stdout no terminal), then the end
// of input, which ends the shell.
inline ProcessResult shell_piped(const TempDir& dir, const LiveJob& job, const std::string& line) {
  return run_process({"/usr/bin/env", "XDG_RUNTIME_DIR=" + dir.path().string(), "/bin/sh", "-c",
                      "printf '%s\\n' \"$2\" | \"$0\" shell \"$1\"", TROUPE_BINARY_DIR "/troupe", job.control, line},
                     dir.path().string(), std::chrono::seconds(60));
}

// The answer of `troupe shell -c command` once it shows `text`, or after 10 s: the monitor
// refreshes its view of the job every 0.25 s, and a step's reports reach it a little later.
inline ProcessResult shell_showing(const TempDir& dir, const LiveJob& job, const std::string& command,
                                   const std::string& text) {
  ProcessResult answer = shell_c(dir, job, command);
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       answer.out.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(100)))
    answer = shell_c(dir, job, command);
  return answer;
}

inline ProcessResult status_showing(const TempDir& dir, const LiveJob& job, const std::string& text) {
  return shell_showing(dir, job, "status", text);
}

// Whether the checkpoints of `step` in two folders hold the same parameters and AdamW moments, bit
// for bit.
inline bool same_state(const std::filesystem::path& a, const std::filesystem::path& b, long step) {
  auto first = troupe::checkpoint::open_checkpoint(troupe::checkpoint::step_dir(a, step));
  auto second = troupe::checkpoint::open_checkpoint(troupe::checkpoint::step_dir(b, step));
  REQUIRE(first);
  REQUIRE(second);
  for (const char* kind : {"param", "adam_m", "adam_v"}) {
    auto x = first->read_all(kind);
    auto y = second->read_all(kind);
    REQUIRE(x);
    REQUIRE(y);
    REQUIRE(x->size() == y->size());
    if (std::memcmp(x->data(), y->data(), x->size() * sizeof(float)) != 0) return false;
  }
  return true;
}

// The shell's `drain node 1` on a 2-node job of `steps` steps: returns once the job trains again
// as one replica of 2 micro-batches.
inline void drain_node_1(const TempDir& dir, const LiveJob& job, long steps) {
  const ProcessResult drain = shell_c(dir, job, "drain node 1");
  INFO("drain: " << drain.out << drain.err);
  REQUIRE(drain.exit_code == 0);
  std::size_t at = 0;
  REQUIRE(job.run->wait_for_line(matching("shrinking from 2 to 1 data-parallel replica\\(s\\): train.grad_accum = 2"),
                                 std::chrono::seconds(60), 0, &at));
  REQUIRE(job.run->wait_for_line(matching("step +[0-9]+/" + std::to_string(steps) + " \\|"), std::chrono::seconds(60),
                                 at + 1));
}

// The node process that `node` ran when the job started it, as its join says: "node 0 (localhost,
// pid 123) joined".
inline std::vector<std::string> joined_pids(const std::string& log, int node) {
  std::vector<std::string> pids;
  const std::regex joined("node " + std::to_string(node) + " \\([^,]+, pid ([0-9]+)\\) joined");
  for (std::sregex_iterator it(log.begin(), log.end(), joined), end; it != end; ++it) pids.push_back((*it)[1].str());
  return pids;
}

// The shell's rejoin on a drained job: answered once its checkpoint committed. Returns the answer.
inline std::string rejoin(const TempDir& dir, const LiveJob& job) {
  const ProcessResult rejoined = shell_c(dir, job, "rejoin");
  INFO("rejoin: " << rejoined.out << rejoined.err);
  REQUIRE(rejoined.exit_code == 0);
  return rejoined.out;
}

// Waits for the job to end, which it must do well.
inline void finished_well(const LiveJob& job) {
  const auto exit_code = job.run->wait_exit(std::chrono::seconds(120));
  INFO(job.log());
  REQUIRE(exit_code);
  CHECK(*exit_code == 0);
}

// The job's last checkpoint holds the state of a run of `start` never drained, bit for bit.
inline void same_as_undisturbed(const TempDir& dir, long steps,
                                const std::vector<std::string>& start = {"train", "--workers", "2"}) {
  const ProcessResult undisturbed =
      run_process(tiny_job_args(steps, dir.file("reference"), start), dir.path().string(), std::chrono::seconds(120));
  REQUIRE(undisturbed.exit_code == 0);
  CHECK(same_state(dir.file("ck"), dir.file("reference"), steps));
}

}  // namespace troupe::test
