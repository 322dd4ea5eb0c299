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

std::vector<ZeroStep::Buffer> ExpertGradients::zero_buffers(std::span<const ParameterView> views, const Tensor& params,
                                                            const Tensor& grads, const DataParallel& dp,
                                                            const DataParallel& expert_data) {
  std::vector<ZeroStep::Buffer> buffers;
  range_views_.assign(ranges_.size(), {});
  for (std::size_t i = 0; i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    for (ParameterView view : views) {
      if (view.offset + view.numel() <= r.begin || view.offset >= r.end) continue;
      TROUPE_CHECK(r.begin <= view.offset && view.offset + view.numel() <= r.end, "a tensor across two runs");
      view.offset -= r.begin;
      range_views_[i].push_back(std::move(view));
    }
    const DataParallel& group = r.expert ? expert_data : dp;
    const std::int64_t count = r.end - r.begin;
    const auto [shard_begin, shard_end] =
        group.segment_of ? group.segment_of(count) : std::pair<std::int64_t, std::int64_t>{0, count};
    ZeroStep::Buffer b;
    b.views = range_views_[i];
    b.numel = count;
    b.params = params.slice(r.begin, {count});
    b.grads = grads.slice(r.begin, {count});
    b.shard_begin = shard_begin;
    b.shard_end = shard_end;
    b.sum_offset = r.begin;
    b.group = r.expert ? &expert_data : nullptr;
    buffers.push_back(std::move(b));
  }
  return buffers;
}

}  // namespace troupe::compute
