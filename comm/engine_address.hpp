#pragma once
// What one engine hands another to connect (Engine::address()): the UCX worker's address and,
// when the engine lends shared memory, the packed UCX key of its block region with the region's
// base and size, so a peer on the same host can map the region (ucp_rkey_ptr). Little-endian:
//
//   u32 worker_bytes | worker address | u32 key_bytes | packed key | u64 base | u64 region_bytes
//
// key_bytes = 0 (and base = region_bytes = 0) when the engine lends no region. Pinned by the
// test "the engine address is the documented wire format" (tests/comm/test_engine.cpp).

#include <cstdint>
#include <span>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::comm {

struct EngineAddress {
  std::vector<std::uint8_t> worker;
  std::vector<std::uint8_t> region_key;
  std::uint64_t region_base = 0;
  std::uint64_t region_bytes = 0;
};

std::vector<std::uint8_t> encode_address(const EngineAddress& address);
Expected<EngineAddress> decode_address(std::span<const std::uint8_t> bytes);

}  // namespace troupe::comm
