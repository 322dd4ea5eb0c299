#include "comm/bootstrap.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>

namespace troupe::comm {
namespace {

bool write_all(int fd, const void* data, std::size_t bytes) {
  const auto* at = static_cast<const std::uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, at, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t bytes) {
  auto* at = static_cast<std::uint8_t*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd, at, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_frame(int fd, const std::vector<std::uint8_t>& bytes) {
  const auto length = static_cast<std::uint32_t>(bytes.size());
  return write_all(fd, &length, sizeof length) && write_all(fd, bytes.data(), bytes.size());
}

bool read_frame(int fd, std::vector<std::uint8_t>& bytes) {
  std::uint32_t length = 0;
  if (!read_all(fd, &length, sizeof length)) return false;
  bytes.resize(length);
  return read_all(fd, bytes.data(), length);
}

std::vector<std::uint8_t> result_frame(bool ok, const std::vector<std::uint8_t>& payload) {
  std::vector<std::uint8_t> frame(payload.size() + 1);
  frame[0] = ok ? 1 : 0;
  std::copy(payload.begin(), payload.end(), frame.begin() + 1);
  return frame;
}

std::vector<std::uint8_t> error_frame(const std::string& message) {
  return result_frame(false, std::vector<std::uint8_t>(message.begin(), message.end()));
}

// A child's "connected to every rank" frame; a result frame begins with 0 or 1.
const std::vector<std::uint8_t> connected_frame{2};

// A child's whole life: engine, address out, table in, connect, connected out, start in, body,
// result out, release.
int child_main(int rank, int world_size, int fd, const LocalRankBody& body, const RankPlacement& place,
               const std::optional<WireModel>& wire) {
  if (place) {
    if (Status placed = place(rank); !placed) {
      write_frame(fd, {});
      write_frame(fd, error_frame(placed.error().message));
      return 1;
    }
  }
  auto engine = Engine::create(rank, world_size, wire);
  if (!engine) {
    write_frame(fd, {});
    write_frame(fd, error_frame(engine.error().message));
    return 1;
  }
  if (!write_frame(fd, (*engine)->address())) return 1;
  std::vector<std::vector<std::uint8_t>> table(static_cast<std::size_t>(world_size));
  for (auto& address : table) {
    if (!read_frame(fd, address)) return 1;
  }
  for (int peer = 0; peer < world_size; ++peer) {
    if (peer == rank) continue;
    if (Status s = (*engine)->connect(peer, table[peer]); !s) {
      write_frame(fd, error_frame(s.error().message));
      return 1;
    }
  }
  std::uint8_t start = 0;
  if (!write_frame(fd, connected_frame) || !read_all(fd, &start, 1)) return 1;
  bool ok = false;
  std::vector<std::uint8_t> frame;
  try {
    Expected<std::vector<std::uint8_t>> result = body(**engine);
    ok = result.ok();
    frame = ok ? result_frame(true, result.value()) : error_frame(result.error().message);
  } catch (const std::exception& e) {
    frame = error_frame(std::string("exception: ") + e.what());
  }
  write_frame(fd, frame);
  std::uint8_t release = 0;
  read_all(fd, &release, 1);
  engine->reset();
  return ok ? 0 : 1;
}

// Once a rank has failed or died, the others may wait for it forever: those still running
// this long after are killed (and reported as timed out).
constexpr auto straggler_grace = std::chrono::seconds(10);

// The parent's view of one child.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  bool exited = false;
  bool connected = false;             // it sent connected_frame
  std::vector<std::uint8_t> pending;  // bytes read, not yet a whole frame
  std::vector<std::vector<std::uint8_t>> frames;  // its address, then its result
};

// Moves whole frames out of `pending`.
void split_frames(Child& child) {
  for (;;) {
    std::uint32_t length = 0;
    if (child.pending.size() < sizeof length) return;
    std::memcpy(&length, child.pending.data(), sizeof length);
    if (child.pending.size() < sizeof length + length) return;
    std::vector<std::uint8_t> frame(child.pending.begin() + sizeof length,
                                    child.pending.begin() + sizeof length + length);
    if (child.frames.size() == 1 && frame == connected_frame)
      child.connected = true;
    else
      child.frames.push_back(std::move(frame));
    child.pending.erase(child.pending.begin(), child.pending.begin() + sizeof length + length);
  }
}

void reap(std::vector<Child>& children, std::vector<LocalRankResult>& results, bool block) {
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].exited) continue;
    int status = 0;
    const pid_t pid = waitpid(children[i].pid, &status, block ? 0 : WNOHANG);
    if (pid != children[i].pid) continue;
    children[i].exited = true;
    if (WIFEXITED(status)) results[i].exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) results[i].signal = WTERMSIG(status);
  }
}

}  // namespace

