#include "actors/process_environment.hpp"

#include <limits>

#include "comm/knobs.hpp"
#include "compute/environment.hpp"

namespace troupe::actors::env {
namespace {

constexpr std::int64_t int_max = std::numeric_limits<int>::max();

// An integer variable, read with its row's fallback and least value.
Expected<int> integer(const Variable& variable) {
  auto value = environment_integer(variable.name, variable.fallback, variable.min, int_max);
  if (!value) return value.error();
  return static_cast<int>(*value);
}

}  // namespace

Expected<int> read_rank() { return integer(rank); }
Expected<int> read_world_size() { return integer(world_size); }
Expected<int> read_local_rank() { return integer(local_rank); }
Expected<int> read_local_world_size() { return integer(local_world_size); }
Expected<int> read_slots() { return integer(slots); }
Expected<int> read_node_index() { return integer(node_index); }
std::optional<std::string> read_join() { return environment_text(join.name); }
std::optional<std::string> read_token() { return environment_text(token.name); }

Expected<int> read_attempt() { return integer(attempt); }
Expected<std::int64_t> read_peak_flops() {
  return environment_integer(peak_flops.name, peak_flops.fallback, peak_flops.min,
                             std::numeric_limits<std::int64_t>::max());
}

Expected<RecoveryCounts> read_restarts() {
  const std::optional<std::string> value = environment_text(restarts.name);
  return value ? RecoveryCounts::parse(*value) : RecoveryCounts{};
}

Expected<std::optional<DrillThrowAt>> read_drill_throw_at() {
  const std::optional<std::string> value = environment_text(drill_throw_at.name);
  if (!value) return std::optional<DrillThrowAt>{};
  const auto colon = value->find(':');
  const Error invalid = environment_error(drill_throw_at.name, "RANK:STEP, two integers >= 0", *value);
  if (colon == std::string::npos) return invalid;
  auto rank_part =
      parse_environment_integer(drill_throw_at.name, std::string_view(*value).substr(0, colon), 0, int_max);
  auto step_part = parse_environment_integer(drill_throw_at.name, std::string_view(*value).substr(colon + 1), 0);
  if (!rank_part || !step_part) return invalid;
  return std::optional<DrillThrowAt>{DrillThrowAt{static_cast<int>(*rank_part), static_cast<long>(*step_part)}};
}

Expected<std::optional<int>> read_drill_node_gone() {
  auto value = integer(drill_node_gone);
  if (!value) return value.error();
  return *value < 0 ? std::nullopt : std::optional<int>(*value);
}

Expected<std::optional<DrillKillAt>> read_drill_kill_at() {
  std::optional<std::string> value = environment_text(drill_kill_at.name);
  if (!value) return std::optional<DrillKillAt>{};
  const Error invalid = environment_error(drill_kill_at.name, "RANK:STEP or RANK:STEP:sync, two integers >= 0", *value);
  const std::string_view text(*value);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return invalid;
  const bool in_sync = text.ends_with(":sync");
  const std::string_view step_text = text.substr(colon + 1, text.size() - colon - 1 - (in_sync ? 5 : 0));
  auto rank_part = parse_environment_integer(drill_kill_at.name, text.substr(0, colon), 0, int_max);
  auto step_part = parse_environment_integer(drill_kill_at.name, step_text, 0);
  if (!rank_part || !step_part) return invalid;
  return std::optional<DrillKillAt>{DrillKillAt{static_cast<int>(*rank_part), static_cast<long>(*step_part), in_sync}};
}

Status check_inherited() {
  if (Status knobs = comm::check_knobs(); !knobs) return knobs;
  if (auto throw_at = read_drill_throw_at(); !throw_at) return throw_at.error();
  if (auto gone = read_drill_node_gone(); !gone) return gone.error();
  if (auto kill = read_drill_kill_at(); !kill) return kill.error();
  return Status::success();
}

}  // namespace troupe::actors::env
