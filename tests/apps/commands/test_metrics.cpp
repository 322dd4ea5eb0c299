// Prometheus metrics of real troupe processes (docs/metrics.md): every node of a job serves
// /metrics on its own port, named in its log; a scrape parses as the text format and shows the
// node's ranks training. Bad metrics settings are refused as bad input.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <thread>

#include "apps/launch/unclaimed_port.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/metrics_scrape.hpp"
#include "support/busy_port.hpp"
#include "support/temp_dir.hpp"

extern char** environ;

using namespace troupe::test;
using Catch::Contains;
using Clock = std::chrono::steady_clock;

namespace {

// A troupe command running in the background, its output going to files; killed with its node
// processes when the test is done with it.
class BackgroundTroupe {
 public:
  explicit BackgroundTroupe(const std::vector<std::string>& troupe_args) {
    std::vector<std::string> args{TROUPE_BINARY_DIR "/troupe"};
    args.insert(args.end(), troupe_args.begin(), troupe_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, out_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&files, 2, (dir_.path() / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    const int spawned = posix_spawn(&pid_, argv[0], &files, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    REQUIRE(spawned == 0);
  }

  ~BackgroundTroupe() {
    const std::vector<pid_t> nodes = children();
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    for (pid_t node : nodes) kill(node, SIGKILL);
  }

  std::string out() const { return file_text(out_path()); }
  std::string err() const { return file_text(dir_.path() / "err.txt"); }

  // Each process's metrics port, by node, from the "metrics on http://127.0.0.1:PORT/metrics"
  // lines, once `count` of them are logged (or the wait runs out: fewer).
  std::map<int, int> metrics_ports(std::size_t count, std::chrono::seconds wait) const {
    // A node's lines carry the launcher's "[node i host]" prefix; a lone trainer's do not.
    const std::regex line("(?:\\[node (\\d+) [^\\]]*\\])?[^\\n]*metrics on http://127\\.0\\.0\\.1:(\\d+)/metrics");
    std::map<int, int> ports;
    for (const auto deadline = Clock::now() + wait; ports.size() < count && Clock::now() < deadline;) {
      const std::string text = out();
      ports.clear();
      for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
        ports[(*it)[1].matched ? std::stoi((*it)[1].str()) : 0] = std::stoi((*it)[2].str());
      if (ports.size() < count) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ports;
  }

 private:
  std::filesystem::path out_path() const { return dir_.path() / "out.txt"; }

  std::vector<pid_t> children() const {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) + "/children");
    std::vector<pid_t> pids;
    for (pid_t child; in >> child;) pids.push_back(child);
    return pids;
  }

  TempDir dir_;
  pid_t pid_ = -1;
};

Exposition scrape(int port) {
  const HttpResponse response = http_get(port, "/metrics");
  INFO("port " << port << ": " << response.error);
  REQUIRE(response.status == 200);
  Exposition exposition = parse_exposition(response.body);
  INFO(response.body);
  for (const std::string& problem : exposition.problems) FAIL_CHECK(problem);
  return exposition;
}

// Scrapes until the steps the process has finished pass `above` (or `wait` runs out).
Exposition scrape_when_steps_pass(int port, double above, std::chrono::seconds wait) {
  Exposition e = scrape(port);
  for (const auto deadline = Clock::now() + wait;
       !(e.value("troupe_steps_total") > above) && Clock::now() < deadline; e = scrape(port))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return e;
}

// A job of two workers from `args`; `check` gets each rank's /metrics once its steps pass `above`.
void check_each_rank(const std::vector<std::string>& args, double above,
                     const std::function<void(int rank, const Exposition& e)>& check) {
  const BackgroundTroupe job(args);
  const std::map<int, int> ports = job.metrics_ports(2, std::chrono::seconds(60));
  INFO("stdout: " << job.out() << "\nstderr: " << job.err());
  REQUIRE(ports.size() == 2);
  for (const auto& [rank, port] : ports) {
    INFO("rank " << rank);
    check(rank, scrape_when_steps_pass(port, above, std::chrono::seconds(60)));
  }
}

// A port nothing listens on now, and the one after it too.
int two_free_ports() { return troupe::launch::unclaimed_port(2).value(); }

const std::vector<std::string> small_job{"--model.preset", "small", "--train.steps", "200", "--sample.tokens", "0",
                                         "--train.threads", "1"};

}  // namespace

TEST_CASE("troupe train --workers 2: each node serves /metrics on its own port, steps rising", "[metrics][dp]") {
  std::vector<std::string> args{"train", "--workers", "2"};
  args.insert(args.end(), small_job.begin(), small_job.end());
  const BackgroundTroupe job(args);
  const std::map<int, int> ports = job.metrics_ports(2, std::chrono::seconds(60));
  INFO("stdout: " << job.out() << "\nstderr: " << job.err());
  REQUIRE(ports.size() == 2);
  REQUIRE(ports.count(0) == 1);
  REQUIRE(ports.count(1) == 1);
  CHECK(ports.at(0) != ports.at(1));

  std::string job_label;
  for (const auto& [node, port] : ports) {
    INFO("node " << node << " on port " << port);
    const Exposition first = scrape_when_steps_pass(port, 0, std::chrono::seconds(90));
    const Exposition second = scrape_when_steps_pass(port, first.value("troupe_steps_total"),
                                                     std::chrono::seconds(90));
    for (const char* name : {"troupe_steps_total", "troupe_step_seconds_count", "troupe_tokens_per_second",
                             "troupe_loss", "troupe_learning_rate", "troupe_grad_norm", "troupe_step",
                             "troupe_resident_memory_bytes"}) {
      INFO(name);
      CHECK(second.find(name).size() == 1);  // one rank per node process here, one process-wide series
    }
    const std::map<std::string, std::string> labels{{"node", std::to_string(node)},
                                                    {"rank", std::to_string(node)},
                                                    {"role", "worker"}};
    const double steps_before = first.value("troupe_steps_total", labels);
    const double steps_after = second.value("troupe_steps_total", labels);
    CHECK(steps_before >= 1);
    CHECK(steps_after > steps_before);
    CHECK(second.value("troupe_step", labels) >= steps_after);
    CHECK(second.value("troupe_tokens_per_second", labels) > 0);
    CHECK(second.value("troupe_step_seconds_count", labels) == steps_after);
    CHECK(second.value("troupe_loss", labels) > 0);
    CHECK(second.value("troupe_resident_memory_bytes", {{"node", std::to_string(node)}}) > 1e6);
    // What the comm engine moved: the gradient all-reduce every step, nothing point-to-point.
    const std::map<std::string, std::string> all_reduce{{"rank", std::to_string(node)}, {"op", "all_reduce"}};
    CHECK(first.value("troupe_comm_bytes_total", all_reduce) > 0);
    CHECK(second.value("troupe_comm_bytes_total", all_reduce) > first.value("troupe_comm_bytes_total", all_reduce));
    CHECK(second.value("troupe_comm_operations_total", all_reduce) >= steps_after);
    CHECK(second.value("troupe_comm_seconds_total", all_reduce) > 0);
    CHECK(second.value("troupe_comm_bytes_total", {{"rank", std::to_string(node)}, {"op", "send"}}) == 0);
    CHECK(second.value("troupe_comm_requests_in_flight", labels) >= 0);
    CHECK(second.value("troupe_comm_collectives_in_flight", labels) >= 0);
    // Not checked against 1: node processes sharing this machine's cores measure their peak while
    // the other one runs, so the denominator is noisy here (monitor.peak_flops fixes it).
    CHECK(second.value("troupe_mfu", labels) > 0);
    CHECK(second.value("troupe_peak_flops", labels) > 1e8);
    CHECK(second.value("troupe_pipeline_bubble_fraction", labels) == 0);  // no pipeline
    CHECK(second.value("troupe_checkpoint_save_seconds_count", labels) == 0);
    CHECK(second.value("troupe_heartbeat_age_seconds", {{"node", std::to_string(node)}}) >= 0);
    CHECK(second.value("troupe_heartbeat_age_seconds", {{"node", std::to_string(node)}}) < 10);  // heartbeat_timeout
    CHECK(second.value("troupe_restarts_total", {{"node", std::to_string(node)}}) == 0);
    // The memory ledger, by kind: small's f32 parameters and gradients, AdamW's two moments (ZeRO 0),
    // no gathered ZeRO-3 parameters, and a total that is the kinds' sum.
    const auto memory = [&](const char* gauge, const std::string& kind) {
      return second.value(gauge, {{"node", std::to_string(node)}, {"device", "host"}, {"kind", kind}});
    };
    const double parameter_bytes =
        static_cast<double>(troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("small")).total()) * 4;
    CHECK(memory("troupe_memory_bytes", "parameters") == parameter_bytes);
    CHECK(memory("troupe_memory_bytes", "gradients") == parameter_bytes);
    CHECK(memory("troupe_memory_bytes", "optimizer_state") == 2 * parameter_bytes);
    CHECK(memory("troupe_memory_bytes", "gathered_parameters") == 0);
    CHECK(memory("troupe_memory_bytes", "activations") > 1e6);
    CHECK(memory("troupe_memory_bytes", "comm_buffers") > 0);
    CHECK(memory("troupe_memory_bytes", "runtime") > 1e6);
    double sum = 0;
    for (const char* kind : {"runtime", "parameters", "gathered_parameters", "gradients", "optimizer_state",
                             "activations", "comm_buffers", "other"}) {
      INFO(kind);
      sum += memory("troupe_memory_bytes", kind);
      CHECK(memory("troupe_memory_peak_bytes", kind) >= memory("troupe_memory_bytes", kind));
    }
    CHECK(memory("troupe_memory_bytes", "total") == Approx(sum).margin(1 << 20));
    CHECK(memory("troupe_memory_peak_bytes", "total") >= memory("troupe_memory_bytes", "total"));
    CHECK(second.find("troupe_memory_bytes", {{"node", std::to_string(node)}}).size() == 9);
    // Both nodes name the same job, an id derived from its token.
    const std::string label = second.find("troupe_steps_total").front().labels.at("job");
    CHECK(std::regex_match(label, std::regex("[0-9a-f]{8}")));
    if (job_label.empty()) job_label = label;
    CHECK(label == job_label);
  }
}

TEST_CASE("troupe train serves /metrics as node 0, rank 0, role trainer", "[metrics]") {
  std::vector<std::string> args{"train"};
  args.insert(args.end(), small_job.begin(), small_job.end());
  const BackgroundTroupe job(args);
  const std::map<int, int> ports = job.metrics_ports(1, std::chrono::seconds(60));
  INFO("stdout: " << job.out() << "\nstderr: " << job.err());
  REQUIRE(ports.count(0) == 1);
  CHECK_THAT(job.out(), Contains("[local r0 trainer] info monitor: metrics on http://127.0.0.1:"));
  const Exposition e = scrape_when_steps_pass(ports.at(0), 0, std::chrono::seconds(90));
  CHECK(e.value("troupe_steps_total", {{"job", "local"}, {"node", "0"}, {"rank", "0"}, {"role", "trainer"}}) >= 1);
}

TEST_CASE("pipeline stages export their bubble and the activations and gradients they move, under 1f1b and zb-v",
          "[metrics][pipeline]") {
  // Two stages and four micro-batches: 1F1B alone idles (p-1)/(m+p-1) = 20% of a step on an idle
  // machine, ZB-V (its B and W counted busy) 4%. Busy time is wall time, so a stage descheduled
  // mid-op (CI runs two tests on two cores) counts as busy: under load the figure falls (4.6% seen
  // under 1F1B), never to nothing.
  const std::pair<std::vector<std::string>, double> schedules[] = {
      {{"--pipeline.schedule", "1f1b"}, 0.01},
      {{"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2"}, 0.001}};
  for (const auto& [schedule, least_bubble] : schedules) {
    INFO(schedule[1]);
    std::vector<std::string> args{
        "train", "--workers",     "2",    "--pipeline.stages", "2", "--pipeline.microbatches", "4", "--model.preset",
        "tiny",  "--train.steps", "2000", "--sample.tokens",   "0", "--train.threads",         "1"};
    args.insert(args.end(), schedule.begin(), schedule.end());
    const BackgroundTroupe job(args);
    const std::map<int, int> ports = job.metrics_ports(2, std::chrono::seconds(60));
    INFO("stdout: " << job.out() << "\nstderr: " << job.err());
    REQUIRE(ports.size() == 2);
    for (const auto& [stage, port] : ports) {
      INFO("stage " << stage);
      const Exposition e = scrape_when_steps_pass(port, 2, std::chrono::seconds(60));
      const std::map<std::string, std::string> rank{{"rank", std::to_string(stage)}};
      CHECK(e.value("troupe_pipeline_bubble_fraction", rank) > least_bubble);
      CHECK(e.value("troupe_pipeline_bubble_fraction", rank) < 1);
      for (const char* op : {"send", "recv"}) {
        INFO(op);
        CHECK(e.value("troupe_comm_bytes_total", {{"rank", std::to_string(stage)}, {"op", op}}) > 0);
        CHECK(e.value("troupe_comm_operations_total", {{"rank", std::to_string(stage)}, {"op", op}}) >= 8);
      }
    }
  }
}

TEST_CASE("gradient compression exports the bytes its sums carried against the uncompressed bytes, and its seconds",
          "[metrics][compression]") {
  check_each_rank({"train", "--workers", "2", "--model.preset", "tiny", "--train.steps", "2000", "--sample.tokens", "0",
                   "--train.threads", "1", "--comm.compress", "powersgd", "--comm.compress_start_step", "0"},
                  2, [&](int rank, const Exposition& e) {
                    const std::map<std::string, std::string> labels{{"rank", std::to_string(rank)}};
                    const double wire = e.value("troupe_compress_wire_bytes_total", labels);
                    const double plain = e.value("troupe_compress_plain_bytes_total", labels);
                    std::printf("rank %d: %.0f bytes on the wire for %.0f uncompressed (%.1fx), %.3f s compressing\n",
                                rank, wire, plain, plain / wire, e.value("troupe_compress_seconds_total", labels));
                    CHECK(wire > 0);
                    CHECK(plain > 4 * wire);
                    CHECK(e.value("troupe_compress_seconds_total", labels) > 0);
                  });
}

TEST_CASE("context shards export their ring shifts apart from other traffic: operations, bytes sent and seconds",
          "[metrics][context]") {
  const int layers = troupe::compute::gpt_preset("tiny").value().n_layer;
  check_each_rank(
      {"train", "--workers", "2", "--context.shards", "2", "--model.preset", "tiny", "--train.batch_size", "2",
       "--train.steps", "2000", "--train.val_every", "0", "--sample.tokens", "0", "--train.threads", "1"},
      2, [&](int rank, const Exposition& e) {
        const std::string r = std::to_string(rank);
        const double steps = e.value("troupe_steps_total", {{"rank", r}});
        const double shifts = e.value("troupe_comm_cp_operations_total", {{"rank", r}, {"op", "ring_shift"}});
        // Per layer and step on 2 shards: one shift forward, two backward (a step in flight adds its own).
        CHECK(shifts >= 3 * layers * steps);
        CHECK(shifts <= 3 * layers * (steps + 1));
        CHECK(e.value("troupe_comm_cp_bytes_total", {{"rank", r}, {"op", "ring_shift"}}) > 0);
        CHECK(e.value("troupe_comm_cp_seconds_total", {{"rank", r}, {"op", "ring_shift"}}) > 0);
        CHECK(e.value("troupe_comm_cp_operations_total", {{"rank", r}, {"op", "all_to_all"}}) == 0);
        CHECK(e.value("troupe_comm_bytes_total", {{"rank", r}, {"op", "send"}}) > 0);  // the shifts' messages
      });
}

TEST_CASE("checkpoint saves are counted with their seconds and bytes", "[metrics]") {
  TempDir checkpoints;
  const BackgroundTroupe job({"train", "--model.preset", "tiny", "--train.steps", "5000", "--sample.tokens", "0",
                              "--train.threads", "1", "--checkpoint.dir", checkpoints.file("ck"),
                              "--checkpoint.every", "10"});
  const std::map<int, int> ports = job.metrics_ports(1, std::chrono::seconds(60));
  INFO("stdout: " << job.out() << "\nstderr: " << job.err());
  REQUIRE(ports.count(0) == 1);
  const Exposition e = scrape_when_steps_pass(ports.at(0), 21, std::chrono::seconds(60));
  const std::map<std::string, std::string> rank{{"rank", "0"}};
  const double saves = e.value("troupe_checkpoint_save_seconds_count", rank);
  CHECK(saves >= 2);
  CHECK(e.value("troupe_checkpoint_save_seconds_sum", rank) > 0);
  // Parameters and both AdamW moments, as float32, in every save.
  const auto params = static_cast<double>(troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total());
  CHECK(e.value("troupe_checkpoint_bytes_total", rank) == saves * 3 * 4 * params);
}

TEST_CASE("after a recovery every node's /metrics counts the job's failure, recovery and restart", "[metrics][dp]") {
  TempDir checkpoints;
  const int port = two_free_ports();  // fixed, so the restarted nodes serve where the first ones did
  ::setenv("TROUPE_DRILL_THROW_AT", "1:3", 1);  // rank 1's worker throws in step 3 of the first attempt
  const BackgroundTroupe job({"train", "--workers", "2", "--model.preset", "tiny", "--train.steps", "5000",
                              "--sample.tokens", "0", "--train.threads", "1", "--checkpoint.dir",
                              checkpoints.file("ck"), "--monitor.metrics_port", std::to_string(port),
                              "--fault.recovery", "restart"});
  ::unsetenv("TROUPE_DRILL_THROW_AT");
  for (int node : {0, 1}) {
    INFO("node " << node);
    Exposition e;
    for (const auto deadline = Clock::now() + std::chrono::seconds(90); Clock::now() < deadline;
         std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
      const HttpResponse response = http_get(port + node, "/metrics");
      if (response.status != 200) continue;  // between the attempts: nobody serves
      e = parse_exposition(response.body);
      if (e.value("troupe_restarts_total") == 1 && e.value("troupe_steps_total") > 0) break;
    }
    INFO("stdout: " << job.out() << "\nstderr: " << job.err());
    const std::map<std::string, std::string> labels{{"node", std::to_string(node)}};
    CHECK(e.value("troupe_restarts_total", labels) == 1);
    CHECK(e.value("troupe_failures_total", {{"node", std::to_string(node)}, {"kind", "worker_exception"}}) == 1);
    CHECK(e.value("troupe_recoveries_total", {{"node", std::to_string(node)}, {"source", "replica"}}) == 1);
    CHECK(e.value("troupe_steps_total") > 0);
  }
}

TEST_CASE("monitor.metrics_port P puts node i on P + i, and -1 turns metrics off", "[metrics][dp]") {
  TempDir dir;
  const std::vector<std::string> tiny{"--model.preset", "tiny", "--train.steps", "2", "--train.val_batches", "1",
                                      "--sample.tokens", "0", "--train.threads", "1"};
  const int port = two_free_ports();
  std::vector<std::string> fixed{"train", "--workers", "2", "--monitor.metrics_port", std::to_string(port)};
  fixed.insert(fixed.end(), tiny.begin(), tiny.end());
  const ProcessResult two = run_troupe(dir, fixed, std::chrono::seconds(120));
  INFO("stdout: " << two.out << "\nstderr: " << two.err);
  REQUIRE(two.exit_code == 0);
  CHECK(std::regex_search(two.out, std::regex("\\[node 0 [^\\]]*\\][^\\n]*metrics on http://127\\.0\\.0\\.1:" +
                                              std::to_string(port) + "/metrics")));
  CHECK(std::regex_search(two.out, std::regex("\\[node 1 [^\\]]*\\][^\\n]*metrics on http://127\\.0\\.0\\.1:" +
                                              std::to_string(port + 1) + "/metrics")));

  std::vector<std::string> off{"train", "--monitor.metrics_port", "-1"};
  off.insert(off.end(), tiny.begin(), tiny.end());
  const ProcessResult quiet = run_troupe(dir, off, std::chrono::seconds(60));
  REQUIRE(quiet.exit_code == 0);
  CHECK_THAT(quiet.out, !Contains("metrics on"));
}

TEST_CASE("a metrics port in use, a bad port and a bad bind address are refused with one line", "[metrics][cli]") {
  TempDir dir;
  {
    const BusyPort busy;
    const std::string port = std::to_string(busy.port());
    check_rejected_in(dir, {"train", "--model.preset", "tiny", "--monitor.metrics_port", port},
                      "monitor.metrics_port " + port + " + node 0: cannot serve metrics on 127.0.0.1:" + port +
                          ": the port is in use");
  }

  check_rejected_in(dir, {"train", "--monitor.metrics_port", "-2"}, "monitor.metrics_port must be -1 (off)");
  check_rejected_in(dir, {"train", "--monitor.metrics_port", "65536"}, "got 65536");
  check_rejected_in(dir, {"train", "--monitor.metrics_bind", "10.0.0"},
                    "monitor.metrics_bind '10.0.0' is not an IPv4 address");
}

TEST_CASE(
    "train.balance static: each replica's /metrics gives its share of the step's global batch, on every "
    "tensor shard of it too",
    "[metrics][dp][balance]") {
  // Shares 6 and 2 of 8 micro-batches (docs/balance.md); a replica's tensor shards are consecutive ranks.
  const std::vector<std::pair<std::vector<std::string>, std::vector<double>>> layouts{
      {{"--workers", "2"}, {0.75, 0.25}}, {{"--workers", "4", "--tensor.shards", "2"}, {0.75, 0.75, 0.25, 0.25}}};
  for (const auto& [layout, share] : layouts) {
    std::vector<std::string> args{"train",  "--train.balance",    "static", "--train.replica_speeds",
                                  "1,0.33", "--train.grad_accum", "4",      "--train.batch_size",
                                  "2",      "--train.seq_len",    "32"};
    args.insert(args.end(), layout.begin(), layout.end());
    const std::vector<std::string> tiny = tiny_steps(100000);
    args.insert(args.end(), tiny.begin(), tiny.end());
    const BackgroundTroupe job(args);
    const int ranks = static_cast<int>(share.size());
    const std::map<int, int> ports = job.metrics_ports(ranks, std::chrono::seconds(60));
    INFO("stdout: " << job.out() << "\nstderr: " << job.err());
    REQUIRE(ports.size() == share.size());
    for (const auto& [node, port] : ports) {
      INFO("node " << node << " of " << ranks);
      const Exposition e = scrape_when_steps_pass(port, 0, std::chrono::seconds(60));
      CHECK(e.value("troupe_batch_share", {{"rank", std::to_string(node)}}) == share.at(node));
    }
  }
}

TEST_CASE(
    "expert shards export their all-to-alls apart from the context exchange's: operations, bytes sent and seconds",
    "[metrics][moe]") {
  const int moe_blocks = troupe::compute::gpt_preset("moe-tiny").value().moe_layers();
  REQUIRE(moe_blocks > 0);
  check_each_rank(
      {"train", "--workers", "2", "--expert.shards", "2", "--model.preset", "moe-tiny", "--train.batch_size", "2",
       "--train.seq_len", "64", "--train.steps", "2000", "--train.val_every", "0", "--sample.tokens", "0",
       "--train.threads", "1"},
      2, [&](int rank, const Exposition& e) {
        const std::string r = std::to_string(rank);
        const double steps = e.value("troupe_steps_total", {{"rank", r}});
        const double exchanges = e.value("troupe_moe_all_to_all_operations_total", {{"rank", r}});
        // Per MoE block and step: forward counts, dispatch and combine; backward dispatch and combine
        // (a step in flight adds its own).
        CHECK(exchanges >= 5 * moe_blocks * steps);
        CHECK(exchanges <= 5 * moe_blocks * (steps + 1));
        CHECK(e.value("troupe_moe_all_to_all_bytes_total", {{"rank", r}}) > 0);
        CHECK(e.value("troupe_moe_all_to_all_seconds_total", {{"rank", r}}) > 0);
        CHECK(e.value("troupe_comm_cp_operations_total", {{"rank", r}, {"op", "all_to_all"}}) == 0);
        CHECK(e.value("troupe_comm_bytes_total", {{"rank", r}, {"op", "send"}}) > 0);  // the all-to-alls' messages
      });
}

TEST_CASE("train.balance dynamic: each replica's /metrics gives its share and its measured time per micro-batch",
          "[metrics][dp][balance]") {
  std::vector<std::string> args{"train", "--workers",          "2", "--train.balance", "dynamic", "--train.grad_accum",
                                "4",     "--train.batch_size", "2", "--train.seq_len", "32"};
  const std::vector<std::string> tiny = tiny_steps(100000);
  args.insert(args.end(), tiny.begin(), tiny.end());
  check_each_rank(args, 3, [&](int node, const Exposition& e) {
    const std::map<std::string, std::string> rank{{"rank", std::to_string(node)}};
    // A share of whole micro-batches, at least one of the 8, and a time that was measured.
    const double share = e.value("troupe_batch_share", rank);
    CHECK(share * 8 == Approx(std::round(share * 8)));
    CHECK(share >= 0.125);
    CHECK(share <= 0.875);
    CHECK(e.value("troupe_micro_batch_seconds", rank) > 0);
  });
}
