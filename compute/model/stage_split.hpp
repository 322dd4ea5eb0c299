#pragma once
// Which GPT layers each pipeline stage runs. A stage holds a contiguous run of blocks
// [first_layer, last_layer); the first stage also holds wte and wpe, the last ln_f and (unless it
// is also the first) its own copy of the tied wte for the lm head (see gpt_stage.hpp).
//
// Balanced split: a stage is weighed by the parameters it owns, embeddings included, which is
// what it stores four times over (parameters, gradients, AdamW's m and v), so the split balances
// memory, as DeepSpeed's partition_method="parameters" does. For the last stage this also tracks
// compute: its wte copy is the lm head, whose matmul costs what a block of the same size would.
// The first stage's wte costs memory but little compute (a row gather), so with a large vocabulary
// the first stage gets fewer layers than compute alone would give it (gpt2 on 4 stages: 1, 5, 5, 1
// blocks). The split minimises the largest stage; among splits that do, it minimises the sum of
// squared stage sizes so the other stages are as even as possible too; remaining ties give the
// later stages the extra layers, since under 1F1B they stash fewer micro-batches.
//
// Interleaved split (interleaved 1F1B): p·v chunks ("virtual stages") of equal layer count; chunk
// k = j·p + s is stage s's j-th chunk, so each stage holds v chunks spread over the depth, as in
// Megatron. Layer counts must divide evenly: the schedule's timing assumes equal chunks.

#include <cstdint>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::compute {

// How a pipeline's layers go to its stages (pipeline.split): balanced by parameters, or by the
// stages' declared speeds (split_layers_by_speed).
enum class SplitMethod { balanced, speed };
inline constexpr SplitMethod split_methods[] = {SplitMethod::balanced, SplitMethod::speed};
inline std::string_view split_method_name(SplitMethod method) {
  return method == SplitMethod::balanced ? "balanced" : "speed";
}

struct StageLayers {
  int first_layer = 0;  // blocks [first_layer, last_layer)
  int last_layer = 0;
  std::int64_t params = 0;  // what a GPTStage over this range owns (stage_parameter_count)

  int layers() const { return last_layer - first_layer; }
};

// Elements a GPTStage over blocks [first_layer, last_layer) owns: its slice of the global layout
// plus, on a last stage that is not the first, the wte copy.
std::int64_t stage_parameter_count(const GPTConfig& config, int first_layer, int last_layer);

// `stages` contiguous runs covering all n_layer blocks, in pipeline order. Errors for
// stages < 1 and stages > n_layer (every stage needs at least one block).
Expected<std::vector<StageLayers>> split_layers(const GPTConfig& config, int stages);

// Speed split: stage s runs `speeds[s]` times as fast as a stage of speed 1 (a declared or
// measured relative speed), and the blocks go where every stage's time — the model FLOPs of its
// blocks and, on the last, the lm head (flops.hpp), over its speed — is even: the same search over
// that cost. A stage twice as fast gets about twice the blocks. Memory is not balanced.
// Compute per token, forward and backward, of a stage over blocks [first_layer, last_layer).
double stage_compute_per_token(const GPTConfig& config, int seq_len, int first_layer, int last_layer);
// One run per entry of `speeds`, in pipeline order. Errors as split_layers, and for a speed that
// is not a positive number.
Expected<std::vector<StageLayers>> split_layers_by_speed(const GPTConfig& config, int seq_len,
                                                         const std::vector<double>& speeds);

// stages·virtual_stages chunks of n_layer / (stages·virtual_stages) blocks each, in depth order
// (chunk k is run by stage k % stages). Errors when n_layer is not divisible by stages·virtual_stages.
Expected<std::vector<StageLayers>> split_layers_interleaved(const GPTConfig& config, int stages, int virtual_stages);

// The split a pipeline of `stages` stages with `virtual_stages` chunks each runs: interleaved when
// virtual_stages > 1, by speed when `speeds` is given (one a stage; sequences of seq_len tokens),
// else balanced. The one place that chooses. Errors for speeds with interleaving, or of another
// count than the stages.
Expected<std::vector<StageLayers>> split_for_pipeline(const GPTConfig& config, int stages, int virtual_stages,
                                                      const std::vector<double>& speeds = {}, int seq_len = 0);

}  // namespace troupe::compute