Expected<std::vector<LocalRankResult>> run_local_ranks(int world_size, const LocalRankBody& body,
                                                       std::chrono::milliseconds timeout, const RankPlacement& place,
                                                       const std::optional<WireModel>& wire) {
  if (world_size < 1) return Error{"comm: bootstrap of " + std::to_string(world_size) + " ranks"};
  std::vector<Child> children(static_cast<std::size_t>(world_size));
  std::vector<int> child_ends;
  for (auto& child : children) {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return Error{std::string("comm: bootstrap socketpair failed: ") + std::strerror(errno)};
    }
    child.fd = pair[0];
    child_ends.push_back(pair[1]);
  }
  for (int rank = 0; rank < world_size; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      for (auto& child : children) {
        if (child.pid > 0) kill(child.pid, SIGKILL);
      }
      return Error{std::string("comm: bootstrap fork failed: ") + std::strerror(errno)};
    }
    if (pid == 0) {
      for (auto& child : children) close(child.fd);
      for (int r = 0; r < world_size; ++r) {
        if (r != rank) close(child_ends[r]);
      }
      _exit(child_main(rank, world_size, child_ends[rank], body, place, wire));
    }
    children[rank].pid = pid;
  }
  for (int fd : child_ends) close(fd);

  // 1. collect every address; 2. relay the table; 3. start the bodies once every rank has
  // connected (or ended); 4. collect every result (or death); 5. release the survivors; 6. reap
  // them. Children past the deadline are killed.
  std::vector<LocalRankResult> results(static_cast<std::size_t>(world_size));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool table_sent = false;
  bool started = false;
  bool released = false;
  std::optional<std::chrono::steady_clock::time_point> trouble_since;
  for (;;) {
    reap(children, results, false);
    bool all_addressed = true;
    bool all_connected = true;  // or settled: a rank that failed to connect holds none back
    bool all_settled = true;
    bool all_gone = true;
    bool one_lost_early = false;  // ended (or closed its socket) before reporting
    bool one_failed = false;
    for (const auto& child : children) {
      const bool open = child.fd >= 0;
      all_addressed = all_addressed && !child.frames.empty();
      all_settled = all_settled && (child.frames.size() >= 2 || !open);
      all_connected = all_connected && (child.connected || child.frames.size() >= 2 || !open);
      all_gone = all_gone && child.exited && !open;
      one_lost_early = one_lost_early || (!open && child.frames.size() < 2);
      one_failed = one_failed || (child.frames.size() >= 2 && (child.frames[1].empty() || child.frames[1][0] != 1));
    }
    if (all_gone) break;
    if (!trouble_since && (one_failed || (one_lost_early && table_sent)))
      trouble_since = std::chrono::steady_clock::now();
    if (one_lost_early && !table_sent) {
      // A rank died before the address exchange: the others would wait for it forever.
      for (auto& child : children) {
        if (!child.exited) kill(child.pid, SIGKILL);
      }
      table_sent = true;
    }
    if (all_addressed && !table_sent) {
      table_sent = true;
      for (auto& child : children) {
        for (const auto& other : children) write_frame(child.fd, other.frames.front());
      }
    }
    if (table_sent && all_connected && !started) {
      started = true;
      for (auto& child : children) {
        const std::uint8_t start = 1;
        if (child.fd >= 0 && child.connected) write_all(child.fd, &start, 1);
      }
    }
    if (all_settled && !released) {
      released = true;
      for (auto& child : children) {
        const std::uint8_t release = 1;
        if (child.fd >= 0) write_all(child.fd, &release, 1);
      }
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (trouble_since) {
      left = std::min(left, std::chrono::duration_cast<std::chrono::milliseconds>(*trouble_since + straggler_grace -
                                                                                  std::chrono::steady_clock::now()));
    }
    if (left.count() <= 0) {
      const bool late = std::chrono::steady_clock::now() >= deadline;
      for (std::size_t i = 0; i < children.size(); ++i) {
        if (children[i].exited) continue;
        kill(children[i].pid, SIGKILL);
        results[i].timed_out = late;
        if (!late)
          results[i].error = "killed: still running " + std::to_string(straggler_grace.count()) +
                             " s after another rank failed or died";
      }
      reap(children, results, true);
      break;
    }
    std::vector<pollfd> fds;
    std::vector<std::size_t> owners;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].fd < 0) continue;
      fds.push_back({children[i].fd, POLLIN, 0});
      owners.push_back(i);
    }
    // Short waits: exits are noticed by waitpid, which poll cannot wait on.
    poll(fds.data(), fds.size(), static_cast<int>(std::min<long>(left.count(), 10)));
    for (std::size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      Child& child = children[owners[k]];
      std::uint8_t buffer[4096];
      const ssize_t n = read(child.fd, buffer, sizeof buffer);
      if (n > 0) {
        child.pending.insert(child.pending.end(), buffer, buffer + n);
        split_frames(child);
      } else if (n == 0 || errno != EINTR) {
        close(child.fd);
        child.fd = -1;
      }
    }
  }
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].fd >= 0) close(children[i].fd);
    if (children[i].frames.size() < 2) {
      if (results[i].error.empty()) {
        results[i].error = results[i].timed_out ? "timed out" : "ended before reporting";
      }
      continue;
    }
    const auto& frame = children[i].frames[1];
    results[i].reported = true;
    results[i].ok = !frame.empty() && frame[0] == 1;
    if (results[i].ok) {
      results[i].report.assign(frame.begin() + 1, frame.end());
    } else if (!frame.empty()) {
      results[i].error.assign(frame.begin() + 1, frame.end());
    }
  }
  return results;
}

}  // namespace troupe::comm
