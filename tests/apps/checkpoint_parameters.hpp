#pragma once
// What a run left in its checkpoint folder, for tests of tests/apps/ that compare the weights of
// runs bit for bit.

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
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

// Every value of every kind (parameters, both AdamW moments, compression state) in the checkpoint at `folder` (one
// step-NNNNNNN folder), in the flat order.
inline std::map<std::string, std::vector<float>> checkpoint_values(const std::filesystem::path& folder) {
  auto loaded = checkpoint::open_checkpoint(folder);
  REQUIRE(loaded.ok());
  std::map<std::string, std::vector<float>> values;
  // Parameters and moments always; a compressed run's factors and residuals (of up to 2 ranks) too.
  for (const char* kind :
       {"param", "adam_m", "adam_v", "powersgd_q", "powersgd_q_tp2", "powersgd_residual_dp0",
        "powersgd_residual_dp1"}) {
    const bool always = std::string(kind).rfind("adam", 0) == 0 || std::string(kind) == "param";
    if (!always && !loaded->holds(kind)) continue;
    auto all = loaded->read_all(kind);
    REQUIRE(all.ok());
    values[kind] = std::move(*all);
  }
  return values;
}

}  // namespace troupe::test
