#include "actors/worker/island_membership.hpp"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "actors/local_messages.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

compute::Tensor copy_of(const compute::Tensor& t) {
  compute::Tensor copy = compute::Tensor::zeros(t.shape(), t.dtype());
  std::memcpy(copy.data(), t.data(), t.nbytes());
  return copy;
}

// The point-to-point key of a rejoin's outer state, part `index`: 0 the steps, 1 w_sync, 2 the momentum.
comm::MessageKey outer_state_key(int epoch, std::uint16_t index) {
  return {comm::MessageKind::point_to_point, comm::epoch_group_id(comm::state_transfer_group_id, epoch), 0, index};
}

// The point-to-point key of a settled sum, the `index`-th of those a rank missed, after the
// renewal of epoch `epoch` (the left-out one: a rejoin's transfers are under the next).
comm::MessageKey settled_sum_key(int epoch, std::uint16_t index) {
  return {comm::MessageKind::point_to_point, comm::epoch_group_id(comm::state_transfer_group_id, epoch), 1, index};
}

// The held ranges of `kind`, in the loop's order, as tensors over its own memory: one, or on a
// stage of several chunks one a chunk, which together lie as the outer state's flat buffer does.
std::vector<compute::Tensor> held_views(const TrainingLoop& loop, const std::string& kind) {
  std::vector<compute::Tensor> views;
  for (const checkpoint::HeldRange& range : loop.held())
    if (range.kind == kind)
      views.push_back(compute::Tensor::adopt(range.data, {range.end - range.begin}, compute::DType::f32,
                                             compute::Device::cpu, [](void*) {}));
  TROUPE_CHECK(!views.empty(), "a DiLoCo rank holds no '" + kind + "' state");
  return views;
}

std::int64_t elements(const std::vector<compute::Tensor>& views) {
  std::int64_t count = 0;
  for (const compute::Tensor& view : views) count += view.numel();
  return count;
}

// Where a flat buffer of the held ranges of `kind` arrives: the one range itself, or a buffer of
// their size to be spread over them (spread_into).
compute::Tensor arrival(const std::vector<compute::Tensor>& views) {
  if (views.size() == 1) return views.front();
  return compute::Tensor::zeros({elements(views)}, compute::DType::f32);
}

// `flat`'s elements into `views`, one after another.
void spread_into(const compute::Tensor& flat, const std::vector<compute::Tensor>& views) {
  TROUPE_CHECK(flat.numel() == elements(views), "a flat buffer of other held ranges");
  std::int64_t at = 0;
  for (const compute::Tensor& view : views) {
    if (view.data() != flat.data())
      std::memcpy(view.data(), flat.data_as<float>() + at, static_cast<std::size_t>(view.nbytes()));
    at += view.numel();
  }
}

}  // namespace

IslandMembership::IslandMembership(MailboxComm& mailbox, comm::Engine& engine, monitor::WorkProgress& progress,
                                   const comm::Grid& grid, int islands, compute::OuterPrecision precision,
                                   std::unique_ptr<comm::Communicator> outer, bool leaves_out, long kill_after_posting)
    : mailbox_(mailbox),
      engine_(engine),
      progress_(progress),
      grid_(grid),
      islands_(islands),
      precision_(precision),
      outer_(std::move(outer)),
      leaves_out_(leaves_out),
      kill_after_posting_(kill_after_posting) {
  for (int island = 0; island < islands_; ++island) present_.push_back(island);
}

compute::IslandGroup IslandMembership::group() {
  compute::IslandGroup group{islands_, comm::island_of(grid_, engine_.rank(), islands_), {}, {}, {}};
  group.start_sum = [this](compute::Tensor pseudo_gradient, long steps) {
    start_sum(std::move(pseudo_gradient), steps);
  };
  group.wait_sum = [this] { return wait_sum(); };
  if (leaves_out_) {
    group.synced = [this](long steps, const compute::Tensor& last_sync, const compute::Tensor& momentum) {
      synced(steps, last_sync, momentum);
    };
    group.agree = [this] { return agree(); };
    group.between_steps = [this] { poll(); };
  }
  return group;
}

int IslandMembership::rank_in(int island) const {
  return comm::outer_group(grid_, engine_.rank(), islands_).ranks.at(static_cast<std::size_t>(island));
}

