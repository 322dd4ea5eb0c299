#pragma once
// Lists as people read them in a log line, a drill's verdict or a failure's reason, whatever the
// job's size: a recovery at 1,024 ranks names hundreds of donors, and a line that lists each one
// is a screen no one reads.
//
// Numbers (ranks, nodes).
// Up to `most` numbers are listed as given, the last after "and": "3", "1 and 2", "1, 2 and 3".
// A longer list is sorted, a number given twice kept once, and its runs of three or more
// consecutive numbers become "32-63"; if that still leaves more than `most` parts, the first
// most - 2 are shown, then "…", the last two and how many numbers there are:
// "2, 4, 6-9, …, 1014 and 1018 (337 in all)".

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace troupe::monitor {

inline constexpr std::size_t numbers_listed_whole = 12;

std::string numbers_text(std::vector<int> numbers, std::size_t most = numbers_listed_whole);

// The noun, plural for more than one number, then numbers_text: "node 2", "ranks 0-31 and 64".
std::string numbered(std::string_view noun, std::vector<int> numbers, std::size_t most = numbers_listed_whole);

// Parts (a rank's state, a node's pids) joined by `separator`, at most `limit` of them: past that the
// text ends in "; and 28 more ranks", so a job of a thousand ranks fails with a line a person can read.
class BoundedList {
 public:
  explicit BoundedList(std::size_t limit, std::string separator = "; ")
      : limit_(limit), separator_(std::move(separator)) {}
  // Whether the next part would be shown: callers skip describing one that would not.
  bool full() const { return shown_ == limit_; }
  void add(const std::string& part);
  // Adds the part `describe()` gives, calling it only where the part will be shown.
  template <class Describe>
  void add_described(Describe describe) {
    if (full())
      ++hidden_;
    else
      add(describe());
  }
  bool empty() const { return shown_ == 0 && hidden_ == 0; }
  // The parts shown, then "<separator>and N more `what`" for those left out.
  std::string text(const std::string& what) const;

 private:
  std::size_t limit_;
  std::string separator_;
  std::size_t shown_ = 0, hidden_ = 0;
  std::string text_;
};

}  // namespace troupe::monitor
