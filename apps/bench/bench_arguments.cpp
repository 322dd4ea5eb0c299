#include "apps/bench/bench_arguments.hpp"

#include <vector>

#include "compute/model/gpt_config.hpp"

namespace troupe::apps {

void add_model_option(CLI::App& bench, std::string& model) {
  bench.add_option("--model", model, "model preset")
      ->check(CLI::IsMember(compute::gpt_preset_names()))
      ->capture_default_str();
}

void add_precision_option(CLI::App& bench, compute::Precision& precision, const std::string& help) {
  std::vector<std::string> names;
  for (const compute::Precision p : compute::precisions) names.emplace_back(compute::precision_name(p));
  bench
      .add_option_function<std::string>(
          "--precision",
          [&precision](const std::string& name) {
            for (const compute::Precision p : compute::precisions)
              if (compute::precision_name(p) == name) precision = p;
          },
          help)
      ->check(CLI::IsMember(names))
      ->default_str(std::string(compute::precision_name(precision)));
}

void add_rank_batch_option(CLI::App& bench, int& batch) {
  bench.add_option("--batch", batch, "micro-batch per rank")->check(CLI::Range(1, 4096))->capture_default_str();
}

void add_iteration_options(CLI::App& bench, int& steps, const std::string& iteration, int& warmup) {
  bench.add_option("--steps", steps, "measured iterations (" + iteration + ")")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bench.add_option("--warmup", warmup, "unmeasured iterations first")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
}

}  // namespace troupe::apps
