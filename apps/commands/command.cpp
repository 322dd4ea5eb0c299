#include "apps/commands/command.hpp"

#include <stdexcept>
#include <utility>

#include "apps/config/unknown_arguments.hpp"
#include "apps/exit_codes.hpp"

namespace troupe::apps {

Command refusing_unknown(CLI::App& command, std::function<int()> run) {
  command.allow_extras();
  return {&command, [&command, run = std::move(run)] {
            if (Status extras = reject_unknown_arguments(command); !extras)
              return error_exit(ExitCode::bad_input, extras.error().message);
            return run();
          }};
}

int run_chosen(const CLI::App& group, const std::vector<Command>& commands) {
  if (Status chosen = require_subcommand(group); !chosen)
    return error_exit(ExitCode::bad_input, chosen.error().message);
  for (const Command& command : commands)
    if (command.app->parsed()) return command.run();
  throw std::logic_error("'" + group.get_subcommands().front()->get_name() + "' was registered without a Command");
}

}  // namespace troupe::apps
