// troupe shell against live 2-node jobs (docs/shell.md): an interactive session driven through a
// pseudo-terminal (status, top, pause/resume, checkpoint, kill node 1 and the reconnect after
// the restart), one-shot -c commands, hostile input on the control ports (wrong and missing
// tokens, garbage bytes, a frame that claims to be huge) and a drain. The job goes on and finishes.

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <caf/io/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/messages.hpp"
#include "apps/live_job.hpp"
#include "apps/run_troupe.hpp"
#include "support/busy_port.hpp"
#include "support/metrics_scrape.hpp"
#include "support/run_process.hpp"
#include "support/tcp_client.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;
namespace fs = std::filesystem;

namespace {

// `troupe shell` on a pseudo-terminal, as a person types into it.
class PtyShell {
 public:
  PtyShell(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      for (const std::string& e : env) putenv(strdup(e.c_str()));
      std::vector<char*> argv;
      std::vector<std::string> all{TROUPE_BINARY_DIR "/troupe", "shell"};
      all.insert(all.end(), args.begin(), args.end());
      for (auto& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~PtyShell() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(master_);
  }

  void type(const std::string& keys) { REQUIRE(write(master_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size())); }

  // Reads until `pattern` matches output after the last expect(), or `timeout`; the text read up to the match.
  std::string expect(const std::string& pattern, seconds timeout = seconds(20)) {
    const std::regex re(pattern);
    for (const auto deadline = Clock::now() + timeout;;) {
      std::smatch m;
      const std::string fresh = output_.substr(mark_);
      if (std::regex_search(fresh, m, re)) {
        mark_ += static_cast<std::size_t>(m.position(0) + m.length(0));
        return fresh.substr(0, static_cast<std::size_t>(m.position(0) + m.length(0)));
      }
      if (Clock::now() > deadline) FAIL("no '" << pattern << "' within " << timeout.count() << " s; the shell wrote:\n" << fresh);
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buffer[4096];
        const ssize_t n = read(master_, buffer, sizeof buffer);
        if (n > 0) output_.append(buffer, static_cast<std::size_t>(n));
      }
    }
  }

  int wait_exit(seconds timeout) {
    for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        char buffer[4096];
        if (const ssize_t n = read(master_, buffer, sizeof buffer); n > 0) output_.append(buffer, static_cast<std::size_t>(n));
      }
    }
    return -2;
  }

 private:
  pid_t pid_ = -1;
  int master_ = -1;
  bool exited_ = false;
  std::string output_;
  std::size_t mark_ = 0;
};

long step_in(const std::string& status) {
  std::smatch m;
  REQUIRE(std::regex_search(status, m, std::regex("step +(\\d+) / ")));
  return std::stol(m[1].str());
}

// Sends `bytes` to 127.0.0.1:port and waits for the peer to close (or 2 s).
void send_raw(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  pollfd p{fd, POLLIN, 0};
  char buffer[256];
  for (const auto deadline = Clock::now() + seconds(2); Clock::now() < deadline;)
    if (poll(&p, 1, 100) > 0 && recv(fd, buffer, sizeof buffer, 0) <= 0) break;
  close(fd);
}

long resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

