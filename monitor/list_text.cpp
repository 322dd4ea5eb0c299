#include "monitor/list_text.hpp"

#include <algorithm>

namespace troupe::monitor {
namespace {

// "a, b and c".
std::string joined(const std::vector<std::string>& parts) {
  std::string text;
  for (std::size_t i = 0; i < parts.size(); ++i)
    text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

// Sorted numbers as parts, each run of three or more consecutive ones as "first-last".
std::vector<std::string> runs(const std::vector<int>& sorted) {
  std::vector<std::string> parts;
  for (std::size_t begin = 0; begin < sorted.size();) {
    std::size_t end = begin + 1;
    while (end < sorted.size() && sorted[end] == sorted[end - 1] + 1) ++end;
    if (end - begin >= 3) {
      parts.push_back(std::to_string(sorted[begin]) + "-" + std::to_string(sorted[end - 1]));
    } else {
      for (std::size_t i = begin; i < end; ++i) parts.push_back(std::to_string(sorted[i]));
    }
    begin = end;
  }
  return parts;
}

}  // namespace

std::string numbers_text(std::vector<int> numbers, std::size_t most) {
  most = std::max<std::size_t>(most, 3);
  if (numbers.size() <= most) {
    std::vector<std::string> parts;
    for (int n : numbers) parts.push_back(std::to_string(n));
    return joined(parts);
  }
  std::sort(numbers.begin(), numbers.end());
  numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
  std::vector<std::string> parts = runs(numbers);
  if (parts.size() <= most) return joined(parts);
  std::string text;
  for (std::size_t i = 0; i + 2 < most; ++i) text += parts[i] + ", ";
  return text + "…, " + parts[parts.size() - 2] + " and " + parts.back() + " (" + std::to_string(numbers.size()) +
         " in all)";
}

std::string numbered(std::string_view noun, std::vector<int> numbers, std::size_t most) {
  const std::size_t count = numbers.size();
  return std::string(noun) + (count == 1 ? " " : "s ") + numbers_text(std::move(numbers), most);
}

void BoundedList::add(const std::string& part) {
  if (full()) {
    ++hidden_;
    return;
  }
  text_ += (shown_ ? separator_ : "") + part;
  ++shown_;
}

std::string BoundedList::text(const std::string& what) const {
  if (hidden_ == 0) return text_;
  return text_ + (shown_ ? separator_ : "") + "and " + std::to_string(hidden_) + " more " + what;
}

}  // namespace troupe::monitor
