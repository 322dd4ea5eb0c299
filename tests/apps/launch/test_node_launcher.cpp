// The launcher with real child processes (/bin/sh scripts): prefixed whole-line output, exits
// noticed at once, orderly stops on failure, signals and stop_all(), pre-flight of remote hosts
// through a template, and the environment a node is given. A watchdog bounds every test.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/launch/node_launcher.hpp"
#include "apps/launch/rank_plan.hpp"

using namespace troupe::launch;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

// Stops the job if a test outlives its time, and ends the test binary if even that does not help.
class Watchdog {
 public:
  Watchdog(NodeLauncher& launcher, std::chrono::seconds limit)
      : thread_([this, &launcher, limit] {
          std::unique_lock lock(mutex_);
          if (done_changed_.wait_for(lock, limit, [this] { return done_; })) return;
          launcher.stop_all(JobEnd::node_failed,
                            "test watchdog: the job outlived " + std::to_string(limit.count()) + " s");
          if (done_changed_.wait_for(lock, 5s, [this] { return done_; })) return;
          std::fputs("test watchdog: the launcher did not stop\n", stderr);
          std::abort();
        }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_changed_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_changed_;
  bool done_ = false;
  std::thread thread_;
};

struct LauncherLines {
  std::vector<std::string> out;
  std::vector<std::string> err;
};

struct Outcome {
  JobResult result;
  LauncherLines lines;
  std::chrono::milliseconds elapsed{};
};

// Called on the loop thread after each forwarded line is recorded.
using OnLine = std::function<void(NodeLauncher&, const LauncherLines&)>;

Outcome run_launcher(std::vector<NodeProcessSpec> nodes, LauncherOptions options, const OnLine& on_line = {}) {
  Outcome outcome;
  NodeLauncher* launcher = nullptr;
  options.sink = [&](OutputStream stream, std::string_view line) {
    (stream == OutputStream::out ? outcome.lines.out : outcome.lines.err).emplace_back(line);
    if (on_line) on_line(*launcher, outcome.lines);
  };
  NodeLauncher job(std::move(nodes), std::move(options));
  launcher = &job;
  Watchdog watchdog(job, 15s);
  const auto start = std::chrono::steady_clock::now();
  outcome.result = job.run();
  outcome.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return outcome;
}

NodeProcessSpec sh_node(int index, const std::string& script) {
  return {index, "localhost", true, {"/bin/sh", "-c", script}, {}};
}

LauncherOptions quick_options() {
  LauncherOptions options;
  options.grace = 300ms;
  options.preflight_timeout = 2s;
  return options;
}

int count_ending(const std::vector<std::string>& lines, const std::string& end) {
  return static_cast<int>(
      std::count_if(lines.begin(), lines.end(), [&](const auto& line) { return line.ends_with(end); }));
}

ExitStatus status_of(const JobResult& result, int node_index) {
  const auto exit = std::find_if(result.exits.begin(), result.exits.end(),
                                 [&](const NodeExit& e) { return e.node_index == node_index; });
  INFO("node " << node_index << " has no exit");
  REQUIRE(exit != result.exits.end());
  return exit->status;
}

// Prints, 300 times, "n<i>-part-end<i>" to stdout and "e<i>-x" to stderr, each in several writes.
const std::string chatty_script =
    "i=0; while [ $i -lt 300 ]; do printf 'n%s-' $i; printf 'part-'; printf 'end%s\\n' $i; "
    "printf 'e%s-' $i >&2; printf 'x\\n' >&2; i=$((i+1)); done";

}  // namespace

TEST_CASE("output of two local nodes arrives prefixed, in whole lines, on the right stream", "[launcher]") {
  const Outcome run = run_launcher({sh_node(0, chatty_script), sh_node(1, chatty_script)}, quick_options());
  CHECK(run.result.end == JobEnd::success);
  CHECK(exit_code(run.result.end) == 0);
  CHECK(run.result.message.empty());
  CHECK(run.result.exits.size() == 2);
  for (int node = 0; node < 2; ++node) {
    const std::string prefix = "[node " + std::to_string(node) + " localhost] ";
    std::vector<std::string> out, err;
    for (const auto& line : run.lines.out) {
      if (line.starts_with(prefix)) out.push_back(line.substr(prefix.size()));
    }
    for (const auto& line : run.lines.err) {
      if (line.starts_with(prefix)) err.push_back(line.substr(prefix.size()));
    }
    REQUIRE(out.size() == 300);
    REQUIRE(err.size() == 300);
    for (int i = 0; i < 300; ++i) {
      CHECK(out[i] == "n" + std::to_string(i) + "-part-end" + std::to_string(i));
      CHECK(err[i] == "e" + std::to_string(i) + "-x");
    }
  }
  CHECK(run.lines.out.size() == 600);
  CHECK(run.lines.err.size() == 600);
}

