#include "apps/config/speeds.hpp"

#include <algorithm>
#include <charconv>

namespace troupe::apps {

Expected<std::vector<double>> parse_speeds(std::string_view input, const std::string& text, std::string_view each) {
  std::vector<double> speeds;
  if (text.empty()) return speeds;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    double speed = 0;
    const auto [stop, failure] = std::from_chars(item.data(), item.data() + item.size(), speed);
    if (item.empty() || failure != std::errc() || stop != item.data() + item.size())
      return Error{std::string(input) + ": '" + item + "' in '" + text + "' is not a number (write one speed " +
                   std::string(each) + ", comma-separated: 1,0.5)"};
    speeds.push_back(speed);
    if (end == text.size()) return speeds;
    begin = end + 1;
  }
}

}  // namespace troupe::apps
