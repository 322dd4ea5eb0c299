// Recovery at its edges, on live jobs of real node processes: a node lost after its last step, Ctrl-C, a
// rescue whose obvious writer is a replacement process holding nothing yet, and one count of
// restarts through drains, grows and a kill, the same in the log, the shell and /metrics.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "apps/live_job.hpp"
#include "support/metrics_scrape.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

namespace {

// The pid of node `node`'s latest process, as its join in `log` says.
pid_t latest_pid(const std::string& log, int node) {
  const std::vector<std::string> pids = joined_pids(log, node);
  REQUIRE(!pids.empty());
  return static_cast<pid_t>(std::stol(pids.back()));
}

// A job of `args` in the background (no shell needed), as troupe's own output shows it.
std::unique_ptr<troupe::apps::WatchedRun> start_job(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv{TROUPE_BINARY_DIR "/troupe"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto started = troupe::apps::WatchedRun::start(argv, {"XDG_RUNTIME_DIR=" + dir.path().string()}, dir.file("job.log"));
  REQUIRE(started);
  return std::move(*started);
}

}  // namespace

TEST_CASE("a node lost after the last step ends the job as finished at once, in place as with restarts",
          "[recovery][dp]") {
  for (const char* recovery : {"in_place", "restart"}) {
    DYNAMIC_SECTION("fault.recovery " << recovery) {
      TempDir dir;
      auto run = start_job(dir, {"train",
                                 "--workers",
                                 "2",
                                 "--model.preset",
                                 "tiny",
                                 "--train.threads",
                                 "1",
                                 "--train.steps",
                                 "30",
                                 "--train.val_batches",
                                 "16",
                                 "--sample.tokens",
                                 "0",
                                 "--fault.recovery",
                                 recovery,
                                 "--fault.heartbeat_seconds",
                                 "0.2",
                                 "--checkpoint.dir",
                                 dir.file("ck"),
                                 "--checkpoint.every",
                                 "100"});
      // The validation after the last step keeps node 1 alive for the kill.
      REQUIRE(run->wait_for_line(matching("step +30/30"), seconds(120)));
      const auto killed = Clock::now();
      REQUIRE(kill(latest_pid(output_of(*run), 1), SIGKILL) == 0);
      const auto code = run->wait_exit(seconds(120));
      const double took = std::chrono::duration<double>(Clock::now() - killed).count();
      INFO(output_of(*run));
      REQUIRE(code);
      CHECK(*code == 0);
      // The rescue timeout is 60 s: a job that waited for a recovery would take it.
      CHECK(took < 30);
      CHECK_THAT(output_of(*run), !Contains("did not complete within") && Contains("job finished"));
    }
  }
}

TEST_CASE("Ctrl-C ends the job as interrupted: the nodes' exits it causes are no failure to recover from",
          "[recovery][dp]") {
  TempDir dir;
  auto run = start_job(dir, {"train", "--workers", "2", "--model.preset", "tiny", "--train.threads", "1",
                             "--train.steps", "100000", "--train.val_every", "0", "--train.val_batches", "1",
                             "--sample.tokens", "0", "--train.log_every", "10", "--fault.heartbeat_seconds", "0.2"});
  REQUIRE(run->wait_for_line(matching("step +20/"), seconds(120)));
  REQUIRE(kill(run->pid(), SIGINT) == 0);
  const auto code = run->wait_exit(seconds(60));
  const std::string log = output_of(*run);
  INFO(log);
  REQUIRE(code);
  CHECK(*code == 130);
  CHECK_THAT(log, Contains("interrupted by SIGINT"));
  CHECK_THAT(log, !Contains("recovery:") && !Contains("lost node"));
}

TEST_CASE(
    "a rescue takes its snapshot from a rank that holds the newest state, not from a process started in place "
    "of a lost one",
    "[recovery][dp]") {
  // Node 0 must die while node 1's new process still waits for its state: tiny's state moves in
  // milliseconds, so on a loaded machine the kill can land after the recovery ended, and the loss is
  // then an ordinary second in-place recovery. Such an attempt proves nothing and is run again.
  constexpr int attempts = 3;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    TempDir dir;
    auto run = start_job(dir, {"train",
                               "--workers",
                               "3",
                               "--model.preset",
                               "tiny",
                               "--train.threads",
                               "1",
                               "--train.steps",
                               "100000",
                               "--train.val_every",
                               "0",
                               "--train.val_batches",
                               "1",
                               "--sample.tokens",
                               "0",
                               "--train.log_every",
                               "1",
                               "--checkpoint.dir",
                               dir.file("ck"),
                               "--checkpoint.every",
                               "10",
                               "--fault.heartbeat_seconds",
                               "0.2"});
    std::size_t at = 0;
    REQUIRE(run->wait_for_line(matching("step +55/"), seconds(120), 0, &at));
    REQUIRE(kill(latest_pid(output_of(*run), 1), SIGKILL) == 0);
    // Node 1's new process is ready but holds nothing until the state comes: node 0 lost now leaves
    // rank 2 the one rank holding the newest step.
    REQUIRE(run->wait_for_line(matching("every rank is ready"), seconds(120), at, &at));
    REQUIRE(kill(latest_pid(output_of(*run), 0), SIGKILL) == 0);
    auto resumed = run->wait_for_line(matching("resumed from .* after step ([0-9]+)"), seconds(180), at);
    const std::string log = output_of(*run);
    INFO("attempt " << attempt << " of " << attempts << "\n" << log);
    REQUIRE(resumed);
    const bool recovered_first = log.find("in place done") != std::string::npos;
    if (recovered_first && attempt < attempts) {
      WARN("attempt " << attempt << ": node 0 died after node 1's recovery ended; the scenario is run again");
      run->kill_all();
      continue;
    }
    REQUIRE_FALSE(recovered_first);
    std::smatch written;
    REQUIRE(
        std::regex_search(log, written, std::regex("rank ([0-9]+) writes its memory of step ([0-9]+) as a rescue")));
    CHECK(written[1].str() == "2");
    CHECK(std::stol(written[2].str()) >= 55);
    CHECK_THAT(resumed->text, Contains("after step " + written[2].str() + " "));
    run->kill_all();
    return;
  }
}