void IslandMembership::renew(int epoch, const std::vector<int>& present) {
  comm::Group renewed{comm::epoch_group_id(comm::outer_group_id, epoch), {}};
  for (int island : present) renewed.ranks.push_back(rank_in(island));
  outer_->abandon_and_renew("the islands present changed (epoch " + std::to_string(epoch) + ")", std::move(renewed));
  ++renewals_;
  const bool left_out = present.size() < present_.size();
  present_ = present;
  if (!left_out) return;
  settle_epoch_ = epoch;
  report_due_ = true;
  settle_table_.reset();
}

void IslandMembership::report_if_final() {
  // Final once none of its sums can be applied but through the settle: none in flight, and every
  // landed one failed. A rank must not wait for its island's agreement first: another rank of the
  // island may have posted its sum over the renewed group, where it waits for a rank that waits for
  // the settle's table, which waits for this report.
  const bool failed = std::all_of(landed_.begin(), landed_.end(), [](const Posted& p) { return p.islands == 0; });
  if (report_due_ && posted_.empty() && failed) report();
}

void IslandMembership::report() {
  report_due_ = false;
  mailbox_.worker()->send(
      job_, recover_atom_v,
      islands_applied_msg{settle_epoch_, engine_.rank(), sums_applied_, kept_.empty() ? 0 : kept_.front().islands});
}

std::int64_t IslandMembership::applied_at(int island) const {
  return settle_table_->applied.at(static_cast<std::size_t>(rank_in(island)));
}

int IslandMembership::settle_source() const {
  // Among the islands present in the settle's epoch: the table may come after a rejoin renewed the
  // group over more islands, which took no part in the sums it settles.
  const std::vector<int>& settled = settle_table_->present;
  int source = settled.front();
  for (int island : settled)
    if (applied_at(island) > applied_at(source)) source = island;
  return source;
}

void IslandMembership::serve() {
  const int source = settle_source();
  const std::int64_t ahead = applied_at(source);
  if (rank_in(source) != engine_.rank()) return;
  // This island applied the newest: its kept sums to the ranks at this place that did not.
  std::vector<MailboxComm::Operation> sends;
  for (int island : settle_table_->present) {
    const std::int64_t behind = applied_at(island);
    for (std::int64_t sequence = behind; sequence < ahead; ++sequence) {
      const auto kept =
          std::find_if(kept_.begin(), kept_.end(), [&](const Posted& p) { return p.sequence == sequence; });
      if (kept == kept_.end())
        throw CommFailed("rank " + std::to_string(rank_in(island)) + " is " + std::to_string(ahead - behind) +
                         " outer sums behind this rank, more than it keeps");
      sends.push_back(mailbox_.send(engine_, rank_in(island),
                                    settled_sum_key(settle_epoch_, static_cast<std::uint16_t>(sequence - behind)),
                                    kept->original));
    }
  }
  auto waiting = progress_.wait_for("the outer sums this island applied, to the ranks that did not");
  for (MailboxComm::Operation op : sends) check_comm(mailbox_.wait(op));
}

void IslandMembership::take_settled() {
  if (report_due_) report();
  {
    auto waiting = progress_.wait_for("the job's table of the outer sums the islands present applied");
    while (!settle_table_) {
      mailbox_.wait_islands_order();
      take_orders();
    }
  }
  const int source = settle_source();
  const std::int64_t ahead = applied_at(source);
  if (ahead <= sums_applied_) return;
  // Behind: the sums this rank posted and did not apply, as the source's ranks applied them.
  const int islands = settle_table_->applied_islands.at(static_cast<std::size_t>(rank_in(source)));
  std::vector<MailboxComm::Operation> receives;
  for (std::int64_t sequence = sums_applied_; sequence < ahead; ++sequence) {
    const auto entry =
        std::find_if(landed_.begin(), landed_.end(), [&](const Posted& p) { return p.sequence == sequence; });
    if (entry == landed_.end())
      throw CommFailed("island " + std::to_string(source) + " applied outer sum " + std::to_string(sequence + 1) +
                       ", which this rank has not landed");
    if (entry->adopted) continue;
    entry->adopted = true;
    entry->islands = islands;
    ++sums_settled_;
    receives.push_back(mailbox_.recv(
        engine_, rank_in(source), settled_sum_key(settle_epoch_, static_cast<std::uint16_t>(sequence - sums_applied_)),
        entry->sum.pseudo_gradient));
  }
  if (receives.empty()) return;
  {
    auto waiting =
        progress_.wait_for("the outer sums an island present applied, from rank " + std::to_string(rank_in(source)));
    for (MailboxComm::Operation op : receives) check_comm(mailbox_.wait(op));
  }
  monitor::logger("train")->warn(
      "rank {}: island {} applied the outer sync in flight when an island was lost and this rank's island did not: "
      "its sum taken from rank {} ({} part(s)) instead of summed again",
      engine_.rank(), source, rank_in(source), ahead - sums_applied_);
}

