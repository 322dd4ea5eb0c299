// Rank assignment from a host file with repeated hosts, local aliases, and the variables each node
// process is given.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/launch/local_host.hpp"
#include "apps/launch/rank_plan.hpp"

using namespace troupe::launch;

namespace {

RankPlan plan_of(const std::string& text, const std::string& this_host) {
  auto hosts = parse_host_text(text, "hosts.txt");
  REQUIRE(hosts.ok());
  return plan_ranks(*hosts, this_host);
}

}  // namespace

TEST_CASE("ranks follow file order and LOCAL_RANK counts within a machine across repeated lines", "[rankplan]") {
  const RankPlan plan = plan_of(
      "localhost slots=2\n"
      "nodeA slots=4\n"
      "127.0.0.1 slots=1\n"
      "nodeA slots=2\n"
      "here slots=1\n",
      "here.cluster.example");
  CHECK(plan.world_size == 10);
  REQUIRE(plan.nodes.size() == 5);
  struct Row {
    std::string host;
    bool local;
    int slots, first_rank, local_rank_base, local_world_size;
  };
  const std::vector<Row> expected = {
      {"localhost", true, 2, 0, 0, 4}, {"nodeA", false, 4, 2, 0, 6}, {"127.0.0.1", true, 1, 6, 2, 4},
      {"nodeA", false, 2, 7, 4, 6},    {"here", true, 1, 9, 3, 4},
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const NodePlan& node = plan.nodes[i];
    INFO("node " << i);
    CHECK(node.node_index == static_cast<int>(i));
    CHECK(node.host == expected[i].host);
    CHECK(node.local == expected[i].local);
    CHECK(node.slots == expected[i].slots);
    CHECK(node.first_rank == expected[i].first_rank);
    CHECK(node.local_rank_base == expected[i].local_rank_base);
    CHECK(node.local_world_size == expected[i].local_world_size);
  }
}

TEST_CASE("each node process is given its ranks, the job's address and the token", "[rankplan]") {
  const RankPlan plan = plan_of("localhost slots=2\nlocalhost slots=3\n", "box");
  const JobContact contact{"10.0.0.5", 29500, "s3cret"};
  const Environment expected = {
      {"RANK", "2"},
      {"WORLD_SIZE", "5"},
      {"LOCAL_RANK", "2"},
      {"LOCAL_WORLD_SIZE", "5"},
      {"MASTER_ADDR", "10.0.0.5"},
      {"MASTER_PORT", "29500"},
      {"TROUPE_NODE_INDEX", "1"},
      {"TROUPE_SLOTS", "3"},
      {"TROUPE_JOIN", "10.0.0.5:29500"},
      {"TROUPE_TOKEN", "s3cret"},
  };
  CHECK(node_environment(plan, plan.nodes[1], contact) == expected);

  const Environment ipv6 = node_environment(plan, plan.nodes[0], {"::1", 7000, "t"});
  CHECK(ipv6[8] == std::pair<std::string, std::string>{"TROUPE_JOIN", "[::1]:7000"});

  const std::vector<std::string> argv = {"/usr/bin/troupe", "node"};
  const std::vector<NodeProcessSpec> commands = node_process_specs(plan, contact, argv);
  REQUIRE(commands.size() == 2);
  CHECK(commands[1].node_index == 1);
  CHECK(commands[1].host == "localhost");
  CHECK(commands[1].local);
  CHECK(commands[1].argv == argv);
  CHECK(commands[1].env == expected);
}

TEST_CASE("local hosts are recognised by name", "[rankplan]") {
  CHECK(is_local_host("localhost", "box.example"));
  CHECK(is_local_host("127.0.0.1", "box.example"));
  CHECK(is_local_host("::1", "box.example"));
  CHECK(is_local_host("box.example", "box.example"));
  CHECK(is_local_host("box", "box.example"));
  CHECK(!is_local_host("box2", "box.example"));
  CHECK(!is_local_host("box.other", "box.example"));
  CHECK(is_local_host(this_host_name(), this_host_name()));
  CHECK(!this_host_name().empty());
}

TEST_CASE("a machine runs at most 4 workers per CPU core, its local aliases counted together", "[rankplan]") {
  const RankPlan plan = plan_of("localhost slots=3\nnodeA slots=64\n127.0.0.1 slots=2\nhere slots=3\n", "here");
  CHECK(local_workers(plan) == 8);
  CHECK(check_local_workers(plan, 2, "hosts.txt").ok());
  const troupe::Status refused = check_local_workers(plan, 1, "hosts.txt");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "hosts.txt: 8 workers on this machine, but its 1 CPU core(s) run at most 4 (4 per core)");
  const RankPlan huge = plan_of("localhost slots=65536\n", "here");
  CHECK_FALSE(check_local_workers(huge, 256, "hosts.txt").ok());
}

TEST_CASE("simulated ranks on this machine must leave room for their System V segments and a node's restart",
          "[rankplan][sim]") {
  // 8 ranks here (3 + 2 + 3; nodeA is elsewhere), the largest local node process 3 ranks: 2 x 11 = 22.
  const RankPlan plan = plan_of("localhost slots=3\nnodeA slots=64\n127.0.0.1 slots=2\nhere slots=3\n", "here");
  CHECK(check_local_sysv_segments(plan, 2, 0, 22, "hosts.txt").ok());
  CHECK(check_local_sysv_segments(plan, 2, 78, 100, "hosts.txt").ok());
  const troupe::Status refused = check_local_sysv_segments(plan, 2, 79, 100, "hosts.txt");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message ==
        "hosts.txt: 8 simulated ranks on this machine take 22 System V shared memory segments (2 a rank, and as many "
        "for the 3 ranks of a node process started again in place), but kernel.shmmni allows 100 and 79 are in use: "
        "raise it (sysctl -w kernel.shmmni=128) or put fewer ranks on this machine");
  // No rank here: nothing to take.
  CHECK(check_local_sysv_segments(plan_of("nodeA slots=64\n", "here"), 2, 100, 100, "hosts.txt").ok());
}
