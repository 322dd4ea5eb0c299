#pragma once
// A GPT stage's context shard (context parallelism): the stage runs on its rank's rows of every
// sequence (compute/context/context_split.hpp: chunks r and 2C - 1 - r of 2C) and only attention
// looks past them, through the context group (compute/context/context_attention.hpp). The rest
// runs on the rank's rows as they are: LayerNorm, MLP, the lm head and the loss (the mean over the
// rank's rows, which the caller weighs as one of C equal parts); the embedding adds the position
// rows of the rank's global positions. Parameters are whole on every rank of the group; their
// gradients are each rank's share and are summed over the group by the caller.
//
// Attention state lives here, one ContextAttention per layer and activation slot (a pipeline
// stage holds several micro-batches between their forward and backward); the embedding's position rows are
// gathered into (T / C, C) before the lookup and their gradient scattered back after it. Under
// tensor shards each shard's attention is its heads (the group is the context ranks of the same
// tensor shard) and the position rows are the replicated wpe's.

#include <memory>
#include <vector>

#include "compute/backend.hpp"
#include "compute/context/context_attention.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

struct ContextShardGroup {
  context::ContextMethod method = context::ContextMethod::ring;
  context::ContextSplit split;  // of the sequence length the stage trains on
  context::ContextExchange* exchange = nullptr;

  bool sharded() const { return exchange != nullptr && split.shards > 1; }
  int rank() const { return exchange ? exchange->rank() : 0; }
};

class ContextLayers {
 public:
  // For a stage of `layers` blocks whose attention has `heads` heads over `channels` (a tensor
  // shard's); on the CPU only.
  ContextLayers(ContextShardGroup group, int layers, int heads, int channels, DType dtype);
  ~ContextLayers();

  const ContextShardGroup& group() const { return group_; }

  // The activation slot whose attention the next calls run and keep (GPTStage's slot; 0 at first).
  void use_slot(int slot) { slot_ = slot; }
  // out (B, T / C, channels) from qkv (B, T / C, 3 channels) of `layer` (0-based in the stage).
  void attention_forward(int layer, Tensor& out, const Tensor& qkv);
  // dqkv written for the layer's last forward in the slot.
  void attention_backward(int layer, Tensor& dqkv, const Tensor& dout, const Tensor& qkv);

  // The embedding of the rank's `rows` rows reads position rows [0, rows) of positions(wpe): wpe's
  // rows at the rank's global positions, (rows, n_embd).
  Tensor positions(Backend& backend, const Tensor& wpe, std::int64_t rows);
  // Its backward writes the position rows' gradient into position_grads (zeroed, (rows, n_embd));
  // add_position_grads then adds it to dwpe's rows at the global positions.
  Tensor position_grads(Backend& backend, const Tensor& dwpe, std::int64_t rows);
  void add_position_grads(Backend& backend, Tensor& dwpe);

 private:
  struct Attention;
  Attention& layer(int index, int B);
  // Rows of wpe (or dwpe) at the rank's global positions of local half `half`, (T / 2C, n_embd).
  Tensor positions_of(const Tensor& table, int half) const;

  ContextShardGroup group_;
  int layer_count_, heads_, channels_;
  int slot_ = 0;
  DType dtype_;
  std::vector<std::unique_ptr<Attention>> layers_;  // slot s's layer l at s · layer_count_ + l
  Tensor local_wpe_, local_dwpe_;
};

}  // namespace troupe::compute
