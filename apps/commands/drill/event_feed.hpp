#pragma once
// The drill's view of a running job: its events (docs/protocols/job-events.md), read through the
// job's control port as the shell talks to the job — with the token from the job's token file — and
// kept in order as they come, across the job's attempts; and the shell's orders to it. A thread of
// its own polls the port; readers wait for the event they need.

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/messages.hpp"
#include "compute/expected.hpp"

namespace troupe::apps::drill {

using Match = std::function<bool(const actors::job_event&)>;

// Every event whose body is a `Body` for which `accept` holds (any `Body` without one).
template <class Body>
Match body_is(std::function<bool(const Body&)> accept = {}) {
  return [accept = std::move(accept)](const actors::job_event& event) {
    const auto* body = caf::get_if<Body>(&event.body);
    return body && (!accept || accept(*body));
  };
}

class EventFeed {
 public:
  // The events of the job whose control port listens on 127.0.0.1:`port`, once its token file is
  // written and the port answers, waiting up to `patience` while `job_alive` says the job runs.
  // Each event is also written to `record` as a line of its text form, as it comes.
  static Expected<std::unique_ptr<EventFeed>> open(int port, std::chrono::seconds patience,
                                                   std::function<bool()> job_alive, const std::string& record);
  ~EventFeed();
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  // A job that sends no event for `limit` while it runs counts as stalled (every step and every
  // recovery's stage sends one): waits end then. None until set.
  void set_stall_limit(std::chrono::seconds limit);
  // How long the job has sent no event, once that is past the stall limit; nothing before, or
  // once the job's events have ended.
  std::optional<std::chrono::seconds> stalled_for() const;

  // The first event from position `from` on that `matches`, waiting up to `timeout`; `at` (when
  // given) receives its position. Nothing when the time runs out, the job stalls or its events
  // end.
  std::optional<actors::job_event> wait_for(const Match& matches, std::chrono::milliseconds timeout,
                                            std::size_t from = 0, std::size_t* at = nullptr);
  std::vector<actors::job_event> events() const;
  std::size_t size() const;
  // The events received until the job's port went quiet for good (the job ended), then all of them.
  std::vector<actors::job_event> final_events(std::chrono::seconds patience);
  // The shell's `command` to the job (as `troupe shell -c` gives it): its answer, or why none came
  // within `answer_within`.
  Expected<std::string> order(const std::string& command,
                              std::chrono::seconds answer_within = std::chrono::seconds(300));

 private:
  EventFeed(int port, std::string token, std::function<bool()> job_alive, const std::string& record);
  void poll();
  bool connect();

  int port_;
  std::string token_;
  std::function<bool()> job_alive_;
  std::ofstream record_;
  std::unique_ptr<actors::TroupeConfig> config_;
  std::unique_ptr<caf::actor_system> system_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  caf::actor monitor_;  // the job's current monitor; null while not connected
  std::vector<actors::job_event> events_;
  std::int64_t last_seq_ = 0;
  std::chrono::steady_clock::time_point last_event_at_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::seconds> stall_limit_;
  bool stopping_ = false;
  bool ended_ = false;  // the job's process exited and its last events were fetched
  std::thread poller_;
};

}  // namespace troupe::apps::drill
