// A node process for the control-plane tests: joins the job supervisor at 127.0.0.1:PORT with
// the identity given on the command line, beats every 100 ms, and does what BEHAVIOR says once
// started, in each of its workers (node i hosts i + 1 slots, as the tests' plans have it):
//   check  verify the start message (world size, every peer worker's address and device group
//          id) and finish
//   fail   report a failure
//   hang   in step 1, wait for a message that never comes, until the job says stop
//   busy   in step 1, compute (not wait) without end, until the job says stop
//   stall  in step 1, compute (not wait) for 2 s, then report that the connection to the next
//          rank broke, as a stalled rank whose waiting peer gave up on it does
//   rescue in step 1, wait for the job's rescue order; a named writer answers that it saved
//          step 7; then wait until the job says stop
//   trained finish steps 1 to 3 (the tests' last step), then wait in the final validation until
//          the job says stop
// Exits with the node's outcome code and prints its reason on stderr.
//
//   test_actors_node PORT NODE_INDEX TOKEN BUILD_ID CONFIG_HASH BEHAVIOR

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/node/node_supervisor.hpp"

using namespace troupe::actors;

namespace {

std::string address_of(int node_index, int slot) {
  return "addr-" + std::to_string(node_index) + "." + std::to_string(slot);
}

// Node i says it leads group 100 + i from its first rank (i·(i+1)/2: node i hosts i + 1 slots).
device_group_id device_group_of(int node_index) {
  const std::string id = "device-id-" + std::to_string(node_index);
  return {static_cast<std::uint16_t>(100 + node_index), node_index * (node_index + 1) / 2,
          byte_blob{{id.begin(), id.end()}}};
}

node_done_msg check_start(const start_msg& start) {
  int world = 0;
  for (std::size_t i = 0; i < start.nodes.size(); ++i) {
    const node_entry& n = start.nodes[i];
    if (n.node_index != static_cast<int>(i) || n.first_rank != world)
      return {-1, 1, "node entry " + std::to_string(i) + " is out of order"};
    if (static_cast<int>(n.comm_addresses.size()) != n.slots)
      return {-1, 1, "node " + std::to_string(i) + " has " + std::to_string(n.comm_addresses.size()) + " addresses"};
    for (int slot = 0; slot < n.slots; ++slot) {
      const auto& bytes = n.comm_addresses[static_cast<std::size_t>(slot)].bytes;
      std::string address(bytes.begin(), bytes.end());
      if (address != address_of(n.node_index, slot))
        return {-1, 1, "node " + std::to_string(i) + " slot " + std::to_string(slot) + " address '" + address + "'"};
    }
    const device_group_id expected = device_group_of(n.node_index);
    if (n.device_group_ids.size() != 1 || n.device_group_ids[0].group != expected.group ||
        n.device_group_ids[0].leader_rank != expected.leader_rank ||
        n.device_group_ids[0].id.bytes != expected.id.bytes)
      return {-1, 1, "node " + std::to_string(i) + " lost its device group id on the way"};
    world += n.slots;
  }
  if (world != start.world_size) return {-1, 1, "world size " + std::to_string(start.world_size)};
  return {-1, 0, ""};
}

node_done_msg until_stopped(caf::blocking_actor* worker) {
  std::string reason = "no stop within 5 minutes";
  worker->receive([&](stop_atom, const stop_msg& stop) { reason = "stopped: " + stop.reason; },
                  caf::after(std::chrono::minutes(5)) >> [] {});
  return {-1, 1, reason};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(
        stderr,
        "usage: %s PORT NODE_INDEX TOKEN BUILD_ID CONFIG_HASH check|fail|hang|busy|stall|rescue|trained ATTEMPT\n",
        argv[0]);
    return 64;
  }
  const auto port = static_cast<std::uint16_t>(std::stoi(argv[1]));
  const int node_index = std::stoi(argv[2]);
  const std::string behaviour = argv[6];

  TroupeConfig cfg;
  caf::actor_system system{cfg};
  auto job = system.middleman().remote_actor("127.0.0.1", port);
  if (!job) {
    std::fprintf(stderr, "cannot reach the job: %s\n", to_string(job.error()).c_str());
    return 3;
  }
  join_msg hello;
  hello.token = argv[3];
  hello.attempt = std::stoi(argv[7]);
  hello.build_id = argv[4];
  hello.config_hash = std::stoull(argv[5]);
  hello.node_index = node_index;
  hello.host = "localhost";
  hello.pid = static_cast<int>(::getpid());
  const int slots = node_index + 1;
  for (int slot = 0; slot < slots; ++slot) {
    std::string address = address_of(node_index, slot);
    hello.comm_addresses.push_back(byte_blob{{address.begin(), address.end()}});
  }
  hello.device_group_ids.push_back(device_group_of(node_index));

  NodeWork work = [behaviour, node_index](const start_msg& start, int slot, caf::blocking_actor* worker,
                                          troupe::monitor::WorkProgress& progress,
                                          const std::optional<recover_msg>&) -> node_done_msg {
    if (behaviour == "fail") return {-1, 3, "deliberate failure"};
    if (behaviour == "rescue") {
      progress.begin("step 1");
      const int rank = start.nodes.at(static_cast<std::size_t>(node_index)).first_rank + slot;
      std::optional<node_done_msg> stopped;
      worker->receive(
          [&](rescue_atom, const rescue_msg& order) {
            for (int writer : order.writers)
              if (writer == rank) worker->send(order.reply_to, rescue_atom_v, rescue_done_msg{rank, 7, ""});
          },
          [&](stop_atom, const stop_msg& stop) { stopped = node_done_msg{-1, 1, "stopped: " + stop.reason}; },
          caf::after(std::chrono::minutes(5)) >> [] {});
      return stopped ? *stopped : until_stopped(worker);
    }
    if (behaviour == "hang") {
      progress.begin("step 1");
      auto waiting = progress.wait_for("a message that never comes");
      return until_stopped(worker);
    }
    if (behaviour == "trained") {
      for (std::int64_t step = 1; step <= 3; ++step) {
        progress.begin("step " + std::to_string(step));
        progress.step_done(step);
      }
      progress.begin("validation after step 3");
      return until_stopped(worker);
    }
    if (behaviour == "stall") {
      progress.begin("step 1");
      std::this_thread::sleep_for(std::chrono::seconds(2));
      const int peer = start.nodes.at(static_cast<std::size_t>(node_index)).first_rank + slot + 1;
      return {-1, 1, "comm: all_reduce on group 0 failed: rank " + std::to_string(peer) +
                         " lost (UCX endpoint error: Connection reset by remote peer)"};
    }
    if (behaviour == "busy") {
      progress.begin("step 1");
      return until_stopped(worker);
    }
    return check_start(start);
  };
  NodeOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(100);
  caf::scoped_actor self{system};
  spawn_node_supervisor(system, *job, std::move(hello), work, std::move(options), self);
  int code = 1;
  self->receive([&](done_atom, const job_outcome_msg& outcome) {
    std::fprintf(stderr, "node %d: %s\n", node_index, outcome.reason.c_str());
    code = outcome.exit_code;
  });
  return code;
}