void IslandMembership::post(Posted& posted) {
  posted.sum = post_outer_sum(mailbox_, *outer_, posted.sum.pseudo_gradient, precision_);
  posted.islands = outer_->group().size();
  posted.posted_in = renewals_;
  posted.failed_in = -1;
}

void IslandMembership::repost(Posted& posted) {
  // The pseudo-gradient as first posted (the ring added into the buffer), over the islands present.
  std::memcpy(posted.sum.pseudo_gradient.data(), posted.original.data(), posted.original.nbytes());
  post(posted);
}

bool IslandMembership::take_orders() {
  mailbox_.take_waiting_orders();
  bool renewed = false;
  while (std::optional<islands_msg> order = mailbox_.take_islands_order()) {
    if (!order->applied.empty()) {
      // The settle's table (a late one, of a renewal settled over again since, is dropped).
      if (order->epoch != settle_epoch_) continue;
      settle_table_ = std::move(*order);
      serve();
    } else if (order->rejoining.empty()) {
      job_ = order->job;
      renew(order->epoch, order->present);
      renewed = true;
    } else {
      rejoin_ = std::move(*order);
    }
  }
  return renewed;
}

void IslandMembership::poll() {
  take_orders();
  report_if_final();
}

void IslandMembership::start_sum(compute::Tensor pseudo_gradient, long steps_taken) {
  if (leaves_out_) poll();
  // Copied before it is posted: the ring adds into it from the moment it is.
  compute::Tensor original = leaves_out_ ? copy_of(pseudo_gradient) : compute::Tensor{};
  posted_.push_back({{0, std::move(pseudo_gradient), {}}, std::move(original), sums_started_});
  ++sums_started_;
  post(posted_.back());
  if (steps_taken == kill_after_posting_) {
    monitor::logger("drill")->error(
        "drill: the node process of rank {} kills itself during the outer sync after step {}", engine_.rank(),
        steps_taken);
    ::raise(SIGKILL);
  }
}

void IslandMembership::land(Posted& posted) {
  for (;;) {
    bool done;
    {
      auto waiting = progress_.wait_for(outer_sum_wait);
      done = !leaves_out_ || mailbox_.wait_or_islands_order(posted.sum.op);
    }
    if (!done) {
      take_orders();  // a renewal gives the sum up (its wait then fails), a rejoin order is kept
      continue;
    }
    // A sum landed over a group renewed since is given up all the same: where islands were left out,
    // what it holds is settled with the islands present (take_settled).
    const Status summed = mailbox_.wait(posted.sum.op);
    if (summed && posted.posted_in == renewals_) return;
    if (!leaves_out_) check_comm(summed);
    // A peer of the sum was lost (the job's word decides: islands left out, or a stop), or a renewal
    // since it was posted gave it up: the island's agreement takes it from there.
    posted.islands = 0;
    if (posted.posted_in == renewals_) posted.failed_in = renewals_;
    return;
  }
}

bool IslandMembership::order_due() const {
  if (static_cast<int>(present_.size()) == islands_) return true;
  return std::any_of(landed_.begin(), landed_.end(), [this](const Posted& p) { return p.failed_in == renewals_; });
}

void IslandMembership::agree_over(std::vector<comm::Communicator*> groups) {
  island_groups_.clear();
  if (!leaves_out_) return;
  for (comm::Communicator* group : groups)
    if (group && group->group().size() > 1) island_groups_.push_back(group);
}

