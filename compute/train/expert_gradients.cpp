#include "compute/train/expert_gradients.hpp"

#include <algorithm>

namespace troupe::compute {

namespace {

// What a group cuts a run of `count` elements into: every position's segment, n + 1 offsets from 0.
std::vector<std::int64_t> cuts(const DataParallel& group, std::int64_t count) {
  return group.shards_of ? group.shards_of(count) : std::vector<std::int64_t>{0, count};
}

}  // namespace

ExpertGradients::ExpertGradients(const GPTStage& stage, std::span<const std::int64_t> cuts)
    : ranges_(kind_ranges(stage.views(), stage.expert_group().sharded(), cuts)),
      expert_shards_(stage.expert_group().shards()) {}

std::vector<ExpertGradients::Range> ExpertGradients::kind_ranges(std::span<const ParameterView> views,
                                                                 bool expert_shards,
                                                                 std::span<const std::int64_t> cuts) {
  std::vector<Range> ranges;
  for (const ParameterView& view : views) {
    const bool expert = view.expert && expert_shards;
    const bool cut = std::find(cuts.begin(), cuts.end(), view.offset) != cuts.end();
    if (!ranges.empty() && ranges.back().expert == expert && ranges.back().end == view.offset && !cut)
      ranges.back().end = view.offset + view.numel();
    else
      ranges.push_back({view.offset, view.offset + view.numel(), expert});
  }
  return ranges;
}

std::vector<RunShards> ExpertGradients::zero3_runs(std::span<const ParameterView> views, bool expert_shards,
                                                   const DataParallel& dp, const DataParallel& expert_data,
                                                   std::span<const std::int64_t> run_ends) {
  std::vector<RunShards> runs;
  for (const Range& r : kind_ranges(views, expert_shards, run_ends)) {
    const DataParallel& group = r.expert ? expert_data : dp;
    std::vector<std::int64_t> shards = cuts(group, r.end - r.begin);
    for (std::int64_t& offset : shards) offset += r.begin;
    runs.push_back({std::move(shards), group.rank, group.unit_exchange});
  }
  return runs;
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
                                                            const DataParallel& expert_data, std::int64_t sum_base) {
  std::vector<ZeroStep::Buffer> buffers;
  const bool zero3 = shards_parameters(dp.zero_stage);
  std::int64_t kept = 0;  // under ZeRO-3: where the run's segment starts in the kept buffers
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
    b.shard_begin = shard_begin;
    b.shard_end = shard_end;
    if (zero3) {
      // The source keeps this segment of every run, one after another.
      b.params = params.slice(kept, {shard_end - shard_begin});
      b.grads = grads.slice(kept, {shard_end - shard_begin});
      b.kept_begin = shard_begin;
      b.source = dp.sharded;
      kept += shard_end - shard_begin;
    } else {
      b.params = params.slice(r.begin, {count});
      b.grads = grads.slice(r.begin, {count});
    }
    b.sum_offset = sum_base + r.begin;
    b.group = r.expert ? &expert_data : nullptr;
    buffers.push_back(std::move(b));
  }
  TROUPE_CHECK(!zero3 || kept == params.numel(), "ZeRO-3's kept parameters are not the segments of its runs");
  return buffers;
}

}  // namespace troupe::compute
