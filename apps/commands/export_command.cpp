// troupe export: a checkpoint's weights as one Hugging Face GPT-2 model.safetensors, for the
// Python world (checkpoint/export_gpt2.hpp). The model config comes from the checkpoint's own
// manifest, so no --config is needed. --checkpoint takes either the job's checkpoint.dir (the
// newest valid step is exported, as a resumed run would pick it) or one step-NNNNNNN folder.
//
//   troupe export --checkpoint ckpt --format safetensors --out gpt.safetensors

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <system_error>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "checkpoint/export_gpt2.hpp"
#include "checkpoint/loader.hpp"
#include "compute/model/parameter_layout.hpp"

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

// Found before the checkpoint is opened, which hashes every shard (slow for a large model).
Status check_paths(const ExportOptions& options) {
  if (options.format != "safetensors")
    return Error{"--format " + options.format + ": the accepted formats are: safetensors"};
  std::error_code ec;
  if (!fs::exists(options.checkpoint, ec)) return Error{"--checkpoint " + options.checkpoint + ": no such directory"};
  if (!fs::is_directory(options.checkpoint, ec))
    return Error{"--checkpoint " + options.checkpoint + " is not a directory"};
  if (fs::is_directory(options.out, ec)) return Error{"--out " + options.out + " is a directory; name a file"};
  const fs::path out_folder = fs::path(options.out).parent_path();
  if (!out_folder.empty() && !fs::is_directory(out_folder, ec))
    return Error{"--out " + options.out + ": folder " + out_folder.string() + " does not exist"};
  return Status::success();
}

Expected<checkpoint::LoadedCheckpoint> open_for_export(const fs::path& folder) {
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

}  // namespace

int run_export(const ExportOptions& options) {
  if (Status usable = check_paths(options); !usable) return error_exit(ExitCode::bad_input, usable.error().message);
  auto loaded = open_for_export(without_trailing_separator(options.checkpoint));
  if (!loaded) return error_exit(ExitCode::bad_input, loaded.error().message);
  const compute::GPTConfig& model = loaded->manifest().model;
  if (Status exported = checkpoint::export_gpt2_safetensors(*loaded, model, options.out); !exported)
    return error_exit(ExitCode::bad_input, exported.error().message);
  const std::uintmax_t bytes = fs::file_size(options.out);
  std::printf("wrote %s: %zu tensors, %ju bytes, GPT-2 safetensors of step %jd (%s)\n", options.out.c_str(),
              compute::ParameterLayout(model).views().size(), bytes,
              static_cast<std::intmax_t>(loaded->manifest().step), loaded->dir().string().c_str());
  return to_int(ExitCode::success);
}

Command add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command =
      app.add_subcommand("export", "Write a checkpoint's weights as a Hugging Face GPT-2 model.safetensors.");
  command
      ->add_option("--checkpoint", options->checkpoint,
                   "checkpoint.dir (its newest valid checkpoint) or one step-NNNNNNN folder")
      ->type_name("DIR")
      ->required();
  command->add_option("--format", options->format, "output format: safetensors")->capture_default_str();
  command->add_option("--out", options->out, "file to write")->type_name("FILE")->capture_default_str();
  return refusing_unknown(*command, [options] { return run_export(*options); });
}

}  // namespace troupe::apps
