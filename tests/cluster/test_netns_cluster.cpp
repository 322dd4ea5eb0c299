// Jobs across hosts: `troupe launch` starting its nodes on hosts simulated as network namespaces
// (scripts/netns-cluster.sh), which share nothing but the wire, so ranks on one host meet through
// shared memory and ranks on different hosts through TCP. Each case brings its own cluster up and
// takes it down.

#include <catch2/catch.hpp>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "apps/checkpoint_parameters.hpp"
#include "apps/line_match.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/store.hpp"
#include "cluster/cluster_support.hpp"
#include "support/metrics_scrape.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A job's arguments with its checkpoints (every `steps`) in `folder`.
std::vector<std::string> saving(std::vector<std::string> args, long steps, const fs::path& folder) {
  return with(with(std::move(args), tiny_steps(steps)),
              {"--checkpoint.dir", folder.string(), "--checkpoint.every", std::to_string(steps)});
}

// 4 steps of data parallelism on 2 lines x 2 slots on loopback, checkpointed in `folder`: what a
// job across hosts must equal.
ProcessResult two_by_two_on_loopback(const TempDir& dir, const fs::path& folder) {
  const auto run = run_troupe(
      dir, saving({"launch", "--hostfile", dir.write("local-hosts", "localhost slots=2\nlocalhost slots=2\n")}, 4, folder),
      std::chrono::seconds(120));
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  return run;
}

void check_same_state(const fs::path& a, const fs::path& b, long step) {
  const auto left = checkpoint_values(troupe::checkpoint::step_dir(a, step));
  const auto right = checkpoint_values(troupe::checkpoint::step_dir(b, step));
  for (const auto& [kind, values] : left) {
    INFO(kind);
    CHECK(values == right.at(kind));
  }
}

// The pid `troupe launch` logged for node `index` when it joined.
int joined_pid(const std::string& output, int index) {
  std::smatch match;
  const std::regex joined("node " + std::to_string(index) + " \\([^,]+, pid ([0-9]+)\\) joined");
  REQUIRE(std::regex_search(output, match, joined));
  return std::stoi(match[1].str());
}

std::string all_lines(const troupe::apps::WatchedRun& run) {
  std::string text;
  for (const auto& line : run.lines()) text += line.text + "\n";
  return text;
}

// `troupe args`, its output kept in `log` in `dir`, once it has logged step `step`.
std::unique_ptr<troupe::apps::WatchedRun> running_past_step(const TempDir& dir, std::vector<std::string> args,
                                                            const std::string& log, int step,
                                                            std::chrono::seconds patience = std::chrono::seconds(60)) {
  args.insert(args.begin(), TROUPE_BINARY_DIR "/troupe");
  auto run = troupe::apps::WatchedRun::start(args, {}, dir.file(log));
  REQUIRE(run.ok());
  const bool reached = (*run)->wait_for_line(matching("step +" + std::to_string(step) + "/"), patience).has_value();
  INFO(all_lines(**run));
  REQUIRE(reached);
  return std::move(*run);
}

// What a running job did once `host`'s link was cut: when it named the cut (`detection`), when its
// in-place recovery was done, and all it printed by its end. The link is up again afterwards.
struct AfterCut {
  troupe::apps::WatchedRun::Clock::time_point cut_at;
  std::optional<troupe::apps::WatchedRun::Line> detected, recovered;
  std::string output;
};

AfterCut cut_link(troupe::apps::WatchedRun& watched, const std::string& host,
                  const troupe::apps::WatchedRun::LineMatch& detection) {
  REQUIRE(cluster_command({"link", host, "down"}).exit_code == 0);
  AfterCut after{troupe::apps::WatchedRun::Clock::now(), {}, {}, {}};
  after.detected = watched.wait_for_line(detection, std::chrono::seconds(30));
  after.recovered = watched.wait_for_line(matching("recovery: in place done"), std::chrono::seconds(60));
  const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
  if (!exit_code) watched.kill_all();
  cluster_command({"link", host, "up"});
  after.output = all_lines(watched);
  INFO(after.output);
  REQUIRE(after.detected);
  REQUIRE(after.recovered);
  REQUIRE(exit_code == 0);
  return after;
}

}  // namespace