TEST_CASE("a last line without a newline is forwarded when the node exits", "[launcher]") {
  const Outcome run = run_launcher({sh_node(0, "printf 'no newline'; printf 'half' >&2")}, quick_options());
  CHECK(run.result.end == JobEnd::success);
  CHECK(run.lines.out == std::vector<std::string>{"[node 0 localhost] no newline"});
  CHECK(run.lines.err == std::vector<std::string>{"[node 0 localhost] half"});
}

TEST_CASE("a node exiting 0 early is no failure and the job succeeds when all have", "[launcher]") {
  const Outcome run = run_launcher({sh_node(0, "exit 0"), sh_node(1, "sleep 0.3; echo late")}, quick_options());
  CHECK(run.result.end == JobEnd::success);
  REQUIRE(run.result.exits.size() == 2);
  CHECK(run.result.exits[0].node_index == 0);
  CHECK(run.lines.out == std::vector<std::string>{"[node 1 localhost] late"});
}

TEST_CASE("a node exiting non-zero is reported with node and code, and the others are stopped", "[launcher]") {
  std::vector<NodeExit> seen;
  LauncherOptions options = quick_options();
  options.on_node_exit = [&](const NodeExit& exit) { seen.push_back(exit); };
  const Outcome run =
      run_launcher({sh_node(0, "echo started; sleep 30"), sh_node(1, "sleep 0.2; echo failing >&2; exit 3")}, options);
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(exit_code(run.result.end) == 1);
  CHECK(run.result.message == "node 1 (localhost) exited with code 3");
  CHECK(status_of(run.result, 1).code == 3);
  CHECK(status_of(run.result, 0).signal == SIGTERM);
  CHECK(status_of(run.result, 0).describe() == "was killed by signal 15 (SIGTERM)");
  CHECK(seen.size() == 2);
  CHECK(run.elapsed < 5s);
  CHECK(run.lines.err ==
        std::vector<std::string>{"[node 1 localhost] failing",
                                 "[launch] node 1 (localhost) exited with code 3; stopping 1 node process (SIGTERM, "
                                 "then SIGKILL after 0.3 s)"});
}

TEST_CASE("with a hold after a failure the others finish on their own and the first failure is the result",
          "[launcher]") {
  LauncherOptions options = quick_options();
  options.hold_after_failure = [] { return std::chrono::milliseconds(3000); };
  const Outcome run =
      run_launcher({sh_node(0, "sleep 0.6; echo rescued; exit 1"), sh_node(1, "sleep 0.1; exit 3")}, options);
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(run.result.message == "node 1 (localhost) exited with code 3");
  CHECK(status_of(run.result, 0).code == 1);  // not SIGTERM: it was left to finish
  CHECK(run.elapsed < 2s);
  CHECK(run.lines.out == std::vector<std::string>{"[node 0 localhost] rescued"});
  CHECK(run.lines.err == std::vector<std::string>{"[launch] node 1 (localhost) exited with code 3; leaving the other "
                                                  "node processes 3 s to finish before stopping them"});
}

