#pragma once
// Lists of ranks and nodes as people read them in a log line, a drill's verdict or an event's
// reason, whatever the job's size: a recovery at 1,024 ranks names hundreds of donors, and a line
// that lists each one is a screen no one reads.
//
// Up to `most` numbers are listed as given, the last after "and": "3", "1 and 2", "1, 2 and 3".
// A longer list is sorted, a number given twice kept once, and its runs of three or more
// consecutive numbers become "32-63"; if that still leaves more than `most` parts, the first
// most - 2 are shown, then "…", the last two and how many numbers there are:
// "2, 4, 6-9, …, 1014 and 1018 (337 in all)".

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::monitor {

inline constexpr std::size_t numbers_listed_whole = 12;

std::string numbers_text(std::vector<int> numbers, std::size_t most = numbers_listed_whole);

// The noun, plural for more than one number, then numbers_text: "node 2", "ranks 0-31 and 64".
std::string numbered(std::string_view noun, std::vector<int> numbers, std::size_t most = numbers_listed_whole);

}  // namespace troupe::monitor
