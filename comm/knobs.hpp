#pragma once
// Every environment knob of comm/, declared here in one line with its default, so the set of
// things a user can turn is read in one place (docs/comm.md lists them with what they trade).
// UCX's own variables (UCX_TLS, UCX_RNDV_THRESH, ...) pass straight through to UCX.

#include <cstdint>

namespace troupe::comm {

struct Knob {
  const char* name;
  std::int64_t fallback;
};

inline constexpr Knob knob_spin_us{"TROUPE_COMM_SPIN_US", 1000};               // poll this long idle in a transfer
inline constexpr Knob knob_chunk_bytes{"TROUPE_COMM_CHUNK_BYTES", 512 << 10};  // ring/chain message size
inline constexpr Knob knob_window{"TROUPE_COMM_WINDOW", 4};                    // ring receives in flight
inline constexpr Knob knob_mapped_blocks{"TROUPE_COMM_MAPPED_BLOCKS", 4};      // shared-memory blocks lent to neighbours

// The knob's value from the environment when set to a non-negative integer, else its default.
std::int64_t knob_value(const Knob& knob);

}  // namespace troupe::comm
