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

#include <cstdint>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/train/data_parallel.hpp"

namespace troupe::compute {

class ExpertGradients {
 public:
  // Of a stage that keeps all its parameters (ZeRO 0 to 2).
  explicit ExpertGradients(const GPTStage& stage);

  bool sharded() const { return expert_shards_ > 1; }
  // Posts the sums of elements [begin, end) of `grads` (the stage's buffer), each run to its group.
  void start_sums(const DataParallel& dp, const Tensor& grads, std::int64_t begin, std::int64_t end) const;
  // The squares of the whole model's summed gradient from this rank's summed `buffer` (or of its
  // parameters from this rank's): under expert shards a scalar sum over `dp` adds the first expert
  // group's expert squares, so every rank of `dp` calls it.
  double squares(Backend& backend, const DataParallel& dp, const Tensor& buffer) const;

 private:
  struct Range {
    std::int64_t begin = 0, end = 0;  // local
    bool expert = false;
  };
  std::vector<Range> ranges_;  // in local order, covering the buffer, adjacent ones of a kind merged
  int expert_shards_ = 1;
};

}  // namespace troupe::compute
