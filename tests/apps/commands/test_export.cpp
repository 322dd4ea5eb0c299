// troupe export as a user runs it: the checkpoint troupe train wrote comes out as one Hugging Face
// GPT-2 safetensors file (names, Conv1D shapes, values), read here by hand from the bytes as a
// Python reader would; a missing, empty or corrupt checkpoint, an unknown format and an
// unwritable output are refused with one line and exit 2.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/parameter_layout.hpp"
#include "apps/run_troupe.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// A safetensors file split as the format defines it: an 8-byte little-endian header length, the
// JSON header, then the data that every entry's data_offsets index.
struct SafetensorsBytes {
  nlohmann::json header;
  std::string data;

  explicit SafetensorsBytes(const fs::path& path) {
    const std::string bytes = read_bytes(path);
    REQUIRE(bytes.size() >= 8);
    std::uint64_t header_length = 0;
    std::memcpy(&header_length, bytes.data(), 8);
    REQUIRE(8 + header_length <= bytes.size());
    header = nlohmann::json::parse(bytes.substr(8, header_length));
    data = bytes.substr(8 + header_length);
  }

  std::vector<std::int64_t> shape(const std::string& name) const {
    return header.at(name).at("shape").get<std::vector<std::int64_t>>();
  }

  float value(const std::string& name, std::int64_t index) const {
    const auto begin = header.at(name).at("data_offsets").at(0).get<std::int64_t>();
    float x = 0;
    std::memcpy(&x, data.data() + begin + index * 4, 4);
    return x;
  }
};

float checkpoint_param(const troupe::checkpoint::LoadedCheckpoint& checkpoint, std::int64_t flat_index) {
  float x = 0;
  REQUIRE(checkpoint.read("param", flat_index, flat_index + 1, std::span(&x, 1)).ok());
  return x;
}

