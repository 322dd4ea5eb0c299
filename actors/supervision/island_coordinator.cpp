// DiLoCo's islands lost and rejoining, the job supervisor's side (island_coordinator.hpp).

#include "actors/supervision/island_coordinator.hpp"

#include <algorithm>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "actors/supervision/recovery_coordinator.hpp"
#include "actors/supervision/recovery_path.hpp"
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

}  // namespace

bool leave_islands_out(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason) {
  auto& st = self->state;
  std::vector<int> ranks;
  for (int index : nodes) {
    const PlannedNode& node = st.plan.nodes.at(index);
    for (int rank = node.first_rank; rank < node.first_rank + node.slots; ++rank) ranks.push_back(rank);
  }
  // One rank an island (choose_island_left_out): island i is rank i.
  const IslandChoice choice = choose_island_left_out(st.plan.recovery, ranks);
  if (!choice.why_not.empty()) {
    log_restart(st, choice.why_not);
    return false;
  }
  std::vector<int> present;
  for (int island = 0; island < st.plan.recovery.islands; ++island)
    if (!contains(choice.lost, island)) present.push_back(island);
  recovery_in_progress recovery = replacing_nodes(st, Goal::rejoin_island, nodes, kind, reason);
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
  const std::string chosen = fmt::format(
      "{} left out (epoch {}): {} go{} on and take{} the next outer sync without {}; starting {}, to rejoin after "
      "that sync with the outer state of rank {}",
      islands_text(choice.lost), recovery.epoch, islands_text(present), present.size() == 1 ? "es" : "",
      present.size() == 1 ? "s" : "", choice.lost.size() == 1 ? "it" : "them", placed, present.front());
  monitor::logger("job")->warn("{}; recovery: {}", reason, chosen);
  const islands_msg left_out{recovery.epoch, present, {}, {}};
  for (const auto& [index, m] : st.joined)
    if (!contains(nodes, index)) self->send(m.node, recover_atom_v, left_out);
  begin_recovery(self, std::move(recovery), chosen);
  return true;
}

void rejoin_islands(job_actor* self) {
  auto& st = self->state;
  const recovery_in_progress& recovery = *st.recovery;
  islands_msg rejoin{recovery.order.epoch, {}, recovery.order.failed_ranks, {}};
  std::sort(rejoin.rejoining.begin(), rejoin.rejoining.end());
  for (int island = 0; island < st.plan.recovery.islands; ++island) rejoin.present.push_back(island);
  const start_msg current = current_start(st);
  for (const auto& [index, process] : recovery.replaced) rejoin.replaced.push_back(current.nodes.at(index));
  for (const auto& [index, m] : st.joined)
    if (!recovery.replaced.count(index)) self->send(m.node, recover_atom_v, rejoin);
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
  const int donor = recovery.order.islands_kept.front();  // island i is rank i
  std::string processes;
  std::vector<int> nodes, old_pids;
  for (const auto& [index, process] : recovery.replaced) {
    processes += fmt::format("{}node {}'s process started again on {} (pid {}, was {})", processes.empty() ? "" : ", ",
                             index, st.plan.nodes.at(index).host, st.joined.at(index).pid, process.old_pid);
    nodes.push_back(index);
    old_pids.push_back(process.old_pid);
  }
  std::vector<int> lost = recovery.order.failed_ranks;
  std::sort(lost.begin(), lost.end());
  monitor::logger("job")->warn(
      "recovery: {} rejoined in {:.3f} s (epoch {}): {}, every other node kept its process; the outer state of rank {} "
      "after step {} ({} bytes over the data plane in {:.3f} s), moments zero; every island present from the next sync",
      islands_text(lost), seconds, recovery.order.epoch, processes, donor, steps, bytes, transfer);
  emit(st, state_moved{RecoveryRoute::island_left_out, recovery.order.epoch, bytes, transfer, {donor}, lost});
  const training_resumed resumed{RecoveryRoute::island_left_out,
                                 recovery.order.epoch,
                                 steps,
                                 "rank " + std::to_string(donor) + "'s outer state",
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
