#include "comm/tag.hpp"

#include "compute/check.hpp"

namespace troupe::comm {

std::uint64_t tag_encode(const MessageKey& key, int source_rank) {
  TROUPE_CHECK(source_rank >= 0 && source_rank <= max_rank, "rank out of the tag's 18 bits");
  TROUPE_CHECK(key.group <= max_group_id, "group id out of the tag's 12 bits");
  return (std::uint64_t{static_cast<std::uint8_t>(key.kind)} << 62) | (std::uint64_t(source_rank) << 44) |
         (std::uint64_t{key.group} << 32) | (std::uint64_t{key.sequence} << 16) | std::uint64_t{key.index};
}

MessageKey tag_key(std::uint64_t tag) {
  return MessageKey{static_cast<MessageKind>(tag >> 62), static_cast<std::uint16_t>((tag >> 32) & 0xfff),
                    static_cast<std::uint16_t>((tag >> 16) & 0xffff), static_cast<std::uint16_t>(tag & 0xffff)};
}

int tag_source(std::uint64_t tag) { return static_cast<int>((tag >> 44) & 0x3ffff); }

}  // namespace troupe::comm
