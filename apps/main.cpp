// troupe: the command line. Parses the arguments, turns a config file plus overrides into a
// checked job, and runs the chosen command.
//
//   troupe train [--config FILE] [--section.name VALUE ...]
//   troupe bench compute [--models tiny,small] [--batch 8] [--threads 1] [--steps 10] [--warmup 1]
//
// Exit codes: 0 success; 1 the command failed while running; 2 the input was wrong (bad option,
// config file or value), found before any work starts. Every error is one line on stderr:
// "troupe: error: <message>".

#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/commands.hpp"
#include "apps/config_cli.hpp"
#include "apps/config_loader.hpp"
#include "apps/config_print.hpp"
#include "apps/resolved_job.hpp"
#include "apps/unknown_arguments.hpp"

namespace {

using namespace troupe;
using namespace troupe::apps;

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

int fail(std::string message, int code) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "troupe: error: %s\n", message.c_str());
  return code;
}

struct TrainArgs {
  std::string config_path;
  bool print_config = false;
  bool print_keys = false;
  ConfigOverrides overrides;
};

// The job the train command was given, or the user-input error that stops it.
Expected<ResolvedJob> train_job(const CLI::App& command, const TrainArgs& args) {
  if (Status extras = reject_unknown_arguments(command); !extras) return extras.error();
  JobConfig config;
  if (!args.config_path.empty()) {
    auto loaded = load_config(args.config_path);
    if (!loaded) return loaded.error();
    config = std::move(*loaded);
  }
  if (Status applied = args.overrides.apply(config); !applied) return applied.error();
  return resolve(config);
}

int train(const CLI::App& command, const TrainArgs& args) {
  if (args.print_keys) {
    std::fputs(config_keys_markdown().c_str(), stdout);
    return 0;
  }
  auto job = train_job(command, args);
  if (!job) return fail(job.error().message, exit_usage);
  if (args.print_config) {
    std::fputs(config_to_toml(job->config).c_str(), stdout);
    return 0;
  }
  return run_train(*job);
}

int bench_compute(const CLI::App& command, const BenchComputeOptions& options) {
  if (Status extras = reject_unknown_arguments(command); !extras) return fail(extras.error().message, exit_usage);
  if (Status valid = validate(options); !valid) return fail(valid.error().message, exit_usage);
  return run_bench_compute(options);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Troupe: GPT training on a supervised actor runtime.", "troupe"};
  app.set_version_flag("--version", "troupe " TROUPE_VERSION);
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.get_formatter()->column_width(34);  // room for the longest key option and its default

  TrainArgs train_args;
  CLI::App* train_command = app.add_subcommand("train", "Train a GPT model; keys come from --config, then overrides.");
  train_command->add_option("--config", train_args.config_path, "TOML file with [model] [train] [data] [sample]")
      ->type_name("FILE");
  train_command->add_flag("--print-config", train_args.print_config,
                          "print the resolved configuration as TOML and exit without training");
  train_command->add_flag("--print-keys", train_args.print_keys, "print the key table of docs/configuration.md")
      ->group("");
  train_args.overrides.add_options(*train_command);
  train_command->footer("Each key is --section.name VALUE or --section.name=VALUE; it overrides the config file.");
  train_command->allow_extras();

  CLI::App* bench_command = app.add_subcommand("bench", "Measure throughput.");
  bench_command->require_subcommand(0, 1);
  bench_command->allow_extras();
  BenchComputeOptions bench_options{{"tiny", "small"}};
  CLI::App* compute_command =
      bench_command->add_subcommand("compute", "Training-step throughput of one worker, per model preset.");
  compute_command->add_option("--models", bench_options.models, "model presets, comma-separated")
      ->delimiter(',')
      ->type_name("LIST")
      ->default_str("tiny,small");
  compute_command->add_option("--batch", bench_options.batch, "micro-batch size B")->capture_default_str();
  compute_command->add_option("--threads", bench_options.threads, "CPU threads; 0 = all cores")->capture_default_str();
  compute_command->add_option("--steps", bench_options.steps, "measured steps")->capture_default_str();
  compute_command->add_option("--warmup", bench_options.warmup, "unmeasured steps first")->capture_default_str();
  compute_command->allow_extras();
  // Set after the subcommands are added, which would otherwise inherit it.
  app.footer("Run 'troupe COMMAND --help' for a command's options; 'troupe train --help' lists every config key.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    return fail(e.what(), exit_usage);
  }

  try {
    if (Status chosen = require_subcommand(app); !chosen) return fail(chosen.error().message, exit_usage);
    if (train_command->parsed()) return train(*train_command, train_args);
    if (Status chosen = require_subcommand(*bench_command); !chosen) return fail(chosen.error().message, exit_usage);
    return bench_compute(*compute_command, bench_options);
  } catch (const std::exception& e) {
    return fail(e.what(), exit_failure);
  } catch (const Error& e) {
    return fail(e.message, exit_failure);
  }
}
