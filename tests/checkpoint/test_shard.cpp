// Shard files: a rank's flat ranges cut at parameter borders into tensors named
// <kind>/<global name> (whole) or <kind>/<global name>[from:to] (slice), read back bitwise.
// Pins the tensor naming of docs/formats/checkpoint.md, and its token pieces (a sim rank's).

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "checkpoint/loader.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint/shard.hpp"
#include "checkpoint/store.hpp"
#include "checkpoint/tensor_name.hpp"
#include "checkpoint_fixture.hpp"
#include "compute/tensor.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;

TEST_CASE("shard round trip: whole tensors and slices come back bitwise under their global names", "[shard]") {
  TempDir dir;
  const auto model = tiny_model();
  const troupe::compute::ParameterLayout layout(model);
  const auto& wpe = layout.find("wpe.weight");
  const auto& c_attn = layout.find("h.1.attn.c_attn.weight");
  const auto params = distinct_values(layout.total(), 0.5f);
  const auto moments = distinct_values(layout.total(), 0.25f);
  // params: from inside wpe to inside h.1's c_attn (a slice, whole tensors, a slice);
  // adam_m: a slice strictly inside one tensor.
  const std::int64_t begin = wpe.offset + 10, end = c_attn.offset + 100;
  const std::vector<Piece> pieces = {piece_of("param", params, begin, end),
                                     piece_of("adam_m", moments, c_attn.offset + 3, c_attn.offset + 7)};
  const auto path = dir.path() / "rank-00001.safetensors";
  auto record = write_shard(path, layout, 1, pieces);
  REQUIRE(record.ok());
  CHECK(record->name == "rank-00001.safetensors");
  CHECK(record->rank == 1);
  CHECK(record->bytes == std::filesystem::file_size(path));
  CHECK(record->hash.size() == 16);
  REQUIRE(record->pieces.size() == 2);
  CHECK(record->pieces[0].kind == "param");
  CHECK(record->pieces[0].begin == begin);
  CHECK(record->pieces[1].end == c_attn.offset + 7);

  // The sidecar carries the same record for a committer in another process.
  auto sidecar = read_record(record_path(path));
  REQUIRE(sidecar.ok());
  CHECK(sidecar->hash == record->hash);
  CHECK(sidecar->bytes == record->bytes);
  CHECK(sidecar->pieces.size() == 2);

  auto file = SafetensorsFile::open(path);
  REQUIRE(file.ok());
  std::map<std::string, troupe::compute::Shape> shapes;
  for (const auto& t : file->tensors()) shapes[t.name] = t.shape;
  const std::int64_t wpe_n = wpe.numel();
  CHECK(shapes.at("param/wpe.weight[10:" + std::to_string(wpe_n) + "]") == troupe::compute::Shape{wpe_n - 10});
  CHECK(shapes.at("param/h.0.ln_1.weight") == troupe::compute::Shape{128});
  CHECK(shapes.at("param/h.0.attn.c_attn.weight") == troupe::compute::Shape{384, 128});
  CHECK(shapes.at("param/h.1.ln_1.bias") == troupe::compute::Shape{128});
  CHECK(shapes.at("param/h.1.attn.c_attn.weight[0:100]") == troupe::compute::Shape{100});
  CHECK(shapes.at("adam_m/h.1.attn.c_attn.weight[3:7]") == troupe::compute::Shape{4});
  CHECK(file->metadata().at("format_version") == "1");

  auto shard = read_shard(path, layout);
  REQUIRE(shard.ok());
  std::map<std::string, std::int64_t> held;
  for (const auto& p : shard->pieces) {
    const auto& source = p.kind == "param" ? params : moments;
    REQUIRE(p.bytes.size() == static_cast<std::size_t>(p.end - p.begin) * sizeof(float));
    REQUIRE(std::memcmp(p.bytes.data(), source.data() + p.begin, p.bytes.size()) == 0);
    held[p.kind] += p.end - p.begin;
  }
  CHECK(held["param"] == end - begin);
  CHECK(held["adam_m"] == 4);
}

TEST_CASE("tensor names parse back into kind, parameter and slice", "[shard]") {
  const auto whole = parse_tensor_name("adam_v/h.11.mlp.c_proj.weight");
  REQUIRE(whole);
  CHECK(whole->kind == "adam_v");
  CHECK(whole->parameter == "h.11.mlp.c_proj.weight");
  CHECK_FALSE(whole->slice);
  const auto slice = parse_tensor_name("param/wte.weight[128:4096]");
  REQUIRE(slice);
  CHECK(slice->parameter == "wte.weight");
  CHECK(slice->slice == std::pair<std::int64_t, std::int64_t>{128, 4096});
  CHECK(format_tensor_name(*slice) == "param/wte.weight[128:4096]");
  const auto residual = parse_tensor_name("powersgd_residual_dp1/h.0.attn.c_attn.weight");
  REQUIRE(residual);
  CHECK(residual->kind == "powersgd_residual_dp1");
  for (const char* bad : {"wte.weight", "Param/wte.weight", "param/", "param/wte.weight[5:4]", "param/w[1:x]", "/w"})
    CHECK_FALSE(parse_tensor_name(bad));
}

