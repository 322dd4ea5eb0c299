#pragma once
// A TCP front for a port CAF publishes (docs/shell.md, "Security"). CAF 0.17's BASP believes the
// payload length a peer announces and allocates it before a byte of it arrives: one 32-byte header
// claiming 4 GiB costs the job 4 GiB of memory. The guard listens on the public address, checks
// every frame a peer sends before passing it on to CAF's listener on loopback, and closes a
// connection whose first frame is not a BASP client handshake, whose frame names no BASP
// operation, or whose payload exceeds the limit; each refusal is reported in one line. Frames
// are passed on as they arrive (payloads in chunks), so the guard holds no more than a chunk.
//
// Idle and slow peers cannot lock the port: a connection is "waiting" until its first frame (the
// BASP client handshake, which a CAF peer sends within milliseconds of the server's) has passed,
// and a waiting connection is closed after `handshake_timeout`. At most `max_waiting` connections
// wait, at most `max_waiting_per_source` of them from one address; past either bound the oldest
// waiting one is closed to admit the new one, so a shell that connects behind a crowd of idle
// connections still gets its handshake answered. Connections that passed the handshake are bounded
// by `max_connections`. Each connection costs three descriptors (the peer's, the upstream one and
// CAF's end of it), so these bounds also keep the process clear of its open-file limit; when it
// is reached all the same, the guard closes its oldest waiting connection and pauses accepting
// (monitor/accept_loop.hpp) instead of spinning, and answers again once descriptors are free.
//
// A peer whose host stops answering is told apart from one whose process stopped: with
// `unreachable_after` set, every connection has TCP keepalive (probes each second once idle) and a
// TCP user timeout of that span, so the kernel gives up on a connection whose peer acknowledges
// nothing for that long (a cut link, a host gone) while a stopped or hung process, whose kernel
// still answers, keeps its connection. Such a connection is reported to `unreachable` with the
// peer's address before it is closed, so the job can name the node as unreachable.
//
// Its own thread runs a Boost.Asio loop; the destructor stops it and closes every connection. The
// guard may outlive the CAF listener behind it: a connection made meanwhile is closed at once.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "compute/expected.hpp"

namespace troupe::actors {

struct FrameGuardOptions {
  std::string bind = "127.0.0.1";
  std::uint16_t port = 0;    // 0: any free port
  std::uint16_t target = 0;  // CAF's listener on 127.0.0.1
  std::uint32_t max_payload = 1u << 20;
  std::size_t max_connections = 64;  // past the handshake
  // "refused 127.0.0.1:5555: ..."; at most 20 lines per 10 s, then one with the count left out.
  std::function<void(const std::string&)> refused;
  std::size_t max_waiting = 32;
  std::size_t max_waiting_per_source = 8;
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds unreachable_after{0};  // 0: the kernel's defaults (minutes)
  std::function<void(const std::string& address, double seconds)> unreachable;
};

class FrameGuard {
 public:
  static Expected<std::unique_ptr<FrameGuard>> start(FrameGuardOptions options);
  ~FrameGuard();
  FrameGuard(const FrameGuard&) = delete;
  FrameGuard& operator=(const FrameGuard&) = delete;

  std::uint16_t port() const;
  // New connections go to CAF's listener on 127.0.0.1:target from now on (a restarted job's).
  void retarget(std::uint16_t target);
  // Connections past their handshake now: the peers still connected through the guard.
  std::size_t connections() const;

 private:
  struct Impl;
  explicit FrameGuard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::actors
