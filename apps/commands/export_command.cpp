// troupe export: a checkpoint's weights for the Python world (checkpoint/export_gpt2.hpp). The
// model config comes from the checkpoint's own manifest, so no --config is needed. --checkpoint
// takes either the job's checkpoint.dir (the newest valid step is exported, as a resumed run would
// pick it) or one step-NNNNNNN folder (checkpoint_argument.hpp). --format safetensors writes one
// model.safetensors (a model with experts: each expert its own tensors); --format hf writes a folder
// GPT2LMHeadModel.from_pretrained loads: config.json, model.safetensors and, with --tokenizer, that
// tokenizer.json copied beside them (refused for a model with experts, which no HF class loads).
//
//   troupe export --checkpoint ckpt --format safetensors --out gpt.safetensors
//   troupe export --checkpoint ckpt --format hf --out my-gpt2 --tokenizer gpt2/tokenizer.json

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>

#include "apps/commands/checkpoint_argument.hpp"
#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "checkpoint/export_gpt2.hpp"
#include "checkpoint/hf_gpt2.hpp"
#include "checkpoint/loader.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;

// Found before the checkpoint is opened, which hashes every shard (slow for a large model).
Status check_paths(const ExportOptions& options) {
  std::error_code ec;
  const bool folder = options.format == ExportFormat::hf;
  if (!options.tokenizer.empty() && !folder)
    return Error{"--tokenizer goes with --format hf (a folder); --format safetensors writes the weights alone"};
  if (!options.tokenizer.empty() && !fs::is_regular_file(options.tokenizer, ec))
    return Error{"--tokenizer " + options.tokenizer + ": no such file"};
  if (!folder && fs::is_directory(options.out, ec))
    return Error{"--out " + options.out + " is a directory; name a file"};
  if (folder && fs::exists(options.out, ec) && !fs::is_directory(options.out, ec))
    return Error{"--out " + options.out + " is a file; --format hf writes a folder"};
  const fs::path out_folder = fs::path(options.out).parent_path();
  if (!out_folder.empty() && !fs::is_directory(out_folder, ec))
    return Error{"--out " + options.out + ": folder " + out_folder.string() + " does not exist"};
  return Status::success();
}

// The Hugging Face folder: config.json, model.safetensors, the tokenizer if given.
Status write_hf_folder(const checkpoint::LoadedCheckpoint& loaded, const ExportOptions& options) {
  const compute::GPTConfig& model = loaded.manifest().model;
  if (model.experts > 0)
    return Error{"--format hf: a model with experts (model.experts " + std::to_string(model.experts) +
                 ") has no Hugging Face class to load it; --format safetensors writes its tensors"};
  const fs::path out = options.out;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec) return Error{"--out " + options.out + ": cannot create it: " + ec.message()};
  if (Status exported = checkpoint::export_gpt2_safetensors(loaded, model, out / "model.safetensors"); !exported)
    return exported;
  std::ofstream config(out / "config.json");
  config << checkpoint::hf_config(model).dump(2) << "\n";
  if (!config.flush()) return Error{"--out " + options.out + ": cannot write config.json"};
  if (!options.tokenizer.empty()) {
    fs::copy_file(options.tokenizer, out / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
    if (ec)
      return Error{"--tokenizer " + options.tokenizer + ": cannot copy it into " + options.out + ": " + ec.message()};
  }
  return Status::success();
}

}  // namespace

int run_export(const ExportOptions& options) {
  if (Status usable = check_paths(options); !usable) return error_exit(ExitCode::bad_input, usable.error().message);
  auto loaded = open_checkpoint_argument(options.checkpoint);
  if (!loaded) return error_exit(ExitCode::bad_input, loaded.error().message);
  const compute::GPTConfig& model = loaded->manifest().model;
  const std::size_t tensors = checkpoint::export_views(model).size();
  const auto step = static_cast<std::intmax_t>(loaded->manifest().step);
  if (options.format == ExportFormat::hf) {
    if (Status written = write_hf_folder(*loaded, options); !written)
      return error_exit(ExitCode::bad_input, written.error().message);
    std::printf("wrote %s: config.json, model.safetensors (%zu tensors)%s, GPT-2 of step %jd (%s)\n",
                options.out.c_str(), tensors, options.tokenizer.empty() ? "" : ", tokenizer.json", step,
                loaded->dir().string().c_str());
    return to_int(ExitCode::success);
  }
  if (Status exported = checkpoint::export_gpt2_safetensors(*loaded, model, options.out); !exported)
    return error_exit(ExitCode::bad_input, exported.error().message);
  const std::uintmax_t bytes = fs::file_size(options.out);
  const std::string experts =
      model.experts > 0 ? " with " + std::to_string(model.experts) + " experts a MoE block, one tensor each" : "";
  std::printf("wrote %s: %zu tensors, %ju bytes, GPT-2 safetensors%s of step %jd (%s)\n", options.out.c_str(), tensors,
              bytes, experts.c_str(), step, loaded->dir().string().c_str());
  return to_int(ExitCode::success);
}

Command add_export_command(CLI::App& app) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* command = app.add_subcommand(
      "export", "Write a checkpoint's weights as a Hugging Face GPT-2 model.safetensors, or a whole HF folder.");
  command
      ->add_option("--checkpoint", options->checkpoint,
                   "checkpoint.dir (its newest valid checkpoint) or one step-NNNNNNN folder")
      ->type_name("DIR")
      ->required();
  command->add_option_function<std::string>(
      "--format",
      [options](const std::string& name) {
        if (name == "safetensors")
          options->format = ExportFormat::safetensors;
        else if (name == "hf")
          options->format = ExportFormat::hf;
        else
          throw CLI::ValidationError("--format " + name + ": the accepted formats are: safetensors, hf");
      },
      "safetensors (one file, the default) or hf (a folder)");
  command->add_option("--out", options->out, "file to write (a folder with --format hf)")
      ->type_name("PATH")
      ->capture_default_str();
  command->add_option("--tokenizer", options->tokenizer, "with --format hf: tokenizer.json to copy into the folder")
      ->type_name("FILE");
  return refusing_unknown(*command, [options] { return run_export(*options); });
}

}  // namespace troupe::apps
