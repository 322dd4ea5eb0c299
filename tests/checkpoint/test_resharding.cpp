// Resharding: a checkpoint written by one grid is read by another. The tiny model's params and
// AdamW moments are saved as two ZeRO ranks (moments halved mid-tensor, params replicated) and
// as two pipeline stages (split at a layer border); any flat range reads back bitwise from
// either. Pins the resharding rule of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include <cstring>

#include "checkpoint/durable_file.hpp"
#include "checkpoint/file_hash.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;

namespace {

struct ModelState {
  troupe::compute::GPTConfig model = tiny_model();
  troupe::compute::ParameterLayout layout{model};
  std::int64_t total = layout.total();
  std::vector<float> params = distinct_values(total, 0.5f);
  std::vector<float> m = distinct_values(total, 0.25f);
  std::vector<float> v = distinct_values(total, 0.75f);

  const std::vector<float>& of(const std::string& kind) const { return kind == "param" ? params : kind == "adam_m" ? m : v; }
  std::vector<Piece> all_kinds(std::int64_t begin, std::int64_t end) const {
    return {piece_of("param", params, begin, end), piece_of("adam_m", m, begin, end), piece_of("adam_v", v, begin, end)};
  }
};

void check_reads_back(const LoadedCheckpoint& loaded, const ModelState& s, std::int64_t begin, std::int64_t end) {
  for (const std::string kind : {"param", "adam_m", "adam_v"}) {
    INFO(kind << " [" << begin << ", " << end << ")");
    std::vector<float> out(static_cast<std::size_t>(end - begin), -1.0f);
    const troupe::Status read = loaded.read(kind, begin, end, out);
    INFO((read ? std::string() : read.error().message));
    REQUIRE(read.ok());
    REQUIRE(std::memcmp(out.data(), s.of(kind).data() + begin, out.size() * sizeof(float)) == 0);
  }
}

}  // namespace

TEST_CASE("a checkpoint saved by ZeRO halves or by pipeline stages reads back any range bitwise", "[resharding]") {
  TempDir dir;
  const ModelState s;
  const std::int64_t half = s.total / 2;  // inside a tensor
  const auto [stage_border, unused] = s.layout.layer_range(2);
  const CheckpointStore store(dir.path(), 5);

  // ZeRO: both replicas hold every param; each owns the moments of its half.
  commit_checkpoint(store, s.model, 1,
                    {{piece_of("param", s.params, 0, s.total), piece_of("adam_m", s.m, 0, half),
                      piece_of("adam_v", s.v, 0, half)},
                     {piece_of("param", s.params, 0, s.total), piece_of("adam_m", s.m, half, s.total),
                      piece_of("adam_v", s.v, half, s.total)}});
  // Pipeline: stage 0 holds [0, layer 2), stage 1 the rest.
  commit_checkpoint(store, s.model, 2, {s.all_kinds(0, stage_border), s.all_kinds(stage_border, s.total)});

  const auto& c_fc = s.layout.find("h.1.mlp.c_fc.weight");
  for (std::int64_t step : {1, 2}) {
    auto loaded = open_checkpoint(step_dir(dir.path(), step));
    REQUIRE(loaded.ok());
    CHECK(loaded->holds("adam_v"));
    CHECK_FALSE(loaded->holds("grad_accum"));
    check_reads_back(*loaded, s, 0, s.total);                      // a single process
    check_reads_back(*loaded, s, stage_border, s.total);           // the other grid's stage 1
    check_reads_back(*loaded, s, 0, half);                         // the other grid's ZeRO shard
    check_reads_back(*loaded, s, half - 5, half + 5);              // across the ZeRO border
    check_reads_back(*loaded, s, stage_border - 3, stage_border + 3);  // across the stage border
    check_reads_back(*loaded, s, c_fc.offset + 17, c_fc.offset + 18);  // one element inside a tensor
    check_reads_back(*loaded, s, 100, 100);                        // nothing
  }
}

TEST_CASE("reading elements no file holds is an error naming kind and range", "[resharding]") {
  // Commit refuses a checkpoint with holes, so this one is assembled by hand.
  TempDir dir;
  const ModelState s;
  const auto folder = dir.path() / "step-0000001";
  std::filesystem::create_directories(folder);
  auto record = write_shard(folder / shard_file_name(0), s.layout, 0,
                            std::vector<Piece>{piece_of("param", s.params, 0, 1000), piece_of("adam_m", s.m, 0, s.total)});
  REQUIRE(record.ok());
  Manifest manifest = manifest_for(s.model, 1);
  manifest.hash_algorithm = hash_algorithm;
  manifest.files = {*record};
  REQUIRE(replace_file(folder / "manifest.json", to_json(manifest).dump()).ok());

  auto loaded = open_checkpoint(folder);
  REQUIRE(loaded.ok());
  std::vector<float> out(200);
  troupe::Status read = loaded->read("param", 900, 1100, out);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message == "checkpoint " + folder.string() + ": no file holds param elements [1000, 1100)");
  read = loaded->read("adam_v", 0, 200, out);
  REQUIRE_FALSE(read.ok());
  CHECK(read.error().message == "checkpoint " + folder.string() + " holds no adam_v (it holds adam_m, param)");
  REQUIRE(loaded->read("param", 800, 1000, out).ok());
  CHECK(out[0] == 800.5f);
}