TEST_CASE("a shard naming a parameter the model lacks is refused with the file and tensor", "[shard]") {
  TempDir dir;
  const troupe::compute::ParameterLayout small(tiny_model());
  auto bigger = tiny_model();
  bigger.n_layer = 6;
  const troupe::compute::ParameterLayout big(bigger);
  const auto& h5 = big.find("h.5.ln_1.weight");
  const auto values = distinct_values(big.total(), 0.0f);
  const auto path = dir.path() / "rank-00000.safetensors";
  REQUIRE(write_shard(path, big, 0, std::vector<Piece>{piece_of("param", values, h5.offset, h5.offset + 128)}).ok());
  auto shard = read_shard(path, small);
  REQUIRE_FALSE(shard.ok());
  CHECK(shard.error().message == "checkpoint shard '" + path.string() +
                                     "': tensor 'param/h.5.ln_1.weight' names a parameter this model does not have");
}

TEST_CASE("a token tensor's pieces are stored as one range a kind, and read as zeros or not at all", "[shard][token]") {
  TempDir dir;
  const CheckpointStore store(dir.path());
  const auto model = tiny_model();
  const troupe::compute::ParameterLayout layout(model);
  const std::int64_t total = layout.total(), half = total / 2;
  const auto params = distinct_values(total, 0.5f);
  // A sim rank's state: token tensors, which the shard records by kind and the range around them.
  const troupe::compute::Tensor state = troupe::compute::Tensor::token({total}, troupe::compute::DType::f32);
  const std::span<const float> token_values{state.data_as<float>(), static_cast<std::size_t>(total)};
  // Rank 0: the first half of the parameters stored, two runs of tokens around what rank 1 stores,
  // and the first moments as tokens (as a tensor shard holds runs between its neighbours').
  const std::vector<Piece> rank0 = {
      piece_of("param", params, 0, half), Piece{"param", half, half + 10, token_values.subspan(half, 10)},
      Piece{"param", total - 10, total, token_values.subspan(total - 10)}, Piece{"adam_m", 0, total, token_values}};
  commit_checkpoint(store, model, 10, {rank0, {piece_of("param", params, half + 10, total - 10)}});

  const auto shard_path = dir.path() / "step-0000010" / shard_file_name(0);
  // The stored half of the parameters and the header: not the tokens.
  CHECK(std::filesystem::file_size(shard_path) < static_cast<std::uintmax_t>(half) * sizeof(float) + 16384);
  auto file = SafetensorsFile::open(shard_path);
  REQUIRE(file.ok());
  CHECK(file->metadata().at("token_pieces") ==
        "adam_m 0 " + std::to_string(total) + ";param " + std::to_string(half) + " " + std::to_string(total));

  auto opened = open_checkpoint(dir.path() / "step-0000010");
  REQUIRE(opened.ok());
  CHECK(opened->value_ranges("param") ==
        std::vector<std::pair<std::int64_t, std::int64_t>>{{0, half}, {half + 10, total - 10}});
  CHECK(opened->value_ranges("adam_m").empty());
  // Into ordinary memory: stored values where a file stores them (rank 1's inside rank 0's token
  // range), zeros where only a token piece stands.
  std::vector<float> around(14);
  REQUIRE(opened->read("param", half - 2, half + 12, around).ok());
  std::vector<float> expected = {params[half - 2], params[half - 1]};
  expected.resize(12, 0.0f);
  expected.push_back(params[half + 10]);
  expected.push_back(params[half + 11]);
  CHECK(around == expected);
  // Into a token tensor: nothing written, the range still checked for being held.
  const troupe::compute::Tensor restored = troupe::compute::Tensor::token({total}, troupe::compute::DType::f32);
  CHECK(opened->read("adam_m", 0, total, {restored.data_as<float>(), static_cast<std::size_t>(total)}).ok());
  const troupe::Status missing =
      opened->read("adam_v", 0, total, {restored.data_as<float>(), static_cast<std::size_t>(total)});
  CHECK_FALSE(missing.ok());
}

TEST_CASE("a token piece outside the model is refused naming the shard and the piece", "[shard][token]") {
  TempDir dir;
  const troupe::compute::ParameterLayout layout(tiny_model());
  const auto path = dir.path() / "rank-00000.safetensors";
  REQUIRE(write_safetensors(path, {},
                            {{"troupe", "checkpoint shard"},
                             {"format_version", "1"},
                             {"token_pieces", "param 0 " + std::to_string(layout.total() + 1)}})
              .ok());
  auto shard = read_shard(path, layout);
  REQUIRE_FALSE(shard.ok());
  CHECK_THAT(shard.error().message, Catch::Contains("rank-00000.safetensors") &&
                                        Catch::Contains("token piece 'param 0 " + std::to_string(layout.total() + 1) +
                                                        "' is not <kind> <begin> <end> inside the model's"));
}