TEST_CASE("troupe shell on a terminal: status, top, pause and resume, checkpoint, kill node 1 and reconnect",
          "[shell][dp]") {
  TempDir dir;
  LiveJob job(dir, 2000);
  PtyShell shell({job.control}, {"XDG_RUNTIME_DIR=" + dir.path().string(), "HOME=" + dir.path().string()});
  shell.expect("connected to the job: 2 nodes, 2 ranks, 2000 steps");
  shell.expect("troupe> ");

  shell.type("status\n");
  const std::string status = shell.expect("ETA +\\S+");
  CHECK_THAT(status, Contains("job       running") && Contains("grid      2 ranks: dp 2 x pp 1 x tp 1 on 2 nodes"));
  CHECK(step_in(status) > 0);

  shell.type("top\n");
  // On a terminal the table is redrawn in place: cursor home and clear screen before each one.
  CHECK_THAT(shell.expect("rank  node +step +loss +step ms +tokens/s"), Contains("\x1b[H\x1b[2J"));
  shell.expect("press any key to return");
  CHECK_THAT(shell.expect("press any key to return"), Contains("\x1b[H\x1b[2J"));  // redrawn
  shell.type("q");
  shell.expect("troupe> ");

  shell.type("pause\n");
  const std::string paused = shell.expect("paused after step (\\d+) on all 2 ranks");
  const long at = std::stol(std::regex_replace(paused, std::regex("[\\s\\S]*paused after step (\\d+) on all[\\s\\S]*"), "$1"));
  shell.type("status\n");
  const long first = step_in(shell.expect("ETA +.*"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  shell.type("status\n");
  const std::string still = shell.expect("ETA +.*");
  CHECK(first == at);
  CHECK(step_in(still) == at);  // steps stopped
  CHECK_THAT(still, Contains("paused after step " + std::to_string(at)));

  shell.type("checkpoint\n");
  shell.expect("checkpoint after step " + std::to_string(at) + " written: ");
  CHECK(fs::is_directory(dir.path() / "ck" / ("step-" + std::string(7 - std::to_string(at).size(), '0') + std::to_string(at))));

  shell.type("resume\n");
  shell.expect("resumed after step " + std::to_string(at));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  shell.type("status\n");
  CHECK(step_in(shell.expect("ETA +.*")) > at);  // and go on

  // In place: only node 1's process is started again, and the shell stays connected.
  shell.type("kill node 1\n");
  shell.expect("kill node 1: SIGKILL sent to pid \\d+ \\(.*\\); the job starts that node's process again, in place");
  REQUIRE(job.run->wait_for_line(matching("recovery: in place done .*node 1's process started again"), seconds(60)));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // the monitor's view of the job, every 0.25 s
  shell.type("status\n");
  const std::string after = shell.expect("went on after step \\d+", seconds(30));
  CHECK_THAT(after, Contains("rank 1 respawned in a new process of its node"));
  CHECK(step_in(after) >= at);

  shell.type("quit\n");
  CHECK(shell.wait_exit(seconds(10)) == 0);
}

// Two shells, one pausing and one resuming right after: the resume once overtook the pause, which
// then waited 30 s for ranks that had gone on and failed (or left them paused for good).
TEST_CASE("a resume right behind a pause is answered after it, and the job trains on", "[shell][dp]") {
  TempDir dir;
  LiveJob job(dir, 2000);
  const std::string token = file_text(job.token_file).substr(0, 32);
  // Both shells connect first: connecting takes longer than 50 ms on a loaded machine, and the
  // resume must reach the monitor while the pause is under way, not before it.
  struct Connection {
    troupe::actors::TroupeConfig cfg;
    caf::actor_system system{cfg};
    caf::expected<caf::actor> monitor = caf::make_error(caf::sec::invalid_argument);
  };
  auto connect = [&](Connection& c) {
    c.monitor = c.system.middleman().remote_actor("127.0.0.1", static_cast<std::uint16_t>(job.control_port));
    REQUIRE(c.monitor);
  };
  auto ask = [&](Connection& c, const std::string& command, troupe::actors::shell_reply_msg& answer,
                 Clock::time_point& at) {
    caf::scoped_actor self{c.system};
    self->request(*c.monitor, seconds(20), troupe::actors::shell_atom_v,
                  troupe::actors::shell_request_msg{token, command})
        .receive([&](troupe::actors::shell_reply_msg& r) { answer = r; },
                 [&](caf::error& e) { answer.text = command + ": " + to_string(e); });
    at = Clock::now();
  };
  Connection pauser, resumer;
  connect(pauser);
  connect(resumer);
  troupe::actors::shell_reply_msg paused, resumed;
  Clock::time_point paused_at, resumed_at;
  const auto start = Clock::now();
  std::thread pausing([&] { ask(pauser, "pause", paused, paused_at); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ask(resumer, "resume", resumed, resumed_at);
  pausing.join();
  INFO("pause: " << paused.text << "\nresume: " << resumed.text);
  REQUIRE(paused.ok);
  REQUIRE(resumed.ok);
  std::smatch m;
  REQUIRE(std::regex_search(paused.text, m, std::regex("paused after step (\\d+) on all 2 ranks")));
  const long at = std::stol(m[1].str());
  CHECK_THAT(resumed.text, Contains("resumed after step " + m[1].str()));
  CHECK(resumed_at >= paused_at);
  CHECK(Clock::now() - start < seconds(10));
  INFO(job.log());
  CHECK(job.run->wait_for_line(matching("step +" + std::to_string((at / 10 + 2) * 10) + "/"), seconds(30)));
}

TEST_CASE("a node lost while the shell has the job paused is rescued from the survivor's memory at once",
          "[shell][dp]") {
  TempDir dir;
  LiveJob job(dir, 2000);
  const ProcessResult paused = shell_c(dir, job, "pause");
  INFO("stderr: " << paused.err);
  REQUIRE(paused.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(paused.out, m, std::regex("paused after step (\\d+) on all 2 ranks")));
  const std::string at = m[1].str();

  const auto killed = Clock::now();
  REQUIRE(shell_c(dir, job, "kill node 1").exit_code == 0);
  // The paused survivor leaves its pause to write what it holds; before, it sat out the job's
  // 60 s wait for the snapshot and the job fell back to the newest checkpoint.
  const auto resumed = job.run->wait_for_line(matching("resumed from .* after step (\\d+)"), seconds(40));
  INFO(job.log());
  REQUIRE(resumed);
  CHECK(Clock::now() - killed < seconds(40));
  CHECK_THAT(resumed->text, Contains("after step " + at + " "));  // no step lost
  CHECK_THAT(job.log(), Contains("writes its memory of step " + at + " as a rescue snapshot"));
}

TEST_CASE("kill worker from the shell is recovered in place: every node keeps its process, status lists the recovery "
          "with its path and duration, and every node's /metrics counts it by path",
          "[shell][dp][recovery]") {
  TempDir dir;
  LiveJob job(dir, 400);
  REQUIRE(shell_c(dir, job, "kill worker 1").exit_code == 0);
  REQUIRE(job.run->wait_for_line(matching("recovery: in place done"), seconds(60)));
  const ProcessResult status = status_showing(dir, job, "recovery  in place (epoch 1)");
  INFO("status: " << status.out << status.err << "\nlog: " << job.log());
  CHECK(status.exit_code == 0);
  CHECK(std::regex_search(status.out, std::regex("\nrecovery  in place \\(epoch 1\\) in [0-9.]+ s: rank 1 respawned in "
                                                 "its process, 10\\.1 MB of state from rank 0; went on after step [0-9]+")));
  CHECK_THAT(status.out, Contains("job       running\n"));
  // One join per node: no process was restarted.
  const std::string log = job.log();
  for (const char* node : {"node 0 \\(", "node 1 \\("}) {
    const std::regex joined(std::string(node) + "[^\n]*pid [0-9]+\\) joined");
    CHECK(std::distance(std::sregex_iterator(log.begin(), log.end(), joined), std::sregex_iterator()) == 1);
  }
  // A second failure, of the other rank: the next epoch, again in place.
  REQUIRE(shell_c(dir, job, "kill worker 0").exit_code == 0);
  REQUIRE(job.run->wait_for_line(matching("recovery: in place done in [0-9.]+ s \\(epoch 2\\): rank 0"), seconds(60)));
  const ProcessResult again = status_showing(dir, job, "recovery  in place (epoch 2)");
  INFO("status after the second: " << again.out);
  CHECK_THAT(again.out, Contains("recovery  in place (epoch 1)") &&
                            Contains("recovery  in place (epoch 2) in ") && Contains("rank 0 respawned in its process") &&
                            Contains("of state from rank 1;"));
  for (int node : {0, 1}) {
    std::smatch m;
    REQUIRE(std::regex_search(log, m, std::regex("\\[node " + std::to_string(node) +
                                                 " [^\\]]*\\][^\n]*metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")));
    const Exposition e = parse_exposition(http_get(std::stoi(m[1].str()), "/metrics").body);
    const std::map<std::string, std::string> in_place{{"source", "replica"}, {"path", "in_place"}};
    CHECK(e.value("troupe_recoveries_total", in_place) == 2);
    CHECK(e.value("troupe_failures_total", {{"kind", "worker_exception"}}) == 2);
  }
  REQUIRE(job.run->wait_for_line(matching("step +[0-9]+/400"), seconds(30), job.run->lines().size()));
  // The respawned workers obey the shell at their boundaries as the first ones did.
  const ProcessResult checkpoint = shell_c(dir, job, "checkpoint");
  INFO("checkpoint: " << checkpoint.out << checkpoint.err);
  CHECK(checkpoint.exit_code == 0);
  CHECK_THAT(checkpoint.out, Contains("written: "));
  // A lost node's process alone is started again, in place: the new process starts its counts with
  // the attempt's in-place recoveries, its own included.
  const std::size_t before_replacement = job.run->lines().size();
  REQUIRE(shell_c(dir, job, "kill node 1").exit_code == 0);
  std::size_t served = 0;
  const auto metrics_line =
      job.run->wait_for_line(matching("\\[node 1 [^\\]]*\\][^\n]*metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics"),
                             seconds(60), before_replacement, &served);
  REQUIRE(metrics_line);
  std::smatch port;
  REQUIRE(std::regex_search(metrics_line->text, port, std::regex("127\\.0\\.0\\.1:([0-9]+)/metrics")));
  // The new process serves before it has set its counts from TROUPE_RESTARTS: ask until it has.
  Exposition replaced;
  for (const auto deadline = Clock::now() + seconds(30); Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    replaced = parse_exposition(http_get(std::stoi(port[1].str()), "/metrics").body);
    if (replaced.value("troupe_failures_total", {{"kind", "node_lost"}}) == 1) break;
  }
  CHECK(replaced.value("troupe_recoveries_total", {{"source", "replica"}, {"path", "in_place"}}) == 3);
  CHECK(replaced.value("troupe_failures_total", {{"kind", "worker_exception"}}) == 2);
  CHECK(replaced.value("troupe_failures_total", {{"kind", "node_lost"}}) == 1);
  CHECK(replaced.value("troupe_restarts_total") == 0);
  REQUIRE(job.run->wait_for_line(matching("recovery: in place done .*node 1's process started again"), seconds(60),
                                 before_replacement));
}

TEST_CASE("troupe shell -c runs one command: a wrong token, garbage and a huge frame are refused, then drain",
          "[shell][dp]") {
  TempDir dir;
  LiveJob job(dir, 120);
  const pid_t job_pid = job.run->pid();

  const ProcessResult status = shell_c(dir, job, "status");
  INFO("stderr: " << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Contains("grid      2 ranks") && Contains("tokens/s"));

  const ProcessResult loss = shell_c(dir, job, "loss");
  CHECK(loss.exit_code == 0);
  CHECK_THAT(loss.out, Contains("min ") && Contains("max ") && Contains("▁"));

  const ProcessResult experts = shell_c(dir, job, "experts");  // tiny has none
  CHECK(experts.exit_code == 0);
  CHECK_THAT(experts.out, Contains("experts: no step with experts reported yet"));

  // Each node's memory by kind from its heartbeats: tiny's 0.84M f32 parameters are 3.2 MiB on
  // both data-parallel replicas, ZeRO-3's gathered copies none, and the total about the resident set.
  const ProcessResult memory = shell_c(dir, job, "memory");
  INFO("memory: " << memory.out << memory.err);
  CHECK(memory.exit_code == 0);
  for (const char* node : {"node 0 (rank 0): resident ", "node 1 (rank 1): resident "})
    CHECK_THAT(memory.out, Contains(node));
  const std::regex parameters("\\n  host +parameters +3\\.2 +3\\.2\\n");
  CHECK(std::distance(std::sregex_iterator(memory.out.begin(), memory.out.end(), parameters), std::sregex_iterator()) == 2);
  CHECK(std::regex_search(memory.out, std::regex("\\n  host +gathered_parameters +0\\.0 +0\\.0\\n")));
  std::smatch totals;
  REQUIRE(std::regex_search(memory.out, totals,
                            std::regex("resident ([0-9.]+) MiB, peak resident ([0-9.]+) MiB\\n(?:.*\\n)*?  host +total +([0-9.]+) +([0-9.]+)")));
  CHECK(std::stod(totals[3].str()) > 0.8 * std::stod(totals[1].str()));
  CHECK(std::stod(totals[4].str()) <= 1.02 * std::stod(totals[2].str()));

  // top through a pipe (stdin and stdout): the table is appended, without the terminal's clear
  // sequence; the end of input ends top and the shell.
  const ProcessResult piped = shell_piped(dir, job, "top");
  INFO("piped top: " << piped.out << piped.err);
  CHECK(piped.exit_code == 0);
  CHECK_THAT(piped.out, Contains("rank  node") && Contains("press any key to return"));
  CHECK(piped.out.find("\x1b[2J") == std::string::npos);

  const ProcessResult trace = shell_c(dir, job, "trace t.json 2");
  CHECK(trace.exit_code == 0);
  CHECK_THAT(trace.out, Contains("written to " + dir.file("t.json")));
  CHECK_THAT(file_text(dir.file("t.json")), Contains("\"traceEvents\"") && Contains("\"rank 1\""));

  const ProcessResult log = shell_c(dir, job, "log debug comm");
  INFO("stderr: " << log.err);
  CHECK(log.exit_code == 0);
  CHECK(log.out == "log level debug for comm in the job process and 2 node process(es)\n");
  const ProcessResult bad_level = shell_c(dir, job, "log loud");
  CHECK(bad_level.exit_code == 1);
  CHECK_THAT(bad_level.err, Contains("log: ") && Contains("loud"));

  // A selection of ranks: node 1's row alone, through a pipe for top; a rank the job lacks is one line.
  const ProcessResult node_workers = shell_c(dir, job, "workers node 1");
  INFO("workers node 1: " << node_workers.out << node_workers.err);
  CHECK(node_workers.exit_code == 0);
  CHECK(std::regex_search(node_workers.out, std::regex("activity\n1 +1 +1 +0 +0 +[0-9]+  .*\n$")));
  const ProcessResult node_top = shell_piped(dir, job, "top 0");
  INFO("piped top 0: " << node_top.out << node_top.err);
  CHECK(node_top.exit_code == 0);
  CHECK(std::regex_search(node_top.out, std::regex("activity\n0 +0 +[0-9]+ .*\n\n\\(press any key")));
  const ProcessResult no_rank = shell_c(dir, job, "workers 1-2");
  CHECK(no_rank.exit_code == 1);
  CHECK(no_rank.err == "troupe: error: workers: no rank 2: the job's are ranks 0 and 1\n");

  const ProcessResult bad = shell_c(dir, job, "kill worker 7");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == "troupe: error: kill worker: RANK must be 0 to 1, not '7'\n");
  CHECK(shell_c(dir, job, "frobnicate").err == "troupe: error: unknown command 'frobnicate'; `help` lists the commands\n");

  // A wrong token from a file, and none at all from a CAF client of our own: refused and logged.
  const std::string wrong = dir.write("wrong.token", "0123456789abcdef0123456789abcdef\n");
  const ProcessResult refused = shell_c(dir, job, "pause", {"--token-file", wrong});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err == "troupe: error: refused: wrong job token\n");
  {
    troupe::actors::TroupeConfig cfg;
    caf::actor_system system{cfg};
    auto monitor = system.middleman().remote_actor("127.0.0.1", static_cast<std::uint16_t>(job.control_port));
    REQUIRE(monitor);
    caf::scoped_actor self{system};
    troupe::actors::shell_reply_msg answer;
    self->request(*monitor, seconds(10), troupe::actors::shell_atom_v, troupe::actors::shell_request_msg{"", "pause"})
        .receive([&](troupe::actors::shell_reply_msg& r) { answer = r; }, [&](caf::error& e) { FAIL(to_string(e)); });
    CHECK(!answer.ok);
    CHECK(answer.text == "refused: no job token (give --token-file or TROUPE_TOKEN)");
    self->request(*monitor, seconds(10), troupe::actors::shell_atom_v,
                  troupe::actors::shell_request_msg{file_text(job.token_file).substr(0, 32), std::string(100000, 'x')})
        .receive([&](troupe::actors::shell_reply_msg& r) { answer = r; }, [&](caf::error& e) { FAIL(to_string(e)); });
    CHECK(answer.text == "refused: the request is longer than 4096 bytes");
  }

  // Garbage on both ports, then BASP headers that announce a 4 GiB payload.
  const long before = resident_kib(job_pid);
  std::string garbage(65536, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7919 % 251);
  for (int port : {job.control_port, job.job_port}) {
    send_raw(port, garbage);
    for (unsigned char operation = 0; operation < 8; ++operation) {
      std::string header(32, '\0');
      header[0] = static_cast<char>(operation);
      header[4] = header[5] = header[6] = '\xff';
      header[7] = '\xf0';
      send_raw(port, header);
    }
  }
  const long grown_mib = (resident_kib(job_pid) - before) / 1024;
  INFO("the job process grew by " << grown_mib << " MiB");
  CHECK(grown_mib < 64);

  CHECK(shell_c(dir, job, "status").exit_code == 0);  // still answering

  // Drain: a checkpoint, then the job goes on without node 1 (one replica, the same global batch).
  const ProcessResult drain = shell_c(dir, job, "drain node 1");
  INFO("stderr: " << drain.err);
  CHECK(drain.exit_code == 0);
  CHECK_THAT(drain.out, Contains("checkpoint after step") && Contains("the job restarts without node 1"));
  const auto exit_code = job.run->wait_exit(seconds(120));
  INFO(job.log());
  REQUIRE(exit_code);
  CHECK(*exit_code == 0);
  CHECK_THAT(job.log(), Contains("shell request from") && Contains("refused: wrong job token") &&
                            Contains("refused: no job token") && Contains("refused: 100032 bytes") &&
                            Contains("control port: refused") && Contains("job port: refused") &&
                            Contains("restarting every node without node 1"));
}

TEST_CASE("troupe shell refuses a bad address and says when no job answers", "[shell][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"shell", "nowhere"}, "'nowhere' is not HOST:PORT");
  const ProcessResult r =
      run_process({"/usr/bin/env", "TROUPE_TOKEN=x", TROUPE_BINARY_DIR "/troupe", "shell", "127.0.0.1:1", "-c", "status"},
                  dir.path().string(), seconds(20));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("troupe: error: cannot reach the job at 127.0.0.1:1: "));
}

TEST_CASE("troupe shell gives up with one line on a listener that accepts and never answers", "[shell][cli]") {
  TempDir dir;
  BusyPort silent;
  const std::string address = "127.0.0.1:" + std::to_string(silent.port());
  const auto start = Clock::now();
  const ProcessResult r = run_process(
      {"/usr/bin/env", "TROUPE_TOKEN=x", TROUPE_BINARY_DIR "/troupe", "shell", address, "-c", "status"},
      dir.path().string(), seconds(30));
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  INFO("the shell gave up after " << took << " s");
  CHECK(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK(r.err == "troupe: error: the job at " + address + " did not answer within 5 s (connected, but no handshake came)\n");
  CHECK(took < 15);
}

TEST_CASE(
    "with 1000 idle or slow connections held against every port of a job at 1024 descriptors, the shell and the web "
    "page are answered within 2 s",
    "[shell][dp]") {
  // This process holds 1000 connections per port: its own soft limit goes up to its hard limit (never down).
  rlimit own{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &own) == 0);
  own.rlim_cur = own.rlim_max;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &own) == 0);
  REQUIRE(own.rlim_cur >= 6000);

  TempDir dir;
  LiveJob job(dir, 100000, {"/usr/bin/prlimit", "--nofile=1024:1024"});
  std::vector<int> metrics_ports;
  int web_port = 0;
  for (const auto& line : job.run->lines()) {
    std::smatch m;
    if (std::regex_search(line.text, m, std::regex("metrics on http://127\\.0\\.0\\.1:(\\d+)/metrics")))
      metrics_ports.push_back(std::stoi(m[1].str()));
    if (std::regex_search(line.text, m, std::regex("web page: http://127\\.0\\.0\\.1:(\\d+)/")))
      web_port = std::stoi(m[1].str());
  }
  REQUIRE(metrics_ports.size() >= 2);
  REQUIRE(web_port > 0);
  const std::string token = file_text(job.token_file).substr(0, 32);

  std::string partial_frame(16, '\0');  // half a BASP client handshake header
  partial_frame[0] = '\x01';
  std::vector<TcpClient> held;
  auto hold = [&](int port, const std::string& slow_bytes) {
    for (int i = 0; i < 1000; ++i) {
      held.emplace_back(port);
      REQUIRE(held.back().connected());
      if (i % 2) held.back().send(slow_bytes);
    }
  };
  hold(job.job_port, partial_frame);
  hold(job.control_port, partial_frame);
  for (int port : metrics_ports) hold(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  hold(web_port, "GET /data?token=" + token + " HTTP/1.1\r\nHost: x\r\n");
  const std::size_t held_from = job.run->lines().size();

  for (int port : {job.control_port, job.job_port}) {
    const auto start = Clock::now();
    TcpClient probe(port);
    const bool answered = probe.receive(1, seconds(2));
    INFO("port " << port << " answered a new connection in "
                 << std::chrono::duration<double>(Clock::now() - start).count() << " s");
    CHECK(answered);
  }
  const auto start = Clock::now();
  const ProcessResult status = shell_c(dir, job, "status");
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  INFO("troupe shell -c status took " << took << " s; stderr: " << status.err);
  CHECK(status.exit_code == 0);
  CHECK(took < 2);
  for (int port : metrics_ports) {
    const HttpResponse scrape = http_get(port, "/metrics", 2);
    INFO("metrics port " << port << ": " << scrape.error);
    CHECK(scrape.status == 200);
  }
  const HttpResponse data = http_get(web_port, "/data?token=" + token, 2);
  INFO("web port " << web_port << ": " << data.error);
  CHECK(data.status == 200);
  CHECK(http_get(web_port, "/data?token=" + std::string(32, 'f'), 2).status == 401);

  const pid_t job_pid = job.run->pid();
  const double cpu_before = cpu_seconds(job_pid);
  std::this_thread::sleep_for(seconds(2));
  const double cpu_used = cpu_seconds(job_pid) - cpu_before;
  const int descriptors = open_descriptors(job_pid);
  INFO("the job process: " << cpu_used << " s of CPU in 2 s, " << descriptors << " descriptors open");
  CHECK(cpu_used < 1);
  CHECK(descriptors < 1024);
  CHECK(job.run->wait_for_line(matching("step +\\d+/"), seconds(30), held_from));  // training goes on

  held.clear();
  const std::size_t released_at = job.run->lines().size();
  CHECK(shell_c(dir, job, "status").exit_code == 0);
  CHECK(job.run->wait_for_line(matching("step +\\d+/"), seconds(30), released_at));
}

