// The GPT-2 export: Hugging Face's names and shapes, the four Conv1D weights per layer
// transposed to (in, out), wte cropped to the real vocabulary, metadata format "pt". Pins the
// export names of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/export_gpt2.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;
using troupe::compute::Shape;

namespace {

// `params` of `model` committed as checkpoint `step` in `dir`, exported to model.safetensors and read back.
struct Exported {
  LoadedCheckpoint loaded;
  SafetensorsFile file;
  std::map<std::string, const StoredTensor*> tensors;

  float value(const std::string& name, std::int64_t index) const {
    float x = 0;
    copy_floats(*tensors.at(name), index, std::span(&x, 1));
    return x;
  }
};

std::unique_ptr<Exported> export_of(const TempDir& dir, const troupe::compute::GPTConfig& model, std::int64_t step,
                                    const std::vector<float>& params) {
  const CheckpointStore store(dir.path() / "ckpt");
  commit_checkpoint(store, model, step, {{piece_of("param", params, 0, static_cast<std::int64_t>(params.size()))}});
  auto loaded = open_checkpoint(step_dir(store.dir(), step));
  REQUIRE(loaded.ok());
  const auto out = dir.path() / "model.safetensors";
  const troupe::Status exported = export_gpt2_safetensors(*loaded, model, out);
  INFO((exported ? std::string() : exported.error().message));
  REQUIRE(exported.ok());
  auto file = SafetensorsFile::open(out);
  REQUIRE(file.ok());
  CHECK(file->metadata().at("format") == "pt");
  auto result = std::unique_ptr<Exported>(new Exported{std::move(*loaded), std::move(*file), {}});
  for (const auto& t : result->file.tensors()) result->tensors[t.name] = &t;
  return result;
}

}  // namespace

TEST_CASE("export writes HF GPT-2 names, transposed Conv1D weights and the unpadded vocabulary", "[export]") {
  TempDir dir;
  // V = 300 pads to 384 rows, so the crop shows.
  const troupe::compute::GPTConfig model{2, 32, 2, 16, 300, troupe::compute::padded_vocab(300)};
  REQUIRE(model.padded_vocab_size == 384);
  const troupe::compute::ParameterLayout layout(model);
  const auto params = distinct_values(layout.total(), 0.5f);
  const std::unique_ptr<Exported> exported = export_of(dir, model, 3, params);
  const auto& tensors = exported->tensors;
  const LoadedCheckpoint* loaded = &exported->loaded;
  std::set<std::string> names;
  for (const auto& [name, unused] : tensors) names.insert(name);
  std::set<std::string> expected;
  for (const auto& v : layout.views()) expected.insert(v.name);
  CHECK(names == expected);
  CHECK(names.contains("h.1.attn.c_attn.weight"));
  CHECK(names.contains("ln_f.bias"));

  auto value = [&](const std::string& name, std::int64_t index) { return exported->value(name, index); };
  CHECK(tensors.at("wte.weight")->shape == Shape{300, 32});
  CHECK(value("wte.weight", 300 * 32 - 1) == params[300 * 32 - 1]);
  CHECK(tensors.at("wpe.weight")->shape == Shape{16, 32});
  CHECK(tensors.at("h.0.ln_1.weight")->shape == Shape{32});
  const std::map<std::string, Shape> conv1d = {{"h.1.attn.c_attn.weight", {32, 96}},
                                               {"h.1.attn.c_proj.weight", {32, 32}},
                                               {"h.1.mlp.c_fc.weight", {32, 128}},
                                               {"h.1.mlp.c_proj.weight", {128, 32}}};
  for (const auto& [name, shape] : conv1d) {
    INFO(name);
    const auto& view = layout.find(name);  // (out, in)
    REQUIRE(tensors.at(name)->shape == shape);
    const std::int64_t in = shape[0], out_features = shape[1];
    for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, in - 1})
      for (std::int64_t o : {std::int64_t{0}, std::int64_t{2}, out_features - 1})
        REQUIRE(value(name, i * out_features + o) == params[view.offset + o * in + i]);
  }
  const auto& bias = layout.find("h.1.attn.c_attn.bias");
  CHECK(value("h.1.attn.c_attn.bias", 5) == params[bias.offset + 5]);
  CHECK_FALSE(std::filesystem::exists(dir.path() / "model.safetensors.partial"));

  const troupe::Status other = export_gpt2_safetensors(*loaded, tiny_model(), dir.path() / "tiny.safetensors");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().message == "export of " + loaded->dir().string() +
                                     ": checkpoint was written for n_layer 2, this model has 4");
}

