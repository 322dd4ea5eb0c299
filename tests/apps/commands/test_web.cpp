// The job's web page against a live 2-node job (docs/web.md): the page, its data and the job's
// own /metrics are served to the job's token and to nothing else; a thousand idle and half-sent
// connections to it stall neither the job nor the page; the data shows every rank
// training with its heartbeat, the curves with the validation loss and each node's memory; while
// a recovery after `kill node 1` is held up (node 0 stopped), rank 1 shows recovering, live;
// after it the timeline shows the failure and the in-place recovery (path, seconds, bytes) and
// /metrics counts it. A slow case loads the page in headless Chromium and reads the same from its
// DOM, the held recovery included.

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/live_job.hpp"
#include "apps/run_troupe.hpp"
#include "support/metrics_scrape.hpp"
#include "support/run_process.hpp"
#include "support/tcp_client.hpp"
#include "support/temp_dir.hpp"
#include "support/tensorboard_reader.hpp"

using namespace troupe::test;
using Catch::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::seconds;

namespace {

struct JobPage {
  int port = 0;
  std::string token;
};

JobPage page_of(const LiveJob& job) {
  JobPage page;
  page.token = file_text(job.token_file).substr(0, 32);
  for (const auto& line : job.run->lines()) {
    std::smatch m;
    if (std::regex_search(line.text, m, std::regex("web page: http://127\\.0\\.0\\.1:(\\d+)/")))
      page.port = std::stoi(m[1].str());
  }
  REQUIRE(page.port > 0);
  return page;
}

nlohmann::json data_of(const JobPage& page) {
  const HttpResponse r = http_get(page.port, "/data?token=" + page.token);
  INFO(r.error);
  REQUIRE(r.status == 200);
  return nlohmann::json::parse(r.body);
}

// The page's data once `ready` holds of it, or after `wait`.
template <class Ready>
nlohmann::json data_when(const JobPage& page, Ready ready, seconds wait) {
  nlohmann::json d = data_of(page);
  for (const auto deadline = Clock::now() + wait; !ready(d) && Clock::now() < deadline; d = data_of(page))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return d;
}

std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(entry.path());
  return files;
}

// Every event file of a run folder, bytes end to end (tags and texts are stored as they are).
std::string event_files_text(const std::filesystem::path& dir) {
  std::string text;
  for (const auto& file : event_files(dir)) text += file_text(file);
  return text;
}

bool has_event(const nlohmann::json& d, const std::string& kind) {
  for (const auto& e : d["timeline"])
    if (e["kind"] == kind) return true;
  return false;
}

bool validated(const nlohmann::json& d) {
  for (const auto& point : d["curve"])
    if (point["val_loss"].is_number()) return true;
  return false;
}

// Whether training resumed after the newest failure on the timeline (a job may also have been
// restarted before: a node that failed to start).
bool resumed_since_failure(const nlohmann::json& d) {
  double failed = -1;
  for (const auto& e : d["timeline"])
    if (e["kind"] == "failure_detected") failed = e["unix_seconds"].get<double>();
  for (const auto& e : d["timeline"])
    if (e["kind"] == "training_resumed" && e["unix_seconds"].get<double>() >= failed) return true;
  return false;
}

std::string state_of(const nlohmann::json& d, int rank) { return d["ranks"]["tiles"][rank]["state"]; }

// A node's process stopped (SIGSTOP) until this goes away (SIGCONT): a recovery of the job waits
// for its ranks, so the lost node's ranks stay recovering meanwhile.
class HeldNode {
 public:
  HeldNode(const LiveJob& job, int node) {
    const std::vector<std::string> pids = joined_pids(job.log(), node);
    REQUIRE(!pids.empty());
    pid_ = std::stoi(pids.back());
    REQUIRE(::kill(pid_, SIGSTOP) == 0);
  }
  HeldNode(const HeldNode&) = delete;
  ~HeldNode() { release(); }
  void release() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

// `kill node 1` with node 0 held: the page's data once rank 1 shows recovering (or after 20 s).
nlohmann::json kill_node_1_held(const TempDir& dir, const LiveJob& job, const JobPage& page) {
  REQUIRE(shell_c(dir, job, "kill node 1").exit_code == 0);
  return data_when(
      page, [](const nlohmann::json& d) { return state_of(d, 1) == "recovering"; }, seconds(20));
}

// The job's extra keys here: validation every 5 steps; node 0 may be held for a while unnoticed.
const std::vector<std::string> web_job_keys{"--train.val_every", "5", "--fault.heartbeat_timeout", "60"};

// Ranks that train: finishing steps, waiting for a message, or named the one the others wait for
// (a respawned rank often is, while it catches up).
int training(const nlohmann::json& d) {
  const auto& states = d["ranks"]["states"];
  return states["training"].get<int>() + states["waiting"].get<int>() + states["straggling"].get<int>();
}

}  // namespace