TEST_CASE("a hold ends in the usual stop when its time is up or at stop_all", "[launcher]") {
  LauncherOptions options = quick_options();
  options.hold_after_failure = [] { return std::chrono::milliseconds(400); };
  const Outcome timed_out = run_launcher({sh_node(0, "sleep 30"), sh_node(1, "exit 3")}, options);
  CHECK(timed_out.result.message == "node 1 (localhost) exited with code 3");
  CHECK(status_of(timed_out.result, 0).signal == SIGTERM);
  CHECK(timed_out.elapsed >= 400ms);

  options.hold_after_failure = [] { return std::chrono::milliseconds(10000); };
  const Outcome stopped = run_launcher({sh_node(0, "echo ready; sleep 30"), sh_node(1, "sleep 0.3; exit 3")}, options,
                                       [](NodeLauncher& launcher, const LauncherLines& lines) {
                                         if (lines.err.size() == 1 && lines.err[0].find("leaving") != std::string::npos)
                                           launcher.stop_all(JobEnd::node_failed, "rescue done");
                                       });
  CHECK(stopped.result.message == "node 1 (localhost) exited with code 3");
  CHECK(status_of(stopped.result, 0).signal == SIGTERM);
  CHECK(stopped.elapsed < 5s);
}

// Node 1's script: the first process says "first" and waits; one started again with AGAIN=1 says
// "again" and ends well.
const std::string replaceable_script =
    "if [ \"$AGAIN\" = 1 ]; then echo again; exit 0; fi; echo first; sleep 30";

TEST_CASE("replace_node kills a node's process and starts it again with the given variables, and the job runs on",
          "[launcher]") {
  const Outcome run =
      run_launcher({sh_node(0, "sleep 1; exit 0"), sh_node(1, replaceable_script)}, quick_options(),
                   [replaced = false](NodeLauncher& launcher, const LauncherLines& lines) mutable {
                     if (replaced || lines.out.empty() || lines.out.back() != "[node 1 localhost] first") return;
                     replaced = true;
                     launcher.replace_node(1, {{"AGAIN", "1"}});
                   });
  CHECK(run.result.end == JobEnd::success);
  CHECK(count_ending(run.lines.out, "] again") == 1);
  std::vector<NodeExit> node1;
  for (const NodeExit& e : run.result.exits)
    if (e.node_index == 1) node1.push_back(e);
  REQUIRE(node1.size() == 2);
  // The two exits may be reaped in either order: the killed process can be scheduled to die after its
  // replacement has already echoed and ended.
  if (node1[0].started_again) std::swap(node1[0], node1[1]);
  CHECK((node1[0].status.signal == SIGKILL && !node1[0].started_again));  // the replaced one, not a failure
  CHECK((node1[1].status.code == 0 && node1[1].started_again));
}

TEST_CASE("replace_node after a node's exit began a hold ends the hold, and the job runs on", "[launcher]") {
  LauncherOptions options = quick_options();
  options.hold_after_failure = [] { return std::chrono::milliseconds(10000); };
  const Outcome run = run_launcher(
      {sh_node(0, "sleep 1.5; exit 0"), sh_node(1, "if [ \"$AGAIN\" = 1 ]; then echo again; exit 0; fi; kill -9 $$")},
      options, [replaced = false](NodeLauncher& launcher, const LauncherLines& lines) mutable {
        if (replaced || lines.err.empty() || lines.err.back().find("leaving") == std::string::npos) return;
        replaced = true;
        launcher.replace_node(1, {{"AGAIN", "1"}});
      });
  CHECK(run.result.end == JobEnd::success);
  CHECK(run.result.message.empty());
  CHECK(count_ending(run.lines.out, "] again") == 1);
  CHECK(status_of(run.result, 0).code == 0);  // left to finish: not stopped
  CHECK(run.elapsed < 5s);
}

TEST_CASE("add_node starts a node the plan did not have while the job runs, and the job ends when it does too",
          "[launcher]") {
  const Outcome run = run_launcher({sh_node(0, "echo first; sleep 1; exit 0")}, quick_options(),
                                   [added = false](NodeLauncher& launcher, const LauncherLines& lines) mutable {
                                     if (added || lines.out.empty() || lines.out.back() != "[node 0 localhost] first")
                                       return;
                                     added = true;
                                     launcher.add_node(sh_node(1, "sleep 1.5; echo added; exit 0"));
                                   });
  CHECK(run.result.end == JobEnd::success);
  CHECK(count_ending(run.lines.out, "[node 1 localhost] added") == 1);
  REQUIRE(run.result.exits.size() == 2);
  CHECK(run.result.exits.back().node_index == 1);  // the launcher waited for the added node to end
  CHECK(run.result.exits.back().started_again);
}

