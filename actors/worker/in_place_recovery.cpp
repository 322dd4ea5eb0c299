#include "actors/worker/in_place_recovery.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <string>

#include "actors/local_messages.hpp"
#include "comm/grid.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

// The job's plan for `epoch`; a stop while waiting ends the worker, and a rescue order (the
// recovery failed: a lost node's new process never joined) too, as RescueRequested: the worker
// still holds its last completed step. Completions of an abandoned step's operations may still
// come: nothing waits for them.
recover_plan_msg wait_for_plan(caf::blocking_actor* worker, int epoch) {
  std::optional<recover_plan_msg> plan;
  std::optional<std::string> stop;
  std::optional<rescue_msg> rescue;
  worker->receive_while([&] { return !plan && !stop && !rescue; })(
      [&](recover_atom, const recover_plan_msg& p) {
        if (p.epoch == epoch) plan = p;
      },
      [](comm_done_atom, const comm_done_msg&) {}, [&](stop_atom, const stop_msg& s) { stop = s.reason; },
      [&](rescue_atom, const rescue_msg& order) { rescue = order; }, caf::after(std::chrono::seconds(1)) >> [] {});
  if (rescue) throw RescueRequested(std::move(*rescue));
  if (stop) throw WorkStopped(*stop);
  return *plan;
}

// The parameters and moments a rank holds, in held() order, as tensors over its own memory.
std::vector<compute::Tensor> state_views(const TrainingLoop& loop) {
  std::vector<compute::Tensor> views;
  // A sim rank's state is token tensors, whose messages carry the size alone: its ranges become
  // views into one token tensor of the largest (a tensor shard holds a range a matrix row).
  compute::Tensor tokens;
  for (const checkpoint::HeldRange& range : loop.held()) {
    const compute::Shape shape{range.end - range.begin};
    if (!compute::is_token_memory(range.data)) {
      views.push_back(
          compute::Tensor::adopt(range.data, shape, compute::DType::f32, compute::Device::cpu, [](void*) {}));
      continue;
    }
    if (!tokens.defined()) {
      std::int64_t largest = 0;
      for (const checkpoint::HeldRange& r : loop.held()) largest = std::max(largest, r.end - r.begin);
      tokens = compute::Tensor::token({largest}, compute::DType::f32);
    }
    views.push_back(tokens.slice(0, shape));
  }
  return views;
}

}  // namespace

std::string InPlaceRecovery::connect_replaced(const recover_plan_msg& plan, int rank) {
  for (const node_entry& node : plan.replaced)
    if (rank >= node.first_rank && rank < node.first_rank + node.slots) return {};  // connected at its start
  // Partners in the renewed groups now (as the new process's ranks connect to theirs at its start),
  // the rest on first use.
  std::vector<int> partners;
  for (const RenewedGroup& group : groups_) {
    const std::vector<int> some = comm::partners(group.communicator->group(), rank);
    partners.insert(partners.end(), some.begin(), some.end());
  }
  std::sort(partners.begin(), partners.end());
  std::vector<comm::Engine::PeerAddress> now;  // their handshakes in flight together
  for (const node_entry& node : plan.replaced)
    for (int slot = 0; slot < node.slots; ++slot) {
      const int peer = node.first_rank + slot;
      const std::vector<std::uint8_t>& address = node.comm_addresses.at(static_cast<std::size_t>(slot)).bytes;
      if (std::binary_search(partners.begin(), partners.end(), peer))
        now.push_back({peer, address});
      else if (Status s = engine_.introduce(peer, address); !s)
        return "cannot connect to the new process of rank " + std::to_string(peer) + ": " + s.error().message;
    }
  if (Status s = engine_.connect(now); !s) return "cannot connect to the new processes' ranks: " + s.error().message;
  return {};
}

