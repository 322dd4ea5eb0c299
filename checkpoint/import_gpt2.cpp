#include "checkpoint/import_gpt2.hpp"

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "checkpoint/hf_gpt2.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/shard.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Error folder_error(const fs::path& dir, const std::string& problem) {
  return Error{"Hugging Face folder " + dir.string() + ": " + problem};
}

Expected<json> read_json(const fs::path& dir, const std::string& name) {
  std::ifstream in(dir / name);
  if (!in) return folder_error(dir, "no " + name);
  std::stringstream text;
  text << in.rdbuf();
  json parsed = json::parse(text.str(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return folder_error(dir, name + " is not a JSON object");
  return parsed;
}

// A positive integer field of config.json, under its GPT-2 name or the generic alias.
Expected<int> dimension(const fs::path& dir, const json& config, const char* name, const char* alias) {
  const json* value = config.contains(name) ? &config[name] : config.contains(alias) ? &config[alias] : nullptr;
  if (value == nullptr) return folder_error(dir, std::string("config.json has no ") + name);
  if (!value->is_number_integer() || value->get<long long>() <= 0 || value->get<long long>() > (1 << 30))
    return folder_error(dir, std::string("config.json ") + name + " is " + value->dump() + ", not a positive integer");
  return value->get<int>();
}

// The first option of config.json Troupe's GPT-2 does not run, as "what: why"; none when it runs all.
std::optional<std::string> unsupported_option(const json& config, int n_embd) {
  auto text = [&](const char* key) { return config.contains(key) ? config[key].dump() : std::string(); };
  if (config.contains("model_type") && config["model_type"] != "gpt2")
    return "model_type " + text("model_type") + ": Troupe runs GPT-2 (\"gpt2\") only";
  for (const char* key : {"rotary_dim", "rotary_pct", "rope_theta", "rope_scaling"})
    if (config.contains(key) && !config[key].is_null())
      return std::string(key) + " " + text(key) + ": rotary positions; Troupe's GPT-2 learns absolute positions";
  if (config.contains("position_embedding_type") && config["position_embedding_type"] != "absolute")
    return "position_embedding_type " + text("position_embedding_type") + ": Troupe's GPT-2 learns absolute positions";
  if (config.contains("activation_function") && config["activation_function"] != "gelu_new" &&
      config["activation_function"] != "gelu_pytorch_tanh")
    return "activation_function " + text("activation_function") +
           ": Troupe's MLP runs GELU in its tanh form (\"gelu_new\")";
  if (config.contains("tie_word_embeddings") && config["tie_word_embeddings"] == false)
    return "tie_word_embeddings false: an untied lm head; Troupe's lm head is the token embedding";
  if (config.contains("layer_norm_epsilon") && config["layer_norm_epsilon"] != 1e-5)
    return "layer_norm_epsilon " + text("layer_norm_epsilon") + ": Troupe's LayerNorm uses 1e-05";
  if (config.contains("n_inner") && !config["n_inner"].is_null() && config["n_inner"] != 4 * n_embd)
    return "n_inner " + text("n_inner") + ": Troupe's MLP is 4 x n_embd = " + std::to_string(4 * n_embd) + " wide";
  if (config.contains("scale_attn_weights") && config["scale_attn_weights"] == false)
    return "scale_attn_weights false: Troupe scales attention by 1/sqrt(head size)";
  if (config.contains("scale_attn_by_inverse_layer_idx") && config["scale_attn_by_inverse_layer_idx"] == true)
    return "scale_attn_by_inverse_layer_idx true: Troupe scales attention by 1/sqrt(head size) alone";
  return std::nullopt;
}

// Buffers older GPT-2 files carry beside the weights (the causal mask): not parameters.
bool is_attention_buffer(const std::string& name) {
  return name.starts_with("h.") && (name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"));
}

// The safetensors files of the folder: model.safetensors, or the shards the index names.
Expected<std::vector<SafetensorsFile>> open_weight_files(const fs::path& dir) {
  std::vector<std::string> names;
  if (fs::exists(dir / "model.safetensors")) {
    names.push_back("model.safetensors");
  } else if (fs::exists(dir / "model.safetensors.index.json")) {
    auto index = read_json(dir, "model.safetensors.index.json");
    if (!index) return index.error();
    if (!index->contains("weight_map") || !(*index)["weight_map"].is_object())
      return folder_error(dir, "model.safetensors.index.json has no weight_map object");
    std::set<std::string> files;
    for (const auto& [tensor, file] : (*index)["weight_map"].items()) {
      if (!file.is_string())
        return folder_error(dir, "model.safetensors.index.json maps '" + tensor + "' to " + file.dump());
      const std::string name = file.get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos || name == "..")
        return folder_error(dir, "model.safetensors.index.json names '" + name + "', not a file of the folder");
      files.insert(name);
    }
    names.assign(files.begin(), files.end());
  } else {
    return folder_error(dir,
                        "no model.safetensors or model.safetensors.index.json (a pytorch_model.bin is not read: "
                        "save the model with safe_serialization=True)");
  }
  std::vector<SafetensorsFile> opened;
  for (const auto& name : names) {
    auto file = SafetensorsFile::open(dir / name);
    if (!file) return folder_error(dir, file.error().message);
    opened.push_back(std::move(*file));
  }
  return opened;
}

std::vector<float> floats_of(const StoredTensor& tensor) {
  std::vector<float> values(static_cast<std::size_t>(compute::shape_numel(tensor.shape)));
  copy_floats(tensor, 0, values);
  return values;
}

}  // namespace

Expected<compute::GPTConfig> read_hf_gpt2_config(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return folder_error(dir, "not a directory");
  auto config = read_json(dir, "config.json");
  if (!config) return config.error();
  compute::GPTConfig model;
  for (auto [field, name, alias] :
       {std::tuple{&model.n_layer, "n_layer", "num_hidden_layers"}, std::tuple{&model.n_embd, "n_embd", "hidden_size"},
        std::tuple{&model.n_head, "n_head", "num_attention_heads"},
        std::tuple{&model.block_size, "n_positions", "max_position_embeddings"},
        std::tuple{&model.vocab_size, "vocab_size", "vocab_size"}}) {
    auto value = dimension(dir, *config, name, alias);
    if (!value) return value.error();
    *field = *value;
  }
  if (auto option = unsupported_option(*config, model.n_embd)) return folder_error(dir, "config.json " + *option);
  model.padded_vocab_size = compute::padded_vocab(model.vocab_size);
  if (Status valid = compute::validate(model); !valid)
    return folder_error(dir, "config.json: " + valid.error().message);
  return model;
}

Expected<HfGpt2> read_hf_gpt2(const fs::path& dir) {
  auto model = read_hf_gpt2_config(dir);
  if (!model) return model.error();
  auto files = open_weight_files(dir);
  if (!files) return files.error();
  std::map<std::string, const StoredTensor*> tensors;  // by Troupe's name
  const StoredTensor* lm_head = nullptr;
  const StoredTensor* wte = nullptr;  // found below: a missing one is refused before lm_head is compared
  for (const SafetensorsFile& file : *files) {
    for (const StoredTensor& tensor : file.tensors()) {
      std::string name = tensor.name.starts_with("transformer.") ? tensor.name.substr(12) : tensor.name;
      if (name == "lm_head.weight") {
        lm_head = &tensor;
        continue;
      }
      if (is_attention_buffer(name)) continue;
      if (name == "wte.weight") wte = &tensor;
      if (!tensors.emplace(name, &tensor).second)
        return folder_error(dir, "tensor '" + tensor.name + "' is stored twice");
    }
  }
  HfGpt2 imported{*model, {}};
  const compute::ParameterLayout layout(*model);
  imported.params.resize(static_cast<std::size_t>(layout.total()));
  for (const auto& view : layout.views()) {
    const auto found = tensors.find(view.name);
    if (found == tensors.end()) return folder_error(dir, "missing tensor '" + view.name + "'");
    const StoredTensor& tensor = *found->second;
    const compute::Shape expected = hf_shape(view, *model);
    if (tensor.shape != expected)
      return folder_error(dir, "tensor '" + tensor.name + "' has shape " + compute::shape_string(tensor.shape) +
                                   ", config.json makes it " + compute::shape_string(expected));
    const std::vector<float> values = from_hf(view, *model, floats_of(tensor));
    std::copy(values.begin(), values.end(), imported.params.begin() + view.offset);
    tensors.erase(found);
  }
  if (!tensors.empty())
    return folder_error(dir, "tensor '" + tensors.begin()->second->name + "' is not a GPT-2 weight Troupe knows");
  if (lm_head != nullptr && (lm_head->shape != wte->shape || floats_of(*lm_head) != floats_of(*wte)))
    return folder_error(dir,
                        "lm_head.weight differs from wte.weight: an untied lm head; Troupe's lm head is the token "
                        "embedding");
  return imported;
}

Expected<fs::path> write_initial_checkpoint(const HfGpt2& imported, const fs::path& dir, const json& job_config) {
  auto existing = committed_steps(dir);
  if (!existing) return existing.error();
  if (!existing->empty())
    return Error{"checkpoint folder " + dir.string() + " holds checkpoints already (step " +
                 std::to_string(existing->front()) + "); import into an empty one"};
  const CheckpointStore store(dir);
  if (Status cleared = store.clear_staging(); !cleared) return cleared.error();
  auto staging = store.begin(0);
  if (!staging) return staging.error();
  const compute::ParameterLayout layout(imported.model);
  const std::vector<float> zeros(imported.params.size(), 0.0f);
  const std::int64_t total = layout.total();
  const Piece pieces[] = {
      {"param", 0, total, imported.params}, {"adam_m", 0, total, zeros}, {"adam_v", 0, total, zeros}};
  auto record = write_shard(*staging / shard_file_name(0), layout, 0, pieces);
  if (!record) return record.error();
  Manifest manifest;
  manifest.model = imported.model;
  manifest.job_config = job_config.is_null() ? json::object() : job_config;
  manifest.files = {*record};
  if (Status committed = store.commit(0, manifest); !committed) return committed.error();
  return step_dir(dir, 0);
}

}  // namespace troupe::checkpoint
