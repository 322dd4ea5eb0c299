#pragma once
// How a tensor shard (Megatron-LM's tensor parallelism) splits GPT's parameters over T shards.
//
//   column-parallel (output rows split): attn.c_attn (each shard holds its NH/T heads' rows of q,
//     k and v, so its qkv is the (B,T,3C/T) of NH/T heads) and mlp.c_fc (rows [s·4C/T, ...));
//     their biases with them.
//   row-parallel (input columns split): attn.c_proj (C, C/T) and mlp.c_proj (C, 4C/T); each shard's
//     product is a partial sum, summed over the shards; their biases are replicated and added once.
//   an MoE block's MLPs as the dense one's: each stacked expert's c_fc (E, H/T, C) and its bias
//     column-parallel, its c_proj (E, C, H/T) row-parallel, and the shared expert's likewise; the
//     router and the experts' c_proj biases are replicated (moe_layer.hpp).
//   vocabulary-parallel: wte rows [s·Vp/T, (s+1)·Vp/T), for the embedding lookup and the tied lm
//     head alike, so the logits (B,T,Vp/T) and the cross-entropy stay split.
//   replicated: wpe, every LayerNorm, the row-parallel biases, ln_f and the router. Their gradients come out
//     equal on every shard (what reaches them has been summed over the shards already).
//
// The vocabulary is split as the layout pads it (gpt_config.hpp: Vp), so the parameter layout and
// the checkpoint format are the same for every T; the padded columns are excluded from the loss.
// With T = 1 every view is whole and maps to the global layout in one run.
//
// Pure functions of (config, shard): no communication.

#include <cstdint>
#include <functional>
#include <vector>

#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

struct TensorShard {
  int index = 0;  // s
  int count = 1;  // T
};

// T shards split the heads, the MLP width and the padded vocabulary evenly, or the error names
// the numbers that do not divide.
Status check_tensor_shards(const GPTConfig& config, int shards);

// Elements that lie contiguously in a shard's local buffer and in the global layout.
struct GlobalRun {
  std::int64_t local = 0;   // offset into the shard's flat buffer
  std::int64_t global = 0;  // offset into the global ParameterLayout's flat buffer
  std::int64_t count = 0;
};

// A global parameter view as shard `shard` holds it.
struct ShardedView {
  Shape shape;                  // the local shape
  bool replicated = false;      // every shard holds all of it
  std::vector<GlobalRun> runs;  // local offsets from the view's start, in local order
};

ShardedView shard_view(const ParameterView& view, const GPTConfig& config, TensorShard shard);

// The shard group as the model uses it; how the values travel is the caller's business. Each
// call returns once done, with the same values on every shard; every shard makes the same calls
// in the same order.
struct TensorShardGroup {
  TensorShard shard;
  bool sequence_parallel = false;  // the residual stream split along the rows (gpt_stage.hpp)
  std::function<void(Tensor buffer)> all_reduce;  // in place: the sum over the shards
  // `buffer` holds T equal segments, this shard's filled; afterwards every segment is.
  std::function<void(Tensor buffer)> all_gather;
  // In place: afterwards this shard's segment of T equal ones holds that segment's sum.
  std::function<void(Tensor buffer)> reduce_scatter;

  bool split() const { return shard.count > 1; }
};

}  // namespace troupe::compute
