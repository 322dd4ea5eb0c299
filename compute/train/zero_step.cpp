#include "compute/train/zero_step.hpp"

#include <algorithm>

#include "compute/optim/grad_clip.hpp"

namespace troupe::compute {
namespace {

// What AdamW updates on this rank: its shard once the stage shards the optimizer state, else all it keeps.
std::pair<std::int64_t, std::int64_t> optimized_range(ZeroStage stage, const ZeroStep::Buffer& b) {
  if (shards_optimizer_state(stage)) return {b.shard_begin, b.shard_end};
  return {b.kept_begin, b.kept_begin + b.params.numel()};
}

}  // namespace

ZeroStep::ZeroStep(Backend& backend, const DataParallel& group, DType dtype, const AdamWOptions& adamw,
                   std::vector<Buffer> buffers)
    : backend_(backend), group_(group), buffers_(std::move(buffers)) {
  const ZeroStage stage = group_.zero_stage;
  for (const Buffer& b : buffers_) {
    const DataParallel& group = group_of(b);
    const bool alone = group.size == 1;
    TROUPE_CHECK(group.zero_stage == stage, "a buffer's own group under another ZeRO stage");
    if (shards_parameters(stage)) {
      TROUPE_CHECK(b.source && b.kept_begin == b.shard_begin && b.kept_begin + b.params.numel() == b.shard_end &&
                       (alone || group.sum),
                   "ZeRO-3 needs a model whose source keeps this rank's shard, and a scalar sum");
    } else {
      TROUPE_CHECK(b.params.numel() == b.numel, "only ZeRO-3 shards the model's parameters");
      TROUPE_CHECK(alone || (shards_gradients(stage) ? group.reduce_scatter_gradients && group_.sum
                                                     : group.start_sum && group.wait_sums),
                   "a data-parallel group of more than one rank needs its gradient reduction");
      TROUPE_CHECK(alone || !gathers_parameters(stage) || group.all_gather_parameters,
                   "ZeRO needs all_gather_parameters");
    }
  }
  optimizers_.reserve(buffers_.size());
  for (const Buffer& b : buffers_) {
    const auto [begin, end] = optimized_range(stage, b);
    optimizers_.emplace_back(backend_, b.views, b.numel, dtype, adamw, begin, end, b.kept_begin);
  }
}

void ZeroStep::sum_gradients() {
  const ZeroStage stage = group_.zero_stage;
  if (shards_parameters(stage)) {
    for (Buffer& b : buffers_) b.source->finish_gradients();
  } else if (shards_gradients(stage)) {
    for (Buffer& b : buffers_)
      if (group_of(b).size > 1) group_of(b).reduce_scatter_gradients(b.grads);
  } else {
    std::vector<const DataParallel*> summing;  // each group once
    for (Buffer& b : buffers_) {
      const DataParallel& group = group_of(b);
      if (group.size == 1) continue;
      group.start_sum(b.grads, b.sum_offset);
      if (std::find(summing.begin(), summing.end(), &group) == summing.end()) summing.push_back(&group);
    }
    for (const DataParallel* group : summing) group->wait_sums();
  }
}

std::pair<std::int64_t, std::int64_t> ZeroStep::summed_range(int b) const {
  const Buffer& buffer = buffers_.at(static_cast<std::size_t>(b));
  if (shards_gradients(group_.zero_stage)) return {buffer.shard_begin, buffer.shard_end};
  return {buffer.kept_begin, buffer.kept_begin + buffer.grads.numel()};
}

Tensor ZeroStep::summed_gradients(int b) const {
  const Buffer& buffer = buffers_.at(static_cast<std::size_t>(b));
  const auto [begin, end] = summed_range(b);
  return buffer.grads.slice(begin - buffer.kept_begin, {end - begin});
}

double ZeroStep::group_squares(double squares) const {
  return shards_gradients(group_.zero_stage) && group_.size > 1 ? group_.sum(squares) : squares;
}

void ZeroStep::clip(double norm, double max_norm) {
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    Tensor held = summed_gradients(static_cast<int>(b));
    scale_to_norm(backend_, held, norm, max_norm);
  }
}

void ZeroStep::update(double lr) {
  for (std::size_t b = 0; b < buffers_.size(); ++b) optimizers_[b].step(buffers_[b].params, buffers_[b].grads, lr);
  if (!gathers_parameters(group_.zero_stage)) return;
  for (Buffer& b : buffers_)
    if (group_of(b).size > 1) group_of(b).all_gather_parameters(b.params);
}

void ZeroStep::resume_at(long steps) {
  for (AdamW& optimizer : optimizers_) optimizer.set_steps_taken(steps);
}

void ZeroStep::abandon_step() {
  std::vector<const DataParallel*> groups{&group_};  // each once: the buffers' own too
  for (const Buffer& b : buffers_)
    if (std::find(groups.begin(), groups.end(), &group_of(b)) == groups.end()) groups.push_back(&group_of(b));
  for (const DataParallel* group : groups)
    if (group->abandon_sums) group->abandon_sums();
  for (Buffer& b : buffers_)
    if (b.source) b.source->abandon_step();
}

void ZeroStep::release_gathered() {
  for (Buffer& b : buffers_)
    if (b.source) b.source->release_all();
}

}  // namespace troupe::compute
