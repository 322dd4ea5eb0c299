// Elastic grow on live 2-node jobs (docs/shell.md, docs/drills.md): the shell's drain, then its
// rejoin, in place or by a restart; a node that cannot come back; a spare line added to the host
// file; a second rejoin while the first is under way; the donor lost during the grow. Each job
// ends with the weights of a run never drained, bit for bit.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <future>
#include <regex>
#include <string>
#include <thread>

#include "apps/live_job.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using std::chrono::seconds;

TEST_CASE(
    "drain node 1, then rejoin: the job goes on as one replica of 2 micro-batches, node 1 joins the running job "
    "while node 0 keeps its process, and it ends with the weights of a run never drained",
    "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 200;
  LiveJob job(dir, steps);
  CHECK(shell_c(dir, job, "rejoin").err ==
        "troupe: error: rejoin: the job runs on every node of its host file; no node was left out to come back\n");
  drain_node_1(dir, job, steps);
  CHECK_THAT(rejoin(dir, job),
             Contains("rejoin: checkpoint after step") && Contains("the job grows with localhost slots=1 back"));
  REQUIRE(job.run->wait_for_line(matching("rejoin: grown in place in"), seconds(60)));
  // The monitor reads the job's view every 250 ms: the grow shows in the next one.
  ProcessResult status = shell_c(dir, job, "status");
  for (int look = 0; look < 20 && status.out.find("grow      in place") == std::string::npos; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    status = shell_c(dir, job, "status");
  }
  INFO("status: " << status.out << status.err);
  CHECK_THAT(status.out, Contains("grid      2 ranks: dp 2 x pp 1 x tp 1") &&
                             Contains("grow      in place (epoch 1) in ") &&
                             Contains("rank 1 joined in 1 new node process(es), 10.1 MB of state from rank 0"));
  // Nothing is left out any more.
  CHECK(shell_c(dir, job, "rejoin").err ==
        "troupe: error: rejoin: the job runs on every node of its host file; no node was left out to come back\n");
  // Node 0, which kept its process through the grow, is lost: its new process joins the grown job.
  const ProcessResult kill = shell_c(dir, job, "kill node 0");
  INFO("kill node 0: " << kill.out << kill.err);
  CHECK(kill.exit_code == 0);
  REQUIRE(job.run->wait_for_line(matching("recovery: in place done"), seconds(60)));
  finished_well(job);
  CHECK_THAT(job.log(), Contains("rejoin: growing in place (epoch 1) from 1 to 2 ranks: starting node 1") &&
                            Contains("joined the running job") && Contains("rejoin: grown in place in") &&
                            Contains("every rank goes on after step") &&
                            Contains("as 2 ranks, each of 1 micro-batch(es)"));
  CHECK_THAT(job.log(), !Contains("restarting every node with the nodes the job went on without"));
  // Node 0 joined twice (the job's start, the restart without node 1) and kept that process through
  // the grow, until it was killed.
  CHECK(joined_pids(job.log().substr(0, job.log().find("shell: kill node 0")), 0).size() == 2);
  CHECK_THAT(job.log(), Contains("joined in place of pid"));
  const std::string after = job.log().substr(job.log().find("rejoin: growing in place"));
  CHECK_THAT(after, Contains("[node 1 localhost]") && Contains("kept its process through an in-place grow"));

  same_as_undisturbed(dir, steps);
}

TEST_CASE(
    "with fault.recovery restart, a rejoin grows the drained job by restarting every node, with the weights of a "
    "run never drained",
    "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 200;
  LiveJob job(dir, steps, {}, {"train", "--workers", "2", "--fault.recovery", "restart"});
  drain_node_1(dir, job, steps);
  rejoin(dir, job);
  finished_well(job);
  CHECK_THAT(job.log(),
             Contains("rejoin: growing by restarting every node: fault.recovery is restart") &&
                 Contains("restarting every node with the nodes the job went on without (the shell's rejoin)") &&
                 Contains("all 2 nodes joined"));
  CHECK(joined_pids(job.log(), 0).size() == 3);
  const std::string after = job.log().substr(job.log().find("the shell's rejoin"));
  CHECK_THAT(after, Contains("[node 1 localhost]"));

  same_as_undisturbed(dir, steps);
}

