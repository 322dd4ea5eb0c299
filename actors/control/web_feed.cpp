#include "actors/control/web_feed.hpp"

#include <algorithm>
#include <filesystem>

#include "comm/grid.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

constexpr std::size_t max_events_a_view = 100000;  // a JobEvents' capacity: a view folds what is there

monitor::TimelineEntry entry(const job_event& e, std::string route = {}, double seconds = 0, std::int64_t bytes = 0) {
  return {e.unix_seconds, e.attempt, std::string(event_name(e.body)), std::move(route), seconds, bytes, to_text(e)};
}

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

bool EventFold::take(const job_event& e) {
  last_seq = e.seq;
  std::optional<monitor::TimelineEntry> line;
  if (const auto* s = caf::get_if<step_trained>(&e.body)) {
    step = std::max(step, s->step);
    loss = s->loss;
  } else if (caf::get_if<job_started>(&e.body)) {
    lost_ranks.clear();
    lost_nodes.clear();
    recovering = false;
  } else if (const auto* f = caf::get_if<failure_detected>(&e.body)) {
    if (lost_ranks.empty() && lost_nodes.empty()) lost_unix_seconds = e.unix_seconds;
    lost_ranks.insert(f->ranks.begin(), f->ranks.end());
    lost_nodes.insert(f->nodes.begin(), f->nodes.end());
    recovering = false;
    line = entry(e);
  } else if (const auto* r = caf::get_if<recovery_chosen>(&e.body)) {
    recovering = !lost_ranks.empty() || !lost_nodes.empty();
    recovering_unix_seconds = e.unix_seconds;
    line = entry(e, std::string(to_string(r->route)));
  } else if (const auto* m = caf::get_if<state_moved>(&e.body)) {
    line = entry(e, std::string(to_string(m->route)), m->seconds, m->bytes);
  } else if (const auto* t = caf::get_if<training_resumed>(&e.body)) {
    if (!lost_ranks.empty() || !lost_nodes.empty()) recovered.push_back({lost_ranks, lost_nodes});
    lost_ranks.clear();
    lost_nodes.clear();
    recovering = false;
    ++recoveries_by_path[std::string(to_string(t->route))];
    line = entry(e, std::string(to_string(t->route)), t->seconds);
  } else if (const auto* g = caf::get_if<straggler_named>(&e.body)) {
    straggler = g->rank;
    straggler_unix_seconds = e.unix_seconds;
    line = entry(e);
  } else if (const auto* c = caf::get_if<checkpoint_noted>(&e.body)) {
    if (c->outcome == CheckpointOutcome::committed) last_checkpoint_unix_seconds = e.unix_seconds;
    line = entry(e);
  } else if (const auto* l = caf::get_if<layout_changed>(&e.body)) {
    line = entry(e, std::string(to_string(l->route)));
  } else if (const auto* j = caf::get_if<node_joined>(&e.body)) {
    if (j->grown || j->replaced_pid != 0) line = entry(e);
  } else if (caf::get_if<attempt_ended>(&e.body) || caf::get_if<job_ended>(&e.body)) {
    line = entry(e);
  }
  if (!line) return false;
  timeline.push_back(std::move(*line));
  if (timeline.size() > max_timeline) timeline.erase(timeline.begin());
  return true;
}

