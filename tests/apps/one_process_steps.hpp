#pragma once
// A layout's run of tiny against one process's, for the tests of tests/apps/ that pin a parallel
// layout as taking the one-process steps: every step's loss and gradient norm as printed, the
// final parameter norm and validation loss, and the final weights tensor by tensor, within a
// tolerance (fp32's unless the test gives another: bf16's, docs/precision.md).

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/temp_dir.hpp"

namespace troupe::test {

inline constexpr long steps = 20;

struct StepFigures {
  double loss = 0, grad_norm = 0;
};

struct Run {
  std::vector<StepFigures> steps;  // as printed, every step
  double param_norm = 0;           // printed to 9 digits
  double val = 0;                  // the final validation loss, printed to 4 digits
  std::vector<float> weights;      // the final checkpoint's parameters
};

// How far a layout's figures may stray from one process's, relative (a printed figure also within
// half its last digit). The defaults are fp32's.
struct StepTolerance {
  double loss = 1e-5, grad_norm = 1e-5, param_norm = 1e-5, val = 1e-5, weights = 1e-5;
};

// tiny for `run_steps` steps, a line per step and a checkpoint at the end, with the layout's arguments.
inline Run run_tiny(const TempDir& dir, const std::string& name, const std::vector<std::string>& layout,
                    long run_steps = steps) {
  const std::filesystem::path folder = dir.path() / name;
  std::vector<std::string> args = with(with({"train"}, tiny_steps(run_steps)), layout);
  args = with(args, {"--train.log_every", "1", "--checkpoint.dir", folder.string()});
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(180));
  INFO(name << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  Run run;
  const std::regex line("step +[0-9]+/[0-9]+ \\| loss ([0-9.]+) \\| lr [0-9.e+-]+ \\| norm ([0-9.]+)");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it)
    run.steps.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  REQUIRE(run.steps.size() == static_cast<std::size_t>(run_steps));
  run.param_norm = number_after(r.out, "param norm");
  run.val = number_after(r.out, "final val loss");
  run.weights = final_parameters(folder, run_steps);
  return run;
}

// |a - b| within `relative` of b, or within half the last printed digit (`printed`).
inline bool close(double a, double b, double relative, double printed) {
  return std::fabs(a - b) <= std::max(relative * std::fabs(b), printed / 2 * 1.000001);
}

// The largest, over the model's tensors, of |a - b| / |b| as vector norms; its tensor in `where`.
// The key third of each attn.c_attn.bias is left out: its true gradient is 0 (softmax ignores one
// shift of every key), so its values are AdamW's steps on rounding noise, different in any two
// runs that sum in different orders, and they change no output of the model.
inline double worst_tensor(const std::vector<float>& a, const std::vector<float>& b, std::string& where) {
  const troupe::compute::GPTConfig config = troupe::compute::gpt_preset("tiny").value();
  const troupe::compute::ParameterLayout layout(config);
  const std::string key_bias = "attn.c_attn.bias";
  double worst = 0;
  for (const auto& view : layout.views()) {
    const bool has_key_bias = view.name.size() > key_bias.size() &&
                              view.name.compare(view.name.size() - key_bias.size(), key_bias.size(), key_bias) == 0;
    double diff = 0, norm = 0;
    for (std::int64_t i = view.offset; i < view.offset + view.numel(); ++i) {
      if (has_key_bias && (i - view.offset) / config.n_embd == 1) continue;
      const double x = a[static_cast<std::size_t>(i)], y = b[static_cast<std::size_t>(i)];
      diff += (x - y) * (x - y);
      norm += y * y;
    }
    const double rel = std::sqrt(diff / std::max(norm, 1e-300));
    if (rel > worst) {
      worst = rel;
      where = view.name;
    }
  }
  return worst;
}

inline void check_same_steps(const Run& run, const Run& one, const std::string& name,
                             const StepTolerance& tolerance = {}) {
  INFO(name);
  REQUIRE(run.steps.size() == one.steps.size());
  double loss_apart = 0, norm_apart = 0;  // the largest relative differences, printed
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    INFO("step " << s + 1 << ": loss " << run.steps[s].loss << " vs " << one.steps[s].loss << ", gradient norm "
                 << run.steps[s].grad_norm << " vs " << one.steps[s].grad_norm);
    CHECK(close(run.steps[s].loss, one.steps[s].loss, tolerance.loss, 1e-4));
    CHECK(close(run.steps[s].grad_norm, one.steps[s].grad_norm, tolerance.grad_norm, 1e-3));
    loss_apart = std::max(loss_apart, std::fabs(run.steps[s].loss - one.steps[s].loss) / one.steps[s].loss);
    norm_apart =
        std::max(norm_apart, std::fabs(run.steps[s].grad_norm - one.steps[s].grad_norm) / one.steps[s].grad_norm);
  }
  CHECK(std::fabs(run.param_norm - one.param_norm) <= tolerance.param_norm * one.param_norm);
  // The same validation windows, split over the replicas: the same loss.
  INFO("val loss " << run.val << " vs " << one.val);
  CHECK(close(run.val, one.val, tolerance.val, 1e-4));
  std::string where;
  const double worst = worst_tensor(run.weights, one.weights, where);
  std::printf(
      "%s: steps' losses within %.2g and gradient norms within %.2g; param norm %.9g (one process %.9g); "
      "weights within %.3g of one process's (worst: %s)\n",
      name.c_str(), loss_apart, norm_apart, run.param_norm, one.param_norm, worst, where.c_str());
  INFO("worst tensor " << where << ": " << worst);
  CHECK(worst <= tolerance.weights);
}

}  // namespace troupe::test
