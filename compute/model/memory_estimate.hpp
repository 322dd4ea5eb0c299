#pragma once
// How much memory one rank's model needs while it trains, before any of it is allocated: what a
// GPTStage holds (parameters and gradients, the activation slots of reserve() and the scratch
// they share) plus AdamW's two moments over the same parameters, as a CPU backend allocates
// them (attention keeps one log-sum-exp per query row and head, (B, NH, T)). ZeRO's sharded moments and the
// trainer's small batch buffers are left out: it errs on the side of the whole replica. Under
// train.precision bf16 it adds the CPU backend's copies of the products' operands.
// tests/compute/test_model_memory_estimate.cpp holds it against the bytes actually allocated.

#include <cstddef>
#include <cstdint>

#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/recompute.hpp"

namespace troupe::compute {

// A rank's share of the model: blocks [first_layer, last_layer), `slots` micro-batches of B
// sequences of T tokens in flight, values of `element_bytes` each (4 for f32), keeping what
// `recompute` keeps, as one of `shards` tensor shards (tensor_shard.hpp: the attention, MLP and
// vocabulary widths split, the residual stream and LayerNorms whole).
struct StageFootprint {
  int first_layer = 0, last_layer = 0;
  int B = 1, T = 1, slots = 1;
  std::size_t element_bytes = 4;
  Recompute recompute = Recompute::none;
  int shards = 1;
  // A zero-bubble schedule's slots also keep, from B to W, what each layer's weight gradients need
  // (GPTStage::reserve with keep_for_weights).
  bool keep_for_weights = false;
  // Expert shards (EP): the rank holds an MoE block's E/EP experts (their parameters, gradients
  // and moments), which may run on up to EP·N·min(k, E/EP) rows, every rank's tokens, exchanged
  // through three such buffers (MoEShape::expert_rows).
  int expert_shards = 1;
  // Bytes of an element of the copies a backend's products multiply (Backend::product_operand_bytes:
  // 2 for the CPU's bf16 products with BF16 units, 4 emulated, 0 where products read their operands).
  std::size_t operand_bytes = 0;
  // Bytes of an element of the activations a slot stores other than the LayerNorm statistics and
  // the attention state (Backend::activation_storage_dtype: the LayerNorm outputs, qkv, the
  // attention's output, a dense block's fc output and GELU output, and but for the stage's output
  // and under a full recompute, the residual stream a block keeps; ln_2's output in the
  // parameters' dtype on a stage with MoE blocks): 2 where they are stored in bf16.
  std::size_t stored_activation_bytes = 4;
};

// The elements of the largest first and of the largest second operand among the linear products
// (forward, input gradient, weight gradient) a stage runs on one micro-batch: the buffers a backend
// that copies its operands keeps (GPTStage::reserve hands them to Backend::reserve_product_operands).
struct ProductOperands {
  double first = 0, second = 0;
};
ProductOperands largest_product_operands(const GPTConfig& config, const StageFootprint& stage);

struct MemoryEstimate {
  double parameter_bytes = 0;   // parameters, gradients, AdamW's first and second moments
  double activation_bytes = 0;  // activation slots and shared scratch
  double total() const { return parameter_bytes + activation_bytes; }
};

// In double, so sizes far beyond any machine still give a figure instead of overflowing.
MemoryEstimate estimate_training_memory(const GPTConfig& config, const StageFootprint& stage);

// Error when a tensor or the parameter count of `config` at micro-batch B × T would have more
// elements than a 64-bit count holds, naming the keys; every size product in the model is then
// safe to compute in std::int64_t.
Status check_element_counts(const GPTConfig& config, int B, int T);

}  // namespace troupe::compute
