// troupe import: a Hugging Face GPT-2 folder as a Troupe checkpoint (checkpoint/import_gpt2.hpp),
// step 0 of a new checkpoint folder, which `troupe train --checkpoint.dir CKPT --resume` starts
// from on any grid. train's init.from does the same into checkpoint.dir (import_initial_weights).
//
//   troupe import --hf gpt2-folder --out ckpt

#include <cstdio>
#include <filesystem>
#include <memory>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "checkpoint/import_gpt2.hpp"
#include "checkpoint/store.hpp"

namespace troupe::apps {
namespace {

// The folder's description, for the line that says what was imported.
std::string described(const checkpoint::HfGpt2& imported) {
  const compute::GPTConfig& m = imported.model;
  return std::to_string(m.n_layer) + " layers, " + std::to_string(m.n_embd) + " channels, " + std::to_string(m.n_head) +
         " heads, " + std::to_string(m.block_size) + " positions, vocabulary " + std::to_string(m.vocab_size) +
         " (padded to " + std::to_string(m.padded_vocab_size) + ")";
}

}  // namespace

int run_import(const ImportOptions& options) {
  auto imported = checkpoint::read_hf_gpt2(options.hf);
  if (!imported) return error_exit(ExitCode::bad_input, imported.error().message);
  auto folder = checkpoint::write_initial_checkpoint(*imported, options.out, {{"init.from", options.hf}});
  if (!folder) return error_exit(ExitCode::bad_input, folder.error().message);
  std::printf("imported %s: GPT-2, %s; wrote %s\n", options.hf.c_str(), described(*imported).c_str(),
              folder->string().c_str());
  return to_int(ExitCode::success);
}

Status import_initial_weights(const ResolvedJob& job) {
  const std::string& dir = job.config.checkpoint.dir;
  auto existing = checkpoint::committed_steps(dir);
  if (!existing) return existing.error();
  if (!existing->empty()) {
    std::printf("init.from %s: checkpoint.dir %s holds step %lld already; resuming from it\n",
                job.config.init.from.c_str(), dir.c_str(), static_cast<long long>(existing->front()));
    return Status::success();
  }
  auto imported = checkpoint::read_hf_gpt2(job.config.init.from);
  if (!imported) return Error{"init.from: " + imported.error().message};
  auto folder = checkpoint::write_initial_checkpoint(*imported, dir, {{"init.from", job.config.init.from}});
  if (!folder) return Error{"init.from: " + folder.error().message};
  std::printf("init.from %s: imported GPT-2, %s, as %s\n", job.config.init.from.c_str(), described(*imported).c_str(),
              folder->string().c_str());
  std::fflush(stdout);
  return Status::success();
}

Command add_import_command(CLI::App& app) {
  auto options = std::make_shared<ImportOptions>();
  CLI::App* command = app.add_subcommand(
      "import",
      "Write a Hugging Face GPT-2 folder (config.json, safetensors) as step 0 of a Troupe checkpoint folder.");
  command->add_option("--hf", options->hf, "the Hugging Face folder: config.json, model.safetensors or shards")
      ->type_name("DIR")
      ->required();
  command->add_option("--out", options->out, "checkpoint folder to create (it must hold no checkpoint)")
      ->type_name("DIR")
      ->required();
  return refusing_unknown(*command, [options] { return run_import(*options); });
}

}  // namespace troupe::apps
