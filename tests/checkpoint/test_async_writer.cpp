// The async writer: the same file as the synchronous path, the snapshot taken at submit (the
// source may change at once), and failures told to the failure callback when they happen and
// reported through wait(), without touching committed checkpoints.

#include <catch2/catch.hpp>

#include <algorithm>
#include <future>

#include "checkpoint/async_writer.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("async writer writes the synchronous path's bytes from a snapshot taken at submit", "[async]") {
  TempDir dir;
  const auto model = tiny_model();
  const troupe::compute::ParameterLayout layout(model);
  std::vector<float> params = distinct_values(layout.total(), 0.5f);
  const std::vector<float> original = params;
  const std::int64_t half = layout.total() / 2;

  const CheckpointStore store(dir.path() / "ckpt");
  REQUIRE(store.begin(7).ok());
  AsyncCheckpointWriter writer(store.dir(), layout, 3);
  REQUIRE(writer.submit(7, std::vector<Piece>{piece_of("param", params, 0, half)}).ok());
  std::fill(params.begin(), params.end(), -1.0f);  // training goes on
  auto record = writer.wait();
  REQUIRE(record.ok());
  CHECK(record->name == "rank-00003.safetensors");
  CHECK(record->rank == 3);

  const fs::path sync_path = dir.path() / "sync" / "rank-00003.safetensors";
  fs::create_directories(sync_path.parent_path());
  auto sync = write_shard(sync_path, layout, 3, std::vector<Piece>{piece_of("param", original, 0, half)});
  REQUIRE(sync.ok());
  CHECK(read_bytes(staging_dir(store.dir(), 7) / "rank-00003.safetensors") == read_bytes(sync_path));
  CHECK(record->hash == sync->hash);
  CHECK(record->bytes == sync->bytes);
  CHECK(fs::exists(staging_dir(store.dir(), 7) / "rank-00003.safetensors.record.json"));
}

TEST_CASE("async write errors come back from wait() and leave committed checkpoints intact", "[async]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  commit_whole_model(store, 10, 0.5f);
  const troupe::compute::ParameterLayout layout(tiny_model());
  const auto params = distinct_values(layout.total(), 0.5f);
  const std::vector<Piece> pieces = {piece_of("param", params, 0, 100)};

  // Step 20's staging folder was never begun: its folder is missing.
  AsyncCheckpointWriter writer(dir.path(), layout, 0);
  REQUIRE(writer.submit(20, pieces).ok());
  auto missing = writer.wait();
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message == "safetensors file '" + (staging_dir(dir.path(), 20) / "rank-00000.safetensors.partial").string() +
                                       "': cannot create: No such file or directory");

  // A checkpoint directory under a regular file cannot be written even by root.
  const std::string file = dir.write("not-a-folder", "x");
  AsyncCheckpointWriter blocked(fs::path(file) / "ckpt", layout, 0);
  REQUIRE(blocked.submit(30, pieces).ok());
  // Submitting again without wait(): the earlier, unreported failure comes back here.
  const troupe::Status earlier = blocked.submit(31, pieces);
  REQUIRE_FALSE(earlier.ok());
  CHECK(earlier.error().message.ends_with("step-0000030.tmp/rank-00000.safetensors.partial': cannot create: Not a directory"));
  auto second = blocked.wait();
  REQUIRE_FALSE(second.ok());
  CHECK(second.error().message.ends_with("': cannot create: Not a directory"));

  auto newest = open_newest_valid(dir.path());
  REQUIRE(newest.ok());
  REQUIRE(newest->checkpoint);
  CHECK(newest->checkpoint->manifest().step == 10);
  CHECK(newest->skipped.empty());
}

TEST_CASE("an async write error reaches the failure callback while nobody waits, naming its step", "[async]") {
  TempDir dir;
  const troupe::compute::ParameterLayout layout(tiny_model());
  const auto params = distinct_values(layout.total(), 0.5f);
  std::promise<std::pair<std::int64_t, std::string>> told;
  // Step 40's staging folder was never begun.
  AsyncCheckpointWriter writer(dir.path(), layout, 2, [&](std::int64_t step, const troupe::Error& error) {
    told.set_value({step, error.message});
  });
  REQUIRE(writer.submit(40, std::vector<Piece>{piece_of("param", params, 0, 100)}).ok());
  auto failure = told.get_future();
  // Told before anyone calls wait(): a generous bound, the write fails in microseconds.
  REQUIRE(failure.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  const auto [step, message] = failure.get();
  CHECK(step == 40);
  CHECK(message == "safetensors file '" + (staging_dir(dir.path(), 40) / "rank-00002.safetensors.partial").string() +
                       "': cannot create: No such file or directory");
  auto waited = writer.wait();
  REQUIRE_FALSE(waited.ok());
  CHECK(waited.error().message == message);
}