monitor::JobSnapshot web_snapshot(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                                  const EventFold& fold, double now) {
  monitor::JobSnapshot s;
  s.unix_seconds = now;
  s.attempt = plan.attempt;
  // Context shards show as their own axis where the job has them; the comm grid holds them inside
  // its dp axis (replica = dp / cp, shard = dp % cp).
  const bool context = plan.cp > 1;
  s.axes = {{"dp", plan.dp / plan.cp}};
  if (context) s.axes.push_back({"cp", plan.cp});
  s.axes.push_back({"pp", plan.pp});
  s.axes.push_back({"tp", plan.tp});
  s.total_steps = plan.total_steps;
  s.step = fold.step;
  s.loss = fold.loss;
  s.last_checkpoint_unix_seconds = fold.last_checkpoint_unix_seconds;
  s.recoveries_by_path = fold.recoveries_by_path;
  s.timeline = fold.timeline;

  const comm::Grid grid{plan.dp, plan.pp, plan.tp};
  s.ranks.resize(static_cast<std::size_t>(std::max(plan.world_size, 0)));
  for (int r = 0; r < plan.world_size; ++r) {
    const comm::GridCoord at = comm::grid_coord(grid, r);
    s.ranks[r].rank = r;
    s.ranks[r].at = {at.dp / plan.cp};  // in the order of s.axes
    if (context) s.ranks[r].at.push_back(at.dp % plan.cp);
    s.ranks[r].at.push_back(at.pp);
    s.ranks[r].at.push_back(at.tp);
  }
  const monitor::RankState lost_state = fold.recovering ? monitor::RankState::recovering : monitor::RankState::lost;
  const double lost_since = fold.recovering ? fold.recovering_unix_seconds : fold.lost_unix_seconds;
  const bool straggler_recent =
      fold.straggler >= 0 && now - fold.straggler_unix_seconds < WebFeed::straggler_memory_seconds;
  for (const node_view& node : view.nodes) {
    s.memory.push_back({node.node_index, node.host, {}, node.resident_bytes});
    for (const memory_beat& m : node.memory)
      s.memory.back().memory.push_back(
          {m.device, m.kind, static_cast<std::uint64_t>(m.bytes), static_cast<std::uint64_t>(m.peak)});
    for (const worker_beat& w : node.workers) {
      if (w.rank < 0 || w.rank >= plan.world_size) continue;
      monitor::RankTile& t = s.ranks[w.rank];
      t.node = node.node_index;
      t.steps_done = w.steps_done;
      t.activity = w.activity;
      t.heard_seconds_ago = node.heard_seconds_ago;
      using monitor::RankState;
      if (fold.lost_ranks.count(w.rank) || fold.lost_nodes.count(node.node_index))
        t.state = lost_state;
      else if (node.done)
        t.state = RankState::done;
      else if (straggler_recent && fold.straggler == w.rank)
        t.state = RankState::straggling;
      else if (!w.waiting_for.empty())
        t.state = RankState::waiting;
      else if (view.running)
        t.state = RankState::training;
      if (t.state == RankState::waiting) t.waiting_for = w.waiting_for;
    }
  }
  for (monitor::RankTile& t : s.ranks)
    t.recoveries = static_cast<int>(std::count_if(fold.recovered.begin(), fold.recovered.end(), [&](const auto& r) {
      return r.ranks.count(t.rank) > 0 || r.nodes.count(t.node) > 0;
    }));
  // Ranks whose node the failure took may be missing from the view: the events still name them.
  for (const int r : fold.lost_ranks)
    if (r >= 0 && r < plan.world_size) s.ranks[r].state = lost_state;
  for (monitor::RankTile& t : s.ranks)
    if (t.state == lost_state) t.state_seconds = std::max(0.0, now - lost_since);

  if (const auto rank0 = history.find(0); rank0 != history.end()) {
    for (const auto& [step, beat] : rank0->second)
      s.curve.push_back({step, beat.loss, beat.lr, beat.grad_norm,
                         beat.seconds > 0 ? static_cast<double>(beat.tokens) / beat.seconds : 0.0,
                         beat.validated ? std::optional(beat.val_loss) : std::nullopt});
    if (!s.curve.empty()) s.tokens_per_second = s.curve.back().tokens_per_second;
  }
  return s;
}

Expected<std::unique_ptr<WebFeed>> WebFeed::open(const MonitorOptions& options, const std::string& token,
                                                 const JobEvents* events) {
  std::unique_ptr<WebFeed> feed(new WebFeed(events));
  if (options.web_port >= 0) {
    auto web = monitor::JobWeb::serve(options.control_bind, options.web_port, token);
    if (!web)
      return Error{"monitor.web_port: cannot listen on " + options.control_bind + ":" +
                   std::to_string(options.web_port) + ": " + web.error().message};
    feed->web_ = std::move(*web);
    monitor::logger("job")->info(
        "web page: http://{}:{}/ (give the job's token: ?token=… or an Authorization: "
        "Bearer header; /data, /metrics beside it)",
        options.control_bind, feed->web_->port());
  }
  if (!options.tensorboard_dir.empty()) {
    auto board = monitor::EventFile::create((std::filesystem::path(options.tensorboard_dir) / "job").string());
    if (!board) return Error{"monitor.tensorboard_dir: " + board.error().message};
    feed->board_.emplace(std::move(*board));
  }
  return feed;
}

void WebFeed::update(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history) {
  std::lock_guard lock(mutex_);
  if (events_)
    for (const job_event& e : events_->since(fold_.last_seq, max_events_a_view)) {
      if (!fold_.take(e) || !board_) continue;
      if (Status written = board_->text(fold_.step, "events", fold_.timeline.back().text); !written) {
        monitor::logger("monitor")->error("monitor.tensorboard_dir: {}; the job's run goes on without it",
                                          written.error().message);
        board_.reset();
      }
    }
  if (web_) web_->publish(web_snapshot(plan, view, history, fold_, unix_seconds_now()));
}

}  // namespace troupe::actors
