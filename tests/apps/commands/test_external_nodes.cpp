// A job whose nodes torchrun (or srun, or a person) starts: every rank runs `troupe node` with
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and rank 0 also hosts the job
// (`troupe launch --external WORLD_SIZE`). Real processes on loopback; the same under a stand-in
// srun across simulated hosts is in tests/cluster/.

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/line_match.hpp"
#include "apps/launch/unclaimed_port.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/store.hpp"
#include "support/busy_port.hpp"
#include "support/scoped_env.hpp"

using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

constexpr const char* token = "0123456789abcdef0123456789abcdef";

// A port nothing listens on now, outside the range the kernel hands to other connections.
int free_port() { return troupe::launch::unclaimed_port().value(); }

struct RankRun {
  std::unique_ptr<troupe::apps::WatchedRun> run;
  int exit_code = -1;
  std::string output;
};

// Every rank of `world_sizes` (rank r says WORLD_SIZE world_sizes[r]) started at once as torchrun
// starts them, `args` after `troupe node`; waits for all of them.
std::vector<RankRun> run_ranks(const TempDir& dir, const std::vector<int>& world_sizes, int master_port,
                               const std::vector<std::string>& args, const std::vector<std::string>& extra_env = {}) {
  std::vector<RankRun> ranks(world_sizes.size());
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    std::vector<std::string> argv{TROUPE_BINARY_DIR "/troupe", "node"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> env{"RANK=" + std::to_string(rank), "WORLD_SIZE=" + std::to_string(world_sizes[rank]),
                                 "LOCAL_RANK=" + std::to_string(rank),
                                 "LOCAL_WORLD_SIZE=" + std::to_string(world_sizes.size()), "MASTER_ADDR=127.0.0.1",
                                 "MASTER_PORT=" + std::to_string(master_port), std::string("TROUPE_TOKEN=") + token};
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    auto started = troupe::apps::WatchedRun::start(argv, env, dir.file("rank" + std::to_string(rank) + ".log"));
    REQUIRE(started.ok());
    ranks[rank].run = std::move(*started);
  }
  for (RankRun& rank : ranks) {
    const auto code = rank.run->wait_exit(std::chrono::seconds(120));
    if (!code) rank.run->kill_all();
    rank.exit_code = code.value_or(-1);
    for (const auto& line : rank.run->lines()) rank.output += line.text + "\n";
  }
  return ranks;
}

}  // namespace

TEST_CASE("ranks that torchrun starts train as troupe launch's would, rank 0 hosting the job past torchrun's own port",
          "[launch]") {
  TempDir dir;
  troupe::test::ScopedEnv no_join("TROUPE_JOIN", nullptr), no_index("TROUPE_NODE_INDEX", nullptr),
      no_slots("TROUPE_SLOTS", nullptr);
  const fs::path launched = dir.path() / "launched", external = dir.path() / "external";
  const std::vector<std::string> job = with(tiny_steps(4), {"--checkpoint.every", "4"});
  const auto reference =
      run_troupe(dir, with(with({"train", "--workers", "2"}, job), {"--checkpoint.dir", launched.string()}),
                 std::chrono::seconds(120));
  INFO(reference.out << reference.err);
  REQUIRE(reference.exit_code == 0);

  // torchrun's agent serves its store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True): the job
  // takes the port after it, which must be free too: both below the ephemeral range, where no
  // outgoing connection of another test takes it meanwhile.
  const BusyPort agent_store(troupe::launch::unclaimed_port(2).value());
  const auto ranks = run_ranks(dir, {2, 2}, agent_store.port(), with(job, {"--checkpoint.dir", external.string()}),
                               {"TORCHELASTIC_USE_AGENT_STORE=True"});
  INFO(ranks[0].output << "\n--- rank 1:\n" << ranks[1].output);
  REQUIRE(ranks[0].exit_code == 0);
  REQUIRE(ranks[1].exit_code == 0);
  CHECK_THAT(ranks[0].output, Contains("job supervisor on 127.0.0.1:" + std::to_string(agent_store.port() + 1) +
                                       "; waiting up to 60 s for 2 node process(es) started by srun, torchrun or by "
                                       "hand, one rank each"));
  CHECK_THAT(ranks[0].output, Contains("job finished: all 2 nodes done"));
  const auto left = checkpoint_values(troupe::checkpoint::step_dir(launched, 4));
  const auto right = checkpoint_values(troupe::checkpoint::step_dir(external, 4));
  for (const auto& [kind, values] : left) {
    INFO(kind);
    CHECK(values == right.at(kind));
  }
}

