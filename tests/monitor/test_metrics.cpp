// monitor::NodeMetrics on its own: served on a free port, scraped over HTTP as Prometheus would,
// read back by a strict parser of the text format.

#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "monitor/metrics.hpp"
#include "support/metrics_scrape.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;

namespace {

std::unique_ptr<monitor::NodeMetrics> serve_any_port(const std::string& job, int node) {
  auto metrics = monitor::NodeMetrics::serve({"127.0.0.1", 0}, {job, node});
  INFO((metrics ? "" : metrics.error().message));
  REQUIRE(metrics.ok());
  return std::move(*metrics);
}

Exposition scrape(const monitor::NodeMetrics& metrics) {
  const HttpResponse response = http_get(metrics.port(), "/metrics");
  INFO(response.error);
  REQUIRE(response.status == 200);
  Exposition exposition = parse_exposition(response.body);
  INFO(response.body);
  for (const std::string& problem : exposition.problems) FAIL_CHECK(problem);
  return exposition;
}

}  // namespace

TEST_CASE("node metrics are served on a free port and read back in the text format", "[metrics]") {
  auto metrics = serve_any_port("job-a", 3);
  CHECK(metrics->port() > 0);
  CHECK(metrics->url() == "http://127.0.0.1:" + std::to_string(metrics->port()) + "/metrics");
  monitor::WorkerMetrics& five = metrics->add_worker(5, "worker");
  metrics->add_worker(6, "worker");
  five.step_done(10, 0.5, 1000, 2.5, 1e-3, 0.75);

  const Exposition e = scrape(*metrics);
  CHECK(e.types.at("troupe_steps_total") == "counter");
  CHECK(e.types.at("troupe_step_seconds") == "histogram");
  for (const char* gauge : {"troupe_step", "troupe_tokens_per_second", "troupe_loss", "troupe_learning_rate",
                            "troupe_grad_norm", "troupe_resident_memory_bytes"}) {
    INFO(gauge);
    CHECK(e.types.at(gauge) == "gauge");
    CHECK(!e.help.at(gauge).empty());
  }
  for (const MetricSample& sample : e.samples) {
    if (sample.name.rfind("troupe_", 0) != 0) continue;  // prometheus-cpp's own exposer_* series
    INFO(sample.name);
    CHECK(sample.labels.at("job") == "job-a");
    CHECK(sample.labels.at("node") == "3");
  }
  const std::map<std::string, std::string> r5{{"rank", "5"}, {"role", "worker"}}, r6{{"rank", "6"}};
  CHECK(e.value("troupe_steps_total", r5) == 1.0);
  CHECK(e.value("troupe_steps_total", r6) == 0.0);
  CHECK(e.value("troupe_step", r5) == 10.0);
  CHECK(e.value("troupe_tokens_per_second", r5) == 2000.0);
  CHECK(e.value("troupe_loss", r5) == 2.5);
  CHECK(e.value("troupe_learning_rate", r5) == Approx(1e-3));
  CHECK(e.value("troupe_grad_norm", r5) == 0.75);
  CHECK(e.value("troupe_step_seconds_count", r5) == 1.0);
  CHECK(e.value("troupe_step_seconds_sum", r5) == 0.5);
  CHECK(e.value("troupe_step_seconds_bucket", {{"rank", "5"}, {"le", "0.25"}}) == 0.0);
  CHECK(e.value("troupe_step_seconds_bucket", {{"rank", "5"}, {"le", "0.5"}}) == 1.0);
  CHECK(e.value("troupe_step_seconds_bucket", {{"rank", "5"}, {"le", "+Inf"}}) == 1.0);
  CHECK(e.value("troupe_resident_memory_bytes") > 1e6);  // a process that has loaded libstdc++ and civetweb
}

TEST_CASE("the memory by kind is read at every scrape as two gauges", "[metrics]") {
  auto metrics = serve_any_port("job-m", 1);
  CHECK(scrape(*metrics).find("troupe_memory_bytes").empty());  // nothing registered: no series
  auto held = std::make_shared<std::atomic<std::uint64_t>>(1000);
  metrics->read_memory_from([held] {
    return monitor::MemoryReading{{"host", "parameters", held->load(), 4000}, {"host", "total", 5000, 9000}};
  });
  Exposition e = scrape(*metrics);
  for (const char* gauge : {"troupe_memory_bytes", "troupe_memory_peak_bytes"}) {
    INFO(gauge);
    CHECK(e.types.at(gauge) == "gauge");
    CHECK(!e.help.at(gauge).empty());
  }
  const std::map<std::string, std::string> parameters{{"device", "host"}, {"kind", "parameters"}};
  CHECK(e.value("troupe_memory_bytes", parameters) == 1000);
  CHECK(e.value("troupe_memory_peak_bytes", parameters) == 4000);
  CHECK(e.value("troupe_memory_peak_bytes", {{"kind", "total"}, {"job", "job-m"}, {"node", "1"}}) == 9000);
  held->store(2500);
  e = scrape(*metrics);
  CHECK(e.value("troupe_memory_bytes", parameters) == 2500);  // read at the scrape, not at registration
}

