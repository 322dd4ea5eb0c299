#include "compute/train/expert_gradients.hpp"

#include <algorithm>

namespace troupe::compute {

ExpertGradients::ExpertGradients(const GPTStage& stage) : expert_shards_(stage.expert_group().shards()) {
  for (const GPTStage::Run& run : stage.global_runs()) {
    if (!ranges_.empty() && ranges_.back().expert == run.expert_shard && ranges_.back().end == run.local)
      ranges_.back().end = run.local + run.count;
    else
      ranges_.push_back({run.local, run.local + run.count, run.expert_shard});
  }
}

void ExpertGradients::start_sums(const DataParallel& dp, const Tensor& grads, std::int64_t begin,
                                 std::int64_t end) const {
  for (const Range& r : ranges_) {
    const std::int64_t from = std::max(begin, r.begin), to = std::min(end, r.end);
    if (from >= to) continue;
    if (!r.expert)
      dp.start_sum(grads.slice(from, {to - from}), from);
    else if (dp.start_expert_sum)
      dp.start_expert_sum(grads.slice(from, {to - from}), from);
  }
}

double ExpertGradients::squares(Backend& backend, const DataParallel& dp, const Tensor& buffer) const {
  if (!sharded()) return backend.sum_of_squares(buffer);
  double dense = 0, experts = 0;
  for (const Range& r : ranges_)
    (r.expert ? experts : dense) += backend.sum_of_squares(buffer.slice(r.begin, {r.end - r.begin}));
  TROUPE_CHECK(dp.sum, "expert shards without a scalar sum over the data-parallel group");
  return dense + dp.sum(dp.rank < expert_shards_ ? experts : 0.0);
}

}  // namespace troupe::compute