TEST_CASE("2 hosts x 2 slots train data parallel bitwise equal to the same grid on loopback, shared memory "
          "within a host and TCP across",
          "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  const fs::path local = dir.path() / "loopback", hosts = dir.path() / "across";
  const auto on_loopback = two_by_two_on_loopback(dir, local);
  CHECK_THAT(on_loopback.out, Contains("comm: rank 0 reaches ranks 1, 2, 3 through shared memory ("));

  const auto across = run_troupe(dir, saving(Cluster::launch(dir, "h0 slots=2\nh1 slots=2\n"), 4, hosts),
                                 std::chrono::seconds(120));
  INFO(across.out << across.err);
  REQUIRE(across.exit_code == 0);
  CHECK_THAT(across.out, Contains("[node 0 h0]") && Contains("[node 1 h1]"));
  CHECK_THAT(across.out, Contains("rank 0 reaches rank 1 through shared memory (") &&
                             Contains("ranks 2, 3 through TCP (tcp/eth0)"));
  CHECK_THAT(across.out, Contains("rank 3 reaches ranks 0, 1 through TCP (tcp/eth0); rank 2 through shared memory ("));
  CHECK_THAT(across.out, !Contains("(tcp/eth0, mapped blocks)"));  // no rank maps a region across hosts
  check_same_state(local, hosts, 4);
  std::printf("dp 4 on 2 hosts x 2 slots: param norm %.9g; on loopback: %.9g\n", number_after(across.out, "param norm"),
              number_after(on_loopback.out, "param norm"));
}