TEST_CASE("steps reported from several threads while scraping are all counted", "[metrics]") {
  auto metrics = serve_any_port("job-b", 0);
  std::vector<monitor::WorkerMetrics*> workers;
  for (int rank = 0; rank < 4; ++rank) workers.push_back(&metrics->add_worker(rank, "worker"));
  std::vector<std::thread> threads;
  for (monitor::WorkerMetrics* worker : workers)
    threads.emplace_back([worker] {
      for (int step = 1; step <= 2000; ++step) worker->step_done(step, 0.001, 64, 3.0, 1e-4, 1.0);
    });
  for (int i = 0; i < 5; ++i) scrape(*metrics);  // concurrent with the updates
  for (std::thread& thread : threads) thread.join();
  const Exposition e = scrape(*metrics);
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    CHECK(e.value("troupe_steps_total", {{"rank", std::to_string(rank)}}) == 2000.0);
    CHECK(e.value("troupe_step_seconds_count", {{"rank", std::to_string(rank)}}) == 2000.0);
  }
}

TEST_CASE("a taken port, a port past 65535 and an address that is not IPv4 are errors naming the address", "[metrics]") {
  auto first = serve_any_port("job-c", 0);
  const std::string taken = "127.0.0.1:" + std::to_string(first->port());
  auto second = monitor::NodeMetrics::serve({"127.0.0.1", first->port()}, {"job-c", 1});
  REQUIRE(!second.ok());
  CHECK(second.error().message == "cannot serve metrics on " + taken +
                                      ": the port is in use or the address is not this host's");

  auto past_range = monitor::NodeMetrics::serve({"127.0.0.1", 65536}, {"job-c", 0});
  REQUIRE(!past_range.ok());
  CHECK(past_range.error().message == "cannot serve metrics on 127.0.0.1:65536: the port is not in 0-65535");

  // civetweb alone would listen on "999.1.1.1", reading it modulo 256.
  for (const char* bind : {"999.1.1.1", "localhost", "::1", ""}) {
    INFO(bind);
    auto refused = monitor::NodeMetrics::serve({bind, 0}, {"job-c", 0});
    REQUIRE(!refused.ok());
    CHECK_THAT(refused.error().message, Contains("'" + std::string(bind) + "' is not an IPv4 address"));
  }
}

