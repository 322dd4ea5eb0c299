#pragma once
// GPT-2 architecture hyper-parameters and the built-in presets.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute {

struct GPTConfig {
  int n_layer = 4;
  int n_embd = 128;        // C
  int n_head = 4;          // NH
  int block_size = 128;    // maximum sequence length T
  int vocab_size = 256;    // V
  int padded_vocab_size = 256;  // Vp: V rounded up to a multiple of 128 once V > 256 (as llm.c)
  // Mixture of experts (compute/moe/moe_layer.hpp): E experts, MLPs of hidden width expert_width
  // (0: a dense MLP's 4C; narrower experts, more of them routed a token, are the fine-grained
  // experts of DeepSeekMoE and Qwen3), each token routed to top_k of them, in every moe_every-th
  // block (blocks l with (l + 1) % moe_every == 0; the rest dense), with shared_experts (0 or 1)
  // always-on expert of the same shape beside them. 0 experts: a dense model.
  int experts = 0;
  int top_k = 0;
  int moe_every = 1;
  int shared_experts = 0;
  int expert_width = 0;

  // H of one expert: expert_width, or 4C where it is 0.
  std::int64_t expert_hidden() const { return expert_width > 0 ? expert_width : 4 * std::int64_t{n_embd}; }
  // An expert's parameters, c_fc (H·C + H) and c_proj (C·H + C); on one of `tensor_shards` T its
  // slice, c_proj's bias whole.
  double expert_parameters(int tensor_shards = 1) const {
    const double C = n_embd, H = double(expert_hidden());
    return (2 * C * H + H) / tensor_shards + C;
  }

  bool is_moe_layer(int layer) const { return experts > 0 && (layer + 1) % moe_every == 0; }
  // The MoE blocks among [first, last), and in the whole model.
  int moe_layers_in(int first, int last) const { return experts > 0 ? last / moe_every - first / moe_every : 0; }
  int moe_layers() const { return moe_layers_in(0, n_layer); }
  // Parameters an MoE block holds beyond a dense one's: the router (E·C) and E + shared experts in
  // place of the dense MLP; on a rank of `expert_shards` EP, E/EP + shared experts (it holds its
  // experts alone); on one of `tensor_shards` T, each MLP's slice (its output bias whole, as the
  // router). In double, as the memory estimate counts.
  double moe_block_extra_parameters(int expert_shards = 1, int tensor_shards = 1) const {
    const double C = n_embd;
    return experts * C + (experts / expert_shards + shared_experts) * expert_parameters(tensor_shards) -
           ((8 * C * C + 4 * C) / tensor_shards + C);
  }
};

// A preset by name (gpt_preset_names(): nano, tiny, small, moe-tiny, moe-small, the GPT-2 and GPT-3
// families); nullopt for
// any other name.
std::optional<GPTConfig> gpt_preset(const std::string& name);
std::vector<std::string> gpt_preset_names();
// Vp for a vocabulary of V tokens.
int padded_vocab(int vocab_size);
// Checks the relations between fields; the error names the offending keys and values.
Status validate(const GPTConfig& config);

}  // namespace troupe::compute
