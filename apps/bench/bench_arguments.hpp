#pragma once
// The options several benches take alike: each with one name, help text and range wherever it
// appears.

#include <string>

#include <CLI/CLI.hpp>

#include "compute/precision.hpp"

namespace troupe::apps {

// --model: a model preset (compute/model/gpt_config.hpp); its default shown.
void add_model_option(CLI::App& bench, std::string& model);
// --precision: fp32 or bf16 (train.precision, compute/precision.hpp), read as its enum; `help`
// says what it does in this bench.
void add_precision_option(CLI::App& bench, compute::Precision& precision, const std::string& help);
// --batch: the micro-batch each data-parallel rank trains, 1 to 4096.
void add_rank_batch_option(CLI::App& bench, int& batch);
// --steps and --warmup of a bench that measures iterations, each what `iteration` says: `steps`
// measured ones (1 to 100000) after `warmup` unmeasured ones (0 to 100000).
void add_iteration_options(CLI::App& bench, int& steps, const std::string& iteration, int& warmup);

}  // namespace troupe::apps
