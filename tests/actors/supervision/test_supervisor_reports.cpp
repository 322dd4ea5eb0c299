// The job supervisor's reasons at a thousand ranks (supervisor_reports.cpp): a watchdog verdict
// over 32 silent node processes of 32 ranks describes two nodes and four ranks of each, and names
// the other silent nodes; a stall over 1,024 ranks describes eight; small jobs keep every rank.

#include <catch2/catch.hpp>

#include "actors/supervision/job_supervisor_state.hpp"

using namespace troupe::actors;
using namespace troupe::actors::supervision;
using Catch::Contains;

namespace {

// A job of `nodes` node processes of `slots` ranks, each rank last heard waiting in step 3 at `heard`.
job_supervisor_state job_of(int nodes, int slots, Clock::time_point heard) {
  job_supervisor_state st;
  st.plan.heartbeat_timeout = std::chrono::seconds(10);
  st.plan.step_timeout = std::chrono::seconds(1);
  for (int n = 0; n < nodes; ++n) {
    st.plan.nodes.push_back({.node_index = n, .host = "vm", .slots = slots, .first_rank = n * slots});
    join_msg m;
    m.node_index = n;
    m.host = "vm";
    m.pid = 100 + n;
    st.joined.emplace(n, m);
    node_liveness live;
    live.last_heartbeat = heard;
    for (int s = 0; s < slots; ++s)
      live.workers.push_back({.rank = n * slots + s,
                              .steps_done = 2,
                              .idle_seconds = 5,
                              .activity = "step 3",
                              .waiting_for = "a scalar sum",
                              .waiting_seconds = 2});
    st.liveness.emplace(n, live);
  }
  return st;
}

struct Verdict {
  std::vector<int> silent;
  std::string reason;
};

Verdict verdict_of(const job_supervisor_state& st, Clock::time_point now) {
  Verdict v;
  v.reason = watchdog_verdict(st, now, v.silent);
  return v;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

}  // namespace

TEST_CASE("a thousand silent ranks give one readable reason: two nodes described, the others named", "[actors]") {
  const auto now = Clock::now();
  const auto [silent, reason] = verdict_of(job_of(32, 32, now - std::chrono::seconds(60)), now);
  INFO(reason);
  CHECK(silent.size() == 32);  // every silent node is answered, described or not
  CHECK(count_of(reason, "sent no heartbeat for") == 2);
  CHECK(count_of(reason, " in step 3, waiting 2.0 s for a scalar sum") == 8);
  CHECK(count_of(reason, "; and 28 more ranks of the node") == 2);
  CHECK_THAT(reason, Contains("rank 0 (node 0 (vm, pid 100)") && Contains("rank 32 (node 1 (vm, pid 101)") &&
                         !Contains("rank 4 ("));
  CHECK_THAT(reason, Contains("; and 30 more silent nodes (nodes 2-31)"));
  CHECK(reason.size() < 3000);
}

TEST_CASE("a stall over a thousand ranks describes eight of them and counts the rest", "[actors]") {
  const auto now = Clock::now();
  job_supervisor_state st = job_of(32, 32, now);
  st.liveness.at(5).workers.at(3).waiting_for.clear();  // rank 163 waits for nothing: listed first
  const auto [silent, reason] = verdict_of(st, now);
  INFO(reason);
  CHECK(silent.empty());
  CHECK_THAT(reason, Catch::StartsWith("no progress for") && Contains("(limit 1.0 s): rank 163 (node 5"));
  CHECK(count_of(reason, " in step 3") == 8);
  CHECK_THAT(reason, Catch::EndsWith("; and 1016 more ranks"));
}

TEST_CASE("a small job's reasons describe every rank", "[actors]") {
  const auto now = Clock::now();
  const auto [silent, reason] = verdict_of(job_of(2, 2, now - std::chrono::seconds(60)), now);
  INFO(reason);
  CHECK(silent == std::vector<int>{0, 1});
  CHECK(count_of(reason, " in step 3, waiting 2.0 s for a scalar sum") == 4);
  CHECK_THAT(reason, !Contains("more"));
}
