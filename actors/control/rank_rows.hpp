#pragma once
// Which ranks a `workers` or `top` reply has a row for. A job of up to every_rank_rows ranks
// shows each one. A larger job asked with no selection gets a summary, not a screen per sixty
// ranks: how many ranks have done how many steps, then the rows of the summary_rows ranks most
// worth a look — the furthest behind, then the most urgent by the reply's own measure (waiting
// longest for `workers`, the slowest last step for `top`) —, then how many were left out and how
// to ask for them. A selection names the rows: `all`, `node N`, or ranks such as `0-15,32`.

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/local_messages.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

inline constexpr std::size_t every_rank_rows = 64;
inline constexpr std::size_t summary_rows = 16;

enum class RankChoice { automatic, all, node, ranks };

struct RankSelection {
  RankChoice choice = RankChoice::automatic;
  int node = -1;                            // RankChoice::node
  std::vector<std::pair<int, int>> ranges;  // RankChoice::ranks: first and last rank of each part
};

// The words after the verb: none, "all", "node N", or one word of ranks and ranges joined by
// commas ("0-15,32"). An error names the word and what is wrong with it.
Expected<RankSelection> parse_rank_selection(std::span<const std::string> words);

struct RankRow {
  int node = -1;
  const worker_beat* worker = nullptr;  // into the view given to choose_rank_rows
};

struct RankRows {
  std::string heading;  // a summary's: the ranks by steps done and how the rows were chosen; else empty
  std::vector<RankRow> rows;
  std::string left_out;  // a summary's: how many ranks have no row and how to ask for them; else empty
};

// How urgent a rank's row is among ranks of the same steps done: larger comes first.
using RankUrgency = std::function<double(const worker_beat&)>;

// The rows `selection` asks for, in the view's order (by node, then slot), or a summary's in the
// order above, `urgency_described` saying which ranks come after the furthest behind ("those
// waiting longest"). `verb` ("workers", "top") goes into the summary's hints. An error names a
// node or a rank the job does not have.
Expected<RankRows> choose_rank_rows(const job_view_msg& view, const RankSelection& selection, std::string_view verb,
                                    const RankUrgency& urgency, std::string_view urgency_described);

}  // namespace troupe::actors
