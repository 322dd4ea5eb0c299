#pragma once
// What a drill's verdict says about the moment its kill landed, for tests that check what follows
// only where that moment allows it.

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

namespace troupe::test {

// A kill mid-step can leave one stage's survivors a step behind the others' (the lost rank's partner
// — another replica, or another context shard of its stage — waited for it in the step's gradient
// sum while later stages completed the step): no replica then holds that stage at the newest step,
// and the in-place recovery rolls every rank back to the newest checkpoint instead, saying why.
// Returns whether a replica held every rank's newest state.
inline bool replica_holds_newest_step(const std::string& out) {
  if (out.find("which others completed") == std::string::npos) return true;
  std::printf("a stage's survivors stood a step behind the others': rolled back to the newest checkpoint\n");
  CHECK_THAT(out, Catch::Contains("in place by rollback to checkpoint step") &&
                      !Catch::Contains("restarting every node"));
  return false;
}

// A SIGKILL that lands while the killed process writes a message into a survivor's shared-memory
// FIFO (UCX's sysv and posix transports reserve an element, write it, then mark it written) leaves
// that element unmarked for good: the survivor reads nothing over shared memory after it, so its
// replacement's handshake times out (TROUPE_COMM_HANDSHAKE_S) and the job restarts every node from
// the survivors' rescue snapshot or the newest checkpoint instead (docs/troubleshooting.md). About
// one kill in a hundred on 2 busy cores, more after a SIGSTOP (drill hang), which can stop a sender
// mid-write. Returns whether the recovery met that; it must still end with the undisturbed weights.
inline bool kill_stalled_a_survivor(const std::string& out) {
  if (out.find("also failed (worker_exception)") == std::string::npos ||
      out.find("did not take the handshake within") == std::string::npos)
    return false;
  std::printf("the kill stalled a survivor's shared-memory FIFO: every node restarted from the newest checkpoint\n");
  CHECK_THAT(out, Catch::Contains("verdict: PASS") && Catch::Contains("\n  recovery: restarting every node from the "));
  return true;
}

}  // namespace troupe::test
