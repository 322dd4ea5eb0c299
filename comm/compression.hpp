#pragma once
// Gradient compression on the data-parallel path (docs/comm.md, "Gradient compression"): what a
// job asks for. `none` sums gradients as they are; `bf16` sends them as bfloat16 (rounded to
// nearest even) and adds in f32 at every hop of the ring; `powersgd` sends a rank-r factorisation
// of each large gradient matrix (Vogels et al., PowerSGD), keeping what it could not send as a
// residual that is added to the next step's gradient.

#include <cstdint>
#include <string>
#include <string_view>

#include "compute/expected.hpp"

namespace troupe::comm {

enum class Compression : std::uint8_t { none, bf16, powersgd };

// Every kind, in the order comm.compress lists them: the config parser reads a name with these.
inline constexpr Compression compressions[] = {Compression::none, Compression::bf16, Compression::powersgd};
std::string_view compression_name(Compression kind);  // "none", "bf16", "powersgd"

struct CompressionOptions {
  Compression kind = Compression::none;
  int rank = 4;            // PowerSGD's r: columns of P and Q
  long start_step = 0;     // steps before this one are summed plain
  std::uint64_t seed = 0;  // Q's first values, the same on every rank of the group
};

}  // namespace troupe::comm
