#include "apps/config/value.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <type_traits>

#include "apps/config/named_choice.hpp"
#include "compute/check.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

template <typename Number>
Status parse_into(Number& out, std::string_view text, std::string_view what, const std::string& where) {
  Number value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) return Error{where + quoted(text) + " is out of range"};
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return Error{where + "expected " + std::string(what) + ", got " + quoted(text)};
  if constexpr (std::is_floating_point_v<Number>) {
    if (!std::isfinite(value)) return Error{where + "expected a finite number, got " + quoted(text)};
  }
  out = value;
  return Status::success();
}

std::string toml_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

Status set_from_text(JobConfig& config, const ConfigKey& key, std::string_view text, std::string_view origin) {
  if (const ValueAlias* alias = find_value_alias(key.name, text)) return apply_value_alias(config, *alias, origin);
  const std::string where = std::string(origin) + ": " + std::string(key.name) + ": ";
  return std::visit(
      [&](auto* target) -> Status {
        using Value = std::remove_pointer_t<decltype(target)>;
        if constexpr (std::is_same_v<Value, std::string>) {
          *target = std::string(text);
          return Status::success();
        } else if constexpr (named_choice<Value>) {
          const auto choice = parse_choice<Value>(text);
          if (!choice) return Error{where + "expected " + choice_list<Value>() + ", got " + quoted(text)};
          *target = *choice;
          return Status::success();
        } else if constexpr (std::is_same_v<Value, bool>) {
          if (text != "true" && text != "false") return Error{where + "expected true or false, got " + quoted(text)};
          *target = text == "true";
          return Status::success();
        } else if constexpr (std::is_same_v<Value, compute::ZeroStage>) {
          std::int64_t number = 0;
          if (Status parsed = parse_into(number, text, "an integer", where); !parsed) return parsed;
          auto stage = compute::parse_zero_stage(number);
          if (!stage) return Error{where + stage.error().message};
          *target = *stage;
          return Status::success();
        } else if constexpr (std::is_same_v<Value, std::uint64_t>) {
          return parse_into(*target, text, "a non-negative integer", where);
        } else if constexpr (std::is_integral_v<Value>) {
          return parse_into(*target, text, "an integer", where);
        } else {
          return parse_into(*target, text, "a number", where);
        }
      },
      key.field(config));
}

Status apply_value_alias(JobConfig& config, const ValueAlias& alias, std::string_view origin) {
  std::string meaning;
  for (const auto& [name, value] : alias.means) {
    const ConfigKey* key = find_config_key(name);
    TROUPE_CHECK(key != nullptr, "value alias of " + std::string(alias.key) + " names no key " + std::string(name));
    if (Status set = set_from_text(config, *key, value, origin); !set) return set;
    meaning += (meaning.empty() ? "" : " with ") + std::string(name) + " " + std::string(value);
  }
  static std::once_flag said;
  std::call_once(said, [&] {
    monitor::logger("job")->warn("{}: {} '{}' is the old spelling of {}; it is read as that", origin, alias.key,
                                 alias.value, meaning);
  });
  return Status::success();
}

namespace {

std::string format_key(const JobConfig& config, const ConfigKey& key, bool quote_strings) {
  JobConfig copy = config;  // the table's accessors point into a mutable config
  return std::visit(
      [quote_strings](auto* value) -> std::string {
        using Value = std::remove_pointer_t<decltype(value)>;
        if constexpr (std::is_same_v<Value, std::string>)
          return quote_strings ? toml_string(*value) : *value;
        else if constexpr (named_choice<Value>)
          return quote_strings ? toml_string(choice_name(*value)) : choice_name(*value);
        else if constexpr (std::is_same_v<Value, bool>)
          return *value ? "true" : "false";
        else if constexpr (std::is_same_v<Value, double>)
          return format_number(*value);
        else if constexpr (std::is_same_v<Value, compute::ZeroStage>)
          return std::to_string(compute::zero_number(*value));
        else
          return std::to_string(*value);
      },
      key.field(copy));
}

}  // namespace

std::string format_value(const JobConfig& config, const ConfigKey& key) { return format_key(config, key, true); }

std::string format_text(const JobConfig& config, const ConfigKey& key) { return format_key(config, key, false); }

std::string format_number(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::general);
  std::string text(buffer, ec == std::errc() ? end : buffer);
  if (std::isfinite(value) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

std::vector<std::string> override_arguments(const JobConfig& config) {
  std::vector<std::string> arguments;
  // --key=value keeps a value that starts with '-' a value; an empty value must stand alone,
  // since CLI11 reads "--key=" as a key waiting for the next argument.
  for (const ConfigKey& key : config_keys()) {
    const std::string option = "--" + std::string(key.name), value = format_text(config, key);
    if (value.empty()) {
      arguments.push_back(option);
      arguments.push_back(value);
    } else {
      arguments.push_back(option + "=" + value);
    }
  }
  return arguments;
}

}  // namespace troupe::apps
