#include "apps/config/rank_memory.hpp"

#include "apps/config/byte_size.hpp"
#include "apps/launch/host_memory.hpp"

namespace troupe::apps {

Expected<double> parse_memory_limit(const std::string& text) {
  if (auto bytes = parse_byte_size(text)) return *bytes;
  return Error{"--memory-limit " + text + ": not a positive size (write it as 6GiB, 512MiB, 2G or a number of bytes)"};
}

std::optional<RankMemory> rank_memory(std::optional<double> limit, int ranks_here) {
  std::optional<RankMemory> share;  // this machine's memory shared by the job's ranks on it
  if (ranks_here >= 1) {
    if (const auto host = launch::host_memory())
      share = RankMemory{double(host->available_bytes) / ranks_here, host->source + " / " + std::to_string(ranks_here) +
                                                                         (ranks_here == 1 ? " rank" : " ranks") +
                                                                         " on this machine"};
  }
  if (!limit) return share;
  if (share && share->bytes < *limit) {
    share->source += ", less than --memory-limit";
    return share;
  }
  return RankMemory{*limit, "--memory-limit"};
}

}  // namespace troupe::apps
