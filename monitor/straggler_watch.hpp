#pragma once
// Who keeps the others waiting. A straggler (a slow disk, a noisy neighbour, a throttled CPU)
// does not hang: it finishes every step, late, and every rank that needs its messages waits.
// Fed one sample per rank per heartbeat — was the rank waiting for a message right then? — it
// names a rank that was almost never waiting while the others mostly were: the one they wait for.

#include <deque>
#include <map>
#include <optional>

namespace troupe::monitor {

class StragglerWatch {
 public:
  // Judges over the last `window` samples of each rank.
  explicit StragglerWatch(int window = 10) : window_(window) {}

  void sample(int rank, bool waiting);

  struct Straggler {
    int rank = -1;
    double waiting_share = 0;         // of its own samples
    double others_waiting_share = 0;  // the least of the other ranks'
  };
  // A rank that waited in at most a quarter of its last `window` samples while every other rank
  // waited in at least half of theirs; nullopt while any rank has fewer samples, or no rank stands
  // out. Needs two ranks or more.
  std::optional<Straggler> find() const;

 private:
  int window_;
  std::map<int, std::deque<bool>> samples_;  // by rank, newest last
};

}  // namespace troupe::monitor