TEST_CASE("update_node changes what a later replace_node starts, and leaves the running process alone", "[launcher]") {
  NodeProcessSpec node1 = sh_node(1, "echo \"first $X\"; sleep 30");
  node1.env = {{"X", "1"}};
  const Outcome run =
      run_launcher({sh_node(0, "sleep 1; exit 0"), node1}, quick_options(),
                   [replaced = false](NodeLauncher& launcher, const LauncherLines& lines) mutable {
                     if (replaced || lines.out.empty() || lines.out.back() != "[node 1 localhost] first 1") return;
                     replaced = true;
                     launcher.update_node(1, {"/bin/sh", "-c", "echo \"updated $X $Y\"; exit 0"}, {{"X", "2"}});
                     launcher.replace_node(1, {{"Y", "3"}});
                   });
  CHECK(run.result.end == JobEnd::success);
  CHECK(count_ending(run.lines.out, "[node 1 localhost] updated 2 3") == 1);
}

TEST_CASE("move_node starts a node on another host and leaves its old process alone, whose exit is no failure",
          "[launcher]") {
  const Outcome run =
      run_launcher({sh_node(0, "sleep 2; exit 0"),
                    sh_node(1, "if [ \"$AGAIN\" = 1 ]; then echo again; exit 0; fi; echo first; sleep 1; exit 3")},
                   quick_options(), [moved = false](NodeLauncher& launcher, const LauncherLines& lines) mutable {
                     if (moved || lines.out.empty() || lines.out.back() != "[node 1 localhost] first") return;
                     moved = true;
                     launcher.move_node(1, "127.0.0.1", true, {{"AGAIN", "1"}});
                   });
  CHECK(run.result.end == JobEnd::success);
  CHECK(std::count(run.lines.out.begin(), run.lines.out.end(), "[node 1 127.0.0.1] again") == 1);
  std::vector<NodeExit> node1;
  for (const NodeExit& e : run.result.exits)
    if (e.node_index == 1) node1.push_back(e);
  REQUIRE(node1.size() == 2);
  const auto old = std::find_if(node1.begin(), node1.end(), [](const NodeExit& e) { return !e.started_again; });
  REQUIRE(old != node1.end());
  CHECK(old->status.code == 3);  // left to end by itself, not killed, and not the job's failure
  CHECK(old->host == "localhost");
  const auto moved = std::find_if(node1.begin(), node1.end(), [](const NodeExit& e) { return e.started_again; });
  REQUIRE(moved != node1.end());
  CHECK(moved->host == "127.0.0.1");
}

TEST_CASE("a node killed by a signal the launcher did not send is a failure", "[launcher]") {
  const Outcome run = run_launcher({sh_node(0, "kill -9 $$")}, quick_options());
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(run.result.message == "node 0 (localhost) was killed by signal 9 (SIGKILL)");
}

TEST_CASE("SIGTERM to the launcher stops the nodes and one ignoring SIGTERM is killed after the grace period",
          "[launcher]") {
  bool raised = false;
  const Outcome run = run_launcher(
      {sh_node(0, "echo ready; sleep 30"), sh_node(1, "trap '' TERM; echo ready; while :; do sleep 0.05; done")},
      quick_options(), [&](NodeLauncher&, const LauncherLines& lines) {
        if (!raised && count_ending(lines.out, "] ready") == 2) {
          raised = true;
          raise(SIGTERM);
        }
      });
  CHECK(run.result.end == JobEnd::terminated);
  CHECK(exit_code(run.result.end) == 143);
  CHECK(run.result.message == "terminated by SIGTERM");
  CHECK(status_of(run.result, 0).signal == SIGTERM);
  CHECK(status_of(run.result, 1).signal == SIGKILL);
  CHECK(run.elapsed >= 300ms);
  CHECK(run.elapsed < 5s);
  CHECK_THAT(run.lines.err.back(), Contains("node 1 (localhost) still running after 0.3 s; SIGKILL"));
}