TEST_CASE("a 2-stage pipeline across hosts takes the steps of the same pipeline on loopback, bitwise", "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  const std::vector<std::string> pipeline{"--pipeline.stages", "2", "--pipeline.microbatches", "4"};
  const fs::path local = dir.path() / "loopback", hosts = dir.path() / "across";
  const auto on_loopback = run_troupe(
      dir,
      with(saving({"launch", "--hostfile", dir.write("local-hosts", "localhost slots=1\nlocalhost slots=1\n")}, 4, local),
           pipeline),
      std::chrono::seconds(120));
  INFO(on_loopback.out << on_loopback.err);
  REQUIRE(on_loopback.exit_code == 0);
  const auto across = run_troupe(dir, with(saving(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\n"), 4, hosts), pipeline),
                                 std::chrono::seconds(120));
  INFO(across.out << across.err);
  REQUIRE(across.exit_code == 0);
  CHECK_THAT(across.out, Contains("rank 0 reaches rank 1 through TCP (tcp/eth0)") &&
                             Contains("rank 1 reaches rank 0 through TCP (tcp/eth0)"));
  check_same_state(local, hosts, 4);
  std::printf("pp 2 across 2 hosts: final loss %.6f; on loopback: %.6f\n", number_after(across.out, "final train loss"),
              number_after(on_loopback.out, "final train loss"));
}

TEST_CASE(
    "with fault.recovery restart a node killed on host B is detected and every node restarts from the "
    "survivors' memory, as on one host",
    "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  const long steps = 16;
  const fs::path undisturbed = dir.path() / "undisturbed", drilled = dir.path() / "drilled";
  const auto job = [&](const fs::path& folder) {
    return with(with(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\n"), tiny_steps(steps)),
                {"--checkpoint.dir", folder.string(), "--checkpoint.every", "8", "--fault.recovery", "restart"});
  };
  const auto calm = run_troupe(dir, job(undisturbed), std::chrono::seconds(120));
  INFO(calm.out << calm.err);
  REQUIRE(calm.exit_code == 0);

  const auto run = running_past_step(dir, job(drilled), "drilled.log", 5);
  auto& watched = *run;
  const int victim = joined_pid(all_lines(watched), 1);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const auto killed_at = troupe::apps::WatchedRun::Clock::now();
  const auto detected = watched.wait_for_line(matching("\\(node_lost\\)"), std::chrono::seconds(30));
  const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
  if (!exit_code) watched.kill_all();
  INFO(all_lines(watched));
  REQUIRE(detected);
  REQUIRE(exit_code == 0);
  const std::string output = all_lines(watched);
  CHECK_THAT(output, Contains("lost node 1 (h1, pid " + std::to_string(victim) + ")"));
  CHECK_THAT(output, Contains("restarting every node from the survivors' rescue snapshot"));
  CHECK_THAT(output, Contains("job finished: all 2 nodes done"));
  check_same_state(undisturbed, drilled, steps);
  std::printf("node 1 on h1 killed after step 5: detected after %.2f s; final weights bitwise those of an undisturbed "
              "run\n",
              std::chrono::duration<double>(detected->at - killed_at).count());
}

namespace {

// The processes left in host `host`'s network namespace.
std::string processes_on(const std::string& host) {
  const ProcessResult listed =
      run_process({"/bin/sh", "-c", "ip netns pids troupe-" + host}, "/", std::chrono::seconds(10));
  REQUIRE(listed.exit_code == 0);
  return listed.out;
}

// The step every rank went on after, from the in-place recovery's last line.
long resumed_after(const std::string& output) {
  std::smatch match;
  REQUIRE(std::regex_search(output, match,
                            std::regex("recovery: in place done .* every rank goes on after step ([0-9]+)")));
  return std::stol(match[1].str());
}

double seconds_between(troupe::apps::WatchedRun::Clock::time_point from,
                       troupe::apps::WatchedRun::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

TEST_CASE(
    "across hosts a lost node is started again in place, killed on its own host and cut off on the spare "
    "line's host, the survivors keeping their processes and the weights equal to an undisturbed run's",
    "[cluster]") {
  Cluster cluster(3);
  TempDir dir;
  const long steps = 16;
  const std::string hosts = "h0 slots=1\nh1 slots=1\nh2 slots=1 spare\n";
  const auto job = [&](const fs::path& folder) {
    return with(saving(Cluster::launch(dir, hosts), steps, folder), {"--fault.heartbeat_timeout", "4"});
  };
  const fs::path undisturbed = dir.path() / "undisturbed";
  const auto calm = run_troupe(dir, job(undisturbed), std::chrono::seconds(120));
  INFO(calm.out << calm.err);
  REQUIRE(calm.exit_code == 0);
  CHECK_THAT(calm.out + calm.err, !Contains("[node 1 h2]") && Contains("job finished: all 2 nodes done"));

  // The node's process killed on h1, which still answers: started again there.
  {
    const fs::path folder = dir.path() / "killed";
    const auto run = running_past_step(dir, job(folder), "killed.log", 5);
    auto& watched = *run;
    const int survivor = joined_pid(all_lines(watched), 0), victim = joined_pid(all_lines(watched), 1);
    REQUIRE(::kill(victim, SIGKILL) == 0);
    const auto killed_at = troupe::apps::WatchedRun::Clock::now();
    const auto detected = watched.wait_for_line(matching("lost node 1 \\(h1"), std::chrono::seconds(30));
    const auto recovered = watched.wait_for_line(matching("recovery: in place done"), std::chrono::seconds(60));
    const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
    if (!exit_code) watched.kill_all();
    const std::string output = all_lines(watched);
    INFO(output);
    REQUIRE(detected);
    REQUIRE(recovered);
    REQUIRE(exit_code == 0);
    CHECK_THAT(output,
               Contains("lost node 1 (h1, pid " + std::to_string(victim) + ")") &&
                   Contains("starting node 1's process again on its host h1, every other node keeps its process"));
    CHECK_THAT(output, Contains("joined in place of pid " + std::to_string(victim)) &&
                           Contains("node 1's process started again on h1"));
    CHECK(occurrences(output, "node 0 (h0, pid " + std::to_string(survivor) + ") joined") == 1);
    CHECK(occurrences(output, ") joined") == 3);  // node 0 once, node 1 twice: no other process restarted
    CHECK_THAT(output, !Contains("restarting every node") && !Contains("[node 1 h2]"));
    CHECK(resumed_after(output) >= 5);  // no step the survivors held is lost
    CHECK_THAT(output, Contains("job finished: all 2 nodes done"));
    check_same_state(undisturbed, folder, steps);
    std::printf(
        "node 1 killed on h1 after step 5: detected after %.2f s, in place done (training again) after %.2f s; "
        "started again on h1, node 0 kept pid %d; weights bitwise those of an undisturbed run\n",
        seconds_between(killed_at, detected->at), seconds_between(killed_at, recovered->at), survivor);
  }

  // h1's link cut: node 1 is started again on the spare line's host h2.
  {
    const fs::path folder = dir.path() / "cut";
    const auto run = running_past_step(dir, job(folder), "cut.log", 5);
    auto& watched = *run;
    const int survivor = joined_pid(all_lines(watched), 0), cut_off = joined_pid(all_lines(watched), 1);
    const AfterCut after = cut_link(watched, "h1", matching("node 1 \\(h1, pid [0-9]+\\) unreachable"));
    const std::string& output = after.output;
    INFO(output);
    CHECK_THAT(output, Contains("node 1 (h1, pid " + std::to_string(cut_off) + ") unreachable") &&
                           Contains("starting node 1's process again on the spare host h2 (node 1's host h1 is "
                                    "unreachable; the spare is now used), every other node keeps its process"));
    CHECK_THAT(output, Contains("node 1 (h2, pid ") && Contains("joined in place of pid " + std::to_string(cut_off)) &&
                           Contains("node 1's process started again on h2"));
    CHECK_THAT(output, Contains("[node 1 h2]"));
    CHECK(occurrences(output, "node 0 (h0, pid " + std::to_string(survivor) + ") joined") == 1);
    CHECK(occurrences(output, ") joined") == 3);
    CHECK_THAT(output, !Contains("restarting every node"));
    CHECK(resumed_after(output) >= 5);
    CHECK_THAT(output, Contains("job finished: all 2 nodes done"));
    check_same_state(undisturbed, folder, steps);
    CHECK(processes_on("h1").empty());  // the cut-off process stopped by itself
    CHECK(processes_on("h2").empty());
    std::printf(
        "h1's link cut after step 5: named unreachable after %.2f s, node 1 in place on the spare h2 after "
        "%.2f s (fault.heartbeat_timeout 4 s); node 0 kept pid %d; weights bitwise those of an undisturbed "
        "run\n",
        seconds_between(after.cut_at, after.detected->at), seconds_between(after.cut_at, after.recovered->at), survivor);
  }
}

TEST_CASE(
    "a cut-off node whose link comes back after its replacement on the spare took over is fenced off: the "
    "run ends with the weights of an undisturbed run",
    "[cluster]") {
  Cluster cluster(3);
  TempDir dir;
  const long steps = 16;
  // Detection after half of fault.heartbeat_timeout; the cut-off node stops itself only after all of it.
  const auto job = [&](const fs::path& folder) {
    return with(saving(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\nh2 slots=1 spare\n"), steps, folder),
                {"--fault.heartbeat_timeout", "10"});
  };
  const fs::path undisturbed = dir.path() / "undisturbed", healed = dir.path() / "healed";
  const auto calm = run_troupe(dir, job(undisturbed), std::chrono::seconds(120));
  INFO(calm.out << calm.err);
  REQUIRE(calm.exit_code == 0);

  const auto run = running_past_step(dir, job(healed), "healed.log", 5);
  auto& watched = *run;
  const int cut_off = joined_pid(all_lines(watched), 1);
  REQUIRE(cluster_command({"link", "h1", "down"}).exit_code == 0);
  const auto cut_at = troupe::apps::WatchedRun::Clock::now();
  const auto replaced =
      watched.wait_for_line(matching("node 1 \\(h2, pid [0-9]+\\) joined in place"), std::chrono::seconds(30));
  // The link back while the cut-off process still runs: it is no longer the job's node 1.
  const bool alive_at_heal = ::kill(cut_off, 0) == 0;
  REQUIRE(cluster_command({"link", "h1", "up"}).exit_code == 0);
  const auto healed_at = troupe::apps::WatchedRun::Clock::now();
  const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
  if (!exit_code) watched.kill_all();
  const std::string output = all_lines(watched);
  INFO(output);
  REQUIRE(replaced);
  CHECK(alive_at_heal);
  REQUIRE(exit_code == 0);
  CHECK_THAT(output, Contains("starting node 1's process again on the spare host h2"));
  CHECK_THAT(output, Contains("job finished: all 2 nodes done") && !Contains("restarting every node"));
  check_same_state(undisturbed, healed, steps);
  CHECK(processes_on("h1").empty());
  // Its connection to the job was closed when it was named unreachable: back on the wire it learns
  // so and stops, and its word reaches nobody (a join or message of its attempt would be refused).
  CHECK_THAT(output, Contains("[node 1 h1] troupe: node 1: lost the job supervisor"));
  const std::size_t last_word = output.rfind("[node 1 h1]");
  REQUIRE(last_word != std::string::npos);
  std::printf("the cut-off process's last line: %s\n",
              output.substr(last_word, output.find('\n', last_word) - last_word).c_str());
  std::printf(
      "h1 cut after step 5, node 1 in place on h2 after %.2f s, h1's link back after %.2f s with its old "
      "process alive: %s; the old process's word %s; weights bitwise those of an undisturbed run\n",
      seconds_between(cut_at, replaced->at), seconds_between(cut_at, healed_at), alive_at_heal ? "yes" : "no",
      output.find("refused node 1 (h1, pid " + std::to_string(cut_off) + "): attempt 0 is stale") != std::string::npos
          ? "reached the job and was refused"
          : "never reached the job");
}

TEST_CASE(
    "every node of a host cut off at once is started again on a spare line of its own in one in-place recovery, "
    "bitwise; with too few spare lines none is, and the job shrinks without that host",
    "[cluster]") {
  Cluster cluster(4);
  TempDir dir;
  const long steps = 16;
  const std::string nodes = "h0 slots=1\nh1 slots=1\nh1 slots=1\n";
  const auto job = [&](const std::string& spares, const fs::path& folder) {
    return with(saving(Cluster::launch(dir, nodes + spares), steps, folder),
                {"--fault.heartbeat_timeout", "4", "--fault.elastic", "true"});
  };
  const fs::path undisturbed = dir.path() / "undisturbed";
  const auto calm = run_troupe(dir, job("", undisturbed), std::chrono::seconds(120));
  INFO(calm.out << calm.err);
  REQUIRE(calm.exit_code == 0);

  // A spare line each: nodes 1 and 2 go to h2 and h3 together, node 0 keeps its process.
  {
    const fs::path folder = dir.path() / "two-spares";
    const auto run = running_past_step(dir, job("h2 slots=1 spare\nh3 slots=1 spare\n", folder), "two-spares.log", 5);
    auto& watched = *run;
    const std::string before = all_lines(watched);
    const int survivor = joined_pid(before, 0), first = joined_pid(before, 1), second = joined_pid(before, 2);
    const AfterCut after = cut_link(watched, "h1", matching("unreachable: its host"));
    const std::string& output = after.output;
    INFO(output);
    CHECK_THAT(output, Contains("node 1 (h1, pid " + std::to_string(first) + "), node 2 (h1, pid " +
                                std::to_string(second) + ") unreachable: its host"));
    CHECK_THAT(output, Contains("starting node 1's process again on the spare host h2 (node 1's host h1 is "
                                "unreachable; the spare is now used), node 2's process again on the spare host h3 "
                                "(node 2's host h1 is unreachable; the spare is now used), every other node keeps "
                                "its process"));
    CHECK_THAT(output, Contains("joined in place of pid " + std::to_string(first)) &&
                           Contains("joined in place of pid " + std::to_string(second)));
    CHECK_THAT(output, Contains("node 1's process started again on h2 (pid ") &&
                           Contains("node 2's process started again on h3 (pid "));
    CHECK(occurrences(output, "recovery: in place done") == 1);
    CHECK(occurrences(output, "node 0 (h0, pid " + std::to_string(survivor) + ") joined") == 1);
    CHECK(occurrences(output, ") joined") == 5);  // node 0 once, nodes 1 and 2 twice each
    CHECK_THAT(output, !Contains("restarting every node"));
    CHECK(resumed_after(output) >= 5);
    CHECK_THAT(output, Contains("job finished: all 3 nodes done"));
    check_same_state(undisturbed, folder, steps);
    CHECK(processes_on("h1").empty());
    CHECK(processes_on("h2").empty());
    CHECK(processes_on("h3").empty());
    std::printf(
        "h1 (nodes 1 and 2) cut after step 5: named unreachable after %.2f s, both in place on the spares h2 and "
        "h3 after %.2f s (fault.heartbeat_timeout 4 s); node 0 kept pid %d; weights bitwise those of an "
        "undisturbed run\n",
        seconds_between(after.cut_at, after.detected->at), seconds_between(after.cut_at, after.recovered->at), survivor);
  }

  // One spare line for two nodes: neither starts on it, every node restarts and the job goes on
  // without h1.
  {
    const fs::path folder = dir.path() / "one-spare";
    const auto run = running_past_step(dir, job("h2 slots=1 spare\n", folder), "one-spare.log", 5);
    auto& watched = *run;
    REQUIRE(cluster_command({"link", "h1", "down"}).exit_code == 0);
    const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
    if (!exit_code) watched.kill_all();
    cluster_command({"link", "h1", "up"});
    const std::string output = all_lines(watched);
    INFO(output);
    REQUIRE(exit_code == 0);
    CHECK_THAT(output, Contains("recovery: restarting every node: node 2's host h1 is unreachable and the host file "
                                "has no spare line left with 1 slot(s) (2 nodes of that host need one each)"));
    CHECK_THAT(output, !Contains("[node 1 h2]") && !Contains("recovery: in place"));
    CHECK_THAT(output, Contains("job finished: all 1 nodes done"));
    CHECK(processes_on("h1").empty());
    CHECK(processes_on("h2").empty());
  }
}

TEST_CASE("on a 100 Mbit/s link training goes on and the nodes' metrics put the time in the all-reduce", "[cluster]") {
  Cluster cluster(2, {"--rate", "100mbit"});
  TempDir dir;
  const auto job =
      with(with(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\n"), tiny_steps(12)), {"--monitor.metrics_port", "19310"});
  const auto run = running_past_step(dir, job, "slow.log", 6, std::chrono::seconds(120));
  auto& watched = *run;
  // Each node serves /metrics on its host's loopback: read it there.
  const ProcessResult scraped = cluster_command({"exec", "h1", "curl -s http://127.0.0.1:19311/metrics"});
  const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
  if (!exit_code) watched.kill_all();
  INFO(all_lines(watched) << scraped.err);
  REQUIRE(scraped.exit_code == 0);
  CHECK(exit_code == 0);
  const Exposition metrics = parse_exposition(scraped.out);
  const double bytes = metrics.value("troupe_comm_bytes_total", {{"rank", "1"}, {"op", "all_reduce"}}),
               seconds = metrics.value("troupe_comm_seconds_total", {{"rank", "1"}, {"op", "all_reduce"}});
  REQUIRE(seconds > 0);
  // Two ranks: each sends its half of every buffer and the half summed back, one buffer's bytes
  // each way; the link carries 12.5 MB/s at most.
  const double rate = bytes / seconds;
  std::printf("100 Mbit/s between h0 and h1: rank 1's all-reduce moved %.1f MB in %.2f s of comm, %.2f MB/s\n",
              bytes / 1e6, seconds, rate / 1e6);
  CHECK(rate < 12.5e6);
  CHECK(rate > 2e6);
}

TEST_CASE("simulated hosts share nothing but the wire, and the script refuses what it cannot do in one line",
          "[cluster]") {
  {
    Cluster cluster(2);
    const ProcessResult listed = cluster_command({"hosts"});
    CHECK(listed.out == "h0 10.213.7.2\nh1 10.213.7.3\n");
    // A file in one host's /dev/shm and a System V segment made there are not seen on the other.
    const ProcessResult made =
        cluster_command({"exec", "h0", "hostname && touch /dev/shm/troupe-probe && ipcmk -M 4096 >/dev/null && ipcs -m | grep -c '^0x'"});
    INFO(made.err);
    REQUIRE(made.exit_code == 0);
    CHECK(made.out == "h0\n1\n");
    const ProcessResult other =
        cluster_command({"exec", "h1", "hostname; ls /dev/shm | grep -c troupe-probe; ipcs -m | grep -c '^0x'"});
    CHECK(other.out == "h1\n0\n0\n");
    CHECK(!fs::exists("/dev/shm/troupe-probe"));
    const ProcessResult twice = cluster_command({"up", "2"});
    CHECK(twice.exit_code == 2);
    CHECK_THAT(twice.err, Contains("a cluster is already up (h0 h1 )"));
    const ProcessResult stranger = cluster_command({"exec", "h7", "true"});
    CHECK(stranger.exit_code == 2);
    CHECK(stranger.err == "netns-cluster: no host 'h7' (hosts: h0 h1 )\n");
  }
  CHECK(cluster_command({"hosts"}).out.empty());
  CHECK(cluster_command({"down"}).exit_code == 0);  // nothing left to remove is no error
  const ProcessResult delayed = cluster_command({"up", "2", "--delay", "5"});
  const ProcessResult has_netem = run_process(
      {"/bin/sh", "-c", "ip link add troupe-nq type veth peer name troupe-nqp && tc qdisc add dev troupe-nq root netem delay 1ms; "
                        "s=$?; ip link del troupe-nq; exit $s"},
      "/", std::chrono::seconds(10));
  if (has_netem.exit_code != 0) {
    CHECK(delayed.exit_code == 2);
    CHECK_THAT(delayed.err, Catch::StartsWith("netns-cluster: --delay and --loss need tc netem, which this kernel"));
    CHECK(std::count(delayed.err.begin(), delayed.err.end(), '\n') == 1);
  } else {
    CHECK(delayed.exit_code == 0);
  }
  cluster_command({"down"});
  CHECK(cluster_command({"hosts"}).out.empty());
  const ProcessResult bad_rate = cluster_command({"up", "2", "--rate", "fast"});
  CHECK(bad_rate.exit_code == 2);
  CHECK(bad_rate.err == "netns-cluster: --rate takes a tc rate such as 100mbit or 1gbit, not 'fast'\n");
}

TEST_CASE("host B's link cut mid-step: named unreachable within fault.heartbeat_timeout, the job goes on without "
          "it, and no process is left",
          "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  const auto job = with(with(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\n"), tiny_steps(30)),
                        {"--checkpoint.dir", (dir.path() / "checkpoints").string(), "--checkpoint.every", "5",
                         "--fault.heartbeat_timeout", "4", "--fault.elastic", "true"});
  const auto run = running_past_step(dir, job, "partition.log", 7);
  auto& watched = *run;
  const int node_b = joined_pid(all_lines(watched), 1);
  REQUIRE(cluster_command({"link", "h1", "down"}).exit_code == 0);
  const auto cut_at = troupe::apps::WatchedRun::Clock::now();
  const auto named =
      watched.wait_for_line(matching("failure 1 \\(unreachable\\) of node 1 \\(h1\\)"), std::chrono::seconds(20));
  const auto exit_code = watched.wait_exit(std::chrono::seconds(120));
  if (!exit_code) watched.kill_all();
  cluster_command({"link", "h1", "up"});
  const std::string output = all_lines(watched);
  INFO(output);
  REQUIRE(named);
  const double detected = std::chrono::duration<double>(named->at - cut_at).count();
  CHECK(detected < 4.0);
  CHECK_THAT(output, Contains("node 1 (h1, pid " + std::to_string(node_b) + ") unreachable: its host 10.213.7.3 "
                              "answered no TCP acknowledgement or keepalive for 2.0 s"));
  CHECK_THAT(output, !Contains("sent no heartbeat") && !Contains("lost node 1"));
  REQUIRE(exit_code == 0);  // never a hang: the job ended, and it ended well
  CHECK_THAT(output, Contains("recovery: restarting every node: node 1's host h1 is unreachable and the host file has "
                              "no spare line left with 1 slot(s)"));
  CHECK_THAT(output, Contains("restarting every node without node 1 (h1)") && Contains("job finished: all 1 nodes done"));
  CHECK_THAT(output, Contains("failure.unreachable=1") && Contains("recovery.shrink=1"));
  CHECK(processes_on("h0").empty());
  CHECK(processes_on("h1").empty());
  std::printf("h1's link cut after step 7: named unreachable after %.2f s (fault.heartbeat_timeout 4 s); the job "
              "shrank to h0 and finished\n",
              detected);
}

TEST_CASE("a node cut off from its job stops by itself within fault.heartbeat_timeout", "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  const auto job =
      with(with(Cluster::launch(dir, "h0 slots=1\nh1 slots=1\n"), tiny_steps(500)), {"--fault.heartbeat_timeout", "4"});
  const auto run = running_past_step(dir, job, "cut-off.log", 3);
  auto& watched = *run;
  REQUIRE(!processes_on("h1").empty());
  // The job process is held still so that it cannot stop the node itself, as a launcher across a
  // cut link could not (ssh carries no signal there).
  REQUIRE(::kill(watched.pid(), SIGSTOP) == 0);
  REQUIRE(cluster_command({"link", "h1", "down"}).exit_code == 0);
  const auto cut_at = std::chrono::steady_clock::now();
  while (!processes_on("h1").empty() && std::chrono::steady_clock::now() - cut_at < std::chrono::seconds(15))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double stopped_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - cut_at).count();
  ::kill(watched.pid(), SIGCONT);
  watched.kill_all();
  watched.wait_exit(std::chrono::seconds(20));
  cluster_command({"link", "h1", "up"});
  CHECK(processes_on("h1").empty());
  CHECK(stopped_after < 4.0 + 2.0);
  std::printf("h1 cut off from a silent job: its node process exited after %.2f s (fault.heartbeat_timeout 4 s)\n",
              stopped_after);
}

TEST_CASE("inside a Slurm allocation troupe launch takes its nodes and starts them through srun", "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  // A stand-in srun on PATH: `srun --nodes=1 --ntasks=1 -w HOST ARGV...` runs ARGV on HOST as it is
  // (srun runs an argv; the cluster's exec, like ssh, a shell line: hence the quoting).
  const std::string srun = dir.write(
      "bin/srun",
      "#!/bin/bash\n"
      "[ \"$1 $2 $3\" = '--nodes=1 --ntasks=1 -w' ] || { echo \"srun stand-in: unexpected $*\" >&2; exit 2; }\n"
      "host=$4; shift 4\n"
      "exec " + cluster_script + " exec \"$host\" \"$(printf '%q ' \"$@\")\"\n");
  fs::permissions(srun, fs::perms::owner_all);
  const std::string path = (dir.path() / "bin").string() + ":" + std::getenv("PATH");
  ScopedEnv on_path("PATH", path.c_str());
  ScopedEnv nodes("SLURM_JOB_NODELIST", "h[0-1]");
  ScopedEnv tasks("SLURM_TASKS_PER_NODE", "2(x2)");
  ScopedEnv no_ntasks("SLURM_NTASKS_PER_NODE", nullptr);
  const auto job = run_troupe(dir, with({"launch", "--bind", cluster_bridge}, tiny_steps(2)), std::chrono::seconds(120));
  INFO(job.out << job.err);
  REQUIRE(job.exit_code == 0);
  CHECK_THAT(job.out + job.err,
             Contains("hosts from the Slurm allocation (SLURM_JOB_NODELIST=h[0-1], SLURM_TASKS_PER_NODE=2(x2)): h0 "
                      "slots=2, h1 slots=2; launcher `srun --nodes=1 --ntasks=1 -w {host} sh -c {command}`"));
  CHECK_THAT(job.out, Contains("[node 1 h1]") && Contains("rank 2 reaches ranks 0, 1 through TCP (tcp/eth0)"));
  CHECK_THAT(job.out, Contains("job finished: all 2 nodes done"));
}

TEST_CASE("srun starting troupe node as every task trains across hosts, rank 0 hosting the job, bitwise as troupe "
          "launch on loopback",
          "[cluster]") {
  Cluster cluster(2);
  TempDir dir;
  // A stand-in srun on PATH: `srun ARGV...` runs SLURM_NTASKS tasks, SLURM_NTASKS_PER_NODE on each
  // of h0, h1, ..., every one ARGV with its SLURM_PROCID and SLURM_LOCALID, and exits with the
  // last failed task's code, as srun does.
  const std::string srun = dir.write(
      "bin/srun",
      "#!/bin/bash\n"
      "pids=()\n"
      "for ((task = 0; task < SLURM_NTASKS; task++)); do\n"
      "  " + cluster_script + " exec h$((task / SLURM_NTASKS_PER_NODE)) \"env SLURM_PROCID=$task "
      "SLURM_LOCALID=$((task % SLURM_NTASKS_PER_NODE)) $(printf '%q ' \"$@\")\" &\n"
      "  pids+=($!)\n"
      "done\n"
      "code=0\n"
      "for pid in \"${pids[@]}\"; do wait $pid || code=$?; done\n"
      "exit $code\n");
  fs::permissions(srun, fs::perms::owner_all);
  const fs::path local = dir.path() / "loopback", hosts = dir.path() / "across";
  const auto on_loopback = two_by_two_on_loopback(dir, local);

  ScopedEnv no_rank("RANK", nullptr), no_world("WORLD_SIZE", nullptr), no_join("TROUPE_JOIN", nullptr),
      no_index("TROUPE_NODE_INDEX", nullptr), no_slots("TROUPE_SLOTS", nullptr), no_local("LOCAL_RANK", nullptr),
      no_local_world("LOCAL_WORLD_SIZE", nullptr);
  ScopedEnv nodes("SLURM_JOB_NODELIST", "h[0-1]"), tasks("SLURM_NTASKS", "4"), per_node("SLURM_NTASKS_PER_NODE", "2");
  ScopedEnv master("MASTER_ADDR", "h0"), port("MASTER_PORT", "29500");
  ScopedEnv token("TROUPE_TOKEN", "0123456789abcdef0123456789abcdef");
  std::vector<std::string> argv{srun, TROUPE_BINARY_DIR "/troupe", "node"};
  const auto job = saving(argv, 4, hosts);
  const ProcessResult ran = run_process(job, dir.path().string(), std::chrono::seconds(120));
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  // A host name: the job listens on every interface of h0.
  CHECK_THAT(ran.out + ran.err, Contains("job supervisor on 0.0.0.0:29500; waiting up to 60 s for 4 node process(es)"));
  CHECK_THAT(ran.out + ran.err, Contains("node 3 (h1, pid ") && Contains("job finished: all 4 nodes done"));
  CHECK_THAT(ran.out + ran.err, Contains("rank 2 reaches ranks 0, 1 through TCP (tcp/eth0); rank 3 through shared memory"));
  check_same_state(local, hosts, 4);
  // srun has waited for every task; what is still in a host a few seconds on was left behind.
  std::string left = processes_on("h0") + processes_on("h1");
  for (int tries = 0; !left.empty() && tries < 50; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = processes_on("h0") + processes_on("h1");
  }
  INFO("left in the hosts: " << left << "\n"
                             << run_process({"/bin/ps", "-eo", "pid,ppid,stat,etime,args"}, "/", std::chrono::seconds(10)).out);
  CHECK(left.empty());
}

TEST_CASE("bench allreduce --hosts 2 runs the ring and ucx_perftest between two simulated hosts", "[cluster]") {
  TempDir dir;
  cluster_command({"down"});
  const ProcessResult missing =
      run_troupe(dir, {"bench", "allreduce", "--hosts", "2", "--processes", "2", "--mib", "1"}, std::chrono::seconds(30));
  Cluster cluster(2);
  const ProcessResult ran = run_troupe(
      dir, {"bench", "allreduce", "--hosts", "2", "--processes", "2", "--mib", "4", "--iterations", "5"},
      std::chrono::seconds(120));
  INFO(ran.out << ran.err);
  REQUIRE(ran.exit_code == 0);
  CHECK_THAT(ran.out, Contains("from a process on host 0 to one on host 1") && Contains("ucx_perftest") &&
                         Contains("perftest 2-way"));
  std::smatch row;
  // procs, size, time ms, busbw, messages ms, x faster, / stream, / 2-way
  REQUIRE(std::regex_search(
      ran.out, row, std::regex("\\n +2 +4 MiB +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)")));
  std::printf("%s", ran.out.c_str());
  CHECK(std::stod(row[2].str()) > 0.01);
  CHECK(std::stod(row[6].str()) > 0);
  const ProcessResult too_few = run_troupe(dir, {"bench", "allreduce", "--hosts", "2", "--processes", "1"});
  CHECK(too_few.exit_code == 2);
  INFO(missing.err);
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("--hosts 2: no simulated host h0 (/run/netns/troupe-h0: No such file or directory); "
                                   "start them with scripts/netns-cluster.sh up 2"));
}
