#include "checkpoint/manifest.hpp"

#include "checkpoint/json_fields.hpp"

namespace troupe::checkpoint {

nlohmann::json to_json(const Manifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : m.files) files.push_back(to_json(f));
  nlohmann::json data = {{"seed", m.data.seed}, {"samples_consumed", m.data.samples_consumed}};
  if (m.data.val_position) data["val_position"] = *m.data.val_position;
  nlohmann::json model = {{"n_layer", m.model.n_layer},       {"n_embd", m.model.n_embd},
                          {"n_head", m.model.n_head},         {"block_size", m.model.block_size},
                          {"vocab_size", m.model.vocab_size}, {"padded_vocab_size", m.model.padded_vocab_size}};
  // A model with experts (docs/moe.md) says so; a dense one's manifest is as it always was.
  if (m.model.experts > 0) {
    model["experts"] = m.model.experts;
    model["top_k"] = m.model.top_k;
    model["moe_every"] = m.model.moe_every;
    model["shared_experts"] = m.model.shared_experts;
    model["expert_width"] = m.model.expert_hidden();
  }
  return {
      {"format_version", m.format_version},
      {"model", model},
      {"job_config", m.job_config},
      {"grid", {{"dp", m.grid.dp}, {"pp", m.grid.pp}, {"tp", m.grid.tp}}},
      {"step", m.step},
      {"optimizer_steps", m.optimizer_steps},
      {"data", data},
      {"rng", {{"seed", m.rng.seed}, {"words", m.rng.words}}},
      {"hash_algorithm", m.hash_algorithm},
      {"files", files},
  };
}

Expected<Manifest> manifest_from_json(const nlohmann::json& json) {
  JsonFields f(json, "");
  Manifest m;
  m.format_version = static_cast<int>(f.integer("format_version"));
  if (f.error()) return *f.error();
  if (m.format_version != format_version)
    return Error{"format version " + std::to_string(m.format_version) + "; this build reads " +
                 std::to_string(format_version)};

  JsonFields model(f.object("model"), "model.");
  auto model_int = [&](const char* key) { return static_cast<int>(model.integer(key)); };
  m.model = {model_int("n_layer"),    model_int("n_embd"),     model_int("n_head"),
             model_int("block_size"), model_int("vocab_size"), model_int("padded_vocab_size")};
  if (model.has("experts")) {
    m.model.experts = model_int("experts");
    m.model.top_k = model_int("top_k");
    m.model.moe_every = model_int("moe_every");
    m.model.shared_experts = model_int("shared_experts");
    // Written since experts could be narrower than 4 x n_embd; absent, they are 4 x n_embd wide.
    if (model.has("expert_width")) m.model.expert_width = model_int("expert_width");
  }
  m.job_config = f.object("job_config");
  JsonFields grid(f.object("grid"), "grid.");
  m.grid = {static_cast<int>(grid.integer("dp")), static_cast<int>(grid.integer("pp")),
            static_cast<int>(grid.integer("tp"))};
  m.step = f.integer("step");
  m.optimizer_steps = f.integer("optimizer_steps");
  JsonFields data(f.object("data"), "data.");
  m.data.seed = data.unsigned_integer("seed");
  m.data.samples_consumed = data.unsigned_integer("samples_consumed");
  if (data.has("val_position")) m.data.val_position = data.unsigned_integer("val_position");
  JsonFields rng(f.object("rng"), "rng.");
  m.rng.seed = rng.unsigned_integer("seed");
  const nlohmann::json& words = rng.array("words");
  for (std::size_t i = 0; !rng.error() && i < words.size(); ++i) {
    if (!words[i].is_number_unsigned()) rng.fail("words." + std::to_string(i), "must be a non-negative integer, got " + words[i].dump());
    else m.rng.words.push_back(words[i].get<std::uint64_t>());
  }
  m.hash_algorithm = f.string("hash_algorithm");
  const nlohmann::json& files = f.array("files");
  for (const JsonFields* part : {&f, &model, &grid, &data, &rng})
    if (part->error()) return *part->error();
  for (std::size_t i = 0; i < files.size(); ++i) {
    auto record = file_record_from_json(files[i], "files." + std::to_string(i) + ".");
    if (!record) return record.error();
    m.files.push_back(std::move(*record));
  }
  return m;
}

}  // namespace troupe::checkpoint
