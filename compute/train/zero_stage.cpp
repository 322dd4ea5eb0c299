#include "compute/train/zero_stage.hpp"

namespace troupe::compute {

std::string zero_setting(ZeroStage stage) { return "train.zero " + std::to_string(zero_number(stage)); }

Expected<ZeroStage> parse_zero_stage(std::int64_t number) {
  for (ZeroStage stage : zero_stages)
    if (zero_number(stage) == number) return stage;
  return Error{"must be 0, 1, 2 or 3, got " + std::to_string(number)};
}

}  // namespace troupe::compute
