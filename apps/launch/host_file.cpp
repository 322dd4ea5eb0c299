// Host-file parsing: comments are cut at '#', a line splits on blanks into a hostname,
// key=value pairs (slots, speed and island) and the word spare. See docs/formats/host-file.md.

#include "apps/launch/host_file.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

namespace troupe::launch {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

bool is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
         c == '_' || c == ':';
}

std::vector<std::string_view> split_blanks(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i])) ++i;
    const std::size_t begin = i;
    while (i < line.size() && !is_blank(line[i])) ++i;
    if (i > begin) words.push_back(line.substr(begin, i - begin));
  }
  return words;
}

// slots=N: a decimal number from 1 to max_slots_per_host, digits only.
Expected<int> parse_slots(std::string_view value, const std::string& where) {
  const bool digits = !value.empty() && value.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits) return Error{where + "slots must be a positive integer, got '" + std::string(value) + "'"};
  long long slots = 0;
  for (char c : value) {
    slots = slots * 10 + (c - '0');
    if (slots > max_slots_per_host) {
      return Error{where + "slots=" + std::string(value) + " is more than " + std::to_string(max_slots_per_host)};
    }
  }
  if (slots == 0) return Error{where + "slots must be a positive integer, got '" + std::string(value) + "'"};
  return static_cast<int>(slots);
}

// speed=X: a positive decimal number, read whole as every config number is.
Expected<double> parse_speed(std::string_view value, const std::string& where) {
  double speed = 0;
  const auto [stop, failure] = std::from_chars(value.data(), value.data() + value.size(), speed);
  if (value.empty() || failure != std::errc() || stop != value.data() + value.size() || !(speed > 0) ||
      !std::isfinite(speed))
    return Error{where + "speed must be a positive number, got '" + std::string(value) + "'"};
  return speed;
}

// island=K: a decimal number from 0 to max_host_islands − 1, digits only.
Expected<int> parse_island(std::string_view value, const std::string& where) {
  const bool digits =
      !value.empty() && value.size() <= 5 && value.find_first_not_of("0123456789") == std::string_view::npos;
  int island = 0;
  for (char c : digits ? value : std::string_view()) island = island * 10 + (c - '0');
  if (!digits || island >= max_host_islands)
    return Error{where + "island must be an integer from 0 to " + std::to_string(max_host_islands - 1) + ", got '" +
                 std::string(value) + "'"};
  return island;
}

struct ParsedLine {
  HostEntry entry;
  bool spare = false;
};

Expected<ParsedLine> parse_line(std::string_view line, int number, const std::string& where) {
  const auto words = split_blanks(line);
  HostEntry entry{std::string(words[0]), 0, number};
  bool spare = false, speed_given = false;
  if (entry.host.find('=') != std::string::npos) {
    return Error{where + "expected a hostname first, got '" + entry.host + "'"};
  }
  for (char c : entry.host) {
    if (!is_host_char(c)) {
      return Error{where + "hostname '" + entry.host + "' may hold only letters, digits, '.', '-', '_' and ':'"};
    }
  }
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string_view word = words[i];
    const std::size_t eq = word.find('=');
    if (word == "spare") {
      if (spare) return Error{where + "spare given twice"};
      spare = true;
      continue;
    }
    if (eq == std::string_view::npos)
      return Error{where + "unknown word '" + std::string(word) +
                   "' (a line takes slots=N, speed=X, island=K and, on a spare line, spare)"};
    if (eq == 0) {
      return Error{where + "expected key=value after the hostname, got '" + std::string(word) + "'"};
    }
    const std::string_view key = word.substr(0, eq);
    if (key == "speed") {
      if (speed_given) return Error{where + "speed given twice"};
      speed_given = true;
      auto speed = parse_speed(word.substr(eq + 1), where);
      if (!speed) return speed.error();
      entry.speed = *speed;
      continue;
    }
    if (key == "island") {
      if (entry.island >= 0) return Error{where + "island given twice"};
      auto island = parse_island(word.substr(eq + 1), where);
      if (!island) return island.error();
      entry.island = *island;
      continue;
    }
    if (key != "slots")
      return Error{where + "unknown key '" + std::string(key) + "' (the keys are slots, speed and island)"};
    if (entry.slots != 0) return Error{where + "slots given twice"};
    auto slots = parse_slots(word.substr(eq + 1), where);
    if (!slots) return slots.error();
    entry.slots = *slots;
  }
  if (entry.slots == 0) {
    return Error{where + "slots missing for host '" + entry.host + "' (write '" + entry.host + " slots=N')"};
  }
  if (spare && entry.island >= 0)
    return Error{where + "a spare line names no island (it takes the island of the node it replaces)"};
  return ParsedLine{std::move(entry), spare};
}

