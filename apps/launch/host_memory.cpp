#include "apps/launch/host_memory.hpp"

#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>

namespace troupe::launch {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::optional<std::uint64_t> leading_number(std::string_view text) {
  const auto begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return std::nullopt;
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data() + begin, text.data() + text.size(), value);
  if (ec != std::errc{} || end == text.data() + begin) return std::nullopt;
  return value;
}

// The cgroup v2 path of this process ("0::/path" in /proc/self/cgroup), "/" when there is none.
std::string cgroup_v2_path() {
  const auto text = read_text("/proc/self/cgroup");
  if (!text) return "/";
  const auto at = text->find("0::");
  if (at == std::string::npos) return "/";
  const auto end = text->find('\n', at);
  return text->substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3);
}

// What the cgroup still allows: its limit minus its usage; nullopt without a limit.
std::optional<std::uint64_t> cgroup_room() {
  const std::string v2 = "/sys/fs/cgroup" + cgroup_v2_path();
  const std::pair<std::string, std::string> files[] = {
      {v2 + "/memory.max", v2 + "/memory.current"},
      {"/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"}};
  for (const auto& [limit_file, usage_file] : files) {
    const auto limit_text = read_text(limit_file);
    if (!limit_text) continue;
    const auto limit = parse_cgroup_limit(*limit_text);
    if (!limit) return std::nullopt;
    const auto usage_text = read_text(usage_file);
    const auto usage = usage_text ? leading_number(*usage_text) : std::nullopt;
    const std::uint64_t used = usage.value_or(0);
    return used < *limit ? *limit - used : 0;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view key = "MemAvailable:";
  const auto at = meminfo.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  const auto kib = leading_number(meminfo.substr(at + key.size()));
  if (!kib) return std::nullopt;
  return *kib * 1024;
}

std::optional<std::uint64_t> parse_cgroup_limit(std::string_view text) {
  const auto value = leading_number(text);
  // cgroup v1 writes "no limit" as the largest page-aligned 63-bit number.
  if (!value || *value >= (std::uint64_t{1} << 62)) return std::nullopt;
  return value;
}

std::optional<HostMemory> host_memory() {
  const auto meminfo = read_text("/proc/meminfo");
  constexpr std::uint64_t unknown = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t available = meminfo ? parse_mem_available(*meminfo).value_or(unknown) : unknown;
  const std::uint64_t room = cgroup_room().value_or(unknown);
  if (room != unknown && room < available) return HostMemory{room, "cgroup memory limit"};
  if (available != unknown) return HostMemory{available, "MemAvailable"};
  return std::nullopt;
}

}  // namespace troupe::launch
