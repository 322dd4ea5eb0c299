// The checkpoint folder and its commit protocol: a step folder appears complete with its
// manifest and `latest`, a staging folder (.tmp) is never a checkpoint, keep_last prunes the
// oldest and never the one just written. Pins the commit protocol of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  const auto bytes = read_bytes(path);
  return {bytes.begin(), bytes.end()};
}

}  // namespace

TEST_CASE("commit publishes step-NNNNNNN with manifest, shards and latest", "[store]") {
  TempDir dir;
  const CheckpointStore store(dir.path() / "ckpt");
  commit_whole_model(store, 40, 0.5f);

  const fs::path folder = dir.path() / "ckpt" / "step-0000040";
  CHECK(fs::is_regular_file(folder / "manifest.json"));
  CHECK(fs::is_regular_file(folder / "rank-00000.safetensors"));
  CHECK_FALSE(fs::exists(folder / "rank-00000.safetensors.record.json"));  // the manifest supersedes sidecars
  CHECK_FALSE(fs::exists(dir.path() / "ckpt" / "step-0000040.tmp"));
  CHECK(read_text(dir.path() / "ckpt" / "latest") == "step-0000040\n");
  CHECK_FALSE(fs::exists(dir.path() / "ckpt" / "latest.tmp"));

  auto loaded = open_checkpoint(folder);
  REQUIRE(loaded.ok());
  CHECK(loaded->manifest().step == 40);
  CHECK(loaded->manifest().hash_algorithm == "xxh3_64");
  CHECK(loaded->manifest().files.size() == 1);
}

TEST_CASE("a staging folder is never listed as a checkpoint, and clear_staging removes a stale one", "[store]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  commit_whole_model(store, 10, 0.5f);
  auto staging = store.begin(20);
  REQUIRE(staging.ok());
  CHECK(*staging == dir.path() / "step-0000020.tmp");
  dir.write("step-0000020.tmp/rank-00000.safetensors", "half a file");
  CHECK(committed_steps(dir.path()).value() == std::vector<std::int64_t>{10});
  auto newest = open_newest_valid(dir.path());
  REQUIRE(newest.ok());
  REQUIRE(newest->checkpoint);
  CHECK(newest->checkpoint->manifest().step == 10);
  CHECK(newest->skipped.empty());

  REQUIRE(store.begin(20).ok());  // another rank's begin keeps what is there
  CHECK(fs::exists(*staging / "rank-00000.safetensors"));
  REQUIRE(store.clear_staging().ok());  // a restarted run starts without the dead attempt's folder
  CHECK(!fs::exists(*staging));
  CHECK(committed_steps(dir.path()).value() == std::vector<std::int64_t>{10});
}

TEST_CASE("keep_last keeps the newest checkpoints and never the one just written", "[store]") {
  TempDir dir;
  const CheckpointStore store(dir.path(), 2);
  for (std::int64_t step : {10, 20, 30}) commit_whole_model(store, step, 0.5f);
  CHECK(committed_steps(dir.path()).value() == std::vector<std::int64_t>{30, 20});

  // A run resumed from step 20 writes 25 while 30 (another timeline) exists: 25 stays.
  commit_whole_model(store, 25, 0.5f);
  CHECK(committed_steps(dir.path()).value() == std::vector<std::int64_t>{30, 25});
  CHECK(read_text(dir.path() / "latest") == "step-0000025\n");
}

TEST_CASE("commit refuses a missing file, a wrong size and a hole in a kind", "[store]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  const auto model = tiny_model();
  const troupe::compute::ParameterLayout layout(model);
  const auto params = distinct_values(layout.total(), 0.5f);
  REQUIRE(store.begin(5).ok());
  const auto staging = staging_dir(dir.path(), 5);
  auto r0 = write_shard(staging / shard_file_name(0), layout, 0, std::vector<Piece>{piece_of("param", params, 0, 1000)});
  REQUIRE(r0.ok());

  Manifest manifest = manifest_for(model, 5);
  manifest.files = {*r0, {"rank-00001.safetensors", 10, "00", 1, {{"param", 1000, layout.total()}}}};
  troupe::Status status = store.commit(5, manifest);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message.starts_with(
      "checkpoint step-0000005.tmp: rank-00001.safetensors (rank 1) is missing: "));

  manifest.files = {*r0};
  manifest.files[0].bytes += 1;
  status = store.commit(5, manifest);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "checkpoint step-0000005.tmp: rank-00000.safetensors has " +
                                      std::to_string(r0->bytes) + " bytes, its record says " +
                                      std::to_string(r0->bytes + 1));

  manifest.files = {*r0};
  status = store.commit(5, manifest);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "checkpoint step-0000005.tmp: no file holds param elements [1000, " +
                                      std::to_string(layout.total()) + ") of the " + std::to_string(layout.total()));
  CHECK(committed_steps(dir.path()).value() == std::vector<std::int64_t>{});
  CHECK_FALSE(fs::exists(dir.path() / "latest"));
}

TEST_CASE("a writer's failure mark holds its error, and an empty one still names the rank", "[store]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  REQUIRE(store.begin(5).ok());
  CHECK(store.failed_writers(5).empty());
  CHECK(store.failed_writers(6).empty());  // no staging folder at all
  store.mark_failed(5, 3, "'x/rank-00003.safetensors': cannot write: No space left on device");
  // An empty mark (a disk with no room for the error) still names the rank.
  std::ofstream(staging_dir(dir.path(), 5) / "rank-00001.failed");
  CHECK(fs::exists(staging_dir(dir.path(), 5) / "rank-00003.failed"));
  CHECK(store.failed_writers(5) ==
        std::vector<std::string>{"rank 1: (no reason recorded: see its log)",
                                 "rank 3: 'x/rank-00003.safetensors': cannot write: No space left on device"});
  auto records = store.collect_records(5);
  REQUIRE(records.ok());
  CHECK(records->empty());  // a mark is no record
}