TEST_CASE("one count of restarts: drains and grows are not restarts, and the log, the shell and /metrics agree",
          "[recovery][shell][metrics][dp]") {
  TempDir dir;
  const long steps = 100000;
  LiveJob job(dir, steps, {}, {"train", "--workers", "2", "--fault.recovery", "restart"});
  drain_node_1(dir, job, steps);
  rejoin(dir, job);
  std::size_t at = 0;
  REQUIRE(job.run->wait_for_line(matching("the shell's rejoin"), seconds(60), 0, &at));
  REQUIRE(job.run->wait_for_line(matching("all 2 nodes joined"), seconds(60), at, &at));
  REQUIRE(job.run->wait_for_line(matching("step +[0-9]+/"), seconds(60), at, &at));
  REQUIRE(kill(latest_pid(job.log(), 1), SIGKILL) == 0);
  REQUIRE(job.run->wait_for_line(matching("\\(restart 1 of 3\\)"), seconds(60), at, &at));
  REQUIRE(job.run->wait_for_line(matching("all 2 nodes joined"), seconds(60), at, &at));
  REQUIRE(job.run->wait_for_line(matching("step +[0-9]+/"), seconds(60), at, &at));

  const ProcessResult hello = shell_c(dir, job, "hello");
  CHECK_THAT(hello.out, Contains("(restart 1 of 3)"));
  const ProcessResult status = shell_c(dir, job, "status");
  INFO(status.out << status.err);
  CHECK_THAT(status.out, Contains("(1 restart(s) of 3 used)"));
  // Node 0's process of this attempt serves the counts it was started with.
  const std::string log = job.log();
  std::smatch port;
  const std::string last_attempt = log.substr(log.rfind("(restart 1 of 3)"));
  REQUIRE(std::regex_search(last_attempt, port,
                            std::regex("\\[node 0 [^\\]]*\\][^\\n]*metrics on http://127\\.0\\.0\\.1:(\\d+)/metrics")));
  const HttpResponse metrics = http_get(std::stoi(port[1].str()), "/metrics");
  REQUIRE(metrics.status == 200);
  const Exposition exposition = parse_exposition(metrics.body);
  INFO(metrics.body);
  CHECK(exposition.value("troupe_restarts_total") == 1);
  CHECK(exposition.value("troupe_recoveries_total", {{"source", "shrink"}}) == 1);
  CHECK(exposition.value("troupe_recoveries_total", {{"source", "grow"}}) == 1);
  CHECK_THAT(log, !Contains("restart 2 of") && !Contains("restart 3 of"));
}
