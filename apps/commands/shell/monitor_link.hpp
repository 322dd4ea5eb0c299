#pragma once
// The shell's connection to a job's monitor actor (docs/shell.md): every request carries the
// token; a lost connection is reconnected to the same HOST:PORT (a restarted job publishes its new
// monitor there) and the shell is told whether the job restarted and why.

#include <chrono>
#include <functional>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "compute/expected.hpp"

namespace troupe::apps::shell {

class MonitorLink {
 public:
  // How long a job may take to answer a new connection before the shell gives up on it.
  static constexpr std::chrono::seconds handshake_timeout{5};

  // `notice` prints what happened to the connection ("job restarted after: ...; reconnected").
  MonitorLink(caf::actor_system& system, std::string host, int port, std::string token,
              std::function<void(const std::string&)> notice);

  // Connects and greets the monitor: its answer, or why the job cannot be reached.
  Expected<actors::shell_reply_msg> connect();
  // Asks the monitor; when the connection is lost, reconnects for up to `reconnect_for` and asks
  // again if `repeatable` (a command that changes nothing), else says it went unanswered.
  Expected<actors::shell_reply_msg> ask(const std::string& line, std::chrono::seconds timeout, bool repeatable,
                                        std::chrono::seconds reconnect_for = std::chrono::seconds(120));
  std::string address() const { return host_ + ":" + std::to_string(port_); }

 private:
  Expected<actors::shell_reply_msg> request(const std::string& line, std::chrono::seconds timeout);
  Status reconnect(std::chrono::seconds reconnect_for, const std::string& why);

  caf::actor_system& system_;
  std::string host_;
  int port_;
  std::string token_;
  std::function<void(const std::string&)> notice_;
  caf::actor monitor_;
  int attempt_ = -1;
};

}  // namespace troupe::apps::shell
