// The web page of a real job of 1,024 simulated ranks (docs/web.md): `troupe launch` over 32 node
// processes of 32 sim ranks trains `nano`; once every rank has stepped, the node processes are
// stopped (SIGSTOP) so that the browser does not share two cores with a thousand ranks, and
// headless Chromium loads the job's page, draws its first 256 tiles from the job's own /data and
// turns the grid's three other pages. Slow: the job takes minutes to start on two cores.

#include <catch2/catch.hpp>

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/commands/watched_run.hpp"
#include "apps/line_match.hpp"
#include "apps/run_troupe.hpp"
#include "support/page_render.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using std::chrono::seconds;

namespace {

// SIGSTOP to every node process of the job while this lives, SIGCONT after.
class StoppedNodes {
 public:
  explicit StoppedNodes(std::vector<pid_t> pids) : pids_(std::move(pids)) {
    for (pid_t pid : pids_) ::kill(pid, SIGSTOP);
  }
  StoppedNodes(const StoppedNodes&) = delete;
  ~StoppedNodes() {
    for (pid_t pid : pids_) ::kill(pid, SIGCONT);
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace

TEST_CASE("headless Chromium draws the page of a 1,024-rank sim job within 1 s of asking, and turns its grid pages",
          "[web][scale][slow]") {
  if (!chromium_present()) return;
  TempDir dir;
  {
    std::ofstream hosts(dir.file("hosts.txt"));
    for (int node = 0; node < 32; ++node) hosts << "localhost slots=32\n";
  }
  // Two cores start 32 processes of 32 ranks slowly: the nodes get a minute of silence before
  // they count as lost.
  auto started = troupe::apps::WatchedRun::start(
      {TROUPE_BINARY_DIR "/troupe", "launch", "--hostfile", dir.file("hosts.txt"), "--model.preset", "nano",
       "--train.backend", "sim", "--train.steps", "1000", "--train.val_every", "0", "--train.val_batches", "1",
       "--sample.tokens", "0", "--fault.heartbeat_timeout", "600"},
      {"XDG_RUNTIME_DIR=" + dir.path().string()}, dir.file("job.log"));
  REQUIRE(started);
  auto& job = **started;
  struct KillAtEnd {
    troupe::apps::WatchedRun& run;
    ~KillAtEnd() { run.kill_all(); }
  } kill_at_end{job};

  const auto page = job.wait_for_line(matching("web page: http://127\\.0\\.0\\.1:(\\d+)/"), seconds(60));
  REQUIRE(page);
  const auto shell = job.wait_for_line(matching("the job's token is in (.+)\\)"), seconds(60));
  REQUIRE(shell);
  std::smatch m;
  REQUIRE(std::regex_search(page->text, m, std::regex("(http://127\\.0\\.0\\.1:\\d+/)")));
  const std::string url = m[1].str();
  REQUIRE(std::regex_search(shell->text, m, std::regex("the job's token is in (.+)\\)")));
  const std::string token = file_text(m[1].str()).substr(0, 32);
  // Rank 0 prints its second step once every rank took its first: every tile has a state to show.
  REQUIRE(job.wait_for_line(matching("step +2/"), std::chrono::minutes(10)));

  StoppedNodes stopped(job.descendants());
  check_1024_rank_page(page_render_lines(url + "?token=" + token, 3), "1,024-rank sim job's page");
}