TEST_CASE(
    "troupe shell -c experts answers each MoE block's load per expert from a live moe-tiny job with expert shards",
    "[shell][moe]") {
  TempDir dir;
  LiveJob job(
      dir, 100000, {}, {"train", "--workers", "2"},
      {"--model.preset", "moe-tiny", "--expert.shards", "2", "--train.batch_size", "2", "--train.seq_len", "64"});
  const ProcessResult experts = shell_showing(dir, job, "experts", "over 2 rank(s)' tokens");
  INFO("stdout: " << experts.out << "\nstderr: " << experts.err);
  REQUIRE(experts.exit_code == 0);
  CHECK(std::regex_search(experts.out, std::regex("experts at steps? [0-9-]+ over 2 rank\\(s\\)' tokens")));
  // moe-tiny's 2 MoE blocks of 4 experts, top-2: each block 2 ranks x 2 x 64 tokens x 2 slots.
  for (const char* block : {"\n    0       512 ", "\n    1       512 "}) CHECK_THAT(experts.out, Contains(block));
  std::smatch row;
  REQUIRE(std::regex_search(experts.out, row,
                            std::regex("\n +0 +512 +([0-9.]+) +([0-9.]+)% +([0-9.]+)% +([0-9.]+)% +([0-9.]+)%")));
  const double shares =
      std::stod(row[2].str()) + std::stod(row[3].str()) + std::stod(row[4].str()) + std::stod(row[5].str());
  CHECK(shares == Approx(100).margin(0.3));
  CHECK(std::stod(row[1].str()) >= 1.0);
  CHECK(std::stod(row[1].str()) <= 4.0);
}

