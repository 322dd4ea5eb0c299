#pragma once
// ZeRO's stages (Rajbhandari et al.): what each one shards over a data-parallel group. A job's
// stage comes from train.zero once, in apps/config, and travels as this enum; code asks what the
// stage shards, never which number it is. Each stage shards what the one before it does and more:
//   none:             every rank holds and updates everything.
//   optimizer_state:  AdamW's moments; each rank updates its shard of the parameters, then the
//                     group all-gathers them.
//   gradients:        and the summed gradients: a reduce-scatter leaves each rank its shard.
//   parameters:       and the parameters: the model keeps its shard and gathers each block for
//                     its use (train/sharded_parameters.hpp); nothing to gather after the step.
// zero_step.hpp is what a step does under each.

#include <cstdint>
#include <string>

#include "compute/expected.hpp"

namespace troupe::compute {

enum class ZeroStage { none, optimizer_state, gradients, parameters };

// Every stage, in train.zero's order: the layout planner tries each.
inline constexpr ZeroStage zero_stages[] = {ZeroStage::none, ZeroStage::optimizer_state, ZeroStage::gradients,
                                            ZeroStage::parameters};

constexpr bool shards_optimizer_state(ZeroStage stage) { return stage != ZeroStage::none; }
constexpr bool shards_gradients(ZeroStage stage) {
  return stage == ZeroStage::gradients || stage == ZeroStage::parameters;
}
constexpr bool shards_parameters(ZeroStage stage) { return stage == ZeroStage::parameters; }
// A rank updates its shard of parameters that every rank holds whole: the group all-gathers them
// after the step.
constexpr bool gathers_parameters(ZeroStage stage) {
  return shards_optimizer_state(stage) && !shards_parameters(stage);
}

// train.zero's number for the stage: 0 to 3.
constexpr int zero_number(ZeroStage stage) { return static_cast<int>(stage); }
// How messages name the stage, by the setting that chose it: "train.zero 2".
std::string zero_setting(ZeroStage stage);
// The stage train.zero's number names, or what is wrong with it ("must be 0, 1, 2 or 3, got 5").
// For the config parser.
Expected<ZeroStage> parse_zero_stage(std::int64_t number);

}  // namespace troupe::compute
