#pragma once
// Weights out to the Python world: one safetensors file laid out as Hugging Face's GPT-2
// model.safetensors (names without the "transformer." prefix; metadata format "pt", which
// transformers requires), loadable by GPT2LMHeadModel.from_pretrained. Three differences from
// our flat order: the four linear weights of each layer (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj) are stored (in, out) as HF's Conv1D keeps them, not (out, in); wte.weight drops
// its padded rows (vocab_size rows, not padded_vocab_size); only `param` values go out.

#include <filesystem>

#include "checkpoint/loader.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::checkpoint {

// Refuses a checkpoint written for another model (check_model). Writes `path` via a temporary
// file and a rename, so a failed export leaves no partial file under the name.
Status export_gpt2_safetensors(const LoadedCheckpoint& checkpoint, const compute::GPTConfig& model,
                               const std::filesystem::path& path);

}  // namespace troupe::checkpoint
