#pragma once
// The settings that are one of a few names (train.backend, train.precision, train.recompute, train.sync,
// train.diloco_precision, train.balance, pipeline.schedule, pipeline.split, context.method, comm.compress,
// fault.recovery, monitor.log_format): each is its library's enum from the config parser on, and this is the one place
// that reads and writes their names. A library lists its values (compute::backend_kinds, ...) and spells each one;
// NamedChoice points at both.

#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "apps/config/job_config.hpp"

namespace troupe::apps {

template <typename Choice>
struct NamedChoice;  // values: every choice in help order; name(choice): how it is spelt

template <>
struct NamedChoice<compute::BackendKind> {
  static constexpr std::span<const compute::BackendKind> values{compute::backend_kinds};
  static std::string_view name(compute::BackendKind kind) { return compute::backend_name(kind); }
};
template <>
struct NamedChoice<compute::Precision> {
  static constexpr std::span<const compute::Precision> values{compute::precisions};
  static std::string_view name(compute::Precision precision) { return compute::precision_name(precision); }
};
template <>
struct NamedChoice<compute::Recompute> {
  static constexpr std::span<const compute::Recompute> values{compute::recompute_modes};
  static std::string name(compute::Recompute mode) { return compute::recompute_name(mode); }
};
template <>
struct NamedChoice<compute::SyncMode> {
  static constexpr std::span<const compute::SyncMode> values{compute::sync_modes};
  static std::string_view name(compute::SyncMode mode) { return compute::sync_mode_name(mode); }
};
template <>
struct NamedChoice<compute::OuterPrecision> {
  static constexpr std::span<const compute::OuterPrecision> values{compute::outer_precisions};
  static std::string_view name(compute::OuterPrecision precision) { return compute::outer_precision_name(precision); }
};
template <>
struct NamedChoice<compute::BalanceMode> {
  static constexpr std::span<const compute::BalanceMode> values{compute::balance_modes};
  static std::string_view name(compute::BalanceMode mode) { return compute::balance_mode_name(mode); }
};
template <>
struct NamedChoice<schedules::ScheduleKind> {
  static constexpr std::span<const schedules::ScheduleKind> values{schedules::schedule_kinds};
  static std::string_view name(schedules::ScheduleKind kind) { return schedules::to_string(kind); }
};
template <>
struct NamedChoice<compute::SplitMethod> {
  static constexpr std::span<const compute::SplitMethod> values{compute::split_methods};
  static std::string_view name(compute::SplitMethod method) { return compute::split_method_name(method); }
};
template <>
struct NamedChoice<compute::context::ContextMethod> {
  static constexpr std::span<const compute::context::ContextMethod> values{compute::context::context_methods};
  static std::string_view name(compute::context::ContextMethod method) {
    return compute::context::context_method_name(method);
  }
};
template <>
struct NamedChoice<comm::Compression> {
  static constexpr std::span<const comm::Compression> values{comm::compressions};
  static std::string_view name(comm::Compression kind) { return comm::compression_name(kind); }
};
template <>
struct NamedChoice<actors::RecoveryMode> {
  static constexpr std::span<const actors::RecoveryMode> values{actors::recovery_modes};
  static std::string_view name(actors::RecoveryMode mode) { return actors::to_string(mode); }
};
template <>
struct NamedChoice<monitor::LogFormat> {
  static constexpr std::span<const monitor::LogFormat> values{monitor::log_formats};
  static std::string_view name(monitor::LogFormat format) { return monitor::log_format_name(format); }
};

template <typename T>
concept named_choice = requires(T choice) {
  { NamedChoice<T>::values } -> std::convertible_to<std::span<const T>>;
  { NamedChoice<T>::name(choice) } -> std::convertible_to<std::string_view>;
};

template <named_choice Choice>
std::string choice_name(Choice choice) {
  return std::string(NamedChoice<Choice>::name(choice));
}

// The choice spelt `text`, if any.
template <named_choice Choice>
std::optional<Choice> parse_choice(std::string_view text) {
  for (const Choice choice : NamedChoice<Choice>::values)
    if (choice_name(choice) == text) return choice;
  return std::nullopt;
}

// The names a wrong one is told about: "none, bf16 or powersgd" (the errors read "expected none,
// bf16 or powersgd, got 'fp8'", as every other wrong value's).
template <named_choice Choice>
std::string choice_list() {
  const auto values = NamedChoice<Choice>::values;
  std::string list;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) list += i + 1 == values.size() ? " or " : ", ";
    list += choice_name(values[i]);
  }
  return list;
}

}  // namespace troupe::apps
