#include "apps/config/config_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "apps/config/keys.hpp"
#include "apps/config/named_choice.hpp"
#include "apps/config/value.hpp"

namespace troupe::apps {
namespace {

std::string_view kind_of(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    default: return "nothing";
  }
}

// Problems found while walking the document, reported in file order (toml::table iterates its
// keys sorted by name, not in the order the file gives them).
class Problems {
 public:
  explicit Problems(const std::string& origin) : origin_(origin) {}

  void add(const toml::source_region& where, const std::string& what) {
    const auto line = where.begin.line;
    std::string message = origin_;
    if (line > 0) message += ":" + std::to_string(line);
    found_.emplace_back(line, message + ": " + what);
  }

  Status first() const {
    if (found_.empty()) return Status::success();
    return Error{std::min_element(found_.begin(), found_.end())->second};
  }

 private:
  std::string origin_;
  std::vector<std::pair<toml::source_index, std::string>> found_;
};

std::string did_you_mean(const std::optional<std::string>& suggestion, std::string_view before = "'",
                         std::string_view after = "'") {
  if (!suggestion) return "";
  return " (did you mean " + std::string(before) + *suggestion + std::string(after) + "?)";
}

// Checks node's type and range against the field and stores it; returns what is wrong, if anything.
std::optional<std::string> assign(const ConfigField& field, const toml::node& node) {
  return std::visit(
      [&](auto* target) -> std::optional<std::string> {
        using Value = std::remove_pointer_t<decltype(target)>;
        const std::string got = std::string(", got ") + std::string(kind_of(node));
        if constexpr (std::is_same_v<Value, std::string>) {
          const auto* text = node.as_string();
          if (!text) return "expected a string" + got;
          *target = text->get();
        } else if constexpr (named_choice<Value>) {
          const auto* text = node.as_string();
          if (!text) return "expected a string" + got;
          const auto choice = parse_choice<Value>(text->get());
          if (!choice) return "expected " + choice_list<Value>() + ", got '" + std::string(text->get()) + "'";
          *target = *choice;
        } else if constexpr (std::is_same_v<Value, bool>) {
          const auto* flag = node.as_boolean();
          if (!flag) return "expected true or false" + got;
          *target = flag->get();
        } else if constexpr (std::is_same_v<Value, double>) {
          if (const auto* integer = node.as_integer()) {
            *target = static_cast<double>(integer->get());
          } else if (const auto* number = node.as_floating_point()) {
            if (!std::isfinite(number->get())) return "expected a finite number, got " + format_number(number->get());
            *target = number->get();
          } else {
            return "expected a number" + got;
          }
        } else if constexpr (std::is_same_v<Value, compute::ZeroStage>) {
          const auto* integer = node.as_integer();
          if (!integer) return "expected an integer" + got;
          auto stage = compute::parse_zero_stage(integer->get());
          if (!stage) return stage.error().message;
          *target = *stage;
        } else {
          const auto* integer = node.as_integer();
          if (!integer) return "expected an integer" + got;
          if (!std::in_range<Value>(integer->get())) {
            return std::to_string(integer->get()) + " is out of range (" +
                   std::to_string(std::numeric_limits<Value>::min()) + " to " +
                   std::to_string(std::numeric_limits<Value>::max()) + ")";
          }
          *target = static_cast<Value>(integer->get());
        }
        return std::nullopt;
      },
      field);
}

void apply_section(JobConfig& config, std::string_view section, const toml::table& table, const std::string& origin,
                   Problems& problems) {
  for (auto&& [name, node] : table) {
    const std::string full = std::string(section) + "." + std::string(name.str());
    const ConfigKey* key = find_config_key(full);
    if (!key) {
      problems.add(name.source(), "unknown key '" + full + "'" + did_you_mean(closest_config_key(full)));
      continue;
    }
    const toml::value<std::string>* text = node.as_string();
    if (const ValueAlias* alias = text ? find_value_alias(full, text->get()) : nullptr) {
      if (Status set = apply_value_alias(config, *alias, origin); !set)
        problems.add(node.source(), set.error().message);
      continue;
    }
    if (auto wrong = assign(key->field(config), node)) problems.add(node.source(), full + ": " + *wrong);
  }
}

}  // namespace

Status apply_toml(JobConfig& config, const toml::table& table, const std::string& origin) {
  Problems problems(origin);
  const auto sections = config_sections();
  for (auto&& [name, node] : table) {
    const std::string section(name.str());
    const bool known = std::find(sections.begin(), sections.end(), section) != sections.end();
    if (known && node.is_table()) {
      apply_section(config, section, *node.as_table(), origin, problems);
    } else if (known) {
      problems.add(name.source(),
                   "'" + section + "' must be a table [" + section + "], got " + std::string(kind_of(node)));
    } else if (node.is_table()) {
      problems.add(name.source(),
                   "unknown section [" + section + "]" + did_you_mean(closest_config_section(section), "[", "]"));
    } else {
      problems.add(name.source(),
                   "unknown key '" + section + "' outside any section" + did_you_mean(closest_config_key(section)));
    }
  }
  return problems.first();
}

Expected<JobConfig> load_config(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return Error{"config file '" + path + "' is a directory"};
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{"cannot read config file '" + path + "': " + std::strerror(errno)};
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) return Error{"cannot read config file '" + path + "': " + std::strerror(errno)};

  toml::table table;
  try {
    table = toml::parse(text.str(), path);
  } catch (const toml::parse_error& e) {
    const auto& at = e.source().begin;
    return Error{path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                 ": TOML syntax error: " + std::string(e.description())};
  }
  JobConfig config;
  if (Status applied = apply_toml(config, table, path); !applied) return applied.error();
  return config;
}

}  // namespace troupe::apps
