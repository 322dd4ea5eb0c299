#pragma once
// Collectives over a group of ranks, in host memory: the entry points (a thin layer over the
// engine, as NCCL's are over its). Each operation is a state machine inside the engine, driven
// by completions on the progress thread, so it overlaps whatever the posting thread does next;
// post_* return at once and call `done` on the progress thread; the blocking forms wait for it.
//
// Every rank of the group must post the same collectives on its Communicator in the same
// order (the order fixes each operation's sequence number, which keeps their messages apart).
// A Tensor given to an operation is kept alive by it until it ends. A rank of the group that
// is lost fails the operation on every other rank with an Error naming it; the failed
// operation may leave unmatched messages under its sequence number, so recovery builds a new
// Communicator (with a new engine, or a new group id).
//
// Algorithms: ring all-reduce (reduce-scatter then all-gather, chunked and pipelined) or, over
// many ranks, recursive doubling; ring reduce-scatter, ring all-gather, chain broadcast,
// dissemination barrier; see docs/comm.md.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/engine.hpp"
#include "comm/group.hpp"
#include "comm/recursive_doubling.hpp"
#include "comm/scratch_pool.hpp"
#include "compute/expected.hpp"
#include "compute/tensor.hpp"

namespace troupe::comm {

class CollectiveOp;

enum class RingPhases : std::uint8_t;

struct CollectiveOptions {
  std::int64_t chunk_bytes = 0;  // message size of ring and chain (TROUPE_COMM_CHUNK_BYTES)
  int window = 0;                // ring partial-sum receives in flight (TROUPE_COMM_WINDOW)
  // Ring chunks between processes on one host go through the engines' mapped blocks where both
  // lend them; false sends every chunk as a message (to compare the two ways). Every rank of
  // the group must give the same value, as for chunk_bytes.
  bool mapped_blocks = true;
  // The all-reduce's algorithm; unset, all_reduce_algorithm chooses by the group's size and the
  // buffer's bytes (the same choice on every rank). Every rank of the group must give the same.
  std::optional<AllReduceAlgorithm> all_reduce;

  static CollectiveOptions from_environment();
};

class Communicator {
 public:
  // The engine's rank must be in the group, ranks unique and inside the engine's world, and
  // the engine connected to all of them.
  static Expected<std::unique_ptr<Communicator>> create(
      Engine& engine, Group group, CollectiveOptions options = CollectiveOptions::from_environment());

  // Abandons what is still in flight (a step a failed worker left): its mapped blocks go back to
  // the engine, for the communicators the rank makes next. The engine must outlive it.
  ~Communicator();

  const Group& group() const { return group_; }
  int position() const { return position_; }

  // Sum over the group, in place; f32, f64 or bf16 (added in f32, rounded at every hop). Every
  // rank ends with the same bits.
  void post_all_reduce(compute::Tensor buffer, Callback done);
  // In place: afterwards segment_of(numel, size, position()) of the buffer holds the sum of
  // that segment over the group; the rest of the buffer holds partial sums. f32, f64 or bf16.
  void post_reduce_scatter(compute::Tensor buffer, Callback done);
  // In place: segment_of(numel, size, p) of position p's buffer ends up on every rank.
  void post_all_gather(compute::Tensor buffer, Callback done);
  // The same two over segments the caller chooses: `segments[p]` is position p's, in order, and
  // together they cover the buffer; any may be empty (ZeRO-3 gathers one block of a buffer that
  // is sharded as a whole, so a block's pieces are uneven). Every rank passes the same segments.
  void post_reduce_scatter(compute::Tensor buffer, std::vector<Slice> segments, Callback done);
  void post_all_gather(compute::Tensor buffer, std::vector<Slice> segments, Callback done);
  // The buffer of position `root` ends up on every rank.
  void post_broadcast(compute::Tensor buffer, int root, Callback done);
  // Done once every rank of the group has entered the barrier.
  void post_barrier(Callback done);

  // Gives up every operation of this communicator still in flight (each one's done gets "comm:
  // ... abandoned: `why`") and goes on as `renewed` with its sequence from 0: under a new id, so
  // that no message of an abandoned operation matches a later one (grid.hpp's epoch_group_id),
  // and over new ranks where the job grew (this rank a member, every rank inside the engine's
  // world, connected before the next operation); every rank of the group switches to the same
  // group before its next operation. Returns once nothing of the abandoned operations touches
  // their buffers any more. Never on the progress thread.
  void abandon_and_renew(const std::string& why, Group renewed);

  // Blocking forms, for tests and simple callers; never on the progress thread.
  Status all_reduce(compute::Tensor buffer);
  Status reduce_scatter(compute::Tensor buffer);
  Status all_gather(compute::Tensor buffer);
  Status reduce_scatter(compute::Tensor buffer, std::vector<Slice> segments);
  Status all_gather(compute::Tensor buffer, std::vector<Slice> segments);
  Status broadcast(compute::Tensor buffer, int root);
  Status barrier();

 private:
  Communicator(Engine& engine, Group group, int position, CollectiveOptions options);
  MessageKey next_key();
  // Checks the buffer for an operation; on a problem posts done(error) and returns false.
  bool accept(const compute::Tensor& buffer, bool reduces, const char* what, const Callback& done);
  // The same for caller-chosen segments: one per position, in order, covering the buffer.
  bool accept_segments(const compute::Tensor& buffer, const std::vector<Slice>& segments, const char* what,
                       const Callback& done);
  void post_ring(compute::Tensor buffer, RingPhases phases, std::vector<Slice> segments, Callback done);

  Engine& engine_;
  Group group_;
  int position_;
  CollectiveOptions options_;
  std::atomic<std::uint32_t> sequence_{0};
  std::shared_ptr<ScratchPool> scratch_ = std::make_shared<ScratchPool>();
  // The operations started and maybe still running (touched on the progress thread only), for
  // abandon_and_renew().
  struct LiveOps;
  std::shared_ptr<LiveOps> live_;
  void post_op(std::shared_ptr<CollectiveOp> op);
};

}  // namespace troupe::comm
