#pragma once
// Weights in from the Python world: a Hugging Face GPT-2 folder as save_pretrained writes it, or
// as the Hub serves it — config.json, and model.safetensors or shards listed by
// model.safetensors.index.json; tensors in F32, BF16 or F16, named with or without the
// "transformer." prefix — read into Troupe's flat parameter order (hf_gpt2.hpp says how), and
// written as a Troupe checkpoint that any grid resumes from.
//
// What Troupe does not run is refused in one line naming it, never approximated: a model_type other
// than gpt2, an activation other than GELU's tanh form, rotary positions, an untied lm head, a
// LayerNorm epsilon other than 1e-5, an MLP width other than 4 x n_embd, attention scaled otherwise,
// a missing or unknown tensor, a shape that does not follow config.json.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"

namespace troupe::checkpoint {

struct HfGpt2 {
  compute::GPTConfig model;   // padded_vocab_size = compute::padded_vocab(vocab_size)
  std::vector<float> params;  // Troupe's flat order (compute::ParameterLayout of `model`)
};

// config.json alone: the model it describes, or why Troupe does not run it. Errors start with
// "Hugging Face folder DIR: ".
Expected<compute::GPTConfig> read_hf_gpt2_config(const std::filesystem::path& dir);
// config.json and every weight.
Expected<HfGpt2> read_hf_gpt2(const std::filesystem::path& dir);

// Writes `imported` as checkpoint step 0 of `dir` (created; it must hold no checkpoint yet): its
// parameters, AdamW moments at zero (an optimizer that has taken no step), one writer, data seed 0
// (a step-0 checkpoint has consumed no data, so a run of any train.seed may start from it). A run
// with checkpoint.resume on `dir` starts from these weights on any grid.
// Returns the step folder.
Expected<std::filesystem::path> write_initial_checkpoint(const HfGpt2& imported, const std::filesystem::path& dir,
                                                         const nlohmann::json& job_config);

}  // namespace troupe::checkpoint
