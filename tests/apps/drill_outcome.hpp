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

}  // namespace troupe::test
