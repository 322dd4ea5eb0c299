// Choosing the checkpoint to resume from: a corrupt or torn newest one is skipped with a line
// saying why and the next older is used; another format version or another model is refused
// with its message. Pins the fallback rule of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "checkpoint/loader.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("a corrupt newest checkpoint is skipped with its reason and the older one loads", "[loader]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  commit_whole_model(store, 20, 0.5f);
  commit_whole_model(store, 40, 0.75f);
  const fs::path shard = dir.path() / "step-0000040" / "rank-00000.safetensors";
  auto bytes = read_bytes(shard);
  bytes[bytes.size() / 2] ^= 0x01;  // one flipped bit in the data
  write_bytes(shard, bytes);

  auto newest = open_newest_valid(dir.path());
  REQUIRE(newest.ok());
  REQUIRE(newest->checkpoint);
  CHECK(newest->checkpoint->manifest().step == 20);
  REQUIRE(newest->skipped.size() == 1);
  CHECK(newest->skipped[0].why.starts_with(
      "skipped step-0000040: rank-00000.safetensors hash mismatch: the file hashes to "));

  std::vector<float> first(4);
  REQUIRE(newest->checkpoint->read("param", 0, 4, first).ok());
  CHECK(first == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f});
}

TEST_CASE("a truncated shard is reported by size, and no valid checkpoint at all is a fresh start", "[loader]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  commit_whole_model(store, 40, 0.5f);
  const fs::path shard = dir.path() / "step-0000040" / "rank-00000.safetensors";
  const auto size = fs::file_size(shard);
  fs::resize_file(shard, size - 100);

  auto newest = open_newest_valid(dir.path());
  REQUIRE(newest.ok());
  CHECK_FALSE(newest->checkpoint);
  REQUIRE(newest->skipped.size() == 1);
  CHECK(newest->skipped[0].why == "skipped step-0000040: rank-00000.safetensors has " + std::to_string(size - 100) +
                                      " bytes, the manifest says " + std::to_string(size) + " (torn write?)");

  auto none = open_newest_valid(dir.path() / "never-written");
  REQUIRE(none.ok());
  CHECK_FALSE(none->checkpoint);
  CHECK(none->skipped.empty());
}

TEST_CASE("a checkpoint of another format version is refused naming both versions", "[loader]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  commit_whole_model(store, 40, 0.5f);
  const fs::path folder = dir.path() / "step-0000040";
  auto manifest = nlohmann::json::parse(read_bytes(folder / "manifest.json"));
  manifest["format_version"] = 2;
  dir.write("step-0000040/manifest.json", manifest.dump());

  auto opened = open_checkpoint(folder);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().message == "checkpoint " + folder.string() + " has format version 2; this build reads 1");
  auto newest = open_newest_valid(dir.path());
  REQUIRE(newest.ok());
  CHECK_FALSE(newest->checkpoint);
  CHECK(newest->skipped == std::vector<troupe::checkpoint::SkippedCheckpoint>{
                               {40, "skipped step-0000040 has format version 2; this build reads 1"}});
}

TEST_CASE("check_model names the first field that differs", "[loader]") {
  Manifest m = manifest_for(tiny_model(), 1);
  m.model.n_layer = 6;
  const troupe::Status status = check_model(m, tiny_model());
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "checkpoint was written for n_layer 6, this model has 4");
  m.model = tiny_model();
  m.model.vocab_size = 200;
  CHECK(check_model(m, tiny_model()).error().message == "checkpoint was written for vocab_size 200, this model has 256");
  CHECK(check_model(manifest_for(tiny_model(), 1), tiny_model()).ok());
}