TEST_CASE(
    "export of a model with experts writes each expert's tensors apart, Conv1D weights transposed, the router "
    "whole",
    "[export][moe]") {
  TempDir dir;
  // 2 blocks of C = 32, 4 experts in block 1 (every 2nd) with a shared expert.
  troupe::compute::GPTConfig model{2, 32, 2, 16, 256, 256};
  model.experts = 4;
  model.top_k = 2;
  model.moe_every = 2;
  model.shared_experts = 1;
  const troupe::compute::ParameterLayout layout(model);
  const auto params = distinct_values(layout.total(), 0.25f);
  const std::unique_ptr<Exported> exported = export_of(dir, model, 5, params);
  const SafetensorsFile* file = &exported->file;
  CHECK(file->metadata().at("experts") == "4");
  CHECK(file->metadata().at("top_k") == "2");
  CHECK(file->metadata().at("moe_every") == "2");
  CHECK(file->metadata().at("shared_experts") == "1");
  const auto& tensors = exported->tensors;
  auto value = [&](const std::string& name, std::int64_t index) { return exported->value(name, index); };
  // Block 0 is dense; block 1 has a router, 4 experts of 4 tensors each and a shared expert, no mlp.c_fc.
  CHECK(tensors.contains("h.0.mlp.c_fc.weight"));
  CHECK_FALSE(tensors.contains("h.1.mlp.c_fc.weight"));
  CHECK_FALSE(tensors.contains("h.1.mlp.experts.c_fc.weight"));
  CHECK(tensors.size() == layout.views().size() - 4 + 4 * 4);
  CHECK(tensors.at("h.1.mlp.router.weight")->shape == Shape{4, 32});
  const auto& router = layout.find("h.1.mlp.router.weight");
  CHECK(value("h.1.mlp.router.weight", 3 * 32 + 7) == params[router.offset + 3 * 32 + 7]);
  // Expert e's c_fc (4C, C) at e·4C·C in Troupe's stack, out (C, 4C); its c_proj (C, 4C) at e·C·4C, out (4C, C).
  const auto& fc = layout.find("h.1.mlp.experts.c_fc.weight");
  const auto& proj = layout.find("h.1.mlp.experts.c_proj.weight");
  const auto& fc_bias = layout.find("h.1.mlp.experts.c_fc.bias");
  for (int e = 0; e < 4; ++e) {
    INFO("expert " << e);
    const std::string p = "h.1.mlp.experts." + std::to_string(e) + ".";
    REQUIRE(tensors.at(p + "c_fc.weight")->shape == Shape{32, 128});
    REQUIRE(tensors.at(p + "c_fc.bias")->shape == Shape{128});
    REQUIRE(tensors.at(p + "c_proj.weight")->shape == Shape{128, 32});
    REQUIRE(tensors.at(p + "c_proj.bias")->shape == Shape{32});
    for (std::int64_t i : {0, 5, 31})
      for (std::int64_t o : {0, 9, 127}) {
        CHECK(value(p + "c_fc.weight", i * 128 + o) == params[fc.offset + e * 128 * 32 + o * 32 + i]);
        CHECK(value(p + "c_proj.weight", o * 32 + i) == params[proj.offset + e * 32 * 128 + i * 128 + o]);
      }
    CHECK(value(p + "c_fc.bias", 100) == params[fc_bias.offset + e * 128 + 100]);
  }
  const auto& shared = layout.find("h.1.mlp.shared_expert.c_fc.weight");
  REQUIRE(tensors.at("h.1.mlp.shared_expert.c_fc.weight")->shape == Shape{32, 128});
  CHECK(value("h.1.mlp.shared_expert.c_fc.weight", 2 * 128 + 3) == params[shared.offset + 3 * 32 + 2]);
}
