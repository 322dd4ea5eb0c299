#pragma once
// The memory this machine can still give a job: MemAvailable from /proc/meminfo, lowered to
// what the process's cgroup leaves (its limit minus its usage) when a limit is set: cgroup v2's
// memory.max, or v1's memory.limit_in_bytes. The parsers take text so tests can feed them.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace troupe::launch {

struct HostMemory {
  std::uint64_t available_bytes = 0;
  std::string source;  // "MemAvailable" or "cgroup memory limit"
};

// nullopt when neither figure can be read (not Linux, /proc not mounted).
std::optional<HostMemory> host_memory();

// MemAvailable of /proc/meminfo text, in bytes.
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);
// A cgroup limit file's value in bytes; nullopt for "max" or a v1 "no limit" (at least 2^62).
std::optional<std::uint64_t> parse_cgroup_limit(std::string_view text);

}  // namespace troupe::launch
