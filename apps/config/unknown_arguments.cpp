#include "apps/config/unknown_arguments.hpp"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "apps/config/spelling.hpp"

namespace troupe::apps {
namespace {

std::string command_path(const CLI::App& command) {
  std::string path = command.get_name();
  for (const CLI::App* parent = command.get_parent(); parent; parent = parent->get_parent())
    path = parent->get_name() + " " + path;
  return path;
}

std::string did_you_mean(const std::optional<std::string>& suggestion) {
  return suggestion ? " (did you mean " + *suggestion + "?)" : "";
}

std::vector<std::string> subcommand_names(const CLI::App& command) {
  std::vector<std::string> names;
  for (const CLI::App* sub : command.get_subcommands([](const CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

}  // namespace

Status reject_unknown_arguments(const CLI::App& command) {
  const std::vector<std::string> extras = command.remaining();
  if (extras.empty()) return Status::success();
  const std::string see = "; see '" + command_path(command) + " --help'";
  const auto option =
      std::find_if(extras.begin(), extras.end(), [](const std::string& arg) { return arg.starts_with("-"); });
  if (option == extras.end()) {
    const auto commands = subcommand_names(command);
    if (commands.empty()) return Error{"unexpected argument '" + extras.front() + "'" + see};
    return Error{"unknown command '" + extras.front() + "'" + did_you_mean(closest_match(extras.front(), commands)) +
                 see};
  }

  const std::string name = option->substr(0, option->find('='));
  std::vector<std::string> known;
  for (const CLI::Option* candidate : command.get_options()) {
    for (const auto& long_name : candidate->get_lnames()) known.push_back("--" + long_name);
  }
  return Error{"unknown option " + name + did_you_mean(closest_match(name, known)) + see};
}

Status require_subcommand(const CLI::App& command) {
  if (Status extras = reject_unknown_arguments(command); !extras) return extras;
  if (!command.get_subcommands().empty()) return Status::success();
  std::string known;
  for (const auto& name : subcommand_names(command)) known += (known.empty() ? "" : ", ") + name;
  return Error{"'" + command_path(command) + "' needs a command (" + known + "); see '" + command_path(command) +
               " --help'"};
}

}  // namespace troupe::apps
