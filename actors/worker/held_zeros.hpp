#pragma once
// Checkpoint state a rank writes as zeros: the elements of a kind it does not hold (PowerSGD's
// residuals of the experts other ranks hold, theirs to write), so that its kind covers the whole
// model as without expert shards.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/run_checkpoints.hpp"
#include "compute/tensor.hpp"

namespace troupe::actors {

// `kind` over [begin, end) less `covered` (global ranges within it, in any order), held as zeros
// read from `zeros`, grown to the largest gap (counted as optimizer state).
void hold_zeros_outside(std::vector<checkpoint::HeldRange>& held, const std::string& kind,
                        std::vector<std::pair<std::int64_t, std::int64_t>> covered, std::int64_t begin,
                        std::int64_t end, compute::Tensor& zeros);

}  // namespace troupe::actors
