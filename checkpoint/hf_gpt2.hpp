#pragma once
// How a Hugging Face GPT-2 folder stores Troupe's parameters, both ways (the export and the
// import use these, so the mapping is written once). Names are Troupe's (compute::ParameterLayout),
// which are HF's without the "transformer." prefix. Two differences in the values: the four
// linear weights of each layer (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are HF Conv1D
// weights, stored (in, out) where Troupe keeps (out, in); wte.weight has vocab_size rows in HF,
// padded_vocab_size in Troupe (the padded rows are zero when imported, dropped when exported).
// config.json holds the dimensions under GPT-2's names (n_layer, n_embd, n_head, n_positions,
// vocab_size).

#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/tensor.hpp"

namespace troupe::checkpoint {

// The shape HF stores `view` in.
compute::Shape hf_shape(const compute::ParameterView& view, const compute::GPTConfig& model);
// `view`'s values in Troupe's order (view.numel() floats) as HF stores them (hf_shape).
std::vector<float> to_hf(const compute::ParameterView& view, const compute::GPTConfig& model,
                         std::span<const float> values);
// HF's values (shape_numel(hf_shape) floats) in Troupe's order, padded rows zero.
std::vector<float> from_hf(const compute::ParameterView& view, const compute::GPTConfig& model,
                           std::span<const float> values);
// config.json for GPT2LMHeadModel: the dimensions and the options Troupe runs (GELU tanh form,
// LayerNorm epsilon 1e-5, tied head, no dropout).
nlohmann::json hf_config(const compute::GPTConfig& model);

}  // namespace troupe::checkpoint
