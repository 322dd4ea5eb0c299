#pragma once
// What the pipeline trainer's files share about a step's messages and activation slots
// (pipeline_trainer.cpp runs a step, pipeline_trainer_shares.cpp resizes them for a new share).

#include <cstdint>
#include <vector>

namespace troupe::actors {

// The top bit of a point-to-point message's index: a gradient's, not an activation's.
inline constexpr std::uint16_t gradient_index_bit = 0x8000;

// A chunk's activation slots, all free, taken from the back: slot 0 first.
inline std::vector<int> every_slot(int slots) {
  std::vector<int> free;
  for (int slot = slots - 1; slot >= 0; --slot) free.push_back(slot);
  return free;
}

}  // namespace troupe::actors
