#include "apps/commands/drill/event_feed.hpp"

#include <filesystem>

#include "actors/control/control_token.hpp"
#include "apps/commands/shell/handshake_probe.hpp"

namespace troupe::apps::drill {
namespace {

constexpr auto poll_period = std::chrono::milliseconds(10);  // between reads that brought nothing
// A monitor answers a read within milliseconds; one that does not is an ended attempt's, gone.
constexpr auto answer_timeout = std::chrono::milliseconds(300);
constexpr std::int32_t events_per_read = 10000;

}  // namespace

Expected<std::unique_ptr<EventFeed>> EventFeed::open(int port, std::chrono::seconds patience,
                                                     std::function<bool()> job_alive, const std::string& record) {
  const std::filesystem::path token_file = actors::default_control_token_path(port);
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    std::error_code ec;
    if (std::filesystem::exists(token_file, ec)) break;
    if (!job_alive()) return Error{"the job ended before it opened its control port " + std::to_string(port)};
    if (std::chrono::steady_clock::now() >= deadline)
      return Error{"the job wrote no token file for its control port " + std::to_string(port) + " (" +
                   token_file.string() + ") within " + std::to_string(patience.count()) + " s"};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto token = actors::read_control_token(token_file);
  if (!token) return token.error();
  return std::unique_ptr<EventFeed>(new EventFeed(port, std::move(*token), std::move(job_alive), record));
}

EventFeed::EventFeed(int port, std::string token, std::function<bool()> job_alive, const std::string& record)
    : port_(port), token_(std::move(token)), job_alive_(std::move(job_alive)), record_(record, std::ios::app),
      config_(std::make_unique<actors::TroupeConfig>()),
      system_(std::make_unique<caf::actor_system>(*config_)) {
  poller_ = std::thread([this] { poll(); });
}

EventFeed::~EventFeed() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  poller_.join();
  monitor_ = nullptr;
  system_.reset();
}

bool EventFeed::connect() {
  if (!shell::await_handshake("127.0.0.1", port_, std::chrono::seconds(2))) return false;
  auto monitor = system_->middleman().remote_actor("127.0.0.1", static_cast<std::uint16_t>(port_));
  if (!monitor) return false;
  std::lock_guard lock(mutex_);
  monitor_ = *monitor;
  return true;
}

// Reads the events after the last one it has, again and again: at once after a read that brought
// some, else after a short pause. A lost connection is made again (a restarted job's monitor
// answers on the same port). Once the job's process has exited, one more read that brings nothing
// ends the feed.
void EventFeed::poll() {
  caf::scoped_actor self{*system_};
  for (;;) {
    caf::actor monitor;
    std::int64_t after = 0;
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      monitor = monitor_;
      after = last_seq_;
    }
    const bool alive = job_alive_();
    bool got = false, reached = false;
    if (monitor || connect()) {
      {
        std::lock_guard lock(mutex_);
        monitor = monitor_;
      }
      self->request(monitor, answer_timeout, actors::events_atom_v, actors::events_request_msg{token_, after,
                                                                                                events_per_read})
          .receive(
              [&](actors::events_reply_msg& reply) {
                reached = reply.error.empty();
                std::lock_guard lock(mutex_);
                // The next attempt's monitor takes over the port: read on from it.
                if (reply.attempt_ended) monitor_ = nullptr;
                for (actors::job_event& event : reply.events) {
                  record_ << actors::to_text(event) << '\n' << std::flush;
                  last_seq_ = event.seq;
                  events_.push_back(std::move(event));
                  last_event_at_ = std::chrono::steady_clock::now();
                  got = true;
                }
              },
              [&](caf::error&) {
                std::lock_guard lock(mutex_);
                monitor_ = nullptr;
              });
    }
    {
      std::lock_guard lock(mutex_);
      if (got) changed_.notify_all();
      if (!alive && !got) {
        ended_ = true;
        changed_.notify_all();
        return;
      }
    }
    if (!got) {
      std::unique_lock lock(mutex_);
      changed_.wait_for(lock, reached ? poll_period : poll_period * 2, [&] { return stopping_; });
    }
  }
}

std::optional<actors::job_event> EventFeed::wait_for(const Match& matches, std::chrono::milliseconds timeout,
                                                     std::size_t from, std::size_t* at) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(mutex_);
  std::size_t next = from;
  for (;;) {
    const auto until = stall_limit_ ? std::min(deadline, last_event_at_ + *stall_limit_) : deadline;
    for (; next < events_.size(); ++next)
      if (matches(events_[next])) {
        if (at) *at = next;
        return events_[next];
      }
    if (ended_ || stopping_) return std::nullopt;
    if (changed_.wait_until(lock, until) == std::cv_status::timeout && next == events_.size()) return std::nullopt;
  }
}

void EventFeed::set_stall_limit(std::chrono::seconds limit) {
  std::lock_guard lock(mutex_);
  stall_limit_ = limit;
}

std::optional<std::chrono::seconds> EventFeed::stalled_for() const {
  std::lock_guard lock(mutex_);
  const auto quiet =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - last_event_at_);
  if (ended_ || !stall_limit_ || quiet < *stall_limit_) return std::nullopt;
  return quiet;
}

std::vector<actors::job_event> EventFeed::events() const {
  std::lock_guard lock(mutex_);
  return events_;
}

std::size_t EventFeed::size() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::vector<actors::job_event> EventFeed::final_events(std::chrono::seconds patience) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, patience, [&] { return ended_; });
  return events_;
}

Expected<std::string> EventFeed::order(const std::string& command, std::chrono::seconds answer_within) {
  const auto deadline = std::chrono::steady_clock::now() + std::min(answer_within, std::chrono::seconds(60));
  caf::scoped_actor self{*system_};
  std::string why = "the job's control port did not answer";
  while (std::chrono::steady_clock::now() < deadline) {
    caf::actor monitor;
    {
      std::lock_guard lock(mutex_);
      monitor = monitor_;
    }
    if (!monitor) {
      std::this_thread::sleep_for(poll_period * 10);
      continue;
    }
    Expected<std::string> answer = Error{why};
    bool retry = false;
    self->request(monitor, answer_within, actors::shell_atom_v, actors::shell_request_msg{token_, command})
        .receive(
            [&](actors::shell_reply_msg& reply) {
              answer = reply.ok ? Expected<std::string>(reply.text)
                                : Expected<std::string>(Error{"troupe shell -c '" + command + "' failed: " + reply.text});
            },
            [&](caf::error& e) {
              why = "the job did not answer: " + to_string(e);
              retry = true;
            });
    if (!retry) return answer;
    std::this_thread::sleep_for(poll_period * 10);
  }
  return Error{"troupe shell -c '" + command + "': " + why};
}

}  // namespace troupe::apps::drill
