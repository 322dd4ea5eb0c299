#pragma once
// System V shared memory segments: how many this host (its IPC namespace) allows and has in use.
// A simulated rank's engine opens UCX's sysv transport only (comm/engine_progress.cpp), whose
// worker takes a segment for its receive FIFO and one for its first pool of receive descriptors;
// a thousand ranks on one host so take 2,048 of the kernel's 4,096 by default (kernel.shmmni). At
// the limit, UCX can create no worker and says only "Out of memory" (docs/scale.md, "Running many
// ranks").

#include <optional>

namespace troupe::comm {

// Whether a simulated rank's engine leaves UCX's transports to Troupe (UCX_TLS unset), which then
// gives it sysv alone among the shared-memory ones; where the user chose them, what it takes of
// System V segments is theirs to know.
bool sim_transports_are_troupes();

// Segments a simulated rank's UCX worker takes, measured (`ipcs -m`: 2,048 at 1,024 ranks, 64 at
// 32 of gpt3-13b) with UCX's default of 512 descriptors a pool.
inline constexpr int sysv_segments_per_sim_rank = 2;

struct SysvSegments {
  int in_use = 0;
  int limit = 0;  // kernel.shmmni
};

// This host's counts (shmctl IPC_INFO and SHM_INFO); none where the kernel does not say.
std::optional<SysvSegments> sysv_segments();

}  // namespace troupe::comm
