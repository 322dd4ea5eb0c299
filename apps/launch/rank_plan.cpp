// Rank assignment: one pass in file order, keyed by machine for the local ranks.

#include "apps/launch/rank_plan.hpp"

#include <algorithm>
#include <map>

#include "actors/process_environment.hpp"
#include "apps/launch/local_host.hpp"

namespace troupe::launch {

RankPlan plan_ranks(const std::vector<HostEntry>& hosts, std::string_view this_host) {
  RankPlan plan;
  std::map<std::string, int> machine_slots;  // slots given so far per machine
  const auto machine = [](const NodePlan& node) { return node.local ? std::string("localhost") : node.host; };
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    NodePlan node;
    node.node_index = static_cast<int>(i);
    node.host = hosts[i].host;
    node.slots = hosts[i].slots;
    node.local = is_local_host(node.host, this_host);
    node.first_rank = plan.world_size;
    node.local_rank_base = machine_slots[machine(node)];
    machine_slots[machine(node)] += node.slots;
    plan.world_size += node.slots;
    plan.nodes.push_back(std::move(node));
  }
  for (NodePlan& node : plan.nodes) node.local_world_size = machine_slots[machine(node)];
  return plan;
}

int local_workers(const RankPlan& plan) {
  int workers = 0;
  for (const NodePlan& node : plan.nodes) workers += node.local ? node.slots : 0;
  return workers;
}

Status check_local_workers(const RankPlan& plan, unsigned cpus, const std::string& origin) {
  const long long most = static_cast<long long>(max_local_workers_per_cpu) * std::max(cpus, 1u);
  const int here = local_workers(plan);
  if (here <= most) return Status::success();
  return Error{origin + ": " + std::to_string(here) + " workers on this machine, but its " +
               std::to_string(std::max(cpus, 1u)) + " CPU core(s) run at most " + std::to_string(most) + " (" +
               std::to_string(max_local_workers_per_cpu) + " per core)"};
}

Status check_local_sysv_segments(const RankPlan& plan, int per_rank, int in_use, int limit, const std::string& origin) {
  int largest_node = 0;
  for (const NodePlan& node : plan.nodes)
    if (node.local) largest_node = std::max(largest_node, node.slots);
  const int here = local_workers(plan);
  const long long need = static_cast<long long>(per_rank) * (here + largest_node);
  if (need <= limit - in_use) return Status::success();
  long long enough = 1;
  while (enough < in_use + need) enough *= 2;
  return Error{origin + ": " + std::to_string(here) + " simulated ranks on this machine take " + std::to_string(need) +
               " System V shared memory segments (" + std::to_string(per_rank) + " a rank, and as many for the " +
               std::to_string(largest_node) +
               " ranks of a node process started again in place), but kernel.shmmni allows " + std::to_string(limit) +
               " and " + std::to_string(in_use) + " are in use: raise it (sysctl -w kernel.shmmni=" +
               std::to_string(enough) + ") or put fewer ranks on this machine"};
}

Environment node_environment(const RankPlan& plan, const NodePlan& node, const JobContact& contact) {
  const bool ipv6 = contact.host.find(':') != std::string::npos;
  const std::string join = (ipv6 ? "[" + contact.host + "]" : contact.host) + ":" + std::to_string(contact.port);
  namespace env = actors::env;
  return {
      {env::rank.name, std::to_string(node.first_rank)},
      {env::world_size.name, std::to_string(plan.world_size)},
      {env::local_rank.name, std::to_string(node.local_rank_base)},
      {env::local_world_size.name, std::to_string(node.local_world_size)},
      {env::master_addr.name, contact.host},
      {env::master_port.name, std::to_string(contact.port)},
      {env::node_index.name, std::to_string(node.node_index)},
      {env::slots.name, std::to_string(node.slots)},
      {env::join.name, join},
      {env::token.name, contact.token},
  };
}

std::vector<NodeProcessSpec> node_process_specs(const RankPlan& plan, const JobContact& contact,
                                       const std::vector<std::string>& argv) {
  std::vector<NodeProcessSpec> commands;
  for (const NodePlan& node : plan.nodes) {
    commands.push_back({node.node_index, node.host, node.local, argv, node_environment(plan, node, contact)});
  }
  return commands;
}

}  // namespace troupe::launch
