// Shard files: a rank's flat ranges cut at parameter borders into tensors named
// <kind>/<global name> (whole) or <kind>/<global name>[from:to] (slice), read back bitwise.
// Pins the tensor naming of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include <cstring>
#include <map>

#include "checkpoint/safetensors.hpp"
#include "checkpoint/shard.hpp"
#include "checkpoint/tensor_name.hpp"
#include "checkpoint_fixture.hpp"
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