bool IslandMembership::island_agrees(int islands, bool consistent) {
  if (island_groups_.empty()) return consistent && islands > 0;
  // The sum of the counts and of their squares over the island (summed over each of its groups in
  // turn, whose product it is): equal counts c over n ranks give n·c and n·c² (small integers, exact
  // in f32), and only they give n·Σc² = (Σc)²; and how many ranks' own sums differed.
  compute::Tensor counts = compute::Tensor::zeros({3}, compute::DType::f32);
  counts.data_as<float>()[0] = static_cast<float>(islands);
  counts.data_as<float>()[1] = static_cast<float>(islands * islands);
  counts.data_as<float>()[2] = consistent ? 0.0f : 1.0f;
  auto waiting = progress_.wait_for("the island's ranks agreeing on the islands their outer sum holds");
  double ranks = 1;
  for (comm::Communicator* group : island_groups_) {
    check_comm(mailbox_.wait(mailbox_.all_reduce(*group, counts)));
    ranks *= group->group().size();
  }
  const double sum = counts.data_as<float>()[0], squares = counts.data_as<float>()[1];
  return ranks * squares == sum * sum && sum > 0 && counts.data_as<float>()[2] == 0.0f;
}

int IslandMembership::wait_sum() {
  Posted& posted = posted_.front();
  land(posted);
  const int summed_over = posted.islands;
  if (leaves_out_) {
    landed_.push_back(std::move(posted));
  } else {
    read_outer_sum(posted.sum);
  }
  posted_.pop_front();
  return summed_over;
}

int IslandMembership::agree() {
  // The islands this rank's sums of the fragment hold (where it holds none of it, those present),
  // and whether they all hold as many.
  const auto count = [this] { return landed_.empty() ? static_cast<int>(present_.size()) : landed_.front().islands; };
  const auto consistent = [this] {
    return std::all_of(landed_.begin(), landed_.end(),
                       [&](const Posted& p) { return p.islands > 0 && p.islands == landed_.front().islands; });
  };
  report_if_final();
  while (!island_agrees(count(), consistent())) {
    // A sync in flight when an island was lost landed with it at some places and not at others:
    // once the job said which islands are present (and the renewal settled what an island present
    // applied), every sum not settled is taken again over the islands present.
    if (count() > 0)
      monitor::logger("train")->warn(
          "rank {}: outer sync {} was summed over {} island(s) here and not so at another place of this island or "
          "another island (an island was lost during it): settled over the islands present",
          engine_.rank(), sums_started_, count());
    else
      monitor::logger("train")->warn(
          "rank {}: outer sync {} failed here or was given up (an island was lost during it): settled over the islands "
          "present",
          engine_.rank(), sums_started_);
    {
      auto waiting = progress_.wait_for("the job's word on the island lost during the outer sync");
      while (order_due()) {
        mailbox_.wait_islands_order();
        take_orders();
      }
    }
    take_settled();
    for (Posted& posted : landed_) {
      if (posted.adopted || posted.islands == static_cast<int>(present_.size())) continue;
      repost(posted);
      land(posted);
    }
  }
  const int islands = count();
  for (Posted& posted : landed_) {
    if (!posted.adopted) read_outer_sum(posted.sum);
    // Kept until the next sync lands: an island present that missed this one takes it (settle).
    std::memcpy(posted.original.data(), posted.sum.pseudo_gradient.data(), posted.original.nbytes());
  }
  // A rank that holds none of the fragment keeps the sums of the last one it held.
  if (!landed_.empty()) {
    sums_applied_ += static_cast<long>(landed_.size());
    kept_ = std::move(landed_);
    landed_.clear();
  }
  if (islands < islands_) rejoin_due_ = true;
  report_if_final();
  return islands;
}

