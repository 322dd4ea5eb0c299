#include "actors/control/rank_rows.hpp"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <set>

#include <spdlog/fmt/fmt.h>

#include "monitor/list_text.hpp"

namespace troupe::actors {
namespace {

constexpr int most_rank_number = 1 << 20;      // above any job's ranks; keeps a range's length in range
constexpr std::size_t steps_groups_named = 4;  // the summary's "steps done" parts before the rest are counted

const char* const selection_forms = "all, node N, or ranks and ranges such as 0-15,32";

// A whole non-negative number of at most most_rank_number, or nothing.
std::optional<int> parse_number(std::string_view text) {
  int value = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc{} || end != text.data() + text.size() || value < 0 || value > most_rank_number)
    return std::nullopt;
  return value;
}

Expected<std::vector<std::pair<int, int>>> parse_ranges(const std::string& word) {
  std::vector<std::pair<int, int>> ranges;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = word.find(',', begin);
    const std::string_view part = std::string_view(word).substr(begin, comma - begin);
    const std::size_t dash = part.find('-');
    const std::optional<int> first = parse_number(part.substr(0, dash));
    const std::optional<int> last = dash == std::string_view::npos ? first : parse_number(part.substr(dash + 1));
    if (!first || !last)
      return Error{fmt::format("{}: '{}' is not a rank or a range of ranks (give {})", word, part, selection_forms)};
    if (*first > *last) return Error{fmt::format("{}: the range {} starts after it ends", word, part)};
    ranges.emplace_back(*first, *last);
    if (comma == std::string::npos) return ranges;
    begin = comma + 1;
  }
}

bool selected(const RankSelection& selection, int node, int rank) {
  switch (selection.choice) {
    case RankChoice::automatic:
    case RankChoice::all: return true;
    case RankChoice::node: return node == selection.node;
    case RankChoice::ranks:
      return std::any_of(selection.ranges.begin(), selection.ranges.end(),
                         [rank](const auto& range) { return range.first <= rank && rank <= range.second; });
  }
  return false;
}

// The first rank `selection` names that the job does not have, if any.
std::optional<int> missing_rank(const RankSelection& selection, const std::set<int>& ranks) {
  for (const auto& [first, last] : selection.ranges) {
    auto it = ranks.lower_bound(first);
    for (int rank = first; rank <= last; ++rank, ++it)
      if (it == ranks.end() || *it != rank) return rank;
  }
  return std::nullopt;
}

// "7 by 1020 ranks, 6 by ranks 33-36": the ranks by steps done, the most steps first.
std::string steps_done_text(const std::vector<RankRow>& rows) {
  std::map<std::int64_t, std::vector<int>, std::greater<>> by_steps;
  for (const RankRow& row : rows) by_steps[row.worker->steps_done].push_back(row.worker->rank);
  // Past steps_groups_named counts, the last one stands for every rank behind the others.
  const std::size_t named = by_steps.size() <= steps_groups_named ? by_steps.size() : steps_groups_named - 1;
  std::vector<std::string> parts;
  std::size_t behind = 0;
  std::int64_t fewest = 0, most = 0;
  for (const auto& [steps, ranks] : by_steps) {
    if (parts.size() < named) {
      parts.push_back(fmt::format("{} by {}", steps,
                                  ranks.size() <= monitor::numbers_listed_whole
                                      ? monitor::numbered("rank", ranks)
                                      : fmt::format("{} ranks", ranks.size())));
      continue;
    }
    if (behind == 0) most = steps;
    fewest = steps;
    behind += ranks.size();
  }
  if (behind > 0) parts.push_back(fmt::format("{} to {} by {} ranks", fewest, most, behind));
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

}  // namespace

Expected<RankSelection> parse_rank_selection(std::span<const std::string> words) {
  RankSelection selection;
  if (words.empty()) return selection;
  if (words.size() == 1 && words[0] == "all") {
    selection.choice = RankChoice::all;
    return selection;
  }
  if (words[0] == "node") {
    const std::optional<int> node = words.size() == 2 ? parse_number(words[1]) : std::nullopt;
    if (!node)
      return Error{
          fmt::format("'{}' is not one node number (give {})", fmt::join(words.subspan(1), " "), selection_forms)};
    selection.choice = RankChoice::node;
    selection.node = *node;
    return selection;
  }
  if (words.size() > 1)
    return Error{
        fmt::format("'{}' is more than one word (give {}, without spaces)", fmt::join(words, " "), selection_forms)};
  auto ranges = parse_ranges(words[0]);
  if (!ranges) return ranges.error();
  selection.choice = RankChoice::ranks;
  selection.ranges = std::move(ranges.value());
  return selection;
}

Expected<RankRows> choose_rank_rows(const job_view_msg& view, const RankSelection& selection, std::string_view verb,
                                    const RankUrgency& urgency, std::string_view urgency_described) {
  std::vector<int> nodes;
  std::set<int> ranks;
  RankRows chosen;
  for (const node_view& n : view.nodes) {
    nodes.push_back(n.node_index);
    for (const worker_beat& w : n.workers) {
      ranks.insert(w.rank);
      if (selected(selection, n.node_index, w.rank)) chosen.rows.push_back({n.node_index, &w});
    }
  }
  if (selection.choice == RankChoice::node && std::find(nodes.begin(), nodes.end(), selection.node) == nodes.end())
    return Error{fmt::format("no node {}: the job's are {}", selection.node, monitor::numbered("node", nodes))};
  if (selection.choice == RankChoice::ranks && ranks.empty())
    return Error{"no rank has reported yet: try again once the job has started"};
  if (selection.choice == RankChoice::ranks)
    if (const std::optional<int> missing = missing_rank(selection, ranks))
      return Error{fmt::format("no rank {}: the job's are {}", *missing,
                               monitor::numbered("rank", std::vector<int>(ranks.begin(), ranks.end())))};
  if (selection.choice != RankChoice::automatic || chosen.rows.size() <= every_rank_rows) return chosen;

  const std::size_t total = chosen.rows.size();
  chosen.heading =
      fmt::format("{} ranks in {} node processes; steps done: {}\nthe {} ranks furthest behind, then {}:", total,
                  view.nodes.size(), steps_done_text(chosen.rows), summary_rows, urgency_described);
  std::stable_sort(chosen.rows.begin(), chosen.rows.end(), [&](const RankRow& a, const RankRow& b) {
    if (a.worker->steps_done != b.worker->steps_done) return a.worker->steps_done < b.worker->steps_done;
    return urgency(*a.worker) > urgency(*b.worker);
  });
  chosen.rows.resize(summary_rows);
  chosen.left_out =
      fmt::format("{} more ranks: `{} all` lists every rank, `{} node {}` a node process's, `{} 0-{}` those ranks",
                  total - summary_rows, verb, verb, chosen.rows.front().node, verb, summary_rows * 2 - 1);
  return chosen;
}

}  // namespace troupe::actors