TEST_CASE("a 2-node job serves its page, data and /metrics to its token only, and a killed node's recovery shows",
          "[web][dp]") {
  TempDir dir;
  LiveJob job(dir, 100000, {}, {"train", "--workers", "2", "--monitor.tensorboard_dir", dir.file("tb")}, web_job_keys);
  const JobPage page = page_of(job);

  for (const std::string& target : {std::string("/"), std::string("/data"), std::string("/metrics"),
                                    "/data?token=" + std::string(32, '0'), "/?token=" + page.token.substr(1)}) {
    const HttpResponse refused = http_get(page.port, target);
    INFO(target);
    CHECK(refused.status == 401);
    CHECK(refused.body == "401 unauthorized\n");
  }
  const HttpResponse html = http_get(page.port, "/?token=" + page.token);
  REQUIRE(html.status == 200);
  CHECK_THAT(html.body,
             Contains("<canvas id=\"chart-loss\"") && Contains("id=\"grid\"") && Contains("id=\"timeline\""));

  nlohmann::json d = data_when(
      page, [](const nlohmann::json& d) { return training(d) == 2 && d["curve"].size() > 2 && validated(d); },
      seconds(30));
  INFO(d.dump(1));
  CHECK(d["ranks"]["total"] == 2);
  CHECK(training(d) == 2);
  REQUIRE(d["ranks"]["tiles"].size() == 2);
  for (const auto& tile : d["ranks"]["tiles"]) {
    CHECK(tile["heard_seconds_ago"].get<double>() >= 0);
    CHECK(tile["heard_seconds_ago"].get<double>() < 5);
  }
  CHECK(d["job"]["grid"][0] == nlohmann::json({{"name", "dp"}, {"size", 2}}));
  CHECK(d["job"]["step"].get<int>() > 0);
  const auto& last = d["curve"].back();
  CHECK(last["loss"].get<double>() > 0);
  CHECK(last["lr"].get<double>() > 0);
  CHECK(last["grad_norm"].get<double>() > 0);
  CHECK(last["tokens_per_second"].get<double>() > 0);
  // The validation loss rides on the step it followed: every 5th step has one, the others none.
  for (const auto& point : d["curve"]) {
    INFO("step " << point["step"]);
    CHECK(point["val_loss"].is_number() == (point["step"].get<int>() % 5 == 0));
    if (point["val_loss"].is_number()) CHECK(point["val_loss"].get<double>() > 0);
  }
  REQUIRE(d["memory"].size() == 2);
  bool parameters = false;
  for (const auto& kind : d["memory"][1]["kinds"]) parameters |= kind["kind"] == "parameters" && kind["bytes"] > 0;
  CHECK(parameters);

  const HttpResponse metrics = http_get(page.port, "/metrics?token=" + page.token);
  REQUIRE(metrics.status == 200);
  const Exposition e = parse_exposition(metrics.body);
  INFO(metrics.body);
  CHECK(e.problems.empty());
  CHECK(e.value("troupe_job_ranks", {{"state", "lost"}}) == 0);
  CHECK(e.value("troupe_job_step") > 0);
  CHECK(e.value("troupe_job_seconds_since_checkpoint") == -1);

  {
    // A thousand connections to the page's port, half of them a request never finished: the job
    // trains on and its page still answers.
    std::vector<TcpClient> clients;
    for (int i = 0; i < 1000; ++i) {
      clients.emplace_back(page.port);
      if (i % 2) clients.back().send("GET /data?token=" + page.token + " HTTP/1.1\r\n");
    }
    const int step = data_of(page)["job"]["step"].get<int>();
    const nlohmann::json trained = data_when(
        page, [step](const nlohmann::json& d) { return d["job"]["step"].get<int>() >= step + 3; }, seconds(60));
    CHECK(trained["job"]["step"].get<int>() >= step + 3);
  }

  {
    HeldNode held(job, 0);
    const nlohmann::json during = kill_node_1_held(dir, job, page);
    std::this_thread::sleep_for(seconds(1));
    const nlohmann::json later = data_of(page);
    const Exposition series = parse_exposition(http_get(page.port, "/metrics?token=" + page.token).body);
    held.release();
    INFO(during.dump(1));
    CHECK(state_of(during, 1) == "recovering");
    CHECK(during["ranks"]["states"]["recovering"] == 1);
    CHECK((has_event(during, "failure_detected") && has_event(during, "recovery_chosen")));
    CHECK_FALSE(resumed_since_failure(during));
    CHECK(state_of(later, 1) == "recovering");  // for as long as the recovery lasts
    CHECK(series.value("troupe_job_ranks", {{"state", "recovering"}}) == 1);
  }
  d = data_when(
      page, [](const nlohmann::json& d) { return resumed_since_failure(d) && training(d) == 2; }, seconds(90));
  INFO(d.dump(1));
  CHECK(has_event(d, "failure_detected"));
  CHECK(has_event(d, "recovery_chosen"));
  CHECK(training(d) == 2);
  bool moved = false, resumed = false;
  for (const auto& entry : d["timeline"]) {
    if (entry["kind"] == "state_moved")
      moved = entry["bytes"].get<long>() > 0 && !entry["route"].get<std::string>().empty();
    if (entry["kind"] == "training_resumed") resumed = entry["seconds"].get<double>() > 0;
  }
  CHECK(moved);
  CHECK(resumed);
  CHECK(d["job"]["recoveries_by_path"]["in_place_from_replica"] == 1);
  CHECK(d["ranks"]["tiles"][0]["recoveries"] == 0);
  CHECK(d["ranks"]["tiles"][1]["recoveries"] == 1);  // node 1's rank was lost and came back
  const Exposition after = parse_exposition(http_get(page.port, "/metrics?token=" + page.token).body);
  CHECK(after.value("troupe_job_recoveries_total", {{"path", "in_place_from_replica"}}) == 1);

  // TensorBoard: the job's run holds the failure and the recovery as text; node 1's new process
  // started a second file for rank 1, beside the first.
  CHECK_THAT(event_files_text(dir.path() / "tb" / "job"), Contains("failure_detected") && Contains("training_resumed"));
  CHECK(event_files(dir.path() / "tb" / "rank-1").size() == 2);
  CHECK_THAT(event_files_text(dir.path() / "tb" / "rank-0"), Contains("train/loss") && Contains("rank/step_seconds"));
}

