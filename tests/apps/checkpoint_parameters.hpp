#pragma once
// What a run left in its checkpoint folder, for tests of tests/apps/ that compare the weights of
// runs bit for bit.

#include <catch2/catch.hpp>

#include <filesystem>
#include <vector>

#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"

namespace troupe::test {

// The parameters in the checkpoint of step `steps` under `dir`, in the flat order.
inline std::vector<float> final_parameters(const std::filesystem::path& dir, long steps) {
  auto loaded = checkpoint::open_checkpoint(checkpoint::step_dir(dir, steps));
  REQUIRE(loaded.ok());
  auto params = loaded->read_all("param");
  REQUIRE(params.ok());
  return std::move(*params);
}

}  // namespace troupe::test
