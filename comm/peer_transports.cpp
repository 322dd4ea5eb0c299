#include "comm/peer_transports.hpp"

#include <algorithm>
#include <vector>

namespace troupe::comm {

std::string transport_kind(std::string_view transports) {
  const std::string_view first = transports.substr(0, transports.find('/'));
  for (std::string_view shared : {"sysv", "posix", "xpmem", "cma", "knem"})
    if (first == shared) return "shared memory";
  if (first == "tcp") return "TCP";
  if (first == "self") return "this process";
  for (std::string_view ib : {"rc", "ud", "dc", "rc_mlx5", "ud_mlx5", "dc_mlx5", "rc_verbs", "ud_verbs"})
    if (first == ib) return "InfiniBand";
  return std::string(transports);
}

std::string describe_peer_transports(const Engine& engine, std::span<const int> peers) {
  struct Way {
    std::string text;
    std::vector<int> peers;
  };
  std::vector<Way> ways;
  for (int peer : peers) {
    const std::string transports = engine.transports(peer);
    std::string text = transport_kind(transports) + " (" + transports;
    if (!engine.peer_region(peer).empty()) text += ", mapped blocks";
    text += ")";
    auto way = std::find_if(ways.begin(), ways.end(), [&](const Way& w) { return w.text == text; });
    if (way == ways.end()) way = ways.insert(ways.end(), Way{text, {}});
    way->peers.push_back(peer);
  }
  std::string line = "rank " + std::to_string(engine.rank()) + " reaches";
  for (std::size_t i = 0; i < ways.size(); ++i) {
    line += i == 0 ? " " : "; ";
    line += ways[i].peers.size() == 1 ? "rank " : "ranks ";
    for (std::size_t p = 0; p < ways[i].peers.size(); ++p)
      line += (p == 0 ? "" : ", ") + std::to_string(ways[i].peers[p]);
    line += " through " + ways[i].text;
  }
  if (ways.empty()) line += " no other rank";
  return line;
}

}  // namespace troupe::comm
