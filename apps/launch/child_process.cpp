// posix_spawn rather than fork: the job process runs CAF's threads, and between fork and exec a
// multi-threaded process may call only async-signal-safe functions. glibc's posix_spawn does the
// whole child set-up itself and reports a failed exec as its return value.

#include "apps/launch/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "apps/launch/local_host.hpp"

extern char** environ;

namespace troupe::launch {
namespace {

// A file descriptor closed when it goes out of scope unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Our environment with env's names replaced or added, as NAME=value strings.
std::vector<std::string> child_environment(const Environment& env) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    bool replaced = false;
    for (const auto& [set_name, value] : env) replaced = replaced || set_name == name;
    if (!replaced) entries.emplace_back(text);
  }
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Set-up that posix_spawn performs in the child before exec.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attributes;

  SpawnSetup(int out, int err) {
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, err, STDERR_FILENO);
    posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t signals;
    sigemptyset(&signals);
    posix_spawnattr_setsigmask(&attributes, &signals);
    sigfillset(&signals);
    posix_spawnattr_setsigdefault(&attributes, &signals);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
  }
};

}  // namespace

Expected<std::unique_ptr<ChildProcess>> ChildProcess::spawn(boost::asio::io_context& io,
                                                            const std::vector<std::string>& argv,
                                                            const Environment& env) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Error{std::string("cannot make a pipe: ") + std::strerror(errno)};
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Error{std::string("cannot make a pipe: ") + std::strerror(errno)};
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
  // Only our ends read without blocking; the child's stay blocking, as programs expect.
  fcntl(out_read.get(), F_SETFL, O_NONBLOCK);
  fcntl(err_read.get(), F_SETFL, O_NONBLOCK);

  std::vector<std::string> args = argv;
  std::vector<std::string> environment = child_environment(env);
  std::vector<char*> arg_pointers = c_strings(args);
  std::vector<char*> env_pointers = c_strings(environment);
  SpawnSetup setup(out_write.get(), err_write.get());
  pid_t pid = 0;
  const std::string program = executable_to_spawn(argv[0]);
  const int failed =
      posix_spawnp(&pid, program.c_str(), &setup.actions, &setup.attributes, arg_pointers.data(), env_pointers.data());
  if (failed != 0) return Error{"cannot start '" + argv[0] + "': " + std::strerror(failed)};

  // The system call itself: glibc before 2.36 has no wrapper, and 2.36 declares it without C linkage.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int error = errno;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Error{std::string("cannot watch a child process (pidfd_open needs Linux 5.3): ") + std::strerror(error)};
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(io, pid, pidfd, out_read.release(), err_read.release()));
}

ChildProcess::ChildProcess(boost::asio::io_context& io, pid_t pid, int pidfd, int out, int err)
    : pid_(pid), pidfd_(io, pidfd), stdout_(io, out), stderr_(io, err) {}

ChildProcess::~ChildProcess() {
  if (reaped_) return;
  ::kill(-pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

void ChildProcess::signal(int signo) {
  if (!reaped_) ::kill(-pid_, signo);
}

std::optional<ExitStatus> ChildProcess::reap() {
  if (reaped_) return std::nullopt;
  int status = 0;
  pid_t done = ::waitpid(pid_, &status, WNOHANG);
  while (done < 0 && errno == EINTR) done = ::waitpid(pid_, &status, WNOHANG);
  if (done == 0) return std::nullopt;
  reaped_ = true;
  if (done < 0) return ExitStatus{-1, 0};
  return exit_status_from_wait(status);
}

}  // namespace troupe::launch
