#include "apps/commands/checkpoint_argument.hpp"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <system_error>

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;

// "ckpt/step-0000002/" names the folder step-0000002, not an empty file name.
fs::path without_trailing_separator(fs::path path) {
  return path.has_filename() || !path.has_parent_path() ? path : path.parent_path();
}

// A step folder holds a manifest; a torn one may not, but its name still says what was meant,
// so it is refused as a checkpoint rather than searched as a checkpoint directory.
bool is_step_folder(const fs::path& folder) {
  static const std::regex step_name("step-[0-9]+");
  return fs::exists(folder / "manifest.json") || std::regex_match(folder.filename().string(), step_name);
}

}  // namespace

Expected<checkpoint::LoadedCheckpoint> open_checkpoint_argument(const std::string& argument) {
  std::error_code ec;
  if (!fs::exists(argument, ec)) return Error{"--checkpoint " + argument + ": no such directory"};
  if (!fs::is_directory(argument, ec)) return Error{"--checkpoint " + argument + " is not a directory"};
  const fs::path folder = without_trailing_separator(argument);
  if (is_step_folder(folder)) return checkpoint::open_checkpoint(folder);
  auto newest = checkpoint::open_newest_valid(folder);
  if (!newest) return newest.error();
  for (const checkpoint::SkippedCheckpoint& skipped : newest->skipped)
    std::fprintf(stderr, "troupe: warning: %s\n", skipped.why.c_str());
  if (newest->checkpoint) return std::move(*newest->checkpoint);
  if (newest->skipped.empty())
    return Error{"--checkpoint " + folder.string() + ": no checkpoint in it (no step-NNNNNNN folder)"};
  return Error{"--checkpoint " + folder.string() + ": no valid checkpoint in it (" +
               std::to_string(newest->skipped.size()) + " skipped, see the warnings above)"};
}

}  // namespace troupe::apps
