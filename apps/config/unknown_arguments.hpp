#pragma once
// Commands accept unknown arguments from CLI11 (allow_extras) so that Troupe, not CLI11, words
// the rejection: one line naming the argument, with the option the user most likely meant.

#include <CLI/CLI.hpp>

#include "compute/expected.hpp"

namespace troupe::apps {

// An error for the first argument command did not recognise ("unknown option --model.n_layr
// (did you mean --model.n_layer?)", "unknown command 'trian' (did you mean train?)"), or success
// when it recognised them all.
Status reject_unknown_arguments(const CLI::App& command);
// For a command that only groups others (troupe, troupe bench): an error when none of them was
// chosen, naming what was given instead, or success.
Status require_subcommand(const CLI::App& command);

}  // namespace troupe::apps
