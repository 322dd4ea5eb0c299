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
  // Mixture of experts (compute/moe/moe_layer.hpp): E experts of the MLP's shape, each token routed
  // to top_k of them, in every moe_every-th block (blocks l with (l + 1) % moe_every == 0; the rest
  // dense), with shared_experts (0 or 1) always-on expert beside them. 0 experts: a dense model.
  int experts = 0;
  int top_k = 0;
  int moe_every = 1;
  int shared_experts = 0;

  bool is_moe_layer(int layer) const { return experts > 0 && (layer + 1) % moe_every == 0; }
  // The MoE blocks among [first, last), and in the whole model.
  int moe_layers_in(int first, int last) const { return experts > 0 ? last / moe_every - first / moe_every : 0; }
  int moe_layers() const { return moe_layers_in(0, n_layer); }
  // Parameters an MoE block holds beyond a dense one's: the router (E·C) and E + shared - 1 more
  // MLPs of 8C² + 5C each; on a rank of `expert_shards` EP, E/EP + shared - 1 (it holds its experts
  // alone); on one of `tensor_shards` T, each MLP's slice, (8C² + 4C)/T + C (its output bias
  // whole, as the router). In double, as the memory estimate counts.
  double moe_block_extra_parameters(int expert_shards = 1, int tensor_shards = 1) const {
    const double C = n_embd;
    return experts * C + (experts / expert_shards + shared_experts - 1) * ((8 * C * C + 4 * C) / tensor_shards + C);
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