// Written out by hand from Hugging Face's GPT-2, not taken from our parameter layout.
std::set<std::string> hf_gpt2_names(int n_layer) {
  std::set<std::string> names = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"};
  for (int l = 0; l < n_layer; ++l) {
    for (const char* suffix : {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
                               "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      names.insert("h." + std::to_string(l) + "." + suffix);
  }
  return names;
}

ProcessResult train_with_checkpoints(const TempDir& dir, const std::string& checkpoint_dir) {
  const ProcessResult trained =
      run_troupe(dir,
                 {"train", "--model.preset", "tiny", "--train.steps", "2", "--train.val_batches", "1",
                  "--sample.tokens", "0", "--train.threads", "1", "--checkpoint.dir", checkpoint_dir},
                 std::chrono::seconds(120));
  INFO("train stderr: " << trained.err);
  REQUIRE(trained.exit_code == 0);
  return trained;
}

}  // namespace

TEST_CASE("export writes the checkpoint troupe train wrote as Hugging Face GPT-2 safetensors", "[export]") {
  TempDir dir;
  train_with_checkpoints(dir, "ckpt");
  auto steps = troupe::checkpoint::committed_steps(dir.path() / "ckpt");
  REQUIRE(steps.ok());
  REQUIRE(!steps->empty());
  const fs::path step_folder = troupe::checkpoint::step_dir(dir.path() / "ckpt", steps->front());
  auto checkpoint = troupe::checkpoint::open_checkpoint(step_folder);
  REQUIRE(checkpoint.ok());
  const troupe::compute::GPTConfig model = checkpoint->manifest().model;
  const std::int64_t C = model.n_embd;

  const ProcessResult exported = run_troupe(dir, {"export", "--checkpoint", "ckpt", "--format", "safetensors"});
  INFO("stderr: " << exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(exported.err.empty());
  CHECK_THAT(exported.out,
             StartsWith("wrote model.safetensors: " + std::to_string(hf_gpt2_names(model.n_layer).size()) +
                        " tensors, " + std::to_string(fs::file_size(dir.path() / "model.safetensors")) + " bytes"));
  CHECK_THAT(exported.out, Contains("step " + std::to_string(checkpoint->manifest().step)));
  CHECK(std::count(exported.out.begin(), exported.out.end(), '\n') == 1);

  const SafetensorsBytes file(dir.path() / "model.safetensors");
  CHECK(file.header.at("__metadata__").at("format") == "pt");
  std::set<std::string> names;
  for (const auto& [name, entry] : file.header.items()) {
    if (name == "__metadata__") continue;
    names.insert(name);
    CHECK(entry.at("dtype") == "F32");
  }
  CHECK(names == hf_gpt2_names(model.n_layer));

  using Shape = std::vector<std::int64_t>;
  CHECK(file.shape("wte.weight") == Shape{model.vocab_size, C});
  CHECK(file.shape("wpe.weight") == Shape{model.block_size, C});
  CHECK(file.shape("h.0.ln_1.weight") == Shape{C});
  CHECK(file.shape("h.0.attn.c_attn.bias") == Shape{3 * C});
  const std::string last = "h." + std::to_string(model.n_layer - 1) + ".";
  CHECK(file.shape(last + "attn.c_attn.weight") == Shape{C, 3 * C});
  CHECK(file.shape(last + "attn.c_proj.weight") == Shape{C, C});
  CHECK(file.shape(last + "mlp.c_fc.weight") == Shape{C, 4 * C});
  CHECK(file.shape(last + "mlp.c_proj.weight") == Shape{4 * C, C});
  CHECK(file.shape("ln_f.bias") == Shape{C});

  // Conv1D element (in i, out o) is our (out, in) element (o, i); i != o so a missed transpose shows.
  const troupe::compute::ParameterLayout layout(model);
  const auto& fc = layout.find(last + "mlp.c_fc.weight");
  const std::int64_t i = 3, o = 4 * C - 2;
  CHECK(file.value(last + "mlp.c_fc.weight", i * 4 * C + o) == checkpoint_param(*checkpoint, fc.offset + o * C + i));
  const auto& wte = layout.find("wte.weight");
  const std::int64_t last_token_last_channel = model.vocab_size * C - 1;
  CHECK(file.value("wte.weight", last_token_last_channel) ==
        checkpoint_param(*checkpoint, wte.offset + last_token_last_channel));

  // One step folder (a trailing separator included) exports the same bytes.
  const ProcessResult from_folder = run_troupe(
      dir, {"export", "--checkpoint", "ckpt/" + step_folder.filename().string() + "/", "--out", "step.safetensors"});
  INFO("stderr: " << from_folder.err);
  REQUIRE(from_folder.exit_code == 0);
  CHECK(read_bytes(dir.path() / "step.safetensors") == read_bytes(dir.path() / "model.safetensors"));
}

TEST_CASE("export refuses a corrupt checkpoint naming why, and a directory of only corrupt ones", "[export]") {
  TempDir dir;
  train_with_checkpoints(dir, "ckpt");
  auto steps = troupe::checkpoint::committed_steps(dir.path() / "ckpt");
  REQUIRE(steps.ok());
  REQUIRE(steps->size() == 1);
  const fs::path step_folder = troupe::checkpoint::step_dir(dir.path() / "ckpt", steps->front());
  const fs::path shard = step_folder / troupe::checkpoint::shard_file_name(0);
  {
    std::fstream flip(shard, std::ios::in | std::ios::out | std::ios::binary);
    flip.seekg(-1, std::ios::end);
    const char last_byte = static_cast<char>(flip.get());
    flip.seekp(-1, std::ios::end);
    flip.put(static_cast<char>(~last_byte));
  }

  check_rejected_in(dir, {"export", "--checkpoint", step_folder.string()}, "hash");
  CHECK_FALSE(fs::exists(dir.path() / "model.safetensors"));

  const ProcessResult all_skipped = run_troupe(dir, {"export", "--checkpoint", "ckpt"});
  INFO("stderr: " << all_skipped.err);
  CHECK(all_skipped.exit_code == 2);
  CHECK(all_skipped.out.empty());
  CHECK_THAT(all_skipped.err, StartsWith("troupe: warning: skipped " + step_folder.filename().string()));
  CHECK_THAT(all_skipped.err, Contains("\ntroupe: error: --checkpoint ckpt: no valid checkpoint"));
  CHECK(std::count(all_skipped.err.begin(), all_skipped.err.end(), '\n') == 2);
  CHECK_FALSE(fs::exists(dir.path() / "model.safetensors"));
}

TEST_CASE("export refuses a missing or empty checkpoint directory, an unknown format and an unwritable output",
          "[export]") {
  TempDir dir;
  fs::create_directory(dir.path() / "empty");
  check_rejected_in(dir, {"export", "--checkpoint", "empty"}, "--checkpoint empty: no checkpoint");
  check_rejected_in(dir, {"export", "--checkpoint", "nowhere"}, "--checkpoint nowhere: no such directory");
  check_rejected_in(dir, {"export"}, "--checkpoint");
  const ProcessResult onnx = check_rejected_in(dir, {"export", "--checkpoint", "empty", "--format", "onnx"}, "onnx");
  CHECK_THAT(onnx.err, Contains("safetensors"));
  check_rejected_in(dir, {"export", "--checkpoint", "empty", "--out", "missing/model.safetensors"}, "missing");
  check_rejected_in(dir, {"export", "--checkpoint", "empty", "--out", "empty"}, "--out empty is a directory");
  check_rejected_in(dir, {"export", "--checkpoint", "empty", "--bogus"}, "--bogus");
}
