#include "schedules/weights_fill.hpp"

namespace troupe::schedules {

WeightsFill::WeightsFill(const std::vector<Instruction>& stream) : stream_(&stream), ran_early_(stream.size(), false) {
  for (std::size_t i = 0; i < stream.size(); ++i)
    if (stream[i].op == Op::backward_input) input_position_[{stream[i].microbatch, stream[i].chunk}] = i;
}

std::optional<std::size_t> WeightsFill::next(std::size_t at) const {
  const std::vector<Instruction>& stream = *stream_;
  for (std::size_t j = at + 1; j < stream.size(); ++j) {
    if (stream[j].op != Op::backward_weights || ran_early_[j]) continue;
    const auto b = input_position_.find({stream[j].microbatch, stream[j].chunk});
    if (b == input_position_.end() || b->second >= at) return std::nullopt;
    return j;
  }
  return std::nullopt;
}

}  // namespace troupe::schedules
