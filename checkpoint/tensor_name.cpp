#include "checkpoint/tensor_name.hpp"

#include <charconv>

#include "checkpoint/file_record.hpp"

namespace troupe::checkpoint {
namespace {

std::optional<std::int64_t> parse_index(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

}  // namespace

std::string format_tensor_name(const TensorName& name) {
  std::string text = name.kind + "/" + name.parameter;
  if (name.slice) text += "[" + std::to_string(name.slice->first) + ":" + std::to_string(name.slice->second) + "]";
  return text;
}

std::optional<TensorName> parse_tensor_name(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || !valid_kind(text.substr(0, slash))) return std::nullopt;
  TensorName name{std::string(text.substr(0, slash)), {}, std::nullopt};
  std::string_view rest = text.substr(slash + 1);
  if (!rest.empty() && rest.back() == ']') {
    const auto open = rest.rfind('[');
    const auto colon = rest.rfind(':');
    if (open == std::string_view::npos || colon == std::string_view::npos || colon < open) return std::nullopt;
    const auto from = parse_index(rest.substr(open + 1, colon - open - 1));
    const auto to = parse_index(rest.substr(colon + 1, rest.size() - colon - 2));
    if (!from || !to || *to < *from) return std::nullopt;
    name.slice = {{*from, *to}};
    rest = rest.substr(0, open);
  }
  if (rest.empty()) return std::nullopt;
  name.parameter = std::string(rest);
  return name;
}

}  // namespace troupe::checkpoint
