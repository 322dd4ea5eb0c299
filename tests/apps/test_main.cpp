// What the troupe binary does for every command before it parses one (apps/main.cpp).

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "apps/commands/watched_run.hpp"
#include "support/busy_port.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

// The soft and hard "Max open files" of a running process, as /proc shows them.
std::string open_file_limits(pid_t pid) {
  std::ifstream limits("/proc/" + std::to_string(pid) + "/limits");
  std::smatch m;
  for (std::string line; std::getline(limits, line);)
    if (std::regex_search(line, m, std::regex("^Max open files +(\\d+) +(\\d+)"))) return m[1].str() + ":" + m[2].str();
  return "";
}

}  // namespace

TEST_CASE("troupe raises its soft open-file limit to the hard limit at start", "[cli]") {
  TempDir dir;
  BusyPort silent;  // the shell waits on it for a few seconds: time to look at its limits
  auto run = troupe::apps::WatchedRun::start({"/usr/bin/prlimit", "--nofile=256:2048", TROUPE_BINARY_DIR "/troupe",
                                              "shell", "127.0.0.1:" + std::to_string(silent.port()), "-c", "status"},
                                             {"TROUPE_TOKEN=x"}, dir.file("shell.log"));
  REQUIRE(run);
  std::string limits;
  for (const auto deadline = std::chrono::steady_clock::now() + 4s;
       limits != "2048:2048" && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(50ms))
    limits = open_file_limits((*run)->pid());
  CHECK(limits == "2048:2048");
  CHECK((*run)->wait_exit(20s) == 1);
}
