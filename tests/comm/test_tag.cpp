// The tag layout is a wire protocol (docs/comm.md): these values must not change silently.

#include <catch2/catch.hpp>

#include "comm/tag.hpp"

using namespace troupe::comm;

TEST_CASE("tag layout is the documented wire format", "[tag]") {
  // kind 1 | source 0x2beef | group 0xabc | sequence 0x1234 | index 0x5678
  const MessageKey key{MessageKind::collective, 0xabc, 0x1234, 0x5678};
  CHECK(tag_encode(key, 0x2beef) == 0x6beefabc12345678ull);
  CHECK(tag_encode(MessageKey{MessageKind::point_to_point, 0, 0, 0}, 0) == 0);
  CHECK(tag_encode(MessageKey{MessageKind::point_to_point, 0, 0, 1}, 1) == (1ull << 44 | 1));
  CHECK(tag_encode(MessageKey{MessageKind::collective, max_group_id, 0xffff, 0xffff}, max_rank) ==
        0x7fffffffffffffffull);
  // kind 2: the engine's handshake, taken by a receive that matches the kind bits alone
  CHECK(tag_encode(MessageKey{MessageKind::handshake}, 3) == (2ull << 62 | 3ull << 44));
  CHECK(tag_kind_bits == 0xc000000000000000ull);
  CHECK(max_rank == 262143);
  CHECK(max_group_id == 4095);
  CHECK(max_messages_per_operation == 65536);
}

TEST_CASE("a tag decodes to the key and source it was made of", "[tag]") {
  const MessageKey key{MessageKind::collective, 7, 65535, 3};
  const std::uint64_t tag = tag_encode(key, 12345);
  CHECK(tag_key(tag) == key);
  CHECK(tag_source(tag) == 12345);
  CHECK(tag_encode(key, 1) != tag_encode(key, 2));
  CHECK(tag_encode(MessageKey{MessageKind::point_to_point, 7, 65535, 3}, 1) != tag_encode(key, 1));
}