TEST_CASE("troupe train writes TensorBoard's scalars, which TensorBoard's own reader reads", "[web][tensorboard]") {
  TempDir dir;
  const ProcessResult run = run_troupe(
      dir, {"train", "--model.preset", "tiny", "--train.steps", "6", "--train.val_every", "3", "--train.val_batches",
            "1", "--sample.tokens", "0", "--train.threads", "1", "--monitor.tensorboard_dir", dir.file("tb")});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  const std::string text = event_files_text(dir.path() / "tb" / "rank-0");
  for (const char* tag : {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_second", "train/mfu",
                          "val/loss", "rank/step_seconds"})
    CHECK_THAT(text, Contains(tag));
  const auto read = read_with_tensorboard(TROUPE_SOURCE_DIR "/scripts/reference/tensorboard_read.py",
                                          dir.file("tb/rank-0"), Catch::getResultCapture().getCurrentTestName());
  if (!read) return;
  INFO(read->out << read->err);
  REQUIRE(read->exit_code == 0);
  for (int step = 1; step <= 6; ++step)
    CHECK_THAT(read->out, Contains("scalar train/loss " + std::to_string(step) + " "));
  CHECK_THAT(read->out, Contains("scalar val/loss 3 ") && Contains("scalar val/loss 6 "));
}

TEST_CASE("a bad web port and a TensorBoard folder that cannot be made are refused with one line", "[web][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--monitor.web_port", "-2"},
                    "monitor.web_port must be -1 (off), 0 (any free port) or a port up to 65535, got -2");
  const std::string blocker = dir.write("file", "not a folder");
  const ProcessResult r = run_troupe(dir, {"train", "--model.preset", "tiny", "--train.steps", "1", "--sample.tokens",
                                           "0", "--monitor.tensorboard_dir", blocker + "/tb"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("monitor.tensorboard_dir: cannot create the folder '" + blocker + "/tb/rank-0'"));
}

