#pragma once
// A command of the troupe command line as main() sees it: the CLI11 subcommand that its
// add_<name>_command registered with every option, and what runs it once the command line has
// been parsed and chose it. The options live in what `run` holds, so they outlive the parse.
//
//   CLI::App app{...};
//   const std::vector<Command> commands{add_train_command(app), add_plan_command(app)};
//   app.parse(argc, argv);                // CLI11's own errors (a missing required option)
//   return run_chosen(app, commands);     // Troupe's: an unknown argument, no command

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace troupe::apps {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // the process exit code (apps/exit_codes.hpp)
};

// A command whose arguments are all its own options: CLI11 lets one it does not know through
// (allow_extras), and Troupe refuses it in its own words (one line, exit 2) before `run` starts.
// Commands that take config keys check theirs with the job (job_arguments.hpp).
Command refusing_unknown(CLI::App& command, std::function<int()> run);

// Runs the one of `commands` (the subcommands of `group`: troupe, troupe bench) the command line
// chose, or refuses an unknown argument of `group` or no choice (one line, exit 2).
int run_chosen(const CLI::App& group, const std::vector<Command>& commands);

}  // namespace troupe::apps
