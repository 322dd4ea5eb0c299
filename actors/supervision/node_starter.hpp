#pragma once
// What the job runner (job_runner.hpp) needs of whoever starts node processes. The runner decides
// which nodes run, with which configuration, and when one starts again; the starter knows
// processes, hosts and host files: `troupe launch` implements it over its Boost.Asio launcher
// (apps/commands/launched_nodes.hpp), starting local nodes by fork/exec and remote ones through the
// launcher template.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/job_options.hpp"
#include "actors/supervision/restart_policy.hpp"

namespace troupe::actors {

// A node of an attempt: its place in the attempt's node order (its node index), its host-file
// line, its ranks first_rank … first_rank + slots − 1, and whether it runs on this machine.
struct PlacedNode {
  int node_index = 0;
  std::string host;
  int slots = 1;
  int first_rank = 0;
  bool local = false;
};

// Which of `nodes` run on this machine, by node index (as the control port takes it).
inline std::vector<bool> nodes_on_this_machine(const std::vector<PlacedNode>& nodes) {
  std::vector<bool> local;
  for (const PlacedNode& node : nodes) local.push_back(node.local);
  return local;
}

// Variables a node process gets on top of those the starter gives every node (its ranks, where
// the job is): its attempt, the job's recovery counts, a lost process's MFU basis.
using NodeEnvironment = std::vector<std::pair<std::string, std::string>>;

// One attempt's nodes, as the starter runs them.
struct AttemptNodes {
  std::vector<NodeShape> lines;  // the attempt's nodes, in node order
  JobConfig config;              // what every node runs (the starter spells it as the nodes' arguments)
  std::string job_host;          // where the nodes join the job
  int job_port = 0;
  std::string token;
  NodeEnvironment env;  // added to every node
  // Asked when a node fails while running: how long to leave the others alone before stopping them
  // (a rescue snapshot, or a process started again in place may answer it); 0: stop at once.
  std::function<std::chrono::milliseconds()> hold_after_failure;
  // A process the starter started again in place (start_again, move) exited: its node, pid, how.
  std::function<void(int node_index, int pid, const std::string& how)> restarted_exited;
  // A signal (SIGINT, SIGTERM, SIGHUP) begins the nodes' stop, before any node is signalled: the
  // job ends with `why`, and the nodes' exits that follow are not failures to recover from.
  std::function<void(const std::string& why)> stopping_at_signal;
};

// How an attempt's node processes ended.
enum class NodesEnd { success, node_failed, start_failed, interrupted, terminated, hung_up };
struct NodesOutcome {
  NodesEnd end = NodesEnd::success;
  int exit_code = 0;     // the job's exit code for it (0, 1, 3, or 128 + the signal)
  std::string message;   // one line saying why the nodes stopped; empty on success
  int first_ended = -1;  // the node index of the first process to end, where one did
};

// The spare lines a host file gained while a watch ran; the watch stops when this goes away.
class SpareLineWatch {
 public:
  virtual ~SpareLineWatch() = default;
  // The new spare lines seen at the last read, each with slots for a node left out.
  virtual std::vector<NodeShape> found() = 0;
};

class NodeStarter {
 public:
  virtual ~NodeStarter() = default;
  // Where the nodes of `lines` run, in order: each one's first rank and whether it is this machine.
  virtual std::vector<PlacedNode> place(const std::vector<NodeShape>& lines) const = 0;
  // Starts `attempt`'s nodes and runs them until every one ended; blocks. One attempt at a time.
  virtual NodesOutcome run(AttemptNodes attempt) = 0;

  // While run() runs, from any thread (the job supervisor's):
  // Stops every node: the job's attempt ended with `reason`.
  virtual void stop_all(const std::string& reason) = 0;
  // Starts node `node_index`'s process again on its host (SIGKILL to the old one first).
  virtual void start_again(int node_index, NodeEnvironment env) = 0;
  // Starts node `node_index`'s process on `host` (a spare line), alone on that machine; the old one
  // is left where it is (its host is unreachable).
  virtual void move(int node_index, const std::string& host, NodeEnvironment env) = 0;
  // Starts node `node_index` of `lines` (the attempt's nodes and those that join it), which the
  // attempt did not run yet, with `config`.
  virtual void add(const std::vector<NodeShape>& lines, int node_index, const JobConfig& config,
                   NodeEnvironment env) = 0;
  // A running node started again from now on runs `config` in a world of `world_size` ranks.
  virtual void update(int node_index, const JobConfig& config, int world_size) = 0;

  // Watches the host file for spare lines beyond `known` with slots for one of the nodes left
  // out (`left_out_slots`), calling `grow` when there is one (and again later, in case the job
  // could not take the order yet); null when there is no host file to watch.
  virtual std::unique_ptr<SpareLineWatch> watch_spares(const std::vector<NodeShape>& known,
                                                       const std::vector<int>& left_out_slots,
                                                       std::function<void()> grow) = 0;
};

}  // namespace troupe::actors
