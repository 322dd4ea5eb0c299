#include "apps/commands/shell/monitor_link.hpp"

#include <thread>

#include <caf/io/all.hpp>

#include "apps/commands/shell/handshake_probe.hpp"

namespace troupe::apps::shell {

MonitorLink::MonitorLink(caf::actor_system& system, std::string host, int port, std::string token,
                         std::function<void(const std::string&)> notice)
    : system_(system), host_(std::move(host)), port_(port), token_(std::move(token)), notice_(std::move(notice)) {}

Expected<actors::shell_reply_msg> MonitorLink::connect() {
  if (Status answers = await_handshake(host_, port_, handshake_timeout); !answers) return answers.error();
  auto monitor = system_.middleman().remote_actor(host_, static_cast<std::uint16_t>(port_));
  if (!monitor) return Error{"cannot reach the job at " + address() + ": " + to_string(monitor.error())};
  monitor_ = *monitor;
  auto hello = request("hello", std::chrono::seconds(10));
  if (hello) attempt_ = hello->attempt;
  return hello;
}

Expected<actors::shell_reply_msg> MonitorLink::request(const std::string& line, std::chrono::seconds timeout) {
  caf::scoped_actor self{system_};
  Expected<actors::shell_reply_msg> answer = Error{"no answer"};
  self->request(monitor_, timeout, actors::shell_atom_v, actors::shell_request_msg{token_, line})
      .receive([&](actors::shell_reply_msg& reply) { answer = std::move(reply); },
               [&](caf::error& e) { answer = Error{"the job did not answer: " + to_string(e)}; });
  return answer;
}

Status MonitorLink::reconnect(std::chrono::seconds reconnect_for, const std::string& why) {
  notice_("connection to the job lost (" + why + "); reconnecting to " + address() + " ...");
  const auto deadline = std::chrono::steady_clock::now() + reconnect_for;
  const int previous = attempt_;
  for (;;) {
    auto hello = connect();
    if (hello && hello->ok) {
      if (hello->attempt != previous)
        notice_("job restarted after: " + hello->restarted_after + " (restart " + std::to_string(hello->attempt) +
                "); reconnected");
      else
        notice_("reconnected");
      return Status::success();
    }
    if (hello && !hello->ok) return Error{hello->text};
    if (std::chrono::steady_clock::now() >= deadline)
      return Error{"the job at " + address() + " is gone (it ended or was stopped): " + hello.error().message};
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Expected<actors::shell_reply_msg> MonitorLink::ask(const std::string& line, std::chrono::seconds timeout,
                                                   bool repeatable, std::chrono::seconds reconnect_for) {
  auto answer = request(line, timeout);
  if (answer) {
    if (answer->attempt != attempt_ && attempt_ >= 0)
      notice_("job restarted after: " + answer->restarted_after + " (restart " + std::to_string(answer->attempt) + ")");
    attempt_ = answer->attempt;
    return answer;
  }
  if (Status back = reconnect(reconnect_for, answer.error().message); !back) return back.error();
  if (!repeatable) return Error{"'" + line + "' was not confirmed before the connection was lost; check and run it again"};
  return request(line, timeout);
}

}  // namespace troupe::apps::shell
