#pragma once
// Model FLOPs of training, the numerator of MFU: 2 FLOPs per multiply-add of every matmul the
// model needs, forward and backward (the backward twice the forward: 6 per weight and token). Per
// token of a sequence of T, with C channels and a vocabulary of V:
//
//   a block's weights     6 · 12C²         qkv 3C², attention projection C², MLP 4C² and 4C²
//   a block's attention   6 · C · (T + 1)  scores and weighted sum, 2 · 2C per key attended; causal:
//                                          token t of 0..T-1 attends to t + 1 keys, (T + 1)/2 a token
//   the lm head           6 · V · C        the tied wte as a matmul, over V (not its padding)
//   an MoE block, beyond  6 · (E·C + (k + shared - 1) · 8C²)   the router, and the k experts a
//     a dense one                          token reaches (with the shared one) in place of one MLP
//
// Not counted: lookups (wte in, wpe), LayerNorms, biases, GELU, softmax, the loss, the padded
// vocabulary's columns and recomputation: MFU credits the model's work, not the implementation's,
// so it stays at most 1 against the peak of the matmuls that do it. (PaLM's estimate, 6N + 12·L·C·T
// as nanoGPT uses it, also counts the attention's masked half, which the kernels skip.)

#include "compute/model/gpt_config.hpp"

namespace troupe::compute {

struct ModelFlops {
  int n_layer = 0;
  double block_weights = 0;    // per token, forward and backward: one block's weight matmuls
  double block_attention = 0;  // per token, forward and backward: one block's causal attention
  double head = 0;             // per token, forward and backward: the lm head
  double moe_extra = 0;        // per token, forward and backward: every MoE block's beyond a dense one's
  double block() const { return block_weights + block_attention; }
  double total() const { return n_layer * block() + moe_extra + head; }
};

ModelFlops model_flops(const GPTConfig& config, int seq_len);

// model_flops(config, seq_len).total()
double model_flops_per_token(const GPTConfig& config, int seq_len);

}  // namespace troupe::compute
