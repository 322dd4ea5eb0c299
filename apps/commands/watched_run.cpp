#include "apps/commands/watched_run.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"

extern char** environ;

namespace troupe::apps {

Expected<std::unique_ptr<WatchedRun>> WatchedRun::start(const std::vector<std::string>& argv,
                                                        const std::vector<std::string>& extra_env,
                                                        const std::string& log_path) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return Error{std::string("cannot make a pipe: ") + std::strerror(errno)};
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> env_pointers, argv_pointers;
  for (auto& e : env) env_pointers.push_back(e.data());
  env_pointers.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (auto& a : args) argv_pointers.push_back(a.data());
  argv_pointers.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  std::unique_ptr<WatchedRun> run(new WatchedRun);
  const int spawned = posix_spawn(&run->pid_, launch::executable_to_spawn(argv[0]).c_str(), &actions, &attributes,
                                  argv_pointers.data(), env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return Error{"cannot start " + argv[0] + ": " + std::strerror(spawned)};
  }
  run->reader_ = std::thread([raw = run.get(), fd = pipe_fds[0], log_path] { raw->read_output(fd, log_path); });
  return run;
}

WatchedRun::~WatchedRun() {
  if (!wait_exit(std::chrono::milliseconds(0))) {
    kill_all();
    (void)wait_exit(std::chrono::seconds(10));
  }
  if (reader_.joinable()) reader_.join();
}

void WatchedRun::read_output(int fd, std::string log_path) {
  std::ofstream log(log_path, std::ios::app);
  std::string pending;
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buffer, static_cast<std::size_t>(n));
    log.write(buffer, n);
    log.flush();
    std::size_t newline;
    std::lock_guard lock(mutex_);
    while ((newline = pending.find('\n')) != std::string::npos) {
      lines_.push_back({Clock::now(), pending.substr(0, newline)});
      pending.erase(0, newline + 1);
    }
    changed_.notify_all();
  }
  close(fd);
  std::lock_guard lock(mutex_);
  if (!pending.empty()) lines_.push_back({Clock::now(), pending});
  output_ended_ = true;
  changed_.notify_all();
}

std::optional<WatchedRun::Line> WatchedRun::wait_for_line(const LineMatch& matches, std::chrono::milliseconds timeout,
                                                          std::size_t from, std::size_t* index) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock lock(mutex_);
  for (std::size_t i = from;;) {
    for (; i < lines_.size(); ++i) {
      if (matches(lines_[i].text)) {
        if (index) *index = i;
        return lines_[i];
      }
    }
    if (output_ended_) return std::nullopt;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout && i == lines_.size()) return std::nullopt;
  }
}

std::vector<WatchedRun::Line> WatchedRun::lines() const {
  std::lock_guard lock(mutex_);
  return lines_;
}

// Any thread: whichever reaps the process first records its code, and every waiter reads it there.
std::optional<int> WatchedRun::wait_exit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (int status = 0;; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    {
      std::lock_guard lock(exit_mutex_);
      if (exit_code_) return exit_code_;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : signal_exit_code(WTERMSIG(status));
        return exit_code_;
      }
    }
    if (Clock::now() >= deadline) return std::nullopt;  // looked once at least, even for a zero timeout
  }
}

std::vector<pid_t> WatchedRun::descendants() const {
  std::vector<pid_t> found, frontier{pid_};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    std::ifstream children("/proc/" + std::to_string(parent) + "/task/" + std::to_string(parent) + "/children");
    for (pid_t child; children >> child;) {
      found.push_back(child);
      frontier.push_back(child);
    }
  }
  return found;
}

void WatchedRun::kill_all() {
  for (pid_t p : descendants()) kill(p, SIGKILL);
  kill(-pid_, SIGKILL);
}

}  // namespace troupe::apps
