#pragma once
// A data-parallel rank's gradients under expert shards (docs/moe.md, "Parameters, gradients and
// checkpoints"). Its flat buffer (GPTStage::layout()) holds two kinds of elements:
//
//   dense    every rank of the data-parallel group holds them (embeddings, attention, LayerNorms,
//            routers, shared experts): summed over the whole group (DataParallel::start_sum);
//   experts  the rank's E/EP experts of each MoE block (GPTStage::Run::expert_shard), which only
//            the ranks at its place in every expert group hold: summed over those dp/EP ranks
//            (DataParallel::start_expert_sum; nothing to sum where the rank is alone there).
//
// The whole model's gradient norm is then the dense elements' squares (equal on every rank once
// summed) plus every expert's squares once: the first expert group's ranks (dp positions 0 … EP−1)
// together hold each expert once, so their expert squares, summed over the group, are those.
// Without expert shards every element is dense. Every rank makes the same calls in the same order.
//
// Under ZeRO 1 and 2 each run of a kind is a buffer of its own (zero_buffers()): a dense run
// sharded over the data-parallel group, an expert run over the expert data-parallel group, each
// rank its segment of the run as that group's collectives cut it (DataParallel::segment_of). Its
// AdamW moments (and ZeRO-2's summed gradients) are that segment's: every dense element and every
// expert's element is then updated by exactly one rank of the group holding it, and the shards'
// squares, summed over the data-parallel group, count each expert once.
//
// Under ZeRO-3 the rank keeps only those segments of its runs (zero3_runs(): ShardedParameters
// keeps a shard of each run over its group, and gathers a unit's piece of each over that group),
// and zero_buffers() makes each kept segment the buffer of its run. Each element is then kept by
// exactly one rank of the data-parallel group, so every rank writes its segments to a checkpoint.

#include <cstdint>
#include <span>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/train/data_parallel.hpp"
#include "compute/train/zero_step.hpp"

namespace troupe::compute {

class ExpertGradients {
 public:
  // `cuts`: local offsets where a run ends even between views of a kind (a pipeline stage's tied
  // embedding, a run of its own: the first and last stages then sum it in the same order).
  explicit ExpertGradients(const GPTStage& stage, std::span<const std::int64_t> cuts = {});

  bool sharded() const { return expert_shards_ > 1; }
  // Posts the sums of elements [begin, end) of `grads` (the stage's buffer), each run to its group.
  void start_sums(const DataParallel& dp, const Tensor& grads, std::int64_t begin, std::int64_t end) const;
  // The squares of the whole model's summed gradient from this rank's summed `buffer` (or of its
  // parameters from this rank's): under expert shards a scalar sum over `dp` adds the first expert
  // group's expert squares, so every rank of `dp` calls it.
  double squares(Backend& backend, const DataParallel& dp, const Tensor& buffer) const;
  // Under ZeRO 1 to 3: `params` and `grads` (the stage's buffers, laid out as `views`; under ZeRO-3
  // what dp.sharded keeps of them) as one ZeroStep buffer a run of a kind, in local order, the dense
  // ones over `dp` (the step's group), the experts' over `expert_data`, each with the segment its
  // group gives this rank. A buffer's sum offset is `sum_base` + its run's local offset: where the
  // run lies in the layout its group's compressor was given.
  std::vector<ZeroStep::Buffer> zero_buffers(std::span<const ParameterView> views, const Tensor& params,
                                             const Tensor& grads, const DataParallel& dp,
                                             const DataParallel& expert_data, std::int64_t sum_base);

  struct Range {
    std::int64_t begin = 0, end = 0;  // local
    bool expert = false;
  };
  const std::vector<Range>& ranges() const { return ranges_; }
  // The runs of a kind of a buffer laid out as `views` (local order), adjacent views of a kind
  // merged but at `cuts`; with `expert_shards` false every element is dense.
  static std::vector<Range> kind_ranges(std::span<const ParameterView> views, bool expert_shards,
                                        std::span<const std::int64_t> cuts = {});
  // Under ZeRO-3: the runs ShardedParameters keeps a shard of, one a run of a kind of a buffer laid
  // out as `views` (ended at `cuts` too; with `expert_shards` false every element dense, as
  // kind_ranges), each over its group as zero_buffers() cuts it (the dense ones over `dp`, the
  // experts' over `expert_data`).
  static std::vector<RunShards> zero3_runs(std::span<const ParameterView> views, bool expert_shards,
                                           const DataParallel& dp, const DataParallel& expert_data,
                                           std::span<const std::int64_t> cuts = {});

 private:
  std::vector<Range> ranges_;  // in local order, covering the buffer, adjacent ones of a kind merged
  int expert_shards_ = 1;
  std::vector<std::vector<ParameterView>> range_views_;  // zero_buffers()'s, at offsets within their run
};

}  // namespace troupe::compute
