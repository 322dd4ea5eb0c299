// troupe: the command line. Each command registers itself and its options (add_<name>_command:
// apps/commands/commands.hpp, apps/bench/bench_commands.hpp); main() lists them, parses the
// arguments and runs the chosen command.
//
//   troupe train [--config FILE] [--workers N] [--memory-limit SIZE] [--resume] [--trace FILE] [--section.name VALUE
//   ...] troupe bench compute [--models tiny,small] [--batch 8] [--threads 1[,2]] [--steps 10] [--warmup 1]
//                        [--vs-pytorch [--python python3] [--rounds 3]] [--profile]
//   troupe bench allreduce [--processes 2,4] [--mib 1,16,64] [--iterations 15]
//   troupe bench dp [--model small] [--batch 8] [--processes 2] [--steps 15] [--warmup 1]
//   troupe bench checkpoint [--model small] [--dir .] [--rounds 3] [--steps 4]
//   troupe bench gpu [--model gpt2] [--precision bf16] [--batch 16] [--seq 1024] [--steps 10]
//   troupe schedule --kind gpipe|1f1b|interleaved --stages P --microbatches M [--virtual-stages V]
//                   [--forward 1] [--backward 2] [--latency 0] [--print] [--trace FILE]
//   troupe plan [--model.preset small] [--model.n_layer N ...] [--nodes 1 --devices-per-node CORES | --hostfile FILE]
//               [--device-memory SIZE] [--peak-flops F] [--mfu 0.5] [--intra-bw B] [--inter-bw B]
//               [--global-batch 8] [--seq T] [--precision fp32|mixed|mixed-fp32-grads] [--top 10]
//   troupe launch [--hostfile FILE] [--memory-limit SIZE] [--config FILE] [--section.name VALUE ...]
//   troupe node   (started by launch)
//   troupe drill SCENARIO [--at-step 3] [--target 1] [--workers 2] [--dir DIR] [--keep] [--config FILE] [--section.name
//   VALUE ...] troupe drill chaos [--kill-every 10] [--seed S] [--workers 4] [--train.steps 100] ... troupe import --hf
//   DIR --out CKPT troupe export --checkpoint DIR [--format safetensors|hf] [--out model.safetensors|DIR] [--tokenizer
//   FILE] troupe tokenize --tokenizer FILE --in TEXT... --out tokens.bin [--threads N] troupe generate --checkpoint
//   CKPT --tokenizer FILE --prompt TEXT [--tokens 100] [--temperature 0.8] [--top-k 0] troupe shell HOST:PORT [-c
//   COMMAND] [--token-file FILE]
//
// Exit codes: apps/exit_codes.hpp (0 success; 1 the command failed while running; 2 the input was
// wrong, found before any work starts; 3 and 128 + signal from troupe launch). Every error is one
// line on stderr: "troupe: error: <message>".

#include <sys/resource.h>

#include <csignal>
#include <exception>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/bench/bench_commands.hpp"
#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "monitor/fatal_signal_report.hpp"

namespace {

using namespace troupe;
using namespace troupe::apps;

// Every connection to a guarded port costs the job three descriptors, and a node's UCX, CAF and
// metrics connections more; Debian's default soft limit (1024) is far below the hard limit.
void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

int main(int argc, char** argv) {
  // Past a file-size limit (ulimit -f, or the disk-full drill) a write must fail with EFBIG and be
  // reported, not end the process.
  std::signal(SIGXFSZ, SIG_IGN);
  monitor::report_fatal_signals();
  raise_open_file_limit();
  CLI::App app{"Troupe: GPT training on a supervised actor runtime.", "troupe"};
  app.set_version_flag("--version", "troupe " TROUPE_VERSION);
  app.require_subcommand(0, 1);
  app.allow_extras();
  app.get_formatter()->column_width(34);  // room for the longest key option and its default
  // In the order `troupe --help` lists them.
  const std::vector<Command> commands{add_train_command(app),    add_launch_command(app),   add_node_command(app),
                                      add_bench_command(app),    add_schedule_command(app), add_plan_command(app),
                                      add_drill_command(app),    add_import_command(app),   add_export_command(app),
                                      add_tokenize_command(app), add_generate_command(app), add_shell_command(app)};
  // Set after the subcommands are added, which would otherwise inherit it.
  app.footer("Run 'troupe COMMAND --help' for a command's options; 'troupe train --help' lists every config key.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    return error_exit(ExitCode::bad_input, e.what());
  }

  try {
    return run_chosen(app, commands);
  } catch (const std::exception& e) {
    return error_exit(ExitCode::failure, e.what());
  } catch (const Error& e) {
    return error_exit(ExitCode::failure, e.message);
  }
}
