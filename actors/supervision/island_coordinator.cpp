// DiLoCo's islands lost and rejoining, the job supervisor's side (island_coordinator.hpp).

#include "actors/supervision/island_coordinator.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "actors/supervision/recovery_coordinator.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "comm/grid.hpp"
#include "monitor/list_text.hpp"
#include "monitor/log.hpp"

namespace troupe::actors::supervision {
namespace {

using Goal = recovery_in_progress::Goal;

// "island 1", "islands 1 and 2".
std::string islands_text(const std::vector<int>& islands) {
  std::string text = nodes_text(islands);
  return "island" + text.substr(4);
}

bool contains(const std::vector<int>& values, int value) {
  return std::find(values.begin(), values.end(), value) != values.end();
}

// The job's grid, as its islands are cut from it.
comm::Grid grid_of(const RecoveryShape& shape) {
  return {shape.data_parallel, shape.pipeline_stages, shape.tensor_shards};
}

// The ranks of `island`, in rank order: the donors of a rejoin, each to the rank at its place in
// the island rejoining.
std::vector<int> island_ranks(const RecoveryShape& shape, int island) {
  const comm::Grid grid = grid_of(shape);
  std::vector<int> ranks;
  for (int rank = 0; rank < grid.world(); ++rank)
    if (comm::island_of(grid, rank, shape.islands) == island) ranks.push_back(rank);
  return ranks;
}

// The islands a rejoin order brings back: those it does not keep.
std::vector<int> islands_rejoining(const RecoveryShape& shape, const recover_msg& order) {
  std::vector<int> rejoining;
  for (int island = 0; island < shape.islands; ++island)
    if (!contains(order.islands_kept, island)) rejoining.push_back(island);
  return rejoining;
}

// "rank 0", or "ranks 0 and 1".
std::string donors_text(const RecoveryShape& shape, int island) {
  return monitor::numbered("rank", island_ranks(shape, island));
}

}  // namespace

bool leave_islands_out(job_actor* self, const std::vector<int>& lost_nodes, FailureKind kind,
                       const std::string& reason) {
  auto& st = self->state;
  // The islands of the lost nodes' ranks, and every node holding a rank of them: an island is left
  // out and rejoins whole, so its live nodes' processes are started again too (killed first). A
  // node holding ranks of two islands takes both with it.
  std::vector<int> nodes = lost_nodes;
  IslandChoice choice;
  for (std::size_t widened = 0; widened != nodes.size();) {
    widened = nodes.size();
    std::vector<int> ranks;
    for (int index : nodes) {
      const PlannedNode& node = st.plan.nodes.at(index);
      for (int rank = node.first_rank; rank < node.first_rank + node.slots; ++rank) ranks.push_back(rank);
    }
    choice = choose_island_left_out(st.plan.recovery, ranks);
    if (!choice.why_not.empty()) {
      log_restart(st, choice.why_not);
      return false;
    }
    const comm::Grid grid = grid_of(st.plan.recovery);
    for (const PlannedNode& node : st.plan.nodes) {
      if (contains(nodes, node.node_index)) continue;
      for (int rank = node.first_rank; rank < node.first_rank + node.slots; ++rank)
        if (contains(choice.lost, comm::island_of(grid, rank, st.plan.recovery.islands))) {
          nodes.push_back(node.node_index);
          break;
        }
    }
  }
  std::vector<int> present;
  for (int island = 0; island < st.plan.recovery.islands; ++island)
    if (!contains(choice.lost, island)) present.push_back(island);
  recovery_in_progress recovery = replacing_nodes(st, Goal::rejoin_island, lost_nodes, kind, reason);
  // The outer group is renewed twice: over the islands present (epoch E), then with the lost ones
  // back (E + 1), the epoch their new ranks start in.
  recovery.order = {recovery.epoch + 1, {}, islands_text(choice.lost) + " lost", caf::actor_cast<caf::actor>(self)};
  recovery.order.islands_kept = present;
  std::string why_not;
  const std::string placed = start_again(st, recovery, nodes, kind, why_not);
  if (placed.empty()) {
    log_restart(st, why_not);
    return false;
  }
  st.recovery_epoch += 2;
  std::vector<int> alive(nodes.begin() + static_cast<std::ptrdiff_t>(lost_nodes.size()), nodes.end());
  std::sort(alive.begin(), alive.end());
  const std::string chosen = fmt::format(
      "{} left out (epoch {}): {} go{} on and take{} the next outer sync without {}; starting {}{}, to rejoin after "
      "that sync with the outer state of {}",
      islands_text(choice.lost), recovery.epoch, islands_text(present), present.size() == 1 ? "es" : "",
      present.size() == 1 ? "s" : "", choice.lost.size() == 1 ? "it" : "them", placed,
      alive.empty() ? std::string()
                    : fmt::format(" ({} of the island{} lost, killed first)", nodes_text(alive),
                                  choice.lost.size() == 1 ? "" : "s"),
      donors_text(st.plan.recovery, present.front()));
  monitor::logger("job")->warn("{}; recovery: {}", reason, chosen);
  const islands_msg left_out{recovery.epoch, present, {}, {}, caf::actor_cast<caf::actor>(self), {}, {}};
  for (const auto& [index, m] : st.joined)
    if (!contains(nodes, index)) self->send(m.node, recover_atom_v, left_out);
  begin_recovery(self, std::move(recovery), chosen);
  return true;
}

void rejoin_islands(job_actor* self) {
  auto& st = self->state;
  const recovery_in_progress& recovery = *st.recovery;
  islands_msg rejoin{recovery.order.epoch, {}, islands_rejoining(st.plan.recovery, recovery.order), {}};
  for (int island = 0; island < st.plan.recovery.islands; ++island) rejoin.present.push_back(island);
  const start_msg current = current_start(st);
  for (const auto& [index, process] : recovery.replaced) rejoin.replaced.push_back(current.nodes.at(index));
  for (const auto& [index, m] : st.joined)
    if (!recovery.replaced.count(index)) self->send(m.node, recover_atom_v, rejoin);
}

void on_islands_applied(job_actor* self, const islands_applied_msg& report) {
  auto& st = self->state;
  if (!st.recovery || st.recovery->goal != Goal::rejoin_island || report.epoch != st.recovery->epoch) return;
  recovery_in_progress& recovery = *st.recovery;
  recovery.applied[report.rank] = report;
  std::size_t present_ranks = 0;
  for (int island : recovery.order.islands_kept) present_ranks += island_ranks(st.plan.recovery, island).size();
  if (recovery.settle_sent || recovery.applied.size() < present_ranks) return;
  recovery.settle_sent = true;
  const std::size_t world = static_cast<std::size_t>(grid_of(st.plan.recovery).world());
  islands_msg settle{recovery.epoch,
                     recovery.order.islands_kept,
                     {},
                     {},
                     caf::actor_cast<caf::actor>(self),
                     std::vector<std::int64_t>(world, -1),
                     std::vector<int>(world, -1)};
  for (const auto& [rank, applied] : recovery.applied) {
    settle.applied.at(static_cast<std::size_t>(rank)) = applied.applied;
    settle.applied_islands.at(static_cast<std::size_t>(rank)) = applied.islands;
  }
  for (const auto& [index, m] : st.joined)
    if (!recovery.replaced.count(index)) self->send(m.node, recover_atom_v, settle);
}

void on_island_rejoined(job_actor* self, const recover_done_msg& done) {
  auto& st = self->state;
  auto& recovery = *st.recovery;
  if (done.epoch != recovery.order.epoch) return;
  if (!done.error.empty()) {
    log_restart(st, "rank " + std::to_string(done.rank) + " could not rejoin the islands: " + done.error);
    return fail_in_place(self, recovery.failed.reason + "; rejoining the islands failed: " + done.error);
  }
  recovery.done[done.rank] = done;
  if (recovery.done.size() < recovery.order.failed_ranks.size()) return;
  std::int64_t bytes = 0, steps = done.steps;
  double transfer = 0;
  for (const auto& [rank, d] : recovery.done) {
    bytes += d.bytes;
    transfer = std::max(transfer, d.seconds);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  const int donor_island = recovery.order.islands_kept.front();
  std::string processes;
  std::vector<int> nodes, old_pids;
  for (const auto& [index, process] : recovery.replaced) {
    processes += fmt::format("{}node {}'s process started again on {} (pid {}, was {})", processes.empty() ? "" : ", ",
                             index, st.plan.nodes.at(index).host, st.joined.at(index).pid, process.old_pid);
    nodes.push_back(index);
    old_pids.push_back(process.old_pid);
  }
  std::vector<int> lost = recovery.order.failed_ranks;  // the lost islands' ranks
  std::sort(lost.begin(), lost.end());
  const std::vector<int> rejoined = islands_rejoining(st.plan.recovery, recovery.order);
  monitor::logger("job")->warn(
      "recovery: {} rejoined in {:.3f} s (epoch {}): {}, every other node kept its process; the outer state of {} "
      "after step {} ({} bytes over the data plane in {:.3f} s), moments zero; every island present from the next sync",
      islands_text(rejoined), seconds, recovery.order.epoch, processes, donors_text(st.plan.recovery, donor_island),
      steps, bytes, transfer);
  emit(st, state_moved{RecoveryRoute::island_left_out, recovery.order.epoch, bytes, transfer,
                       island_ranks(st.plan.recovery, donor_island), lost});
  const training_resumed resumed{RecoveryRoute::island_left_out,
                                 recovery.order.epoch,
                                 steps,
                                 donors_text(st.plan.recovery, donor_island) + "'s outer state",
                                 lost,
                                 nodes,
                                 old_pids,
                                 seconds,
                                 recovery.kind};
  emit(st, resumed);
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, resumed);
  st.recovered_kinds.push_back(recovery.kind);
  st.holding_nothing.clear();
  leave_recovery(self);
  st.resumed_at = Clock::now();
}

}  // namespace troupe::actors::supervision