TEST_CASE(
    "rank 0 started beside a troupe launch --external that a person started first joins that job rather than "
    "hosting another, and every process exits 0",
    "[launch]") {
  TempDir dir;
  troupe::test::ScopedEnv no_join("TROUPE_JOIN", nullptr), no_index("TROUPE_NODE_INDEX", nullptr),
      no_slots("TROUPE_SLOTS", nullptr);
  const int port = free_port();
  std::vector<std::string> argv{
      TROUPE_BINARY_DIR "/troupe", "launch", "--external", "2", "--bind", "127.0.0.1", "--port", std::to_string(port)};
  for (const std::string& option : tiny_steps(4)) argv.push_back(option);
  auto started = troupe::apps::WatchedRun::start(argv, {std::string("TROUPE_TOKEN=") + token}, dir.file("job.log"));
  REQUIRE(started.ok());
  auto& job = *started;
  REQUIRE(job->wait_for_line(matching("job supervisor on 127\\.0\\.0\\.1:" + std::to_string(port)),
                             std::chrono::seconds(30)));
  const auto ranks = run_ranks(dir, {2, 2}, port, tiny_steps(4));
  const auto job_code = job->wait_exit(std::chrono::seconds(60));
  std::string job_output;
  for (const auto& line : job->lines()) job_output += line.text + "\n";
  INFO(ranks[0].output << "\n--- rank 1:\n" << ranks[1].output << "\n--- job:\n" << job_output);
  CHECK(ranks[0].exit_code == 0);
  CHECK(ranks[1].exit_code == 0);
  REQUIRE(job_code);
  CHECK(*job_code == 0);
  CHECK_THAT(ranks[0].output, Contains("a job already listens at 127.0.0.1:" + std::to_string(port) +
                                       " (troupe launch --external); joining it"));
  CHECK_THAT(ranks[0].output, !Contains("Address already in use"));
  CHECK_THAT(job_output, Contains("job finished: all 2 nodes done"));
}

TEST_CASE("ranks that torchrun starts: a rank that never joins, or brings another world size, ends the job in one line",
          "[launch]") {
  TempDir dir;
  troupe::test::ScopedEnv no_join("TROUPE_JOIN", nullptr), no_index("TROUPE_NODE_INDEX", nullptr),
      no_slots("TROUPE_SLOTS", nullptr);
  const int port = free_port();
  const auto started = std::chrono::steady_clock::now();
  const auto alone = run_ranks(dir, {2}, port, with(tiny_steps(2), {"--join-timeout", "8"}));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(alone[0].output);
  CHECK(alone[0].exit_code == 2);
  CHECK_THAT(alone[0].output, Contains("job supervisor on 127.0.0.1:" + std::to_string(port) + "; waiting up to 8 s"));
  // Rank 0 itself joins unless a crowded machine holds its start past the deadline too.
  CHECK_THAT(alone[0].output,
             Contains("troupe: error: node") && Contains("1 (started elsewhere) did not join within 8.000 s"));
  CHECK(waited < 8 + 20);

  const auto mismatched = run_ranks(dir, {2, 3}, free_port(), tiny_steps(2));
  INFO(mismatched[0].output);
  CHECK(mismatched[0].exit_code == 1);
  CHECK(mismatched[1].exit_code != 0);
  CHECK_THAT(mismatched[0].output,
             Contains("troupe: error: node 1 (") && Contains("failed: its WORLD_SIZE 3 differs from the job's 2 ranks"));
}

TEST_CASE("a node or job started outside troupe launch without its variables or token is refused in one line", "[cli]") {
  TempDir dir;
  troupe::test::ScopedEnv no_join("TROUPE_JOIN", nullptr), no_index("TROUPE_NODE_INDEX", nullptr),
      no_slots("TROUPE_SLOTS", nullptr), world("WORLD_SIZE", "2"), no_procid("SLURM_PROCID", nullptr);
  troupe::test::ScopedEnv rank("RANK", "1"), address("MASTER_ADDR", "127.0.0.1"), no_port("MASTER_PORT", nullptr);
  troupe::test::ScopedEnv with_token("TROUPE_TOKEN", token);
  check_rejected_in(dir, {"node", "--model.preset", "tiny"},
                    "troupe node started by srun or torchrun needs MASTER_ADDR and MASTER_PORT (rank 0's host and a "
                    "free port there), or --join HOST:PORT; not set: MASTER_PORT");
  {
    troupe::test::ScopedEnv port("MASTER_PORT", "http");
    check_rejected_in(dir, {"node", "--model.preset", "tiny"},
                      "environment variable MASTER_PORT: expected an integer >= 1, got 'http'");
  }
  troupe::test::ScopedEnv port("MASTER_PORT", "29500");
  {
    troupe::test::ScopedEnv no_token("TROUPE_TOKEN", nullptr);
    check_rejected_in(dir, {"node", "--model.preset", "tiny"},
                      "troupe node started by srun or torchrun needs the job's token in TROUPE_TOKEN (or --token), the "
                      "same for every rank");
    check_rejected_in(dir, {"launch", "--external", "2", "--model.preset", "tiny"},
                      "troupe launch --external needs the job's token in TROUPE_TOKEN, the same in every node's "
                      "environment");
  }
  {
    troupe::test::ScopedEnv short_token("TROUPE_TOKEN", "s3cret");
    check_rejected_in(dir, {"launch", "--external", "2", "--model.preset", "tiny"},
                      "TROUPE_TOKEN has 6 characters; a job token needs at least 16");
  }
  check_rejected_in(dir, {"launch", "--external", "2", "--hostfile", dir.write("hosts", "localhost slots=2\n")},
                    "--external and --hostfile exclude each other: the nodes start elsewhere");
  check_rejected_in(dir, {"launch", "--external", "3", "--model.preset", "tiny", "--pipeline.stages", "2"},
                    "does not divide the job's 3 workers");
}
