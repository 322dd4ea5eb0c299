#include "comm/sysv_segments.hpp"

#include <sys/ipc.h>
#include <sys/shm.h>

#include <cstdlib>

namespace troupe::comm {

bool sim_transports_are_troupes() { return std::getenv("UCX_TLS") == nullptr; }

std::optional<SysvSegments> sysv_segments() {
  shminfo limits{};
  if (shmctl(0, IPC_INFO, reinterpret_cast<shmid_ds*>(&limits)) < 0) return std::nullopt;
  shm_info usage{};
  if (shmctl(0, SHM_INFO, reinterpret_cast<shmid_ds*>(&usage)) < 0) return std::nullopt;
  return SysvSegments{usage.used_ids, static_cast<int>(limits.shmmni)};
}

}  // namespace troupe::comm