TEST_CASE("troupe shell -c status shows a live DiLoCo job's islands, outer syncs, their bytes and the next sync",
          "[shell][diloco]") {
  TempDir dir;
  LiveJob job(dir, 100000, {}, {"train", "--workers", "2"},
              {"--train.sync", "diloco", "--train.islands", "2", "--train.diloco_steps", "4"});
  const ProcessResult status = status_showing(dir, job, "outer sync(s), the last");
  INFO("stdout: " << status.out << "\nstderr: " << status.err);
  REQUIRE(status.exit_code == 0);
  std::smatch line;
  REQUIRE(std::regex_search(
      status.out, line,
      std::regex("\ndiloco    2 island\\(s\\) present; ([0-9]+) outer sync\\(s\\), the last ([0-9.]+) MB sent by each "
                 "rank; next after step ([0-9]+)\n")));
  CHECK(std::stol(line[1].str()) >= 1);
  CHECK(std::stol(line[3].str()) % 4 == 0);  // H 4, one fragment
  // The bytes are those the job's log gives for every sync.
  const std::string log = job.log();
  std::smatch logged;
  REQUIRE(std::regex_search(log, logged,
                            std::regex("diloco: outer step 1 after step 4: .* ([0-9.]+) MB sent by each rank")));
  CHECK(logged[1].str() == line[2].str());
}
