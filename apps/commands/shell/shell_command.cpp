// troupe shell HOST:PORT: an interactive monitor shell attached to a running job's monitor actor
// (docs/shell.md), or one command with -c. The job answers every command but `help`, `quit` and
// the terminal side of `top` (redraw every second until a key is pressed) and `trace` (the file is
// written here, where the shell runs).

#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "actors/actor_system_setup.hpp"
#include "actors/process_environment.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/shell/line_editor.hpp"
#include "apps/commands/shell/monitor_link.hpp"
#include "apps/exit_codes.hpp"
#include "actors/control/control_token.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

using shell::MonitorLink;

const char* const help_text =
    "status                  grid, step, loss, tokens/s, ETA\n"
    "nodes                   node processes: host, pid, ranks, last heartbeat\n"
    "workers [RANKS]         ranks: steps done, what each is doing or waiting for\n"
    "memory                  every node process's memory by kind, now and peak, beside its resident set\n"
    "top [RANKS]             a live per-rank table, redrawn every second until a key is pressed\n"
    "loss                    the recent loss curve as a sparkline, with min, max and last\n"
    "experts                 per MoE block, each expert's share of the latest step's token-slots, max/mean\n"
    "trace FILE [STEPS]      record the next STEPS (3) steps of every rank as Chrome trace JSON into FILE\n"
    "checkpoint              save a checkpoint at the next step boundary (needs checkpoint.dir)\n"
    "pause / resume          stop every rank at the next step boundary / go on\n"
    "log LEVEL [SUBSYSTEM]   set the log level (trace ... off) everywhere, of one subsystem or all\n"
    "kill worker RANK        drill: that rank's worker throws at its next step boundary\n"
    "kill node NODE          drill: SIGKILL to that node process\n"
    "drain node NODE         checkpoint, then restart the job without that node (fewer replicas)\n"
    "rejoin                  checkpoint, then restart the job with the nodes it went on without\n"
    "help                    this list\n"
    "                        RANKS: all, node N, or ranks such as 0-15,32; without it a job of more\n"
    "                        than 64 ranks gets a summary and the 16 ranks furthest behind\n"
    "quit                    leave the shell (the job goes on)";

const std::vector<std::string> completions{"status",     "nodes",    "workers", "memory",  "top",   "loss",  "trace",
                                           "checkpoint", "pause",    "resume",  "log",     "kill",  "drain", "rejoin",
                                           "worker",     "node",     "help",    "quit",    "debug", "info",  "warn",
                                           "error",      "critical", "off",     "experts", "all"};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Commands that change nothing may be asked again after a reconnect.
bool repeatable(const std::string& verb) {
  return verb == "status" || verb == "nodes" || verb == "workers" || verb == "memory" || verb == "top" ||
         verb == "loss" || verb == "experts";
}

std::chrono::seconds timeout_for(const std::string& verb) {
  return verb == "checkpoint" || verb == "pause" || verb == "trace" || verb == "drain" || verb == "rejoin"
             ? std::chrono::seconds(150)
             : std::chrono::seconds(15);
}

// The terminal without line buffering or echo while alive, so one key press can be seen at once.
class RawTerminal {
 public:
  RawTerminal() : active_(::tcgetattr(STDIN_FILENO, &saved_) == 0) {
    if (!active_) return;
    termios raw = saved_;
    raw.c_lflag &= static_cast<tcflag_t>(~(ICANON | ECHO));
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  }
  ~RawTerminal() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }

 private:
  termios saved_{};
  bool active_;
};

// The answer when a trace the job sent cannot be saved where the user asked.
std::string trace_write_failure(const std::filesystem::path& file) { return "trace: cannot write " + file.string(); }

// Redraws the job's top table for `line` (`top` and the ranks it names) every second until a key
// is pressed (or input ends), or once with the error if the job refuses the line: in place on a
// terminal (cursor home, clear screen, as top does), one table after another into a pipe or file.
int run_top(MonitorLink& link, const std::string& line) {
  RawTerminal raw;
  const char* const clear = ::isatty(STDOUT_FILENO) ? "\x1b[H\x1b[2J" : "";
  for (;;) {
    auto answer = link.ask(line, timeout_for("top"), true);
    if (!answer || !answer->ok) {
      std::printf("%s\n", answer ? answer->text.c_str() : answer.error().message.c_str());
      return to_int(ExitCode::failure);
    }
    std::printf("%s%s\n\n(press any key to return to the prompt)\n", clear, answer->text.c_str());
    std::fflush(stdout);
    pollfd in{STDIN_FILENO, POLLIN, 0};
    if (::poll(&in, 1, 1000) > 0) {
      char key;
      (void)::read(STDIN_FILENO, &key, 1);
      return to_int(ExitCode::success);
    }
  }
}

