#pragma once
// What every collective state machine shares (internal to comm/): its requests in flight, a
// watch on the other ranks of its group, and finishing exactly once. It lives on the progress
// thread; it is kept alive by the callbacks of its requests and by its watch, and it owns
// (through a Tensor) the buffer its requests point into, so a send UCX could not cancel never
// reads freed memory.
//
//            start()                    each completion: then(); all expected done
//   [new] ------------> [running] ----------------------------------------------> [succeeded]
//                           |  a request fails, a rank of the group is lost, or its
//                           |  communicator abandons it (abandon(): a recovery gives up the step)
//                           +------------------------------------------------------> [failed]
//                              (requests in flight are cancelled; done() gets the error)

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "comm/engine.hpp"
#include "comm/group.hpp"
#include "compute/tensor.hpp"

namespace troupe::comm {

class CollectiveOp : public std::enable_shared_from_this<CollectiveOp> {
 public:
  virtual ~CollectiveOp();
  // Progress thread only: watches the group, then posts the first requests.
  void start();
  // Progress thread only: fails the operation now with `why`, unless it has ended. Nothing of it
  // touches its buffer afterwards (work resumed later checks finished()).
  void abandon(const std::string& why);

 protected:
  // `key` carries the group and sequence; requests fill in the index. From here until done()
  // the operation counts in the engine's traffic (traffic.hpp) as in flight.
  CollectiveOp(Engine& engine, TrafficKind kind, const Group& group, MessageKey key, compute::Tensor buffer,
               Callback done);

  // Posts the first requests and says how many requests the operation makes in all.
  virtual void begin() = 0;
  // Once the operation has failed: gives back what others wait for (a ring's mapped blocks), even
  // while the operation itself lives on in a callback nobody will call (a block it waits for).
  virtual void release_after_failure() {}

  void expect(std::uint64_t requests) { expected_ = requests; }
  // A message of the operation. `then` runs when it has completed, unless the operation failed.
  // Within one operation an index is used by at most one send and one receive. Over a buffer
  // that moves as a token (compute/tensor.hpp) a message with bytes is a token message of that
  // size, `data` unused: a collective over one adds and copies nothing.
  void send(int peer, std::uint32_t index, const void* data, std::size_t bytes, std::function<void()> then = {});
  void recv(int peer, std::uint32_t index, void* data, std::size_t bytes, std::function<void()> then = {});

  Engine& engine_;
  // Whether the operation has ended (succeeded or failed): work resumed later (a block that came
  // free) must not touch a failed operation's buffer.
  bool finished() const { return finished_; }
  const Group& group() const { return group_; }
  const compute::Tensor& buffer() const { return buffer_; }
  std::byte* bytes_at(std::int64_t element) const;

 private:
  void on_done(std::uint64_t slot, const Status& status, const std::function<void()>& then);
  void finish(Status status);

  TrafficKind kind_;
  std::chrono::steady_clock::time_point posted_;
  Group group_;
  MessageKey key_;
  compute::Tensor buffer_;
  Callback done_;
  std::uint64_t expected_ = 0;
  std::uint64_t completed_ = 0;
  bool finished_ = false;
  WatchId watch_ = 0;
  std::unordered_map<std::uint64_t, RequestId> in_flight_;  // by index * 2 + (receive ? 1 : 0)
};

}  // namespace troupe::comm
