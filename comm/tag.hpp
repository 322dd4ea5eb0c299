#pragma once
// The UCX tag of every message Troupe sends: a wire protocol, pinned by the test "tag layout is
// the documented wire format" (tests/comm/test_tag.cpp) and described in docs/comm.md.
//
// UCX matches tags worker-wide, not per endpoint, so the sender's rank is part of the tag: a
// receive posted for rank 3 must never take rank 5's message. The rest of the tag names the
// operation (kind, group, sequence) and the message inside it (index), so that independent
// operations never match each other. Every receive matches all 64 bits.
//
//   63 62 61            44 43        32 31          16 15           0
//  +-----+----------------+------------+--------------+--------------+
//  |kind |  source rank   |  group id  |   sequence   |    index     |
//  | (2) |      (18)      |    (12)    |     (16)     |     (16)     |
//  +-----+----------------+------------+--------------+--------------+

#include <cstdint>

namespace troupe::comm {

// handshake: the empty message connect() sends each peer (comm/engine.hpp); every engine keeps
// a receive posted for it that matches the kind bits alone.
enum class MessageKind : std::uint8_t { point_to_point = 0, collective = 1, handshake = 2 };

// Everything in a tag but the source rank, which the engine fills in (its own rank on a send,
// the peer's on a receive).
struct MessageKey {
  MessageKind kind = MessageKind::point_to_point;
  std::uint16_t group = 0;     // < max_group_id + 1
  std::uint16_t sequence = 0;  // operation number within the group, wraps
  std::uint16_t index = 0;     // message number within the operation

  bool operator==(const MessageKey&) const = default;
};

inline constexpr std::uint64_t tag_kind_bits = std::uint64_t{3} << 62;
inline constexpr int max_rank = (1 << 18) - 1;
inline constexpr std::uint16_t max_group_id = (1 << 12) - 1;
inline constexpr std::uint32_t max_messages_per_operation = 1u << 16;

std::uint64_t tag_encode(const MessageKey& key, int source_rank);
MessageKey tag_key(std::uint64_t tag);
int tag_source(std::uint64_t tag);

}  // namespace troupe::comm
