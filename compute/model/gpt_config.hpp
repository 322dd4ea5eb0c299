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
};

// A preset by name (gpt_preset_names(): tiny, small, the GPT-2 and GPT-3 families); nullopt for
// any other name.
std::optional<GPTConfig> gpt_preset(const std::string& name);
std::vector<std::string> gpt_preset_names();
// Vp for a vocabulary of V tokens.
int padded_vocab(int vocab_size);
// Checks the relations between fields; the error names the offending keys and values.
Status validate(const GPTConfig& config);

}  // namespace troupe::compute
