// Slurm node-list expansion: split at top-level commas, then expand each item's bracket groups as
// a cartesian product. Numbers are formatted to the width of the range's lower bound.

#include "apps/launch/slurm_nodelist.hpp"

#include <algorithm>

namespace troupe::launch {
namespace {

constexpr std::size_t max_digits = 9;

bool is_digits(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

std::string padded(long long value, std::size_t width) {
  std::string digits = std::to_string(value);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// The values of one bracket group's body, e.g. "01-03,07" → 01 02 03 07.
Expected<std::vector<std::string>> expand_group(std::string_view body, const std::string& where) {
  std::vector<std::string> values;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(body.find(',', begin), body.size());
    const std::string_view range = body.substr(begin, end - begin);
    const std::size_t dash = range.find('-');
    const std::string_view low = range.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : range.substr(dash + 1);
    if (!is_digits(low) || !is_digits(high)) {
      return Error{where + "'[" + std::string(body) + "]' holds '" + std::string(range) +
                   "', not a number or a range low-high"};
    }
    if (low.size() > max_digits || high.size() > max_digits) {
      return Error{where + "'" + std::string(range) + "' has a number of more than " + std::to_string(max_digits) +
                   " digits"};
    }
    const long long lo = std::stoll(std::string(low));
    const long long hi = std::stoll(std::string(high));
    if (lo > hi) return Error{where + "range '" + std::string(range) + "' runs backwards"};
    if (static_cast<std::size_t>(hi - lo) + values.size() >= max_nodelist_hosts) {
      return Error{where + "expands to more than " + std::to_string(max_nodelist_hosts) + " hosts"};
    }
    for (long long v = lo; v <= hi; ++v) values.push_back(padded(v, low.size()));
    if (end == body.size()) break;
    begin = end + 1;
  }
  return values;
}

// Appends the hosts of one item, e.g. "r[1-2]n[1-2]", to hosts.
Status expand_item(std::string_view item, const std::string& where, std::vector<std::string>& hosts) {
  if (item.empty()) return Error{where + "empty item"};
  std::vector<std::string> names{""};
  std::size_t i = 0;
  while (i < item.size()) {
    std::vector<std::string> parts;
    if (item[i] == '[') {
      const std::size_t close = item.find(']', i);
      if (close == std::string_view::npos) return Error{where + "'[' without ']'"};
      const std::string_view body = item.substr(i + 1, close - i - 1);
      if (body.find('[') != std::string_view::npos) return Error{where + "nested '['"};
      auto values = expand_group(body, where);
      if (!values) return values.error();
      parts = std::move(*values);
      i = close + 1;
    } else {
      const std::size_t next = std::min(item.find_first_of("[]", i), item.size());
      if (next < item.size() && item[next] == ']') return Error{where + "']' without '['"};
      parts.emplace_back(item.substr(i, next - i));
      i = next;
    }
    if (names.size() * parts.size() + hosts.size() > max_nodelist_hosts) {
      return Error{where + "expands to more than " + std::to_string(max_nodelist_hosts) + " hosts"};
    }
    std::vector<std::string> longer;
    longer.reserve(names.size() * parts.size());
    for (const auto& name : names) {
      for (const auto& part : parts) longer.push_back(name + part);
    }
    names = std::move(longer);
  }
  hosts.insert(hosts.end(), names.begin(), names.end());
  return Status::success();
}

}  // namespace

Expected<std::vector<std::string>> expand_slurm_nodelist(std::string_view nodelist) {
  const std::string where = "node list '" + std::string(nodelist) + "': ";
  if (nodelist.empty()) return Error{"node list is empty"};
  for (char c : nodelist) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                         c == '-' || c == '_' || c == ',' || c == '[' || c == ']';
    if (!allowed) return Error{where + "character '" + std::string(1, c) + "' is not allowed"};
  }
  std::vector<std::string> hosts;
  std::size_t begin = 0;
  while (begin <= nodelist.size()) {
    // An item ends at the first comma outside brackets.
    std::size_t end = begin;
    int depth = 0;
    while (end < nodelist.size() && !(nodelist[end] == ',' && depth == 0)) {
      if (nodelist[end] == '[') ++depth;
      if (nodelist[end] == ']') --depth;
      ++end;
    }
    if (Status item = expand_item(nodelist.substr(begin, end - begin), where, hosts); !item) return item.error();
    begin = end + 1;
  }
  return hosts;
}

}  // namespace troupe::launch