TEST_CASE("headless Chromium shows the killed node's rank recovering, then recovered, and the recovery on the timeline",
          "[web][dp][slow]") {
  const std::string chromium = "/usr/bin/chromium";
  if (!std::filesystem::exists(chromium)) {
    std::printf("SKIPPED (needs Debian's chromium: apt-get install chromium): %s not found\n", chromium.c_str());
    WARN("SKIPPED (needs Debian's chromium: apt-get install chromium): " << chromium << " not found");
    return;
  }
  TempDir dir;
  LiveJob job(dir, 100000, {}, {"train", "--workers", "2"}, web_job_keys);
  const JobPage page = page_of(job);
  const std::string url = "http://127.0.0.1:" + std::to_string(page.port) + "/?token=" + page.token;
  const std::vector<std::string> headless{
      chromium, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1100", "--virtual-time-budget=5000"};
  std::vector<std::string> dump = headless;
  dump.insert(dump.end(), {"--dump-dom", url});
  auto screenshot_to = [&](const std::string& png) {
    std::vector<std::string> shot = headless;
    shot.insert(shot.end(), {"--screenshot=" + png, url});
    return shot;
  };

  // Live: with node 0 held, the recovery from `kill node 1` waits, and the page shows rank 1
  // recovering while it does.
  {
    HeldNode held(job, 0);
    REQUIRE(state_of(kill_node_1_held(dir, job, page), 1) == "recovering");
    const ProcessResult during = run_process(dump, dir.path().string(), seconds(120));
    const ProcessResult during_shot =
        run_process(screenshot_to(TROUPE_BINARY_DIR "/web-during-recovery.png"), dir.path().string(), seconds(120));
    const nlohmann::json still = data_of(page);
    held.release();
    CHECK(during_shot.exit_code == 0);
    CHECK(file_text(TROUPE_BINARY_DIR "/web-during-recovery.png").substr(1, 3) == "PNG");
    INFO(during.err);
    REQUIRE(during.exit_code == 0);
    REQUIRE(state_of(still, 1) == "recovering");  // the recovery was still held when the page was read
    std::smatch tile;
    INFO(during.out);
    REQUIRE(std::regex_search(during.out, tile, std::regex("<div [^>]*id=\"rank-1\"[^>]*>")));
    CHECK_THAT(tile.str(), Contains("data-state=\"recovering\""));
    CHECK_THAT(during.out, Contains("<tr data-kind=\"recovery_chosen\">"));
    CHECK_FALSE(resumed_since_failure(still));
    CHECK(std::regex_search(during.out, std::regex("<span id=\"val-loss\">val loss [0-9.]+ \\(step [0-9]+\\)</span>")));
  }
  const nlohmann::json d = data_when(
      page, [](const nlohmann::json& d) { return resumed_since_failure(d) && training(d) == 2; }, seconds(90));
  REQUIRE(resumed_since_failure(d));

  const ProcessResult dom = run_process(dump, dir.path().string(), seconds(120));
  INFO(dom.err);
  REQUIRE(dom.exit_code == 0);
  INFO(dom.out);
  CHECK_THAT(dom.out, Contains("<tr data-kind=\"failure_detected\">") &&
                          Contains("<tr data-kind=\"recovery_chosen\">") &&
                          Contains("<tr data-kind=\"training_resumed\">") && Contains("in_place_from_replica"));
  std::smatch tile;
  REQUIRE(std::regex_search(dom.out, tile, std::regex("<div [^>]*id=\"rank-1\"[^>]*>")));
  CHECK_THAT(tile.str(), (Contains("data-state=\"training\"") || Contains("data-state=\"straggling\"") ||
                          Contains("data-state=\"waiting\"")) &&
                             Contains("data-recoveries=\"1\""));
  CHECK_THAT(dom.out, Contains("<div id=\"error\"></div>"));  // every poll of the data endpoint was answered

  // The screenshots docs/web.md shows (docs/img/web-during-recovery.png and
  // web-after-node-kill.png are such, copied by hand).
  const std::string png = TROUPE_BINARY_DIR "/web-after-node-kill.png";
  const ProcessResult screenshot = run_process(screenshot_to(png), dir.path().string(), seconds(120));
  INFO(screenshot.err);
  CHECK(screenshot.exit_code == 0);
  CHECK(file_text(png).substr(1, 3) == "PNG");
}
