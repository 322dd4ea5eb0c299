#pragma once
// Host files in DeepSpeed's syntax: one node process per line, `hostname slots=N`, `#` comments;
// `speed=X` declares the line's relative speed (train.balance static); `island=K` the DiLoCo island
// its ranks belong to (island_placement.hpp orders the lines by it).
// A host may repeat (several node processes on one machine); ranks follow file order. A line that
// ends in the word `spare` (`node5 slots=1 spare`) starts nothing and holds no ranks: it is where
// the job starts a lost node again when that node's own host cannot take it. The format is
// documented in docs/formats/host-file.md; every error names the file and line.

#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::launch {

// One line of a host file: one node process on `host` with `slots` workers.
struct HostEntry {
  std::string host;
  int slots = 0;
  int line = 0;  // 1-based line in the host file, for messages
  double speed = 1;  // speed=X: its ranks' relative speed, for train.balance static
  int island = -1;   // island=K: the DiLoCo island of its ranks; -1 where the line names none
};

// The most islands a host file may name (island=0 … max_host_islands − 1).
inline constexpr int max_host_islands = 65536;

// The most workers one line may ask for, and the most ranks a whole host file may.
inline constexpr int max_slots_per_host = 65536;
inline constexpr int max_world_size = 1 << 24;

// A host file's lines: the node processes in file order, and the spare lines apart from them. Either
// every node line names its island or none does; a spare line names none (it takes the island of
// the node it replaces).
struct HostFile {
  std::vector<HostEntry> nodes;
  std::vector<HostEntry> spares;
};

// Reads and parses the host file at path; errors start with "<path>:<line>:" (or "<path>:").
Expected<HostFile> read_host_file(const std::string& path);

// Parses host-file text; origin names it in errors the way a path would.
Expected<HostFile> parse_host_lines(std::string_view text, std::string_view origin);

// The node lines alone, for what has no use for spares (planning, rank assignment).
Expected<std::vector<HostEntry>> parse_host_file(const std::string& path);
Expected<std::vector<HostEntry>> parse_host_text(std::string_view text, std::string_view origin);

}  // namespace troupe::launch