TEST_CASE("Ctrl-C interrupts with exit code 130 and a second one kills without waiting for the grace period",
          "[launcher]") {
  int raised = 0;
  LauncherOptions options = quick_options();
  options.grace = 20s;
  std::vector<std::string> told;  // the job hears of the stop once, before any node is signalled
  options.on_signal_stop = [&told](const std::string& why) { told.push_back(why); };
  const Outcome run = run_launcher({sh_node(0, "trap '' TERM; echo ready; while :; do sleep 0.05; done")}, options,
                                   [&](NodeLauncher&, const LauncherLines& lines) {
                                     if (raised == 0 && count_ending(lines.out, "] ready") == 1) {
                                       ++raised;
                                       raise(SIGINT);
                                     } else if (raised == 1 && !lines.err.empty()) {
                                       ++raised;
                                       raise(SIGINT);
                                     }
                                   });
  CHECK(run.result.end == JobEnd::interrupted);
  CHECK(exit_code(run.result.end) == 130);
  CHECK(run.result.message == "interrupted by SIGINT");
  CHECK(told == std::vector<std::string>{"interrupted by SIGINT"});
  CHECK(status_of(run.result, 0).signal == SIGKILL);
  CHECK(run.elapsed < 5s);
  CHECK(run.lines.err ==
        std::vector<std::string>{
            "[launch] interrupted by SIGINT; stopping 1 node process (SIGTERM, then SIGKILL after 20 s)",
            "[launch] node 0 (localhost) at a second signal (SIGINT); SIGKILL"});
}

TEST_CASE("SIGHUP to the launcher stops the job as hung up", "[launcher]") {
  bool raised = false;
  const Outcome run =
      run_launcher({sh_node(0, "echo ready; sleep 30")}, quick_options(), [&](NodeLauncher&, const LauncherLines&) {
        if (!raised) {
          raised = true;
          raise(SIGHUP);
        }
      });
  CHECK(run.result.end == JobEnd::hung_up);
  CHECK(run.result.message == "hung up (SIGHUP): the terminal went away");
  CHECK(status_of(run.result, 0).signal == SIGTERM);
  CHECK(run.elapsed < 5s);
}

TEST_CASE("stop_all from another thread stops the job with the supervisor's reason", "[launcher]") {
  bool ready = false;
  std::thread supervisor;
  const Outcome run =
      run_launcher({sh_node(0, "echo ready; sleep 30"), sh_node(1, "echo ready; sleep 30")}, quick_options(),
                   [&](NodeLauncher& launcher, const LauncherLines& lines) {
                     if (!ready && count_ending(lines.out, "] ready") == 2) {
                       ready = true;
                       supervisor = std::thread([&launcher] {
                         launcher.stop_all(JobEnd::node_failed, "node 3 lost (remote_link_unreachable)");
                       });
                     }
                   });
  if (supervisor.joinable()) supervisor.join();
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(run.result.message == "node 3 lost (remote_link_unreachable)");
  CHECK(run.result.exits.size() == 2);
  CHECK(run.elapsed < 5s);
}

TEST_CASE("a program that cannot start stops the job, naming the node", "[launcher]") {
  const Outcome run = run_launcher(
      {sh_node(0, "sleep 30"), NodeProcessSpec{1, "localhost", true, {"/no/such/program"}, {}}}, quick_options());
  CHECK(run.result.end == JobEnd::start_failed);
  CHECK(exit_code(run.result.end) == 3);
  CHECK(run.result.message == "node 1 (localhost): cannot start '/no/such/program': No such file or directory");
  CHECK(status_of(run.result, 0).signal == SIGTERM);
  CHECK(run.elapsed < 5s);
}

TEST_CASE("each node gets its ranks and the job's address in its environment", "[launcher]") {
  auto hosts = parse_host_text("localhost slots=2\nlocalhost slots=1\nfar slots=4\n", "hosts.txt");
  REQUIRE(hosts.ok());
  const RankPlan plan = plan_ranks(*hosts, "here");
  const std::vector<std::string> argv = {
      "/bin/sh", "-c",
      "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $TROUPE_NODE_INDEX "
      "$TROUPE_SLOTS $TROUPE_JOIN $TROUPE_TOKEN [$1]\"",
      "sh", "it's \"odd\" $HOME"};
  LauncherOptions options = quick_options();
  // A stand-in for ssh that runs the command here: sh -c COMMAND HOST.
  auto fake_remote = LaunchTemplate::parse("sh -c {command} {host}");
  REQUIRE(fake_remote.ok());
  options.remote = *fake_remote;
  Outcome run = run_launcher(node_process_specs(plan, {"127.0.0.1", 29500, "tok en"}, argv), options);
  CHECK(run.result.end == JobEnd::success);
  std::sort(run.lines.out.begin(), run.lines.out.end());
  CHECK(run.lines.out ==
        std::vector<std::string>{
            "[node 0 localhost] 0 7 0 3 127.0.0.1 29500 0 2 127.0.0.1:29500 tok en [it's \"odd\" $HOME]",
            "[node 1 localhost] 2 7 2 3 127.0.0.1 29500 1 1 127.0.0.1:29500 tok en [it's \"odd\" $HOME]",
            "[node 2 far] 3 7 0 4 127.0.0.1 29500 2 4 127.0.0.1:29500 tok en [it's \"odd\" $HOME]"});
}