// Runs one command line; prints its answer (errors to stderr in one-shot mode). 0 when it succeeded.
int run_line(MonitorLink& link, const std::string& line, bool one_shot) {
  const std::vector<std::string> words = split(line);
  if (words.empty()) return to_int(ExitCode::success);
  const std::string& verb = words.front();
  if (verb == "help") {
    std::printf("%s\n", help_text);
    return to_int(ExitCode::success);
  }
  if (verb == "top" && !one_shot) return run_top(link, line);
  auto answer = link.ask(line, timeout_for(verb), repeatable(verb));
  std::string text = answer ? answer->text : answer.error().message;
  bool ok = answer && answer->ok;
  if (ok && verb == "trace" && words.size() >= 2) {
    const std::filesystem::path file = std::filesystem::absolute(words[1]);
    std::ofstream out(file, std::ios::binary);
    out << answer->attachment;
    out.close();
    if (!out) {
      ok = false;
      text = trace_write_failure(file);
    } else {
      text += " written to " + file.string() + " (Chrome trace JSON: open it in Perfetto or chrome://tracing)";
    }
  }
  if (!ok && one_shot) return error_exit(ExitCode::failure, text);
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  return to_int(ok ? ExitCode::success : ExitCode::failure);
}

}  // namespace

int run_shell(const ShellArgs& args) {
  const auto colon = args.address.rfind(':');
  const int port = colon == std::string::npos ? 0 : std::atoi(args.address.c_str() + colon + 1);
  if (colon == std::string::npos || colon == 0 || port <= 0 || port > 65535)
    return error_exit(
        ExitCode::bad_input,
        "'" + args.address + "' is not HOST:PORT (the job prints it: \"monitor: troupe shell HOST:PORT\")");
  const std::string host = args.address.substr(0, colon);

  std::string token;
  if (!args.token_file.empty()) {
    auto read = actors::read_control_token(args.token_file);
    if (!read) return error_exit(ExitCode::bad_input, "--token-file: " + read.error().message);
    token = *read;
  } else if (std::optional<std::string> from_env = actors::env::read_token()) {
    token = *from_env;
  } else {
    auto read = actors::read_control_token(actors::default_control_token_path(port));
    if (!read)
      return error_exit(ExitCode::bad_input,
                        "no job token: give --token-file FILE or TROUPE_TOKEN (" + read.error().message + ")");
    token = *read;
  }

  // The shell's own CAF logging would interleave with its output: only errors.
  (void)monitor::set_log_level("error", "");
  actors::TroupeConfig cfg;
  caf::actor_system system{cfg};
  MonitorLink link(system, host, port, token, [](const std::string& line) {
    std::printf("[%s]\n", line.c_str());
    std::fflush(stdout);
  });
  auto hello = link.connect();
  if (!hello) return error_exit(ExitCode::failure, hello.error().message);
  if (!hello->ok) return error_exit(ExitCode::failure, hello->text);
  if (!args.command.empty()) return run_line(link, args.command, true);

  std::printf("%s\ntype `help` for the commands, `quit` to leave (the job goes on)\n", hello->text.c_str());
  std::vector<std::string> words = completions;
  for (const std::string& subsystem : monitor::log_subsystems()) words.push_back(subsystem);
  shell::LineEditor editor(std::move(words));
  while (auto line = editor.read("troupe> ")) {
    const std::vector<std::string> words = split(*line);
    if (!words.empty() && (words.front() == "quit" || words.front() == "exit")) break;
    run_line(link, *line, false);
  }
  return to_int(ExitCode::success);
}

Command add_shell_command(CLI::App& app) {
  auto options = std::make_shared<ShellArgs>();
  CLI::App* command =
      app.add_subcommand("shell", "Attach a monitor shell to a running job (status, top, pause, checkpoint, drills).");
  command->add_option("address", options->address, "HOST:PORT as the job prints it (\"monitor: troupe shell ...\")")
      ->required();
  command->add_option("-c", options->command, "run this one command, print its answer and exit")->type_name("COMMAND");
  command
      ->add_option("--token-file", options->token_file,
                   "file holding the job's token (default: $TROUPE_TOKEN, else the job's token file)")
      ->type_name("FILE");
  return refusing_unknown(*command, [options] { return run_shell(*options); });
}

}  // namespace troupe::apps