TEST_CASE(
    "MFU, bubble, checkpoints, DiLoCo syncs, expert routing, comm traffic, heartbeat and failures are exported with "
    "the worker's labels",
    "[metrics]") {
  auto metrics = serve_any_port("job-d", 1);
  monitor::WorkerMetrics& worker = metrics->add_worker(2, "worker");
  const Exposition before = scrape(*metrics);
  CHECK(before.find("troupe_heartbeat_age_seconds").empty());  // no heartbeat yet
  CHECK(before.value("troupe_restarts_total") == 0.0);

  worker.set_mfu_basis(1e6, 2, 1e9);  // 2 ranks of 1 GFLOP/s: 1000 tokens/s of 1 MFLOP is 50%
  worker.step_done(1, 0.25, 250, 3.0, 1e-3, 1.0);
  worker.set_bubble_fraction(0.375);
  worker.checkpoint_saved(0.02, 4096);
  worker.checkpoint_saved(0.03, 4096);
  worker.outer_synced(3000, 2);
  worker.outer_synced(1000, 2);
  // Two MoE blocks of 3 experts, two steps.
  worker.experts_routed({4, 4, 4, 2, 8, 2}, 3, 2.0);
  worker.experts_routed({5, 4, 3, 4, 4, 4}, 3, 1.25);
  worker.set_batch_share(0.75);
  worker.set_micro_batch_seconds(0.21);
  std::atomic<std::uint64_t> reduced_bytes = 1000;
  worker.read_comm_from([&reduced_bytes] {
    return monitor::CommReading{{{"all_reduce", 2, reduced_bytes, 0.5}, {"send", 1, 64, 0.001}},
                                {{"all_reduce", 1, 600, 0.25}},
                                {{"ring_shift", 6, 3072, 0.125}, {"all_to_all", 2, 512, 0.0625}},
                                3,
                                1,
                                {"", 10, 4096, 0.75}};
  });
  metrics->heartbeat_sent();
  metrics->count_failure("node_lost");
  metrics->count_failure("node_lost");
  metrics->count_recovery("checkpoint", "restart");
  metrics->count_recovery("replica", "in_place");
  metrics->count_recovery("replica", "in_place");
  metrics->count_restarts(2);

  Exposition e = scrape(*metrics);
  const std::map<std::string, std::string> r2{{"rank", "2"}, {"role", "worker"}};
  CHECK(e.value("troupe_mfu", r2) == Approx(0.5));
  CHECK(e.value("troupe_peak_flops", r2) == 1e9);
  CHECK(e.value("troupe_pipeline_bubble_fraction", r2) == 0.375);
  CHECK(e.value("troupe_checkpoint_save_seconds_count", r2) == 2.0);
  CHECK(e.value("troupe_checkpoint_save_seconds_sum", r2) == Approx(0.05));
  CHECK(e.value("troupe_checkpoint_bytes_total", r2) == 8192.0);
  CHECK(e.value("troupe_diloco_outer_syncs_total", r2) == 2.0);
  CHECK(e.value("troupe_diloco_outer_bytes_total", r2) == 4000.0);
  CHECK(e.value("troupe_diloco_islands", r2) == 2.0);
  CHECK(e.value("troupe_batch_share", r2) == 0.75);
  CHECK(e.types.at("troupe_batch_share") == "gauge");
  CHECK(e.value("troupe_micro_batch_seconds", r2) == 0.21);
  CHECK(e.types.at("troupe_micro_batch_seconds") == "gauge");
  CHECK(e.types.at("troupe_diloco_outer_bytes_total") == "counter");
  CHECK(e.value("troupe_moe_expert_slots_total", {{"rank", "2"}, {"block", "0"}, {"expert", "0"}}) == 9.0);
  CHECK(e.value("troupe_moe_expert_slots_total", {{"rank", "2"}, {"block", "1"}, {"expert", "1"}}) == 12.0);
  CHECK(e.value("troupe_moe_expert_slots_total", {{"rank", "2"}, {"block", "1"}, {"expert", "2"}}) == 6.0);
  CHECK(e.types.at("troupe_moe_expert_slots_total") == "counter");
  CHECK(e.value("troupe_moe_load_imbalance", r2) == 1.25);
  CHECK(e.types.at("troupe_comm_bytes_total") == "counter");
  CHECK(e.value("troupe_comm_bytes_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 1000.0);
  CHECK(e.value("troupe_comm_operations_total", {{"rank", "2"}, {"op", "send"}}) == 1.0);
  CHECK(e.value("troupe_comm_seconds_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 0.5);
  CHECK(e.value("troupe_comm_tp_bytes_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 600.0);
  CHECK(e.value("troupe_comm_tp_seconds_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 0.25);
  CHECK(e.value("troupe_comm_tp_operations_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 1.0);
  CHECK(e.types.at("troupe_comm_cp_bytes_total") == "counter");
  CHECK(e.value("troupe_comm_cp_operations_total", {{"rank", "2"}, {"op", "ring_shift"}}) == 6.0);
  CHECK(e.value("troupe_comm_cp_bytes_total", {{"rank", "2"}, {"op", "ring_shift"}}) == 3072.0);
  CHECK(e.value("troupe_comm_cp_seconds_total", {{"rank", "2"}, {"op", "ring_shift"}}) == 0.125);
  CHECK(e.value("troupe_comm_cp_operations_total", {{"rank", "2"}, {"op", "all_to_all"}}) == 2.0);
  CHECK(e.value("troupe_comm_cp_bytes_total", {{"rank", "2"}, {"op", "all_to_all"}}) == 512.0);
  CHECK(e.value("troupe_comm_cp_seconds_total", {{"rank", "2"}, {"op", "all_to_all"}}) == 0.0625);
  CHECK(e.types.at("troupe_moe_all_to_all_bytes_total") == "counter");
  CHECK(e.value("troupe_moe_all_to_all_operations_total", r2) == 10.0);
  CHECK(e.value("troupe_moe_all_to_all_bytes_total", r2) == 4096.0);
  CHECK(e.value("troupe_moe_all_to_all_seconds_total", r2) == 0.75);
  CHECK(e.value("troupe_comm_requests_in_flight", r2) == 3.0);
  CHECK(e.value("troupe_comm_collectives_in_flight", r2) == 1.0);
  CHECK(e.value("troupe_heartbeat_age_seconds") >= 0.0);
  CHECK(e.value("troupe_heartbeat_age_seconds") < 5.0);
  CHECK(e.value("troupe_failures_total", {{"kind", "node_lost"}}) == 2.0);
  CHECK(e.value("troupe_recoveries_total", {{"source", "checkpoint"}, {"path", "restart"}}) == 1.0);
  CHECK(e.value("troupe_recoveries_total", {{"source", "replica"}, {"path", "in_place"}}) == 2.0);
  CHECK(e.value("troupe_restarts_total") == 2.0);
  for (const MetricSample& sample : e.samples) {
    if (sample.name.rfind("troupe_", 0) != 0) continue;
    INFO(sample.name);
    CHECK(sample.labels.at("job") == "job-d");
    CHECK(sample.labels.at("node") == "1");
  }

  reduced_bytes = 5000;  // read again at the next scrape, not cached
  e = scrape(*metrics);
  CHECK(e.value("troupe_comm_bytes_total", {{"rank", "2"}, {"op", "all_reduce"}}) == 5000.0);
}