TEST_CASE("a remote host whose launcher command does not answer fails pre-flight within the timeout, named",
          "[launcher]") {
  LauncherOptions options = quick_options();
  options.preflight_timeout = 300ms;
  auto silent = LaunchTemplate::parse("sleep 30 && {command} {host}");
  REQUIRE(silent.ok());
  options.remote = *silent;
  const Outcome run = run_launcher({sh_node(0, "echo never"), NodeProcessSpec{1, "far1", false, {"/bin/true"}, {}},
                                    NodeProcessSpec{2, "far2", false, {"/bin/true"}, {}}},
                                   options);
  CHECK(run.result.end == JobEnd::start_failed);
  CHECK(exit_code(run.result.end) == 3);
  CHECK(run.result.message ==
        "pre-flight: no answer within 0.3 s from host 'far1', host 'far2' (launcher template `sleep 30 && {command} "
        "{host}`)");
  CHECK(run.result.exits.empty());
  CHECK(run.lines.out.empty());
  CHECK(run.elapsed < 3s);
}

TEST_CASE("a failing launcher command fails pre-flight with the host and its last words", "[launcher]") {
  LauncherOptions options = quick_options();
  auto refused = LaunchTemplate::parse(
      "sh -c 'echo \"ssh: connect to host $0 port 22: Connection refused\" >&2; exit 255' {host} {command}");
  REQUIRE(refused.ok());
  options.remote = *refused;
  const Outcome run = run_launcher({NodeProcessSpec{0, "far2", false, {"/bin/true"}, {}}}, options);
  CHECK(run.result.end == JobEnd::start_failed);
  CHECK_THAT(run.result.message, Contains("pre-flight of host 'far2' failed: `sh -c"));
  CHECK_THAT(run.result.message,
             Contains("exited with code 255: ssh: connect to host far2 port 22: Connection refused"));
  CHECK(run.elapsed < 3s);
}

TEST_CASE("without pre-flight a failing launcher command is a node failure naming the host", "[launcher]") {
  LauncherOptions options = quick_options();
  options.preflight_timeout = 0ms;
  auto failing = LaunchTemplate::parse("false {host} {command}");
  REQUIRE(failing.ok());
  options.remote = *failing;
  const Outcome run = run_launcher({NodeProcessSpec{0, "far3", false, {"/bin/true"}, {}}}, options);
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(run.result.message == "node 0 (far3) exited with code 1");
}

TEST_CASE("a finished job leaves no descriptor open and no child unreaped", "[launcher]") {
  const auto open_descriptors = [] {
    const std::filesystem::directory_iterator fds("/proc/self/fd");
    return std::distance(std::filesystem::begin(fds), std::filesystem::end(fds));
  };
  const auto before = open_descriptors();
  const Outcome run = run_launcher({sh_node(0, "echo ready; sleep 30"), sh_node(1, "exit 2")}, quick_options());
  CHECK(run.result.end == JobEnd::node_failed);
  CHECK(open_descriptors() == before);
  errno = 0;
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

TEST_CASE("exit codes of the launcher", "[launcher]") {
  CHECK(exit_code(JobEnd::success) == 0);
  CHECK(exit_code(JobEnd::node_failed) == 1);
  CHECK(exit_code(JobEnd::start_failed) == 3);
  CHECK(exit_code(JobEnd::interrupted) == 130);
  CHECK(exit_code(JobEnd::terminated) == 143);
  CHECK(exit_code(JobEnd::hung_up) == 129);
}
