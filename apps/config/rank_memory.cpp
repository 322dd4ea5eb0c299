#include "apps/config/rank_memory.hpp"

#include "apps/config/byte_size.hpp"
#include "apps/launch/host_memory.hpp"

namespace troupe::apps {

Expected<double> parse_memory_limit(const std::string& text) {
  if (auto bytes = parse_byte_size(text)) return *bytes;
  return Error{"--memory-limit " + text + ": not a positive size (write it as 6GiB, 512MiB, 2G or a number of bytes)"};
}

std::optional<RankMemory> rank_memory(std::optional<double> limit, int ranks_here) {
  if (limit) return RankMemory{*limit, "--memory-limit"};
  if (ranks_here < 1) return std::nullopt;
  const auto host = launch::host_memory();
  if (!host) return std::nullopt;
  return RankMemory{
      double(host->available_bytes) / ranks_here,
      host->source + " / " + std::to_string(ranks_here) + (ranks_here == 1 ? " rank" : " ranks") + " on this machine"};
}

}  // namespace troupe::apps