RecoveryResult InPlaceRecovery::survive(const recover_msg& order, std::int64_t steps_done, TrainingLoop& loop,
                                       const CheckpointRollback& rollback) {
  mailbox_.abandon_transfers();
  const bool grows = order.grown_world > 0;
  if (grows) {
    // Plain data parallelism alone grows in place (recovery_path.hpp): the one group is every rank.
    TROUPE_CHECK(groups_.size() == 1 && groups_.front().axis_id == comm::dp_group_id,
                 "only a replica's data-parallel group grows in place");
    engine_.grow_world(order.grown_world);
  }
  for (const RenewedGroup& group : groups_) {
    comm::Group renewed{comm::epoch_group_id(group.axis_id, order.epoch), group.communicator->group().ranks};
    if (grows) {
      renewed.ranks.resize(static_cast<std::size_t>(order.grown_world));
      std::iota(renewed.ranks.begin(), renewed.ranks.end(), 0);
    }
    group.communicator->abandon_and_renew(order.reason, std::move(renewed));
  }
  mailbox_.drain();
  loop.abandon_step();
  if (grows)
    loop.resplit(
        {engine_.rank(), order.grown_world, order.grown_grad_accum, order.grown_batch_size, order.grown_speeds});
  if (renew_step_) renew_step_(order.epoch);
  return take_part(order, steps_done, loop, rollback);
}

RecoveryResult InPlaceRecovery::join(const recover_msg& order, TrainingLoop& loop, const CheckpointRollback& rollback) {
  if (renew_step_) renew_step_(order.epoch);
  return take_part(order, -1, loop, rollback);
}

std::string InPlaceRecovery::move_state(const recover_plan_msg& plan, const recover_msg& order, TrainingLoop& loop,
                                        RecoveryResult& result) {
  const int rank = engine_.rank();
  std::vector<int> receivers;  // of this rank's state
  for (std::size_t i = 0; i < plan.receivers.size(); ++i) {
    if (plan.receivers[i] == rank) result.donor = plan.donors[i];
    if (plan.donors[i] == rank) receivers.push_back(plan.receivers[i]);
  }
  const bool receives = result.donor >= 0;
  if (!receives && receivers.empty()) return {};
  const comm::MessageKey key{comm::MessageKind::point_to_point,
                             comm::epoch_group_id(comm::state_transfer_group_id, order.epoch), 0, 0};
  loop.mirror_to_host();
  const std::vector<compute::Tensor> views = state_views(loop);
  for (std::size_t i = 0; i < views.size(); ++i) {
    comm::MessageKey part = key;
    part.index = static_cast<std::uint16_t>(i);
    if (receives) {
      mailbox_.recv(engine_, result.donor, part, views[i]);
      result.bytes += views[i].nbytes();
    } else {
      for (int receiver : receivers) {
        mailbox_.send(engine_, receiver, part, views[i]);
        result.bytes += views[i].nbytes();
      }
    }
  }
  result.received = receives;
  if (Status moved = mailbox_.wait_all(); !moved) return moved.error().message;
  return {};
}

RecoveryResult InPlaceRecovery::take_part(const recover_msg& order, std::int64_t steps_done, TrainingLoop& loop,
                                          const CheckpointRollback& rollback) {
  const int rank = engine_.rank();
  worker_->send(order.job, recover_atom_v,
                recover_ready_msg{order.epoch, rank, steps_done, caf::actor_cast<caf::actor>(worker_),
                                  rollback.newest ? rollback.newest() : -1});
  const recover_plan_msg plan = wait_for_plan(worker_, order.epoch);
  TROUPE_CHECK(plan.donors.size() == plan.receivers.size(), "a recovery plan pairs every receiver with a donor");
  RecoveryResult result{plan.steps, -1, false, 0, 0, {}};
  const auto start = Clock::now();
  std::string error = connect_replaced(plan, rank);
  if (error.empty() && plan.rollback) {
    TROUPE_CHECK(static_cast<bool>(rollback.load), "a rollback plan reaches only a rank that writes checkpoints");
    if (Expected<std::string> loaded = rollback.load(plan.steps); !loaded) {
      error = "rolling back to checkpoint step " + std::to_string(plan.steps) + ": " + loaded.error().message;
    } else {
      result.checkpoint = *loaded;
      for (const checkpoint::HeldRange& range : loop.held())
        result.bytes += (range.end - range.begin) * static_cast<std::int64_t>(sizeof(float));
    }
  } else if (error.empty()) {
    error = move_state(plan, order, loop, result);
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (error.empty()) {
    loop.mirror_to_device();
    loop.resume_at(plan.steps);
  }
  worker_->send(order.job, recover_atom_v, recover_done_msg{order.epoch, rank, result.bytes, result.seconds, error});
  if (!error.empty()) throw CommFailed("in-place recovery: " + error);
  return result;
}

}  // namespace troupe::actors
