#pragma once
// A job config resolved as a run resolves it, for the tests of what a resolved job holds: the test
// stops there when the config does not resolve.

#include <catch2/catch.hpp>

#include "apps/config/resolve.hpp"

namespace troupe::test {

inline actors::ResolvedJob resolved(const actors::JobConfig& config) {
  auto job = apps::resolve(config);
  REQUIRE(job.ok());
  return *job;
}

}  // namespace troupe::test
