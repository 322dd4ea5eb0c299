// The region of shared memory an engine lends its neighbours on the host, and theirs mapped here
// (comm/engine.hpp says what a ring does with them).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "comm/engine_state.hpp"
#include "comm/knobs.hpp"
#include "compute/memory_ledger.hpp"

namespace troupe::comm {

bool shared_memory_enabled() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || tls[0] == '^') return true;
  const std::string_view list(tls);
  for (std::string_view name : {"all", "sm", "shm", "posix", "sysv", "mm"}) {
    for (std::size_t at = list.find(name); at != std::string_view::npos; at = list.find(name, at + 1)) {
      const bool starts = at == 0 || list[at - 1] == ',';
      const bool ends = at + name.size() == list.size() || list[at + name.size()] == ',';
      if (starts && ends) return true;
    }
  }
  return false;
}

// Allocates the region lent to neighbours (shared memory, from UCX's allocator) and packs its
// key into `address`. Without shared memory, or when UCX cannot allocate, nothing is lent and
// rings move every chunk as a message.
void Engine::State::lend_region(EngineAddress& address) {
  const auto blocks = knob_value(knob_mapped_blocks);
  const auto block_bytes = std::max<std::int64_t>(knob_value(knob_chunk_bytes), 1);
  if (blocks == 0 || !shared_memory_enabled()) return;
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = static_cast<std::size_t>(blocks * block_bytes);
  params.flags = UCP_MEM_MAP_ALLOCATE;
  if (ucp_mem_map(context, &params, &lent_region) != UCS_OK) {
    lent_region = nullptr;
    return;
  }
  ucp_mem_attr_t attributes{};
  attributes.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  void* key = nullptr;
  std::size_t key_bytes = 0;
  if (ucp_mem_query(lent_region, &attributes) != UCS_OK ||
      ucp_rkey_pack(context, lent_region, &key, &key_bytes) != UCS_OK) {
    ucp_mem_unmap(context, lent_region);
    lent_region = nullptr;
    return;
  }
  const auto* packed = static_cast<const std::uint8_t*>(key);
  address.region_key.assign(packed, packed + key_bytes);
  ucp_rkey_buffer_release(key);
  auto* base = static_cast<std::byte*>(attributes.address);
  std::memset(base, 0, params.length);  // fault the pages in now, not during the first collective
  lent_bytes = params.length;
  compute::memory_ledger().add(compute::MemoryKind::comm_buffers, lent_bytes);
  address.region_base = reinterpret_cast<std::uintptr_t>(base);
  address.region_bytes = params.length;
  arena = std::make_unique<BlockArena>(base, static_cast<std::size_t>(block_bytes), static_cast<std::size_t>(blocks));
}

// Maps `peer`'s lent region when UCX can (a peer on this host reached through shared memory);
// otherwise the peer's chunks come as messages.
void Engine::State::map_region(Peer& peer, const EngineAddress& address) {
  if (peer.rank == rank || address.region_key.empty() || peer.ep == nullptr) return;
  ucp_rkey_h key = nullptr;
  if (ucp_ep_rkey_unpack(peer.ep, address.region_key.data(), &key) != UCS_OK) return;
  void* mapped = nullptr;
  if (ucp_rkey_ptr(key, address.region_base, &mapped) != UCS_OK) {
    ucp_rkey_destroy(key);
    return;
  }
  peer.region_key = key;
  // Its pages count in this process's resident set once the ring touches them.
  compute::memory_ledger().add(compute::MemoryKind::comm_buffers, address.region_bytes);
  peer.region = {static_cast<const std::byte*>(mapped), static_cast<std::size_t>(address.region_bytes)};
}

}  // namespace troupe::comm
