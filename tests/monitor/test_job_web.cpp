// The job's web page server (monitor/job_web.hpp, docs/protocols/web.md): only the job's token
// opens it, in the URL or a Bearer header, and anything else gets 401 and nothing more; the data
// endpoint pages a 1,024-rank grid; the job's /metrics parses as the text format; idle and slow
// clients by the thousand do not keep it from answering.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/job_page_data.hpp"
#include "monitor/job_web.hpp"
#include "support/metrics_scrape.hpp"
#include "support/page_render.hpp"
#include "support/run_process.hpp"
#include "support/tcp_client.hpp"

using namespace troupe::monitor;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

const std::string token = "0123456789abcdef0123456789abcdef";

// A job of `ranks` ranks, dp × tp × pp = ranks × 1 × 1, with every state present.
JobSnapshot snapshot_of(int ranks) {
  JobSnapshot s;
  s.axes = {{"dp", ranks}, {"pp", 1}, {"tp", 1}};
  s.step = 42;
  s.total_steps = 100;
  s.loss = 3.5;
  s.tokens_per_second = 1234;
  s.attempt = 1;
  s.last_checkpoint_unix_seconds = 1000;
  s.recoveries_by_path = {{"in_place_from_replica", 2}};
  for (int r = 0; r < ranks; ++r) {
    RankTile t;
    t.rank = r;
    t.node = r / 8;
    t.at = {r, 0, 0};
    t.state = rank_states[r % std::size(rank_states)];
    t.waiting_for = t.state == RankState::waiting ? "grad bucket 3 from rank 1" : "";
    t.heard_seconds_ago = 0.25;
    s.ranks.push_back(t);
  }
  for (int step = 1; step <= 42; ++step)
    s.curve.push_back({step, 5.0 - step * 0.03, 3e-4, 1.5, 1234, step % 10 == 0 ? std::optional(4.0) : std::nullopt});
  s.timeline.push_back({990, 1, "failure_detected", "", 0, 0, "failure_detected kind=node_exit nodes=[1]"});
  s.timeline.push_back({995, 1, "training_resumed", "in_place_from_replica", 1.5, 4096, "training_resumed ..."});
  s.memory.push_back({0, "localhost", {{"host", "parameters", 1 << 20, 1 << 20}}, 5 << 20});
  return s;
}

std::unique_ptr<JobWeb> serve_job(int ranks) {
  auto web = JobWeb::serve("127.0.0.1", 0, token);
  REQUIRE(web);
  (*web)->publish(snapshot_of(ranks));
  return std::move(*web);
}

std::string head_with(const std::string& target, const std::string& header) {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + header + "\r\n\r\n";
}

}  // namespace

TEST_CASE("the web page, its data and the job's metrics need the job's token: anything else is 401 and nothing more",
          "[web]") {
  auto web = serve_job(4);
  for (const std::string path : {"/", "/data", "/metrics", "/nowhere"}) {
    for (const std::string& target : {path, path + "?token=", path + "?token=wrong", path + "?token=" + token + "x",
                                      path + "?page=1&token=" + token.substr(1)}) {
      const HttpReply reply = web->answer(target, head_with(target, ""));
      INFO(target);
      CHECK(reply.status == "401 Unauthorized");
      CHECK(reply.body == "401 unauthorized\n");
    }
    for (const std::string& header :
         {std::string("Authorization: Bearer wrong"), "Authorization: " + token, "X-Token: " + token}) {
      const HttpReply reply = web->answer(path, head_with(path, header));
      INFO(path << " with " << header);
      CHECK(reply.status == "401 Unauthorized");
    }
  }
  // Over the wire as well: the status line says 401 and the body holds nothing of the job.
  const HttpResponse refused = http_get(web->port(), "/data?token=nope");
  CHECK(refused.status == 401);
  CHECK(refused.body == "401 unauthorized\n");

  CHECK(web->answer("/?token=" + token, "").status == "200 OK");
  CHECK(web->answer("/data", head_with("/data", "authorization: Bearer " + token)).status == "200 OK");
  CHECK(web->answer("/nowhere?token=" + token, "").status == "404 Not Found");
  const HttpResponse page = http_get(web->port(), "/?token=" + token);
  REQUIRE(page.status == 200);
  CHECK_THAT(page.body, Catch::Contains("<canvas id=\"chart-loss\""));
  CHECK_THAT(page.body, Catch::Contains("id=\"grid\""));
  CHECK_THAT(page.body, Catch::Contains("id=\"timeline\""));
  // Self-contained: nothing is loaded from another address.
  CHECK_THAT(page.body, !Catch::Contains("src=\"http") && !Catch::Contains("href=\"http"));
  CHECK(web->url() == "http://127.0.0.1:" + std::to_string(web->port()) + "/?token=" + token);
}

