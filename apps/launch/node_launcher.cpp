// The launcher's event loop: one Child per process it started (pre-flight checks and nodes),
// watched through its pipes and pidfd; the state machine of node_launcher.hpp in begin_stop(),
// on_exit(), on_signal() and finish_if_done().

#include "apps/launch/node_launcher.hpp"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <tuple>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "apps/exit_codes.hpp"
#include "apps/launch/child_process.hpp"
#include "apps/launch/line_buffer.hpp"
#include "apps/launch/node_shared_memory.hpp"

namespace troupe::launch {
namespace {

namespace asio = boost::asio;

constexpr std::size_t max_line_bytes = 64 * 1024;
constexpr std::size_t read_chunk_bytes = 64 * 1024;
// Reads after a child's exit, to take what it left in its pipes (64 KiB each unless enlarged). A
// bound, because a process it left behind may keep writing.
constexpr int max_drain_reads = 16;

struct SignalEnd {
  int signo;
  JobEnd end;
  const char* message;
};
constexpr SignalEnd signal_ends[] = {
    {SIGINT, JobEnd::interrupted, "interrupted by SIGINT"},
    {SIGTERM, JobEnd::terminated, "terminated by SIGTERM"},
    {SIGHUP, JobEnd::hung_up, "hung up (SIGHUP): the terminal went away"},
};

// "0.5 s", "10 s"
std::string seconds_text(std::chrono::milliseconds duration) {
  std::string text = std::to_string(duration.count() / 1000);
  if (const auto millis = duration.count() % 1000; millis != 0) {
    std::string fraction = std::to_string(millis);
    fraction.insert(0, 3 - fraction.size(), '0');
    while (fraction.back() == '0') fraction.pop_back();
    text += "." + fraction;
  }
  return text + " s";
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

int exit_code(JobEnd end) {
  using apps::ExitCode;
  switch (end) {
    case JobEnd::success: return to_int(ExitCode::success);
    case JobEnd::node_failed: return to_int(ExitCode::failure);
    case JobEnd::start_failed: return to_int(ExitCode::start_failed);
    case JobEnd::interrupted: return to_int(ExitCode::interrupted);
    case JobEnd::terminated: return to_int(ExitCode::terminated);
    case JobEnd::hung_up: return to_int(ExitCode::hung_up);
  }
  return to_int(ExitCode::failure);
}

LineSink standard_streams_sink() {
  return [](OutputStream stream, std::string_view line) {
    std::string text(line);
    text += '\n';
    write_all(stream == OutputStream::out ? STDOUT_FILENO : STDERR_FILENO, text);
  };
}

struct NodeLauncher::Impl {
  enum class State { idle, checking, running, holding, stopping, killing, done };
  enum class Role { check, node };
  enum class Read { data, empty, closed };

  struct Child {
    Role role = Role::node;
    int node_index = -1;  // nodes only
    std::string host;
    std::string label;    // "node 1 (localhost)" or "host 'far'"
    std::string prefix;   // "[node 1 localhost] " for nodes
    std::string command;  // a check's shell line, for messages
    std::unique_ptr<ChildProcess> process;
    LineBuffer out{max_line_bytes};
    LineBuffer err{max_line_bytes};
    std::string last_line;  // a check's last non-empty output line
    std::optional<ExitStatus> exit;
    std::optional<NodeSharedMemory> shared_memory;  // a local node's UCX folder, removed at its exit
    bool replaced = false;  // a node whose process replace_node() started again: its exit is expected
    bool started_again = false;  // started by replace_node(), move_node() or add_node()
  };

  asio::io_context io;
  asio::signal_set signals{io};
  asio::steady_timer preflight_timer{io};
  asio::steady_timer grace_timer{io};
  asio::steady_timer hold_timer{io};
  std::vector<NodeProcessSpec> nodes;
  LauncherOptions options;
  std::vector<std::unique_ptr<Child>> children;
  std::vector<char> read_buffer = std::vector<char>(read_chunk_bytes);
  State state = State::idle;
  JobResult result;

  Impl(std::vector<NodeProcessSpec> node_process_specs, LauncherOptions launcher_options)
      : nodes(std::move(node_process_specs)), options(std::move(launcher_options)) {}

  JobResult run() {
    TROUPE_CHECK(state == State::idle, "NodeLauncher::run() called twice");
    if (options.handle_signals) {
      for (const SignalEnd& signal : signal_ends) signals.add(signal.signo);
      wait_for_signal();
    }
    std::vector<std::string> remote_hosts;
    for (const NodeProcessSpec& node : nodes) {
      TROUPE_CHECK(!node.argv.empty(), "node " + std::to_string(node.node_index) + " has no program");
      const bool seen = std::find(remote_hosts.begin(), remote_hosts.end(), node.host) != remote_hosts.end();
      if (!node.local && !seen) remote_hosts.push_back(node.host);
    }
    if (!remote_hosts.empty() && options.preflight_timeout.count() > 0) {
      start_checks(remote_hosts);
    } else {
      start_nodes();
    }
    io.run();
    return std::move(result);
  }

  // --- starting ---

  void start_checks(const std::vector<std::string>& hosts) {
    state = State::checking;
    for (const std::string& host : hosts) {
      auto child = std::make_unique<Child>();
      child->role = Role::check;
      child->host = host;
      child->label = "host '" + host + "'";
      child->command = options.remote.expand(host, "true");
      const std::string line = child->command;
      if (!start(std::move(child), {"/bin/sh", "-c", line}, {})) return;
    }
    preflight_timer.expires_after(options.preflight_timeout);
    preflight_timer.async_wait([this](const boost::system::error_code& error) {
      if (!error && state == State::checking) on_preflight_timeout();
    });
  }

  void start_nodes() {
    state = State::running;
    NodeSharedMemory::remove_orphans();
    for (const NodeProcessSpec& node : nodes)
      if (!start_node(node)) return;
    finish_if_done();
  }

  // Spawns `node`'s process; on failure stops the job and returns false.
  bool start_node(const NodeProcessSpec& node, bool started_again = false) {
    auto child = std::make_unique<Child>();
    child->role = Role::node;
    child->started_again = started_again;
    child->node_index = node.node_index;
    child->host = node.host;
    child->label = "node " + std::to_string(node.node_index) + " (" + node.host + ")";
    child->prefix = "[node " + std::to_string(node.node_index) + " " + node.host + "] ";
    if (node.local) {
      Environment env = node.env;
      child->shared_memory = NodeSharedMemory::create();
      if (child->shared_memory) env.push_back(child->shared_memory->variable());
      return start(std::move(child), node.argv, env);
    }
    const std::string line = options.remote.expand(node.host, remote_command_line(node.env, node.argv));
    return start(std::move(child), {"/bin/sh", "-c", line}, {});
  }

  // A new process for node `node_index` (on `moved_to`'s host when set), with `env` on top of its
  // spec. The old one, where still running, is killed, or on a move left alone (see the header).
  void replace(int node_index, const Environment& env, const std::optional<std::pair<std::string, bool>>& moved_to) {
    if (state != State::running && state != State::holding) return;
    const auto spec = std::find_if(nodes.begin(), nodes.end(),
                                   [node_index](const NodeProcessSpec& n) { return n.node_index == node_index; });
    TROUPE_CHECK(spec != nodes.end(), "replace_node() of a node not in the plan");
    for (Child* child : live_children()) {
      if (child->role != Role::node || child->node_index != node_index) continue;
      child->replaced = true;
      if (moved_to) continue;
      child->process->signal(SIGKILL);
      child->process->signal(SIGCONT);
    }
    if (state == State::holding) {
      hold_timer.cancel();
      state = State::running;
      result.end = JobEnd::success;
      result.message.clear();
    }
    if (moved_to) std::tie(spec->host, spec->local) = *moved_to;
    NodeProcessSpec again = *spec;
    set_on_top(again.env, env);
    start_node(again, true);
  }

  // `node_index`'s spec from now on: `argv`, and `env` on top of its variables.
  void update(int node_index, std::vector<std::string> argv, const Environment& env) {
    const auto spec = std::find_if(nodes.begin(), nodes.end(),
                                   [node_index](const NodeProcessSpec& n) { return n.node_index == node_index; });
    TROUPE_CHECK(spec != nodes.end(), "update_node() of a node not in the plan");
    spec->argv = std::move(argv);
    set_on_top(spec->env, env);
  }

  // Sets every variable of `on_top` in `env`, a variable of the same name replaced.
  static void set_on_top(Environment& env, const Environment& on_top) {
    for (const auto& [name, value] : on_top) {
      auto same = std::find_if(env.begin(), env.end(), [&](const auto& e) { return e.first == name; });
      if (same != env.end())
        same->second = value;
      else
        env.emplace_back(name, value);
    }
  }

  void add(NodeProcessSpec node) {
    if (state != State::running) return;
    TROUPE_CHECK(std::none_of(nodes.begin(), nodes.end(),
                              [&](const NodeProcessSpec& n) { return n.node_index == node.node_index; }),
                 "add_node() of a node already in the plan");
    nodes.push_back(std::move(node));
    start_node(nodes.back(), true);
  }

  // Spawns the child and watches it; on failure stops the job and returns false.
  bool start(std::unique_ptr<Child> child, const std::vector<std::string>& argv, const Environment& env) {
    auto process = ChildProcess::spawn(io, argv, env);
    if (!process) {
      begin_stop(JobEnd::start_failed, child->label + ": " + process.error().message);
      return false;
    }
    child->process = std::move(*process);
    Child& watched = *children.emplace_back(std::move(child));
    watch_output(watched, OutputStream::out);
    watch_output(watched, OutputStream::err);
    watch_exit(watched);
    return true;
  }

  // --- output ---

  asio::posix::stream_descriptor& pipe(Child& child, OutputStream stream) {
    return stream == OutputStream::out ? child.process->stdout_pipe() : child.process->stderr_pipe();
  }

  void watch_output(Child& child, OutputStream stream) {
    pipe(child, stream)
        .async_wait(asio::posix::stream_descriptor::wait_read,
                    [this, &child, stream](const boost::system::error_code& error) {
                      if (error || !pipe(child, stream).is_open()) return;  // closed at its exit
                      if (read_once(child, stream) != Read::closed) watch_output(child, stream);
                    });
  }

  // One read() from the pipe; at its end, the unterminated rest is forwarded and the pipe closed.
  Read read_once(Child& child, OutputStream stream) {
    auto& descriptor = pipe(child, stream);
    const ssize_t n = ::read(descriptor.native_handle(), read_buffer.data(), read_buffer.size());
    if (n > 0) {
      buffer(child, stream).append({read_buffer.data(), static_cast<std::size_t>(n)}, emitter(child, stream));
      return Read::data;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return Read::empty;
    close_output(child, stream);
    return Read::closed;
  }

  void close_output(Child& child, OutputStream stream) {
    buffer(child, stream).finish(emitter(child, stream));
    boost::system::error_code ignored;
    pipe(child, stream).close(ignored);
  }

  LineBuffer& buffer(Child& child, OutputStream stream) { return stream == OutputStream::out ? child.out : child.err; }

  LineBuffer::Emit emitter(Child& child, OutputStream stream) {
    return [this, &child, stream](std::string_view line) {
      if (child.role == Role::node) {
        options.sink(stream, child.prefix + std::string(line));
      } else if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
        child.last_line = std::string(line);
      }
    };
  }

  // --- exits ---

  void watch_exit(Child& child) {
    child.process->exit_watch().async_wait(asio::posix::stream_descriptor::wait_read,
                                           [this, &child](const boost::system::error_code& error) {
                                             if (!error) on_exit(child);
                                           });
  }

  void on_exit(Child& child) {
    const std::optional<ExitStatus> status = child.process->reap();
    if (!status) {
      watch_exit(child);
      return;
    }
    // Everything it wrote is in its pipes now; a process it left behind may not write after this.
    for (OutputStream stream : {OutputStream::out, OutputStream::err}) {
      if (!pipe(child, stream).is_open()) continue;
      for (int i = 0; i < max_drain_reads && read_once(child, stream) == Read::data; ++i) {
      }
      if (pipe(child, stream).is_open()) close_output(child, stream);
    }
    boost::system::error_code ignored;
    child.process->exit_watch().close(ignored);
    child.exit = status;
    child.shared_memory.reset();

    if (child.role == Role::node) {
      result.exits.push_back({child.node_index, child.host, *status, child.started_again, child.process->pid()});
      if (options.on_node_exit) options.on_node_exit(result.exits.back());
      if (state == State::running && !status->success() && !child.replaced) {
        const std::string why = child.label + " " + status->describe();
        const auto hold = options.hold_after_failure ? options.hold_after_failure() : std::chrono::milliseconds(0);
        if (hold.count() > 0)
          begin_hold(hold, why);
        else
          begin_stop(JobEnd::node_failed, why);
      }
    } else if (state == State::checking) {
      if (!status->success()) {
        std::string why = "pre-flight of " + child.label + " failed: `" + child.command + "` " + status->describe();
        if (!child.last_line.empty()) why += ": " + child.last_line;
        begin_stop(JobEnd::start_failed, why);
      } else if (live_children().empty()) {
        preflight_timer.cancel();
        start_nodes();
        return;
      }
    }
    finish_if_done();
  }

  std::vector<Child*> live_children() {
    std::vector<Child*> live;
    for (auto& child : children) {
      if (!child->exit) live.push_back(child.get());
    }
    return live;
  }

  void on_preflight_timeout() {
    std::string hosts;
    for (Child* child : live_children()) hosts += (hosts.empty() ? "" : ", ") + child->label;
    begin_stop(JobEnd::start_failed, "pre-flight: no answer within " + seconds_text(options.preflight_timeout) +
                                         " from " + hosts + " (launcher template `" + options.remote.text() + "`)");
  }

  // --- stopping ---

  // The failure is the job's result; the others run on until the hold ends in a stop.
  void begin_hold(std::chrono::milliseconds hold, const std::string& message) {
    state = State::holding;
    result.end = JobEnd::node_failed;
    result.message = message;
    say(message + "; leaving the other node processes " + seconds_text(hold) + " to finish before stopping them");
    hold_timer.expires_after(hold);
    hold_timer.async_wait([this, message](const boost::system::error_code& error) {
      if (!error && state == State::holding) begin_stop(JobEnd::node_failed, message);
    });
  }

  void begin_stop(JobEnd reason, const std::string& message) {
    if (state == State::stopping || state == State::killing || state == State::done) return;
    if (state != State::holding) {
      result.end = reason;
      result.message = message;
    }
    state = State::stopping;
    hold_timer.cancel();
    preflight_timer.cancel();
    const auto live = live_children();
    if (!live.empty()) {
      // Every live child has the same role: checks before running, nodes after.
      const bool checks = live.front()->role == Role::check;
      const bool one = live.size() == 1;
      const std::string what =
          checks ? (one ? "pre-flight check" : "pre-flight checks") : (one ? "node process" : "node processes");
      say(message + "; stopping " + std::to_string(live.size()) + " " + what + " (SIGTERM, then SIGKILL after " +
          seconds_text(options.grace) + ")");
      // SIGCONT after SIGTERM (as systemd does): a stopped node, the kind the heartbeat catches,
      // would otherwise hold its SIGTERM until the grace period ends in SIGKILL.
      for (Child* child : live) {
        child->process->signal(SIGTERM);
        child->process->signal(SIGCONT);
      }
      grace_timer.expires_after(options.grace);
      grace_timer.async_wait([this](const boost::system::error_code& error) {
        if (!error && state == State::stopping) kill_remaining("still running after " + seconds_text(options.grace));
      });
    }
    finish_if_done();
  }

  void kill_remaining(const std::string& why) {
    state = State::killing;
    std::string labels;
    for (Child* child : live_children()) {
      labels += (labels.empty() ? "" : ", ") + child->label;
      child->process->signal(SIGKILL);
    }
    say(labels + " " + why + "; SIGKILL");
  }

  void wait_for_signal() {
    signals.async_wait([this](const boost::system::error_code& error, int signo) {
      if (error) return;
      on_signal(signo);
      wait_for_signal();
    });
  }

  void on_signal(int signo) {
    const SignalEnd& entry = *std::find_if(std::begin(signal_ends), std::end(signal_ends),
                                           [signo](const SignalEnd& s) { return s.signo == signo; });
    if (state == State::stopping) {
      kill_remaining("at a second signal (SIG" + std::string(sigabbrev_np(signo)) + ")");
    } else if (state == State::checking || state == State::running || state == State::holding) {
      if (state == State::holding) state = State::running;  // a signal's end outranks the held failure
      if (options.on_signal_stop) options.on_signal_stop(entry.message);
      begin_stop(entry.end, entry.message);
    }
  }

  void finish_if_done() {
    if (state == State::checking || state == State::done) return;
    if (!live_children().empty()) return;
    state = State::done;
    preflight_timer.cancel();
    grace_timer.cancel();
    hold_timer.cancel();
    boost::system::error_code ignored;
    signals.cancel(ignored);
    signals.clear(ignored);
  }

  void say(const std::string& text) { options.sink(OutputStream::err, "[launch] " + text); }
};

NodeLauncher::NodeLauncher(std::vector<NodeProcessSpec> nodes, LauncherOptions options)
    : impl_(std::make_unique<Impl>(std::move(nodes), std::move(options))) {}

NodeLauncher::~NodeLauncher() = default;

JobResult NodeLauncher::run() { return impl_->run(); }

void NodeLauncher::replace_node(int node_index, Environment env) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, node_index, env = std::move(env)] { impl->replace(node_index, env, std::nullopt); });
}

void NodeLauncher::move_node(int node_index, std::string host, bool local, Environment env) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, node_index, env = std::move(env), moved_to = std::pair{std::move(host), local}] {
    impl->replace(node_index, env, moved_to);
  });
}

void NodeLauncher::update_node(int node_index, std::vector<std::string> argv, Environment env) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, node_index, argv = std::move(argv), env = std::move(env)]() mutable {
    impl->update(node_index, std::move(argv), env);
  });
}

void NodeLauncher::add_node(NodeProcessSpec node) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, node = std::move(node)]() mutable { impl->add(std::move(node)); });
}

void NodeLauncher::stop_all(JobEnd reason, std::string message) {
  Impl* impl = impl_.get();
  asio::post(impl->io, [impl, reason, message = std::move(message)] { impl->begin_stop(reason, message); });
}

}  // namespace troupe::launch