void IslandMembership::synced(long steps_taken, const compute::Tensor& last_sync, const compute::Tensor& momentum) {
  if (!rejoin_due_) return;
  // The rejoining rank starts with no sum in flight: the outer state handed over must hold every
  // fragment's last sync.
  TROUPE_CHECK(posted_.empty() && landed_.empty(), "an outer sum in flight when a lost island rejoins");
  rejoin_due_ = false;
  take_orders();
  while (!rejoin_) {
    auto waiting = progress_.wait_for("the lost island's new process, to hand it the outer state");
    mailbox_.wait_islands_order();
    take_orders();
  }
  const islands_msg order = *std::exchange(rejoin_, std::nullopt);
  // The new ranks at this rank's place are its partners in the renewed group now; the others are
  // introduced, connected on first use.
  std::vector<int> partners;
  for (int island : order.rejoining) partners.push_back(rank_in(island));
  for (const node_entry& node : order.replaced)
    for (int slot = 0; slot < node.slots; ++slot) {
      const int peer = node.first_rank + slot;
      const std::vector<std::uint8_t>& address = node.comm_addresses.at(static_cast<std::size_t>(slot)).bytes;
      const bool now = std::find(partners.begin(), partners.end(), peer) != partners.end();
      if (Status s = now ? engine_.connect(peer, address) : engine_.introduce(peer, address); !s)
        throw CommFailed("cannot connect to the new process of rank " + std::to_string(peer) + ": " +
                         s.error().message);
    }
  if (rank_in(present_.front()) == engine_.rank()) {
    compute::Tensor steps = compute::Tensor::zeros({1}, compute::DType::f64);
    steps.data_as<double>()[0] = static_cast<double>(steps_taken);
    std::vector<MailboxComm::Operation> sends;
    for (int peer : partners) {
      sends.push_back(mailbox_.send(engine_, peer, outer_state_key(order.epoch, 0), steps));
      sends.push_back(mailbox_.send(engine_, peer, outer_state_key(order.epoch, 1), last_sync));
      sends.push_back(mailbox_.send(engine_, peer, outer_state_key(order.epoch, 2), momentum));
    }
    auto waiting = progress_.wait_for("the outer state's transfer to the rejoining island");
    for (MailboxComm::Operation op : sends) check_comm(mailbox_.wait(op));
  }
  renew(order.epoch, order.present);
}

RecoveryResult IslandMembership::rejoin(const recover_msg& order, TrainingLoop& loop) {
  const auto start = Clock::now();
  const int rank = engine_.rank();
  RecoveryResult result;
  result.donor = rank_in(order.islands_kept.at(0));
  result.received = true;
  result.rejoined_island = true;
  compute::Tensor steps = compute::Tensor::zeros({1}, compute::DType::f64);
  const std::vector<compute::Tensor> sync_ranges = held_views(loop, "outer_sync"),
                                     momentum_ranges = held_views(loop, "outer_momentum");
  const compute::Tensor last_sync = arrival(sync_ranges), momentum = arrival(momentum_ranges);
  const std::vector<MailboxComm::Operation> receives{
      mailbox_.recv(engine_, result.donor, outer_state_key(order.epoch, 0), steps),
      mailbox_.recv(engine_, result.donor, outer_state_key(order.epoch, 1), last_sync),
      mailbox_.recv(engine_, result.donor, outer_state_key(order.epoch, 2), momentum)};
  std::string error;
  {
    auto waiting = progress_.wait_for("the outer state from rank " + std::to_string(result.donor) +
                                      " after the islands' next sync");
    for (MailboxComm::Operation op : receives)
      if (const Status s = mailbox_.wait(op); !s && error.empty()) error = s.error().message;
  }
  result.steps = static_cast<std::int64_t>(steps.data_as<double>()[0]);
  result.bytes = static_cast<std::int64_t>(steps.nbytes() + last_sync.nbytes() + momentum.nbytes());
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (error.empty()) {
    // Its weights become w_sync; its inner optimizer starts afresh (OuterStep::adopt, docs/diloco.md).
    spread_into(last_sync, sync_ranges);
    spread_into(momentum, momentum_ranges);
    spread_into(last_sync, held_views(loop, "param"));
    for (const char* moments : {"adam_m", "adam_v"})
      for (const compute::Tensor& m : held_views(loop, moments)) std::memset(m.data(), 0, m.nbytes());
    loop.mirror_to_device();
    loop.resume_at(static_cast<long>(result.steps));
  }
  mailbox_.worker()->send(order.job, recover_atom_v,
                          recover_done_msg{order.epoch, rank, result.bytes, result.seconds, error, result.steps});
  if (!error.empty()) throw CommFailed("rejoining the islands: " + error);
  return result;
}

}  // namespace troupe::actors