TEST_CASE("the data endpoint pages a 1,024-rank grid and counts every rank by state", "[web]") {
  auto web = serve_job(1024);
  std::set<int> seen;
  for (int page = 0; page < 4; ++page) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResponse r = http_get(web->port(), "/data?page=" + std::to_string(page) + "&per_page=256&token=" + token);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    REQUIRE(r.status == 200);
    const nlohmann::json d = nlohmann::json::parse(r.body);
    INFO("page " << page << " took " << seconds << " s");
    CHECK(d["ranks"]["total"] == 1024);
    CHECK(d["ranks"]["pages"] == 4);
    CHECK(d["ranks"]["page"] == page);
    REQUIRE(d["ranks"]["tiles"].size() == 256);
    CHECK(d["ranks"]["tiles"][0]["rank"] == page * 256);
    for (const auto& tile : d["ranks"]["tiles"]) seen.insert(tile["rank"].get<int>());
    int counted = 0;
    for (const auto& [state, count] : d["ranks"]["states"].items()) counted += count.get<int>();
    CHECK(counted == 1024);
    CHECK(d["ranks"]["states"]["lost"] == 1024 / 7 + (1024 % 7 > 4 ? 1 : 0));
    CHECK(d["curve"].size() == 42);
    CHECK(d["curve"][9]["val_loss"] == 4.0);
    CHECK(d["curve"][10]["val_loss"].is_null());
    CHECK(d["job"]["grid"] == nlohmann::json::parse(R"([{"name": "dp", "size": 1024}, {"name": "pp", "size": 1},
                                                         {"name": "tp", "size": 1}])"));
    CHECK(d["ranks"]["tiles"][3]["at"] == nlohmann::json::array({page * 256 + 3, 0, 0}));
    CHECK(d["timeline"][1]["route"] == "in_place_from_replica");
    CHECK(d["timeline"][1]["bytes"] == 4096);
  }
  CHECK(seen.size() == 1024);
  const nlohmann::json past = page_data(snapshot_of(1024), 4, 256);
  CHECK(past["ranks"]["tiles"].empty());
  // The page size is held to 1 … max_tiles_per_page.
  CHECK(page_data(snapshot_of(1024), 0, 100000)["ranks"]["tiles"].size() == max_tiles_per_page);
  CHECK(page_data(snapshot_of(1024), 0, 0)["ranks"]["tiles"].size() == 1);
  const nlohmann::json waiting = page_data(snapshot_of(8), 0, 8)["ranks"]["tiles"][2];
  CHECK(waiting["state"] == "waiting");
  CHECK(waiting["waiting_for"] == "grad bucket 3 from rank 1");
}

TEST_CASE("the job's /metrics gives ranks by state, recoveries by path, step, loss and the checkpoint's age", "[web]") {
  const std::string text = job_metrics_text(snapshot_of(14), 1060);
  const Exposition e = parse_exposition(text);
  INFO(text);
  CHECK(e.problems.empty());
  CHECK(e.value("troupe_job_ranks", {{"state", "lost"}}) == 2);
  CHECK(e.value("troupe_job_ranks", {{"state", "training"}}) == 2);
  CHECK(e.value("troupe_job_recoveries_total", {{"path", "in_place_from_replica"}}) == 2);
  CHECK(e.value("troupe_job_step") == 42);
  CHECK(e.value("troupe_job_loss") == 3.5);
  CHECK(e.value("troupe_job_tokens_per_second") == 1234);
  CHECK(e.value("troupe_job_seconds_since_checkpoint") == 60);
  CHECK(e.types.at("troupe_job_recoveries_total") == "counter");
  JobSnapshot none;
  CHECK(parse_exposition(job_metrics_text(none, 5)).value("troupe_job_seconds_since_checkpoint") == -1);
}

TEST_CASE("a thousand idle and slow connections do not keep the web server from answering", "[web]") {
  auto web = serve_job(16);
  std::vector<TcpClient> clients;
  for (int i = 0; i < 1000; ++i) {
    clients.emplace_back(web->port());
    if (i % 2) clients.back().send("GET /data?token=" + token + " HTTP/1.1\r\n");  // the blank line never comes
  }
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse r = http_get(web->port(), "/data?token=" + token, 3);
  INFO(r.error);
  CHECK(r.status == 200);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

// The page as a person opens it: the real page and the real /data of a 1,024-rank snapshot (the
// types the job fills), loaded in headless Chromium on its wall clock (no virtual time) by
// scripts/bench/page_render_time.py; the page itself notes when it first drew its data.
TEST_CASE("headless Chromium draws a 1,024-rank job's page data within 1 s, and turns its four grid pages",
          "[web][slow]") {
  if (!chromium_present()) return;
  auto web = serve_job(1024);
  check_1024_rank_page(page_render_lines(web->url(), 3), "1,024-rank page");
}
