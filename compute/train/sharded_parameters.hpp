#pragma once
// ZeRO-3's parameter source (parameter_source.hpp): stage 3 of Rajbhandari et al., FSDP's fully
// sharded units. Position p of a data-parallel group of n keeps shard p of the stage's flat
// buffer, local [shards[p], shards[p + 1]), of the parameters and of the gradients (and the
// trainer's AdamW keeps that shard's moments). These are ZeRO-1/2's shards, so checkpoints, the
// clip and the optimizer see the same ranges under every stage.
//
// Under expert shards the buffer is runs of two kinds, each sharded over its own group (a RunShards:
// the dense runs over the data-parallel group, the rank's experts over the ranks holding the same
// experts, compute/train/expert_gradients.hpp), and the rank keeps its shard of every run, one after
// another; a unit's piece inside each run moves over that run's group. With one run this is the
// plain case above.
//
// Forward: use(u) all-gathers unit u into a buffer of its size (each position contributes the
// part of u inside its shard: uneven, often empty) and at once posts the gather of the unit the
// stage names as next, which travels while u computes (prefetch). done_with(u) after a forward
// frees the gathered copy when reshard_after_forward, else keeps it for the backward; the units
// the backward starts with (a last stage's tail and the embeddings its lm head reads) are kept
// either way, as FSDP keeps its root. Backward walks down: use(u) gathers again and prefetches the next; gradient(u) is
// a zeroed buffer of u's size for the backward to fill; gradient_done(u) posts its reduce-scatter over the same pieces,
// and once that is done the piece inside this shard is added into the kept gradients. A unit's reduce-scatter travels
// while the unit below it computes.
//
// Every rank of the group runs the same forward and backward, so the collectives meet in order.
// Each element is summed in the ring order of the shard that holds it, as ZeRO-2's reduce-scatter
// of the whole buffer sums it: one micro-batch per step gives ZeRO-2's bits.

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "compute/model/parameter_source.hpp"

namespace troupe::compute {

// How the group moves a unit's bytes (compute/ knows no communication).
struct ShardExchange {
  using Ticket = std::uint64_t;
  // Post a collective over a unit's buffer; `counts[p]` elements are position p's piece, in order
  // and covering the buffer. wait(ticket) returns once it is done.
  std::function<Ticket(Tensor unit, std::vector<std::int64_t> counts)> start_all_gather;
  std::function<Ticket(Tensor unit, std::vector<std::int64_t> counts)> start_reduce_scatter;
  std::function<void(Ticket)> wait;
};

// A run of the stage's flat buffer sharded over one group: position p of its n keeps local
// [shards[p], shards[p + 1]); with n = 1 nothing is exchanged.
struct RunShards {
  std::vector<std::int64_t> shards;  // n + 1 offsets into the stage's buffer, the run's begin to its end
  int position = 0;
  ShardExchange exchange;
};

class ShardedParameters final : public ParameterSource {
 public:
  // `shards` holds n + 1 offsets into the stage's flat buffer: the whole buffer one run.
  ShardedParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype, int position,
                    std::vector<std::int64_t> shards, ShardExchange exchange, bool reshard_after_forward);
  // `runs` cover the stage's flat buffer in order.
  ShardedParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype, std::vector<RunShards> runs,
                    bool reshard_after_forward);

  Tensor& kept_parameters() override { return params_; }
  Tensor& kept_gradients() override { return grads_; }
  std::vector<ParameterUnit> kept_runs() const override;
  Tensor use(int unit, int next) override;
  void done_with(int unit, Reuse reuse) override;
  Tensor gradient(int unit) override;
  void gradient_done(int unit) override;

  // Unit u's gradient then accumulates over all the step's backwards in one buffer
  // (deferred_gradient), reduce-scattered only by finish_gradients: a pipeline first sums a tied
  // embedding's two shares in it, between the first and the last stage.
  void defer_gradient(int unit) { deferred_.insert(unit); }
  // From now on every unit, once gathered, stays gathered until finish_gradients, and every unit's
  // gradient is deferred: each unit is gathered and reduce-scattered once a step however many
  // micro-batches the step runs (train.balance on pipeline stages or tensor shards, whose replicas
  // run different numbers). The price is ZeRO-1's memory for the step: every parameter and gradient
  // of the stage whole.
  void hold_for_step() { hold_for_step_ = true; }
  Tensor deferred_gradient(int unit) const;
  // Reduce-scatters the deferred gradients, waits for every reduce-scatter and adds its piece:
  // the kept gradients are then final.
  void finish_gradients();
  // Frees every gathered copy: after forwards that no backward follows (evaluation).
  void release_all();
  // Forgets a step given up part-way, once its collectives have ended (an in-place recovery
  // renewed the group under them and drained their completions): gathered copies, unit gradients
  // and reduce-scatters go back to the free buffers, their tickets never waited for. The kept
  // shard is left as it is, for the caller to restore.
  void abandon_step();
  // Bytes of the gathered copies and unit gradients it has allocated; it keeps them for reuse, so
  // this is also its peak beyond the shard.
  std::int64_t buffer_bytes(bool gradients) const { return gradients ? gradient_bytes_ : gathered_bytes_; }
  // Wall seconds spent waiting for its collectives since the last call: what a replica waited for
  // the others in its forward and backward, which its measured speed leaves out (train.balance
  // dynamic, dynamic_shares.hpp).
  double take_waited_seconds();

 private:
  // A collective in flight over one run's group.
  struct Pending {
    std::size_t run;
    ShardExchange::Ticket ticket;
  };
  struct Gathered {
    Tensor buffer;
    std::vector<Pending> pending;
  };
  struct Reducing {
    int unit;
    Tensor buffer;
    std::vector<Pending> pending;
  };
  struct Run {
    RunShards sharded;
    std::int64_t begin = 0, end = 0;  // this rank's shard, local
    std::int64_t kept_at = 0;         // where it sits in the kept buffers
    bool exchanges() const { return sharded.shards.size() > 2; }
  };

  // Posts a gather (or a reduce-scatter) of every run's piece of `unit`, whose buffer is `buffer`.
  std::vector<Pending> start(const ParameterUnit& unit, const Tensor& buffer, bool gather);
  void wait(std::vector<Pending>& pending);
  Gathered& gather(int unit);
  void release(int unit);
  void fold_oldest();
  Tensor take(std::multimap<std::int64_t, Tensor>& pool, std::int64_t size, bool gradients);

  Backend& backend_;
  std::vector<ParameterUnit> units_;
  DType dtype_;
  std::vector<Run> runs_;
  bool reshard_after_forward_;
  bool hold_for_step_ = false;
  Tensor params_, grads_;
  std::map<int, Gathered> gathered_;
  std::map<int, Tensor> open_gradients_;  // handed out by gradient(), not yet done
  std::set<int> deferred_;
  std::map<int, Tensor> deferred_gradients_;  // this step's, by unit
  std::vector<Reducing> reducing_;  // oldest first
  // Freed buffers by size, reused: a step allocates nothing once the first has run.
  std::multimap<std::int64_t, Tensor> free_parameters_, free_gradients_;
  std::int64_t gathered_bytes_ = 0, gradient_bytes_ = 0;
  double waited_seconds_ = 0;
};

}  // namespace troupe::compute
