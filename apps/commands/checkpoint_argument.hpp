#pragma once
// --checkpoint of the commands that read one checkpoint (export, generate): either a job's
// checkpoint.dir, whose newest valid step is taken as a resumed run would take it (skipped ones
// warned about on stderr), or one step-NNNNNNN folder.

#include <string>

#include "checkpoint/loader.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// Errors: "--checkpoint DIR: no such directory", "... is not a directory", no (valid) checkpoint in it.
Expected<checkpoint::LoadedCheckpoint> open_checkpoint_argument(const std::string& argument);

}  // namespace troupe::apps
