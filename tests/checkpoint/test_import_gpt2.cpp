// The Hugging Face import against the fixture scripts/reference/hf_gpt2_fixture.py made with
// transformers (tests/compute/golden/hf_gpt2, docs/formats/hf-fixture.md): a GPT2LMHeadModel
// folder as save_pretrained wrote it, in float32 and as bfloat16 shards. Troupe's float64 forward
// on the imported weights gives the library's float64 logits and loss; export -> import -> export
// is bit for bit; what Troupe does not run is refused naming it.

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "checkpoint/export_gpt2.hpp"
#include "checkpoint/hf_gpt2.hpp"
#include "checkpoint/import_gpt2.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/safetensors.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using troupe::compute::DType;
using troupe::compute::Tensor;
using troupe::test::TempDir;
namespace fs = std::filesystem;

namespace {

const fs::path kFixture = fs::path(TROUPE_SOURCE_DIR) / "tests/compute/golden/hf_gpt2";

nlohmann::json reference() {
  std::ifstream in(kFixture / "reference.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

HfGpt2 imported(const fs::path& dir) {
  auto model = read_hf_gpt2(dir);
  INFO((model ? std::string() : model.error().message));
  REQUIRE(model.ok());
  return std::move(*model);
}

// What torch's .to(torch.bfloat16) keeps of a float: round to nearest, ties to even.
float bf16_rounded(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  return std::bit_cast<float>((bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u);
}

// A copy of the float32 fixture folder with config.json changed by `edit`.
fs::path edited_copy(const TempDir& dir, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path copy = dir.path() / "edited";
  fs::create_directories(copy);
  fs::copy_file(kFixture / "model/model.safetensors", copy / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(kFixture / "model/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  std::ofstream(copy / "config.json") << config.dump(2);
  return copy;
}

std::string import_error(const fs::path& dir) {
  auto model = read_hf_gpt2(dir);
  REQUIRE_FALSE(model.ok());
  const std::string prefix = "Hugging Face folder " + dir.string() + ": ";
  REQUIRE(model.error().message.substr(0, prefix.size()) == prefix);
  return model.error().message.substr(prefix.size());
}

}  // namespace

TEST_CASE("an imported Hugging Face GPT-2 gives the library's float64 logits and loss", "[import][golden]") {
  const nlohmann::json ref = reference();
  const HfGpt2 hf = imported(kFixture / "model");
  CHECK(hf.model.n_layer == 2);
  CHECK(hf.model.n_embd == 32);
  CHECK(hf.model.vocab_size == 500);
  CHECK(hf.model.padded_vocab_size == 512);
  const troupe::compute::ParameterLayout layout(hf.model);
  const auto& wte = layout.find("wte.weight");
  for (std::int64_t i = 500 * 32; i < wte.numel(); ++i) REQUIRE(hf.params[wte.offset + i] == 0.0f);  // padded rows

  troupe::compute::CpuBackend backend(1);
  troupe::compute::GPT model(hf.model, backend, DType::f64);
  for (const auto& view : layout.views()) {
    Tensor host = Tensor::zeros(view.shape, DType::f64);
    for (std::int64_t i = 0; i < view.numel(); ++i) host.data_as<double>()[i] = hf.params[view.offset + i];
    Tensor destination = model.param(view.name);
    backend.copy(destination, host);
  }
  const auto tokens_list = ref["tokens"].get<std::vector<int>>();
  const auto targets_list = ref["targets"].get<std::vector<int>>();
  const int T = static_cast<int>(tokens_list.size());
  Tensor tokens = Tensor::zeros({1, T}, DType::i32);
  Tensor targets = Tensor::zeros({1, T}, DType::i32);
  std::copy(tokens_list.begin(), tokens_list.end(), tokens.data_as<std::int32_t>());
  std::copy(targets_list.begin(), targets_list.end(), targets.data_as<std::int32_t>());
  model.reserve(1, T);
  const double loss = model.forward(tokens, targets);

  const std::string expected_bytes = file_bytes(kFixture / "logits.f64");
  const int V = ref["vocab_size"].get<int>();
  REQUIRE(expected_bytes.size() == static_cast<std::size_t>(T) * V * sizeof(double));
  const Tensor logits = model.last_logits();  // (1, T, Vp)
  REQUIRE(logits.numel() == static_cast<std::int64_t>(T) * hf.model.padded_vocab_size);
  double diff = 0, norm = 0;
  for (int t = 0; t < T; ++t)
    for (int v = 0; v < V; ++v) {
      double expected;
      std::memcpy(&expected, expected_bytes.data() + (static_cast<std::size_t>(t) * V + v) * sizeof(double), 8);
      const double actual = logits.data_as<double>()[static_cast<std::int64_t>(t) * hf.model.padded_vocab_size + v];
      diff += (actual - expected) * (actual - expected);
      norm += expected * expected;
    }
  const double expected_loss = std::stod(ref["loss"].get<std::string>());
  // Both sides run the same float32 weights in float64; the sums differ in order only (a few ulp).
  INFO("logits: relative error " << std::sqrt(diff / norm) << "; loss " << loss << " against " << expected_loss);
  CHECK(std::sqrt(diff / norm) <= 1e-10);
  CHECK(std::abs(loss - expected_loss) <= 1e-10 * std::abs(expected_loss));
}

TEST_CASE("bfloat16 shards with an index import as the float32 weights rounded to bfloat16", "[import]") {
  const HfGpt2 f32 = imported(kFixture / "model");
  const HfGpt2 bf16 = imported(kFixture / "model-bf16");
  REQUIRE(bf16.model.n_layer == f32.model.n_layer);
  REQUIRE(bf16.params.size() == f32.params.size());
  for (std::size_t i = 0; i < f32.params.size(); ++i) {
    INFO("flat element " << i);
    REQUIRE(std::bit_cast<std::uint32_t>(bf16.params[i]) == std::bit_cast<std::uint32_t>(bf16_rounded(f32.params[i])));
  }
}

TEST_CASE("import -> checkpoint -> export -> import -> export is bit for bit", "[import][export]") {
  TempDir dir;
  const HfGpt2 first = imported(kFixture / "model");
  auto folder = write_initial_checkpoint(first, dir.path() / "ckpt", {{"source", "test"}});
  INFO((folder ? std::string() : folder.error().message));
  REQUIRE(folder.ok());
  auto loaded = open_checkpoint(*folder);
  REQUIRE(loaded.ok());
  CHECK(loaded->manifest().step == 0);
  for (const char* kind : {"adam_m", "adam_v"}) {
    auto moments = loaded->read_all(kind);
    REQUIRE(moments.ok());
    CHECK(std::all_of(moments->begin(), moments->end(), [](float x) { return x == 0.0f; }));
  }

  const fs::path out1 = dir.path() / "export1";
  fs::create_directories(out1);
  REQUIRE(export_gpt2_safetensors(*loaded, first.model, out1 / "model.safetensors").ok());
  std::ofstream(out1 / "config.json") << hf_config(first.model).dump(2);

  const HfGpt2 second = imported(out1);
  REQUIRE(second.model.block_size == first.model.block_size);
  REQUIRE(std::memcmp(second.params.data(), first.params.data(), first.params.size() * sizeof(float)) == 0);
  auto folder2 = write_initial_checkpoint(second, dir.path() / "ckpt2", {});
  REQUIRE(folder2.ok());
  auto loaded2 = open_checkpoint(*folder2);
  INFO((loaded2 ? std::string() : loaded2.error().message));
  REQUIRE(loaded2.ok());
  const fs::path out2 = dir.path() / "export2.safetensors";
  REQUIRE(export_gpt2_safetensors(*loaded2, second.model, out2).ok());
  CHECK(file_bytes(out2) == file_bytes(out1 / "model.safetensors"));

  auto again = write_initial_checkpoint(second, dir.path() / "ckpt", {});
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message.find("holds checkpoints already (step 0)") != std::string::npos);
}

TEST_CASE("what Troupe does not run is refused in one line naming it", "[import]") {
  TempDir dir;
  using nlohmann::json;
  CHECK(import_error(edited_copy(dir, [](json& c) { c["activation_function"] = "relu"; })) ==
        "config.json activation_function \"relu\": Troupe's MLP runs GELU in its tanh form (\"gelu_new\")");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["rotary_dim"] = 8; })) ==
        "config.json rotary_dim 8: rotary positions; Troupe's GPT-2 learns absolute positions");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["tie_word_embeddings"] = false; })) ==
        "config.json tie_word_embeddings false: an untied lm head; Troupe's lm head is the token embedding");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["model_type"] = "llama"; })) ==
        "config.json model_type \"llama\": Troupe runs GPT-2 (\"gpt2\") only");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["layer_norm_epsilon"] = 1e-6; })) ==
        "config.json layer_norm_epsilon 1e-06: Troupe's LayerNorm uses 1e-05");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["n_positions"] = 32; })) ==
        "tensor 'transformer.wpe.weight' has shape [64, 32], config.json makes it [32, 32]");
  CHECK(import_error(edited_copy(dir, [](json& c) { c.erase("n_layer"); })) == "config.json has no n_layer");
  CHECK(import_error(edited_copy(dir, [](json& c) { c["n_layer"] = 3; })) == "missing tensor 'h.2.ln_1.weight'");

  // A file without one tensor, and one with an lm head of its own.
  const HfGpt2 hf = imported(kFixture / "model");
  const troupe::compute::ParameterLayout layout(hf.model);
  std::vector<std::vector<float>> values;
  std::vector<TensorToWrite> tensors;
  values.reserve(layout.views().size() + 1);
  for (const auto& view : layout.views()) {
    values.push_back(to_hf(view, hf.model, {hf.params.data() + view.offset, static_cast<std::size_t>(view.numel())}));
    tensors.push_back({view.name, hf_shape(view, hf.model), values.back()});
  }
  const fs::path folder = edited_copy(dir, [](json&) {});
  std::vector<TensorToWrite> without_ln_f(tensors.begin(), tensors.end() - 1);
  REQUIRE(write_safetensors(folder / "model.safetensors", without_ln_f, {{"format", "pt"}}).ok());
  CHECK(import_error(folder) == "missing tensor 'ln_f.bias'");
  values.push_back(values.front());
  values.back()[0] += 1.0f;
  tensors.push_back({"lm_head.weight", tensors.front().shape, values.back()});
  REQUIRE(tensors.front().name == "wte.weight");
  REQUIRE(write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}}).ok());
  CHECK(import_error(folder) ==
        "lm_head.weight differs from wte.weight: an untied lm head; Troupe's lm head is the token embedding");
  tensors.back().values = values.front();  // tied: the same values under both names
  REQUIRE(write_safetensors(folder / "model.safetensors", tensors, {{"format", "pt"}}).ok());
  CHECK(read_hf_gpt2(folder).ok());
}
