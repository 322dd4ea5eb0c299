#pragma once
// A reproducible token stream for benchmarks that measure speed, not learning: no corpus to read.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::compute {

// `count` tokens below `vocab_size`, the same for every call (splitmix64 of the index).
std::vector<std::uint16_t> synthetic_tokens(std::size_t count, int vocab_size);

}  // namespace troupe::compute
