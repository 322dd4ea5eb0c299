#include "monitor/log.hpp"

#include <mutex>

#include <spdlog/sinks/stdout_sinks.h>

namespace troupe::monitor {
namespace {

std::mutex identity_mutex;
std::string pattern_for(int rank, const std::string& role) {
  return "%H:%M:%S.%e [r" + std::to_string(rank) + " " + role + "] %^%l%$: %v";
}
std::string current_pattern = pattern_for(0, "main");

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  std::lock_guard lock(identity_mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::stdout_logger_mt(name);
  created->set_pattern(current_pattern);
  created->flush_on(spdlog::level::info);
  return created;
}

std::shared_ptr<spdlog::logger> silent_logger() {
  static const auto silent = std::make_shared<spdlog::logger>("silent");
  return silent;
}

void set_identity(int rank, const std::string& role) {
  std::lock_guard lock(identity_mutex);
  current_pattern = pattern_for(rank, role);
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->set_pattern(current_pattern); });
}

}  // namespace troupe::monitor