TEST_CASE(
    "a node that cannot come back fails the grow in place: the job tries a restart with it, leaves it out again "
    "and finishes on the node it had",
    "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 200;
  // As `troupe drill node-lost` does: node 1 fails whenever it is started again.
  LiveJob job(dir, steps, {"/usr/bin/env", "TROUPE_DRILL_NODE_GONE=1"});
  drain_node_1(dir, job, steps);
  rejoin(dir, job);
  finished_well(job);
  CHECK_THAT(job.log(), Contains("rejoin: growing in place (epoch 1) from 1 to 2 ranks: starting node 1") &&
                            Contains("rejoin: growing in place failed (") && Contains("growing by a restart instead") &&
                            Contains("(it could not rejoin)") && Contains("job finished"));
}

TEST_CASE(
    "a spare line added to the host file of a drained job brings node 1 back onto that line in the running job, "
    "with the weights of a run never drained",
    "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 200;
  const std::string hosts = dir.write("hosts", "localhost slots=1\nlocalhost slots=1\n");
  LiveJob job(dir, steps, {}, {"launch", "--hostfile", hosts});
  drain_node_1(dir, job, steps);
  {
    std::ofstream out(hosts, std::ios::app);
    out << "127.0.0.1 slots=1 spare\n";
  }
  finished_well(job);
  CHECK_THAT(job.log(), Contains(hosts + ":3: a new spare line (127.0.0.1 slots=1) can take a node the job went on "
                                         "without: ordering the job's rejoin") &&
                            Contains("rejoin: checkpoint after step") &&
                            Contains("rejoin: growing in place (epoch 1) from 1 to 2 ranks: starting node 1") &&
                            Contains("rejoin: grown in place in"));
  CHECK(joined_pids(job.log(), 0).size() == 2);
  // Node 1 runs on the spare line.
  const std::string after = job.log().substr(job.log().find("rejoin: growing in place"));
  CHECK_THAT(after, Contains("[node 1 127.0.0.1]"));

  same_as_undisturbed(dir, steps,
                      {"launch", "--hostfile", dir.write("plain", "localhost slots=1\nlocalhost slots=1\n")});
}

TEST_CASE("a second rejoin while the first is under way is refused in one line, and nothing restarts",
          "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 200;
  LiveJob job(dir, steps);
  drain_node_1(dir, job, steps);
  auto first = std::async(std::launch::async, [&] { return shell_c(dir, job, "rejoin"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const ProcessResult second = shell_c(dir, job, "rejoin");
  const ProcessResult answered = first.get();
  INFO("first: " << answered.out << answered.err << "\nsecond: " << second.out << second.err);
  CHECK(answered.exit_code == 0);
  CHECK_THAT(answered.out, Contains("the job grows with localhost slots=1 back"));
  CHECK(second.exit_code != 0);
  // Refused while the first waits for its checkpoint or grows, or, once it has grown, because no
  // node is left out.
  CHECK_THAT(second.err, Contains("rejoin: refused: a rejoin is under way already") ||
                             Contains("no node was left out to come back"));
  finished_well(job);
  CHECK_THAT(job.log(), Contains("rejoin: grown in place in"));
  CHECK_THAT(job.log(), !Contains("restarting every node with the nodes the job went on without"));
  // Node 0 joined at the start and after the drain's restart only.
  CHECK(joined_pids(job.log(), 0).size() == 2);
  same_as_undisturbed(dir, steps);
}

TEST_CASE("the donor lost during a grow in place: the restart that follows brings the rejoined node back",
          "[shell][dp][slow]") {
  TempDir dir;
  const long steps = 400;
  LiveJob job(dir, steps);
  drain_node_1(dir, job, steps);
  rejoin(dir, job);
  // Node 0 gives the new rank its state: lost before the grown job runs, the grow cannot finish.
  std::size_t at = 0;
  REQUIRE(job.run->wait_for_line(matching("rejoin: growing in place \\(epoch 1\\)"), seconds(60), 0, &at));
  const std::vector<std::string> node_0 = joined_pids(job.log(), 0);
  REQUIRE(!node_0.empty());
  REQUIRE(kill(std::stoi(node_0.back()), SIGKILL) == 0);
  finished_well(job);
  const std::string log = job.log();
  const std::string after = log.substr(log.find("rejoin: growing in place (epoch 1)"));
  INFO(after);
  CHECK_THAT(after, Contains("rejoin: the grow in place did not finish before the attempt ended; the restart brings "
                             "localhost slots=1 back"));
  CHECK_THAT(after, Contains("all 2 nodes joined"));
  // Node 1 trains to the end.
  CHECK_THAT(after.substr(after.rfind("all 2 nodes joined")), Contains("[node 1 localhost]"));
}
