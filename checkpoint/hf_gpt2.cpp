#include "checkpoint/hf_gpt2.hpp"

#include <string>

#include "compute/check.hpp"

namespace troupe::checkpoint {
namespace {

// Every linear weight of a block: attention's, the MLP's, and with experts each expert's and the
// shared expert's (the router's stays nn.Linear's (out, in)).
bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix : {".c_attn.weight", ".c_proj.weight", ".c_fc.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

std::vector<float> transposed(std::span<const float> values, std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
  return out;
}

}  // namespace

compute::Shape hf_shape(const compute::ParameterView& view, const compute::GPTConfig& model) {
  if (view.name == "wte.weight") return {model.vocab_size, model.n_embd};
  if (is_conv1d_weight(view.name)) return {view.shape[1], view.shape[0]};
  return view.shape;
}

std::vector<float> to_hf(const compute::ParameterView& view, const compute::GPTConfig& model,
                         std::span<const float> values) {
  TROUPE_CHECK(static_cast<std::int64_t>(values.size()) == view.numel(), view.name);
  if (is_conv1d_weight(view.name)) return transposed(values, view.shape[0], view.shape[1]);
  const auto kept = static_cast<std::size_t>(compute::shape_numel(hf_shape(view, model)));
  return {values.begin(), values.begin() + static_cast<std::ptrdiff_t>(kept)};
}

std::vector<float> from_hf(const compute::ParameterView& view, const compute::GPTConfig& model,
                           std::span<const float> values) {
  const compute::Shape shape = hf_shape(view, model);
  TROUPE_CHECK(static_cast<std::int64_t>(values.size()) == compute::shape_numel(shape), view.name);
  if (is_conv1d_weight(view.name)) return transposed(values, shape[0], shape[1]);
  std::vector<float> out(values.begin(), values.end());
  out.resize(static_cast<std::size_t>(view.numel()), 0.0f);
  return out;
}

nlohmann::json hf_config(const compute::GPTConfig& model) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_layer", model.n_layer},
          {"n_embd", model.n_embd},
          {"n_head", model.n_head},
          {"n_positions", model.block_size},
          {"n_ctx", model.block_size},
          {"vocab_size", model.vocab_size},
          {"n_inner", nullptr},
          {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", true},
          {"scale_attn_weights", true},
          {"scale_attn_by_inverse_layer_idx", false},
          {"resid_pdrop", 0.0},
          {"embd_pdrop", 0.0},
          {"attn_pdrop", 0.0},
          {"torch_dtype", "float32"}};
}

}  // namespace troupe::checkpoint