// Islands are named on every node line or on none.
Status check_islands_named(const HostFile& file, std::string_view origin) {
  const auto named = [](const HostEntry& node) { return node.island >= 0; };
  if (std::none_of(file.nodes.begin(), file.nodes.end(), named)) return Status::success();
  for (const HostEntry& node : file.nodes)
    if (!named(node))
      return Error{std::string(origin) + ":" + std::to_string(node.line) + ": island missing for host '" + node.host +
                   "' (once a node line names its island, every node line does)"};
  return Status::success();
}

// A spare takes the place of one node process, so it needs the slots of at least one node line.
Status check_spares(const HostFile& file, std::string_view origin) {
  if (file.nodes.empty())
    return Error{std::string(origin) +
                 ": no node line: every host is a spare (a spare holds no ranks until a node is lost)"};
  int fewest = file.nodes.front().slots;
  for (const HostEntry& node : file.nodes) fewest = std::min(fewest, node.slots);
  for (const HostEntry& spare : file.spares) {
    const std::string where = std::string(origin) + ":" + std::to_string(spare.line) + ": ";
    if (spare.slots < fewest)
      return Error{where + "spare host '" + spare.host + "' has slots=" + std::to_string(spare.slots) +
                   ", fewer than any node line's (the fewest is " + std::to_string(fewest) +
                   "): it could replace none"};
  }
  return Status::success();
}

}  // namespace

Expected<HostFile> parse_host_lines(std::string_view text, std::string_view origin) {
  HostFile file;
  long long world_size = 0;
  int number = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    line = line.substr(0, line.find('#'));
    if (split_blanks(line).empty()) continue;
    const std::string where = std::string(origin) + ":" + std::to_string(number) + ": ";
    auto parsed = parse_line(line, number, where);
    if (!parsed) return parsed.error();
    if (parsed->spare) {
      file.spares.push_back(std::move(parsed->entry));
      continue;
    }
    world_size += parsed->entry.slots;
    if (world_size > max_world_size) {
      return Error{where + "the host file asks for more than " + std::to_string(max_world_size) + " ranks"};
    }
    file.nodes.push_back(std::move(parsed->entry));
  }
  if (file.nodes.empty() && file.spares.empty())
    return Error{std::string(origin) + ": no hosts: every line is blank or a comment"};
  if (Status spares = check_spares(file, origin); !spares) return spares.error();
  if (Status islands = check_islands_named(file, origin); !islands) return islands.error();
  return file;
}

Expected<HostFile> read_host_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{path + ": cannot read host file: " + std::strerror(errno)};
  std::ostringstream text;
  text << file.rdbuf();
  return parse_host_lines(text.str(), path);
}

namespace {

Expected<std::vector<HostEntry>> node_lines(Expected<HostFile> file) {
  if (!file) return file.error();
  return std::move(file->nodes);
}

}  // namespace

Expected<std::vector<HostEntry>> parse_host_file(const std::string& path) { return node_lines(read_host_file(path)); }

Expected<std::vector<HostEntry>> parse_host_text(std::string_view text, std::string_view origin) {
  return node_lines(parse_host_lines(text, origin));
}

}  // namespace troupe::launch
