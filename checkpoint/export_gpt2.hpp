#pragma once
// Weights out to the Python world: one safetensors file laid out as Hugging Face's GPT-2
// model.safetensors (names without the "transformer." prefix; metadata format "pt", which
// transformers requires), loadable by GPT2LMHeadModel.from_pretrained. Three differences from
// our flat order: the four linear weights of each layer (attn.c_attn, attn.c_proj, mlp.c_fc,
// mlp.c_proj) are stored (in, out) as HF's Conv1D keeps them, not (out, in); wte.weight drops
// its padded rows (vocab_size rows, not padded_vocab_size); only `param` values go out.
//
// A model with experts (docs/moe.md) goes out in the same form, each MoE block's stacked expert
// tensors split one per expert: h.<l>.mlp.experts.<e>.c_fc.weight (C, 4C), .c_fc.bias (4C),
// .c_proj.weight (4C, C), .c_proj.bias (C), the weights Conv1D's (in, out) as a dense block's MLP;
// h.<l>.mlp.router.weight (E, C) as Troupe keeps it (nn.Linear's (out, in)); the shared expert's
// h.<l>.mlp.shared_expert.* as a dense MLP's. The metadata adds experts, top_k, moe_every and
// shared_experts. No Hugging Face model class loads it: the names are documented for a reader
// (docs/formats/checkpoint.md).

#include <filesystem>
#include <vector>

#include "checkpoint/loader.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {

// The tensors the export writes, in order, each with its offset into the flat parameters and its
// shape in Troupe's order: the layout's views, a stacked expert tensor as one view per expert.
std::vector<compute::ParameterView> export_views(const compute::GPTConfig& model);

// Refuses a checkpoint written for another model (check_model). Writes `path` via a temporary
// file and a rename, so a failed export leaves no partial file under the name.
Status export_gpt2_safetensors(const LoadedCheckpoint& checkpoint, const compute::GPTConfig& model,
                               const std::filesystem::path& path);

}  // namespace troupe::checkpoint
