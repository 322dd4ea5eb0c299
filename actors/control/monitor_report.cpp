#include "actors/control/monitor_report.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "comm/grid.hpp"
#include "monitor/duration_text.hpp"
#include "monitor/sparkline.hpp"
#include "monitor/trace.hpp"

namespace troupe::actors {
namespace {

constexpr std::size_t kept_steps = 4096;
constexpr std::size_t rate_window = 10;  // steps the rates and the ETA are measured over

// Rank 0's newest steps, oldest first, at most `count`.
std::vector<step_beat> newest_steps(const StepHistory& history, std::size_t count) {
  std::vector<step_beat> steps;
  auto rank0 = history.find(0);
  if (rank0 == history.end()) return steps;
  for (auto it = rank0->second.rbegin(); it != rank0->second.rend() && steps.size() < count; ++it)
    steps.push_back(it->second);
  std::reverse(steps.begin(), steps.end());
  return steps;
}

struct Rates {
  double tokens_per_second = 0;  // while stepping
  double wall_seconds_per_step = 0;  // validation and checkpoints included
};

Rates rates(const std::vector<step_beat>& steps) {
  Rates r;
  double seconds = 0, tokens = 0;
  for (const step_beat& s : steps) {
    seconds += s.seconds;
    tokens += static_cast<double>(s.tokens);
  }
  if (seconds > 0) r.tokens_per_second = tokens / seconds;
  if (steps.size() >= 2) {
    const step_beat &first = steps.front(), &last = steps.back();
    const double wall = last.start_unix_seconds + last.seconds - first.start_unix_seconds;
    r.wall_seconds_per_step = wall / static_cast<double>(last.step - first.step + 1);
  } else if (!steps.empty()) {
    r.wall_seconds_per_step = steps.back().seconds;
  }
  return r;
}

std::int64_t job_step(const job_view_msg& view) {
  std::int64_t step = 0;
  for (const node_view& n : view.nodes)
    for (const worker_beat& w : n.workers) step = std::max(step, w.steps_done);
  return step;
}

std::string state_text(const MonitorPlan& plan, const job_view_msg& view, const PauseState& pause) {
  std::string state = !view.running ? "starting: waiting for every node to join"
                      : pause.paused
                          ? fmt::format("paused after step {} ({} ago; `resume` continues)", pause.after_step,
                                        monitor::duration_text(pause.seconds))
                          : "running";
  // Every restart says why; those that used the budget are counted against it (a drain's shrink or
  // a grow did not).
  if (plan.attempt > 0)
    state += fmt::format("; restarted after: {} ({} restart(s) of {} used)", plan.restarted_after, plan.restarts,
                         plan.max_restarts);
  return state;
}

// "\nrecovery  in place (epoch 1) in 0.250 s: rank 1 respawned in its process, 5.2 MB of state from
// rank 0; went on after step 4" for every in-place recovery and grow the job went on after, from
// its events: each training_resumed with the state_moved just before it.
std::string recovery_lines(const std::vector<job_event>& events) {
  std::string text;
  const state_moved* moved = nullptr;
  for (const job_event& event : events) {
    if (const auto* m = caf::get_if<state_moved>(&event.body)) moved = m;
    const auto* resumed = caf::get_if<training_resumed>(&event.body);
    if (!resumed || !moved || moved->epoch != resumed->epoch) continue;
    const double megabytes = static_cast<double>(moved->bytes) / 1e6;
    std::string ranks;
    for (int rank : resumed->ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
    const bool several = resumed->ranks.size() > 1;
    int donor = moved->donors.empty() ? -1 : moved->donors.front();
    for (std::size_t i = 0; i < moved->receivers.size() && i < moved->donors.size(); ++i)
      if (!resumed->ranks.empty() && moved->receivers[i] == resumed->ranks.front()) donor = moved->donors[i];
    if (resumed->route == RecoveryRoute::grow_in_place) {
      text += fmt::format(
          "\ngrow      in place (epoch {}) in {:.3f} s: rank{} {} joined in {} new node process(es), "
          "{:.1f} MB of state from rank {}; went on after step {}",
          resumed->epoch, resumed->seconds, several ? "s" : "", ranks, resumed->nodes.size(), megabytes, donor,
          resumed->after_step);
    } else if (resumed->route == RecoveryRoute::in_place_from_replica ||
               resumed->route == RecoveryRoute::in_place_rollback) {
      const std::string state = resumed->route == RecoveryRoute::in_place_from_replica
                                    ? fmt::format("{:.1f} MB of state from rank {}", megabytes, donor)
                                    : fmt::format("every rank rolled back to checkpoint step {} ({:.1f} MB read)",
                                                  resumed->after_step, megabytes);
      const std::size_t processes = resumed->nodes.size();
      const std::string where = processes == 0 ? (several ? "their processes" : "its process")
                                : processes == 1
                                    ? (several ? "a new process of their node" : "a new process of its node")
                                    : fmt::format("{} new node processes", processes);
      text += fmt::format(
          "\nrecovery  in place (epoch {}) in {:.3f} s: rank{} {} respawned in {}, {}; went on after "
          "step {}",
          resumed->epoch, resumed->seconds, several ? "s" : "", ranks, where, state, resumed->after_step);
    }
  }
  return text;
}

// "diloco    2 island(s) present; 3 outer sync(s), the last 1.63 MB sent by each rank; next after
// step 80" from rank 0's newest step of a train.sync diloco run.
std::string diloco_line(const step_beat& newest) {
  const std::string syncs = newest.outer_syncs == 0
                                ? "no outer sync yet"
                                : fmt::format("{} outer sync(s), the last {:.2f} MB sent by each rank",
                                              newest.outer_syncs, static_cast<double>(newest.outer_bytes) / 1e6);
  const std::string next =
      newest.next_sync_step > 0 ? fmt::format("next after step {}", newest.next_sync_step) : "none to come";
  return fmt::format("diloco    {} island(s) present; {}; {}\n", newest.islands, syncs, next);
}

}  // namespace

void remember_steps(StepHistory& history, const job_view_msg& view) {
  for (const node_view& n : view.nodes)
    for (const worker_beat& w : n.workers) {
      auto& steps = history[w.rank];
      for (const step_beat& s : w.recent_steps) steps[s.step] = s;
      while (steps.size() > kept_steps) steps.erase(steps.begin());
      // Only the newest step keeps its routing (experts reads it there): older ones drop theirs.
      if (steps.size() > 1)
        for (auto older = std::next(steps.rbegin()); older != steps.rend() && !older->second.expert_slots.empty();
             ++older)
          std::vector<std::int64_t>().swap(older->second.expert_slots);
    }
}

std::string status_text(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                        const PauseState& pause, const std::vector<job_event>& events) {
  const std::vector<step_beat> recent = newest_steps(history, rate_window);
  const Rates r = rates(recent);
  const std::int64_t step = job_step(view);
  std::string text = fmt::format("job       {}\n", state_text(plan, view, pause));
  text += fmt::format("grid      {} ranks: dp {} x pp {} x tp {} on {} nodes\n", plan.world_size, plan.dp, plan.pp,
                      plan.tp, view.nodes.size());
  text += fmt::format("step      {} / {} ({:.0f}%)\n", step, plan.total_steps,
                      plan.total_steps > 0 ? 100.0 * static_cast<double>(step) / static_cast<double>(plan.total_steps)
                                           : 0.0);
  text += recent.empty() ? "loss      -\n" : fmt::format("loss      {:.4f}\n", recent.back().loss);
  text += recent.empty() ? "tokens/s  -\n" : fmt::format("tokens/s  {:.0f}\n", r.tokens_per_second);
  if (!recent.empty() && recent.back().islands > 0) text += diloco_line(recent.back());
  std::string eta = "-";
  if (pause.paused)
    eta = "- (paused)";
  else if (r.wall_seconds_per_step > 0)
    eta = monitor::duration_text(r.wall_seconds_per_step * static_cast<double>(plan.total_steps - step));
  text += "ETA       " + eta;
  return text + recovery_lines(events);
}

std::string nodes_text(const job_view_msg& view) {
  std::string text = fmt::format("{:<5} {:<16} {:>8} {:<9} {:>10}  {}", "node", "host", "pid", "ranks", "heartbeat",
                                 "state");
  for (const node_view& n : view.nodes) {
    std::string ranks = "-";
    if (!n.workers.empty())
      ranks = n.workers.size() == 1 ? std::to_string(n.workers.front().rank)
                                    : fmt::format("{}-{}", n.workers.front().rank, n.workers.back().rank);
    const std::string heard = n.heard_seconds_ago < 0 ? "-" : fmt::format("{:.1f} s ago", n.heard_seconds_ago);
    const std::string state = n.pid == 0 ? "not joined" : n.done ? "done" : "running";
    text += fmt::format("\n{:<5} {:<16} {:>8} {:<9} {:>10}  {}", n.node_index, n.host, n.pid == 0 ? "-" : std::to_string(n.pid),
                        ranks, heard, state);
  }
  return text;
}

std::string memory_text(const job_view_msg& view) {
  std::string text;
  for (const node_view& n : view.nodes) {
    if (!text.empty()) text += "\n";
    std::string ranks = "-";
    if (!n.workers.empty())
      ranks = n.workers.size() == 1 ? std::to_string(n.workers.front().rank)
                                    : fmt::format("{}-{}", n.workers.front().rank, n.workers.back().rank);
    if (n.memory.empty()) {
      text += fmt::format("node {} (rank {}): no heartbeat yet", n.node_index, ranks);
      continue;
    }
    const auto mib = [](std::int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); };
    text += fmt::format("node {} (rank {}): resident {} MiB, peak resident {} MiB\n", n.node_index, ranks,
                        mib(n.resident_bytes), mib(n.peak_resident_bytes));
    text += fmt::format("  {:<6} {:<20} {:>10} {:>10}", "device", "kind", "MiB now", "MiB peak");
    for (const memory_beat& m : n.memory)
      text += fmt::format("\n  {:<6} {:<20} {:>10} {:>10}", m.device, m.kind, mib(m.bytes), mib(m.peak));
  }
  return text;
}

Expected<std::string> workers_text(const MonitorPlan& plan, const job_view_msg& view, const RankSelection& selection) {
  const comm::Grid grid{plan.dp, plan.pp, plan.tp};
  // Under train.balance a replica's share of the global batch and its measured time per
  // micro-batch (dynamic), from its last step: the columns appear once a rank reports a share
  // other than the even one, or a time.
  bool balancing = false;
  for (const node_view& n : view.nodes)
    for (const worker_beat& w : n.workers)
      if (!w.recent_steps.empty()) {
        const step_beat& last = w.recent_steps.back();
        if (last.micro_batch_seconds > 0 || (last.batch_share > 0 && std::abs(last.batch_share * plan.dp - 1.0) > 1e-9))
          balancing = true;
      }
  auto chosen = choose_rank_rows(
      view, selection, "workers", [](const worker_beat& w) { return w.waiting_seconds; }, "those waiting longest");
  if (!chosen) return chosen.error();
  std::string text = chosen->heading.empty() ? "" : chosen->heading + "\n";
  text += fmt::format("{:<5} {:<5} {:>3} {:>3} {:>3} {:>7}", "rank", "node", "dp", "pp", "tp", "steps");
  if (balancing) text += fmt::format(" {:>7} {:>9}", "share", "ms/micro");
  text += "  activity";
  for (const RankRow& row : chosen->rows) {
    const worker_beat& w = *row.worker;
    std::string activity = w.activity.empty() ? "before its first step" : w.activity;
    if (!w.waiting_for.empty()) activity += fmt::format(", waiting {:.1f} s for {}", w.waiting_seconds, w.waiting_for);
    const comm::GridCoord c = comm::grid_coord(grid, w.rank);
    text += fmt::format("\n{:<5} {:<5} {:>3} {:>3} {:>3} {:>7}", w.rank, row.node, c.dp, c.pp, c.tp, w.steps_done);
    if (balancing) {
      std::string share = "-", per_micro = "-";
      if (!w.recent_steps.empty()) {
        const step_beat& last = w.recent_steps.back();
        if (last.batch_share > 0) share = fmt::format("{:.1f} %", last.batch_share * 100);
        if (last.micro_batch_seconds > 0) per_micro = fmt::format("{:.1f}", last.micro_batch_seconds * 1e3);
      }
      text += fmt::format(" {:>7} {:>9}", share, per_micro);
    }
    text += "  " + activity;
  }
  if (!chosen->left_out.empty()) text += "\n" + chosen->left_out;
  return text;
}

Expected<std::string> top_text(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                               const PauseState& pause, const RankSelection& selection) {
  const auto last_step_seconds = [&history](const worker_beat& w) {
    auto h = history.find(w.rank);
    return h == history.end() || h->second.empty() ? 0.0 : h->second.rbegin()->second.seconds;
  };
  auto chosen = choose_rank_rows(view, selection, "top", last_step_seconds, "the slowest last steps");
  if (!chosen) return chosen.error();
  std::string text = fmt::format("job {} | step {} / {}\n", state_text(plan, view, pause), job_step(view),
                                 plan.total_steps);
  if (!chosen->heading.empty()) text += chosen->heading + "\n";
  // Gradient compression's columns appear once a rank reports a compressed step.
  bool compressing = false;
  for (const auto& [rank, steps] : history)
    if (!steps.empty() && steps.rbegin()->second.plain_bytes > 0) compressing = true;
  text += fmt::format("{:<5} {:<5} {:>7} {:>8} {:>9} {:>10} {:>7}", "rank", "node", "step", "loss", "step ms",
                      "tokens/s", "idle s");
  if (compressing) text += fmt::format(" {:>17} {:>10}", "sums MB/plain MB", "compress ms");
  text += "  activity";
  for (const RankRow& row : chosen->rows) {
    const worker_beat& w = *row.worker;
    std::string loss = "-", step_ms = "-", tokens = "-", sums = "-", compress_ms = "-";
    if (auto h = history.find(w.rank); h != history.end() && !h->second.empty()) {
      const step_beat& last = h->second.rbegin()->second;
      loss = fmt::format("{:.4f}", last.loss);
      step_ms = fmt::format("{:.1f}", last.seconds * 1e3);
      if (last.seconds > 0) tokens = fmt::format("{:.0f}", static_cast<double>(last.tokens) / last.seconds);
      if (last.plain_bytes > 0) {
        sums = fmt::format("{:.2f}/{:.2f}", static_cast<double>(last.wire_bytes) * 1e-6,
                           static_cast<double>(last.plain_bytes) * 1e-6);
        compress_ms = fmt::format("{:.1f}", last.compress_seconds * 1e3);
      }
    }
    std::string activity = w.activity.empty() ? "-" : w.activity;
    if (!w.waiting_for.empty()) activity += " (waiting)";
    text += fmt::format("\n{:<5} {:<5} {:>7} {:>8} {:>9} {:>10} {:>7.1f}", w.rank, row.node, w.steps_done, loss,
                        step_ms, tokens, w.idle_seconds);
    if (compressing) text += fmt::format(" {:>17} {:>10}", sums, compress_ms);
    text += "  " + activity;
  }
  if (!chosen->left_out.empty()) text += "\n" + chosen->left_out;
  return text;
}

std::string loss_text(const StepHistory& history, std::size_t width) {
  const std::vector<step_beat> steps = newest_steps(history, width * 4);
  if (steps.empty()) return "loss: no step finished yet";
  std::vector<double> losses;
  for (const step_beat& s : steps) losses.push_back(s.loss);
  const auto [low, high] = std::minmax_element(losses.begin(), losses.end());
  return fmt::format("loss, steps {}-{} ({} recorded): {}\nmin {:.4f}  max {:.4f}  last {:.4f}", steps.front().step,
                     steps.back().step, steps.size(), monitor::sparkline(losses, width), *low, *high, losses.back());
}

std::int64_t common_step(const job_view_msg& view, const StepHistory& history) {
  std::int64_t common = -1;
  bool first = true;
  for (const node_view& n : view.nodes)
    for (const worker_beat& w : n.workers) {
      auto h = history.find(w.rank);
      const std::int64_t newest = h == history.end() || h->second.empty() ? -1 : h->second.rbegin()->first;
      common = first ? newest : std::min(common, newest);
      first = false;
    }
  return common;
}

std::string trace_json(const job_view_msg& view, const StepHistory& history, std::int64_t first,
                       std::int64_t last) {
  double origin = -1;
  for (const auto& [rank, steps] : history)
    for (auto it = steps.lower_bound(first); it != steps.end() && it->first <= last; ++it)
      if (origin < 0 || it->second.start_unix_seconds < origin) origin = it->second.start_unix_seconds;
  monitor::TraceRecorder trace;
  for (const node_view& n : view.nodes) {
    trace.name_process(n.node_index, fmt::format("node {} ({}, pid {})", n.node_index, n.host, n.pid));
    for (const worker_beat& w : n.workers) {
      trace.name_track({n.node_index, w.rank}, fmt::format("rank {}", w.rank));
      auto h = history.find(w.rank);
      if (h == history.end()) continue;
      for (auto it = h->second.lower_bound(first); it != h->second.end() && it->first <= last; ++it) {
        const step_beat& s = it->second;
        trace.add_complete({n.node_index, w.rank}, fmt::format("step {}", s.step), "step",
                           (s.start_unix_seconds - origin) * 1e6, s.seconds * 1e6,
                           {{"loss", fmt::format("{:.4f}", s.loss)}, {"tokens", std::to_string(s.tokens)}});
      }
    }
  }
  return trace.to_json();
}

std::string experts_text(const StepHistory& history) {
  // Every rank's newest step with routing, summed: each rank counts its own tokens' slots.
  int experts = 0, ranks = 0;
  std::int64_t first_step = -1, last_step = -1;
  std::vector<std::int64_t> slots;
  for (const auto& [rank, steps] : history) {
    if (steps.empty() || steps.rbegin()->second.expert_slots.empty()) continue;
    const step_beat& newest = steps.rbegin()->second;
    if (slots.empty()) {
      experts = newest.experts;
      slots.assign(newest.expert_slots.size(), 0);
    }
    if (newest.experts != experts || newest.expert_slots.size() != slots.size()) continue;
    for (std::size_t i = 0; i < slots.size(); ++i) slots[i] += newest.expert_slots[i];
    first_step = first_step < 0 ? newest.step : std::min(first_step, newest.step);
    last_step = std::max(last_step, newest.step);
    ++ranks;
  }
  if (ranks == 0 || experts <= 0)
    return "experts: no step with experts reported yet (a model without experts has none)";
  const std::string steps =
      first_step == last_step ? fmt::format("step {}", last_step) : fmt::format("steps {}-{}", first_step, last_step);
  std::string text = fmt::format(
      "experts at {} over {} rank(s)' tokens: each expert's share of its MoE block's "
      "token-slots, and the most loaded over the mean (1 = even, {} = one expert takes all)\n",
      steps, ranks, experts);
  text += fmt::format("{:>5} {:>9} {:>8}  share per expert, from expert 0", "block", "slots", "max/mean");
  const auto E = static_cast<std::size_t>(experts);
  for (std::size_t b = 0; b * E < slots.size(); ++b) {
    const auto first = slots.begin() + static_cast<std::ptrdiff_t>(b * E);
    const std::int64_t total = std::accumulate(first, first + static_cast<std::ptrdiff_t>(E), std::int64_t{0});
    const std::int64_t most = *std::max_element(first, first + static_cast<std::ptrdiff_t>(E));
    const double imbalance = total > 0 ? static_cast<double>(most) * experts / static_cast<double>(total) : 0;
    text += fmt::format("\n{:>5} {:>9} {:>8.2f} ", b, total, imbalance);
    for (std::size_t e = 0; e < E; ++e)
      text += fmt::format(" {:5.1f}%", total > 0 ? 100.0 * static_cast<double>(first[static_cast<std::ptrdiff_t>(e)]) /
                                                       static_cast<double>(total)
                                                 : 0.0);
  }
  return text;
}

}  // namespace troupe::actors
