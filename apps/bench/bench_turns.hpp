#pragma once
// Turn-taking between the processes of a bench that measures its variants in one run (bench dp,
// bench tp): a shared VM drifts by more than the differences measured, so the variants' processes
// live at once and take turns, one step each. The memory is mapped before the fork so every rank
// shares it; the leader runs its own turns and hands the followers theirs. A rank that is not
// measured waits on a semaphore and takes no CPU.
//
// `Turn` is the bench's enum of turns; it must have a `stop` value, which ends the followers' loops.

#include <semaphore.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "compute/check.hpp"

namespace troupe::apps {

template <typename Turn>
class Turns {
 public:
  static constexpr int max_followers = 64;

  explicit Turns(int followers) : followers_(followers) {
    TROUPE_CHECK(followers <= max_followers, "more bench followers than the shared turn memory holds");
    void* memory = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    TROUPE_CHECK(memory != MAP_FAILED, "cannot map the bench's shared turn memory");
    shared_ = new (memory) Shared;
    for (int r = 0; r < followers_; ++r) TROUPE_CHECK(sem_init(&shared_->start[r], 1, 0) == 0, "sem_init");
    TROUPE_CHECK(sem_init(&shared_->finished, 1, 0) == 0, "sem_init");
  }
  ~Turns() {
    for (int r = 0; r < followers_; ++r) sem_destroy(&shared_->start[r]);
    sem_destroy(&shared_->finished);
    munmap(shared_, sizeof(Shared));
  }
  Turns(const Turns&) = delete;
  Turns& operator=(const Turns&) = delete;

  // Leader: every follower runs `turn` once; returns when all have finished it.
  void hand_out(Turn turn) {
    shared_->turn.store(static_cast<int>(turn));
    for (int r = 0; r < followers_; ++r) sem_post(&shared_->start[r]);
    if (turn != Turn::stop) wait_for_followers();
  }
  void wait_for_followers() {
    for (int r = 0; r < followers_; ++r) wait(&shared_->finished);
  }
  // Leader: `iterations` rounds, round i taking the turns of orders[i % orders.size()] in that
  // order: `own` runs `step` (its seconds kept from round `warmup` on), any other turn is handed
  // out unless `skip` leaves it out; then stop. The kept seconds.
  template <typename Orders>
  std::vector<double> lead_rounds(const Orders& orders, int iterations, int warmup, Turn own,
                                  const std::function<double()>& step, const std::function<bool(Turn)>& skip = {}) {
    std::vector<double> kept;
    for (int i = 0; i < iterations; ++i)
      for (Turn turn : orders[static_cast<std::size_t>(i) % orders.size()]) {
        if (skip && skip(turn)) continue;
        if (turn != own) {
          hand_out(turn);
          continue;
        }
        const double seconds = step();
        if (i >= warmup) kept.push_back(seconds);
      }
    hand_out(Turn::stop);
    return kept;
  }
  // Follower `rank`: its next turn.
  Turn next(int rank) {
    wait(&shared_->start[rank]);
    return static_cast<Turn>(shared_->turn.load());
  }
  void finish() { sem_post(&shared_->finished); }

 private:
  struct Shared {
    std::atomic<int> turn{0};
    sem_t start[max_followers];
    sem_t finished;
  };

  static void wait(sem_t* semaphore) {
    while (sem_wait(semaphore) != 0) TROUPE_CHECK(errno == EINTR, "sem_wait: " + std::string(std::strerror(errno)));
  }

  int followers_;
  Shared* shared_;
};

}  // namespace troupe::apps
