#pragma once
// What a run left in its checkpoint folder, for tests of tests/apps/ that compare the weights of
// runs bit for bit.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::test {

// The parameters in the checkpoint of step `steps` under `dir`, in the flat order.
inline std::vector<float> final_parameters(const std::filesystem::path& dir, long steps) {
  auto loaded = checkpoint::open_checkpoint(checkpoint::step_dir(dir, steps));
  REQUIRE(loaded.ok());
  auto params = loaded->read_all("param");
  REQUIRE(params.ok());
  return std::move(*params);
}

// Runs `troupe` with `args` and --checkpoint.dir <dir>/<name>, which must succeed, and returns the
// parameters of its checkpoint after `steps` steps.
inline std::vector<float> parameters_after_run(const TempDir& dir, std::vector<std::string> args,
                                               const std::string& name, long steps) {
  const std::filesystem::path out = dir.path() / name;
  args.insert(args.end(), {"--checkpoint.dir", out.string()});
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
  INFO(name << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return final_parameters(out, steps);
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

// Tensor by tensor (in `layout`'s views), how two runs' flat parameters compare.
struct ParameterComparison {
  int tensors = 0;
  int bitwise = 0;
  double largest = 0;  // largest absolute difference of any element
  std::string largest_in;
};

inline ParameterComparison compare_parameters(const troupe::compute::ParameterLayout& layout,
                                              const std::vector<float>& a, const std::vector<float>& b) {
  ParameterComparison c;
  for (const auto& view : layout.views()) {
    ++c.tensors;
    const float* x = a.data() + view.offset;
    const float* y = b.data() + view.offset;
    if (std::memcmp(x, y, static_cast<std::size_t>(view.numel()) * sizeof(float)) == 0) {
      ++c.bitwise;
      continue;
    }
    for (std::int64_t i = 0; i < view.numel(); ++i) {
      const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
      if (d > c.largest) {
        c.largest = d;
        c.largest_in = view.name;
      }
    }
  }
  return c;
}

}  // namespace troupe::test
