#include "monitor/job_page_data.hpp"

#include <algorithm>

#include <spdlog/fmt/fmt.h>

namespace troupe::monitor {
namespace {

std::map<RankState, int> count_states(const JobSnapshot& s) {
  std::map<RankState, int> counts;
  for (const RankState state : rank_states) counts[state] = 0;
  for (const RankTile& tile : s.ranks) ++counts[tile.state];
  return counts;
}

nlohmann::json tile_json(const RankTile& t) {
  return {{"rank", t.rank},
          {"node", t.node},
          {"at", t.at},
          {"state", to_string(t.state)},
          {"steps_done", t.steps_done},
          {"activity", t.activity},
          {"waiting_for", t.waiting_for},
          {"heard_seconds_ago", t.heard_seconds_ago},
          {"recoveries", t.recoveries},
          {"state_seconds", t.state_seconds}};
}

}  // namespace

std::string_view to_string(RankState state) {
  switch (state) {
    case RankState::starting: return "starting";
    case RankState::training: return "training";
    case RankState::waiting: return "waiting";
    case RankState::straggling: return "straggling";
    case RankState::lost: return "lost";
    case RankState::recovering: return "recovering";
    case RankState::done: return "done";
  }
  return "starting";
}

nlohmann::json page_data(const JobSnapshot& s, int page, int per_page) {
  per_page = std::clamp(per_page, 1, max_tiles_per_page);
  page = std::max(page, 0);
  const int total = static_cast<int>(s.ranks.size());
  nlohmann::json states = nlohmann::json::object();
  for (const auto& [state, count] : count_states(s)) states[std::string(to_string(state))] = count;
  nlohmann::json tiles = nlohmann::json::array();
  const long first = static_cast<long>(page) * per_page;
  for (long i = first; i < std::min<long>(total, first + per_page); ++i) tiles.push_back(tile_json(s.ranks[i]));

  nlohmann::json curve = nlohmann::json::array();
  for (const CurvePoint& p : s.curve)
    curve.push_back({{"step", p.step},
                     {"loss", p.loss},
                     {"lr", p.lr},
                     {"grad_norm", p.grad_norm},
                     {"tokens_per_second", p.tokens_per_second},
                     {"val_loss", p.val_loss ? nlohmann::json(*p.val_loss) : nlohmann::json()}});
  nlohmann::json timeline = nlohmann::json::array();
  for (const TimelineEntry& e : s.timeline)
    timeline.push_back({{"unix_seconds", e.unix_seconds},
                        {"attempt", e.attempt},
                        {"kind", e.kind},
                        {"route", e.route},
                        {"seconds", e.seconds},
                        {"bytes", e.bytes},
                        {"text", e.text}});
  nlohmann::json axes = nlohmann::json::array();
  for (const GridAxis& axis : s.axes) axes.push_back({{"name", axis.name}, {"size", axis.size}});
  nlohmann::json memory = nlohmann::json::array();
  for (const NodeMemory& n : s.memory) {
    nlohmann::json kinds = nlohmann::json::array();
    for (const MemoryFigure& f : n.memory)
      kinds.push_back({{"device", f.device}, {"kind", f.kind}, {"bytes", f.bytes}, {"peak", f.peak}});
    memory.push_back({{"node", n.node}, {"host", n.host}, {"resident_bytes", n.resident_bytes}, {"kinds", kinds}});
  }
  return {{"job",
           {{"unix_seconds", s.unix_seconds},
            {"attempt", s.attempt},
            {"grid", axes},
            {"step", s.step},
            {"total_steps", s.total_steps},
            {"loss", s.loss},
            {"tokens_per_second", s.tokens_per_second},
            {"last_checkpoint_unix_seconds", s.last_checkpoint_unix_seconds},
            {"recoveries_by_path", s.recoveries_by_path}}},
          {"ranks",
           {{"total", total},
            {"page", page},
            {"per_page", per_page},
            {"pages", (total + per_page - 1) / per_page},
            {"states", states},
            {"tiles", tiles}}},
          {"curve", curve},
          {"timeline", timeline},
          {"memory", memory}};
}

std::string job_metrics_text(const JobSnapshot& s, double now) {
  std::string out;
  auto gauge = [&](std::string_view name, std::string_view help, double value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, value);
  };
  out +=
      "# HELP troupe_job_ranks Ranks of the job by state, as the job process sees them.\n"
      "# TYPE troupe_job_ranks gauge\n";
  for (const auto& [state, count] : count_states(s))
    out += fmt::format("troupe_job_ranks{{state=\"{}\"}} {}\n", to_string(state), count);
  out +=
      "# HELP troupe_job_recoveries_total Recoveries the job finished, by path.\n"
      "# TYPE troupe_job_recoveries_total counter\n";
  for (const auto& [path, count] : s.recoveries_by_path)
    out += fmt::format("troupe_job_recoveries_total{{path=\"{}\"}} {}\n", path, count);
  gauge("troupe_job_step", "The newest step any rank finished.", static_cast<double>(s.step));
  gauge("troupe_job_loss", "Rank 0's loss of its newest step.", s.loss);
  gauge("troupe_job_tokens_per_second", "The job's tokens per second over its newest step.", s.tokens_per_second);
  gauge("troupe_job_attempt", "The job's attempt (restarts of every node so far).", s.attempt);
  gauge("troupe_job_seconds_since_checkpoint", "Seconds since the newest committed checkpoint; -1: none yet.",
        s.last_checkpoint_unix_seconds > 0 ? now - s.last_checkpoint_unix_seconds : -1.0);
  return out;
}

}  // namespace troupe::monitor
