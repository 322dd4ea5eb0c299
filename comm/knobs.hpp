#pragma once
// Every environment knob of comm/, declared here in one line with its default, so the set of
// things a user can turn is read in one place (docs/environment.md lists them with every other
// variable, docs/comm.md says what they trade). UCX's own variables (UCX_TLS, UCX_RNDV_THRESH,
// ...) pass straight through to UCX.
//
// A knob is unset (its default) or a whole number >= 0; anything else is an error naming the
// knob and its value (compute/environment.hpp), never a silent fall-back to the default.
// Engine::create checks every knob first and fails with that error, so the readers after it
// (knob_value) see only valid values.

#include <array>
#include <cstdint>

#include "compute/expected.hpp"

namespace troupe::comm {

struct Knob {
  const char* name;
  std::int64_t fallback;
};

inline constexpr Knob knob_spin_us{"TROUPE_COMM_SPIN_US", 1000};               // poll this long idle in a transfer
inline constexpr Knob knob_chunk_bytes{"TROUPE_COMM_CHUNK_BYTES", 512 << 10};  // ring/chain message size
inline constexpr Knob knob_window{"TROUPE_COMM_WINDOW", 4};                    // ring receives in flight
inline constexpr Knob knob_mapped_blocks{"TROUPE_COMM_MAPPED_BLOCKS", 4};      // shared-memory blocks lent to neighbours
inline constexpr Knob knob_handshake_s{"TROUPE_COMM_HANDSHAKE_S", 20};         // connect()'s longest wait; 0: none
inline constexpr std::array<Knob, 5> knobs{knob_spin_us, knob_chunk_bytes, knob_window, knob_mapped_blocks,
                                           knob_handshake_s};

// The knob's value from the environment: its default when unset, else the set value when it is a
// whole number >= 0, else "environment variable TROUPE_COMM_WINDOW: expected an integer >= 0, got 'x'".
Expected<std::int64_t> read_knob(const Knob& knob);
// Every knob read; the first one with an invalid value as its error.
Status check_knobs();
// read_knob's value, for readers after Engine::create has checked every knob. An invalid value
// here (the environment changed after the check) fails an internal check naming it.
std::int64_t knob_value(const Knob& knob);

}  // namespace troupe::comm
