#pragma once
// The trainer's data-parallel hooks (compute::DataParallel) carried out by a worker actor's
// collectives over one group: per-layer buckets posted while backward runs and their
// completions received as messages, ZeRO's reduce-scatter and all-gather, scalar sums. While a
// hook waits, the worker's progress record says for what (the heartbeat carries it to the job's
// watchdog). A failed collective (a lost peer) throws std::runtime_error with its message, which
// ends the rank's run; a stop request throws WorkStopped.

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/worker/mailbox_comm.hpp"
#include "comm/gradient_compressor.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/train/outer_step.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// `mailbox`, `comm` (the data-parallel group) and `progress` must outlive the returned hooks.
// ZeRO stage `zero_stage`'s sums, gathers and scalar sums over `comm`, for a caller whose flat
// buffers each name their shard (a pipeline stage's chunks; compute/train/zero_step.hpp). With a
// compressor (from gradient_compressor() below, over the same group) the gradients are summed
// through it: buckets (ZeRO 0 and 1), and ZeRO-2's reduce-scatter (bf16 only).
compute::DataParallel group_hooks(MailboxComm& mailbox, comm::Communicator& comm, monitor::WorkProgress& progress,
                                  compute::ZeroStage zero_stage,
                                  std::shared_ptr<comm::GradientCompressor> compressor = nullptr);
// A replica's: group_hooks with this rank's shard of its one flat buffer of `parameters` elements
// (the whole model), and under ZeRO-3 every position's shard and the unit exchange its model's
// source takes.
compute::DataParallel group_data_parallel(MailboxComm& mailbox, comm::Communicator& comm,
                                          monitor::WorkProgress& progress, compute::ZeroStage zero_stage,
                                          std::int64_t parameters,
                                          std::shared_ptr<comm::GradientCompressor> compressor = nullptr);

// Under expert shards: the rank's experts' gradient buckets summed over `expert_data` (comm/grid.hpp's
// expert_data_group), posted through `mailbox` as the dense buckets are (so wait_sums waits for them);
// under ZeRO 1 to 3 also the group's hooks that shard the rank's experts (DataParallel::expert_data),
// under ZeRO-3 with the exchange of their units' pieces.
// With `compressor` (over `expert_data`, of the rank's expert tensors) the experts' sums go through
// it, finished after the dense ones.
void sum_experts_over(compute::DataParallel& dp, MailboxComm& mailbox, comm::Communicator& expert_data,
                      monitor::WorkProgress& progress, std::shared_ptr<comm::GradientCompressor> compressor = nullptr);

// A compressor of gradients over `comm`, its sums posted through `mailbox`; `tensors` (PowerSGD's
// matrices) from gradient_tensors(), or none for bf16.
std::shared_ptr<comm::GradientCompressor> gradient_compressor(MailboxComm& mailbox, comm::Communicator& comm,
                                                              monitor::WorkProgress& progress,
                                                              const comm::CompressionOptions& options,
                                                              std::vector<comm::GradientTensor> tensors);
// Parameters as the compressor sees them: matrices rows × cols, vectors rows × 1, at their
// offsets in the buffer `views` describe (the whole model's, a rank's local one under expert
// shards, or a pipeline stage's), each stacked expert apart.
std::vector<comm::GradientTensor> gradient_tensors(const std::vector<compute::ParameterView>& views);

// One pseudo-gradient's sum over an outer group, in flight: the pseudo-gradient it lands in and the
// buffer on the wire (the same tensor in f32; bf16 values; under int8 every position's payload in
// its own segment of 4-byte words, this rank's at its position in the group).
struct OuterSum {
  MailboxComm::Operation op;
  compute::Tensor pseudo_gradient, wire;
};
OuterSum post_outer_sum(MailboxComm& mailbox, comm::Communicator& outer, compute::Tensor pseudo_gradient,
                        compute::OuterPrecision precision);
// Once its operation is done: the sum read from the wire into the pseudo-gradient (int8 payloads
// decoded and added in position order).
void read_outer_sum(const OuterSum& sum);
// What a rank waiting for an outer sum tells the watchdog.
inline constexpr const char* outer_sum_wait = "the outer step's pseudo-gradient sum over the islands";

// DiLoCo's place of this rank among the islands: `outer` (comm/grid.hpp's outer_group) sums a
// pseudo-gradient by the ring all-reduce, in f32 or on the bf16 wire of the gradient sums
// (comm/bf16_wire.hpp), posted at once and waited for when the outer step needs it; the wait says
// so to the watchdog.
compute::IslandGroup island_hooks(MailboxComm& mailbox, comm::Communicator& outer, monitor::WorkProgress& progress,
                                  int island, compute::OuterPrecision precision);

// ZeRO-3's gathers and reduce-scatters of one unit over `comm`, posted now and waited for when the
// model needs them; a wait names which of the two it is for the watchdog.
compute::ShardExchange unit_exchange(MailboxComm& mailbox, comm::Communicator& comm, monitor::WorkProgress& progress);

// The n + 1 offsets of the shards of a buffer of `parameters` elements over `comm`'s positions.
std::vector<std::int64_t> shard_offsets(const comm::Communicator& comm, std::int64_t parameters);

}  // namespace troupe::actors
