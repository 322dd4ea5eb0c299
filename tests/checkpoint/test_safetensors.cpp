// The safetensors writer and reader: the byte layout (8-byte little-endian header length, JSON
// header padded to 8 bytes, raw float32 data), and one clear error per kind of malformed file.

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>

#include <nlohmann/json.hpp>

#include "checkpoint/file_hash.hpp"
#include "checkpoint/safetensors.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;
using troupe::test::TempDir;

namespace {

// A file with the given header JSON and `data_bytes` zero bytes of data.
std::vector<std::uint8_t> raw_file(const std::string& header, std::size_t data_bytes) {
  std::vector<std::uint8_t> bytes(8);
  for (int k = 0; k < 8; ++k) bytes[k] = static_cast<std::uint8_t>(std::uint64_t{header.size()} >> (8 * k));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  return bytes;
}

std::string open_error(const TempDir& dir, const std::vector<std::uint8_t>& bytes) {
  const std::string path = dir.write("bad.safetensors", bytes);
  auto file = SafetensorsFile::open(path);
  REQUIRE_FALSE(file.ok());
  const std::string prefix = "safetensors file '" + path + "': ";
  REQUIRE(file.error().message.substr(0, prefix.size()) == prefix);
  return file.error().message.substr(prefix.size());
}

}  // namespace

TEST_CASE("safetensors layout: length, padded JSON header, data, and a hash over every byte", "[safetensors]") {
  TempDir dir;
  const std::vector<float> a = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  const std::vector<float> b = {-1.5f};
  const std::vector<TensorToWrite> tensors = {{"a", {2, 3}, a}, {"b", {1}, b}};
  const auto path = dir.path() / "t.safetensors";
  auto written = write_safetensors(path, tensors, {{"format", "pt"}});
  REQUIRE(written.ok());

  const auto bytes = read_bytes(path);
  CHECK(written->bytes == bytes.size());
  CHECK(written->hash == hash_hex(std::as_bytes(std::span(bytes))));
  std::uint64_t n = 0;
  for (int k = 0; k < 8; ++k) n |= std::uint64_t{bytes[k]} << (8 * k);
  CHECK((8 + n) % 8 == 0);
  REQUIRE(bytes.size() == 8 + n + 7 * sizeof(float));
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  CHECK(header["__metadata__"] == nlohmann::json{{"format", "pt"}});
  CHECK(header["a"] == nlohmann::json{{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}});
  CHECK(header["b"] == nlohmann::json{{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {24, 28}}});

  auto file = SafetensorsFile::open(path);
  REQUIRE(file.ok());
  REQUIRE(file->tensors().size() == 2);
  CHECK(file->tensors()[0].name == "a");
  std::vector<float> out(3);
  copy_floats(file->tensors()[0], 3, out);
  CHECK(out == std::vector<float>{4.0f, 5.0f, 6.0f});
  CHECK(file->metadata().at("format") == "pt");
}

TEST_CASE("malformed safetensors files are refused naming the file and the problem", "[safetensors]") {
  TempDir dir;
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  CHECK(open_error(dir, {1, 2, 3}) == "shorter than the 8-byte header length (3 bytes)");
  CHECK(open_error(dir, {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'}) ==
        "header length 200 runs past the end of the file (10 bytes)");
  CHECK(open_error(dir, {0, 0, 0, 0, 0, 0, 0, 1}).find("over the 100 MiB limit") != std::string::npos);
  CHECK(open_error(dir, raw_file("[1, 2]", 0)) == "the header is not a JSON object");
  CHECK(open_error(dir, raw_file(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", 2)) ==
        "tensor 'a' has dtype \"I8\"; only F32, BF16 and F16 are read");
  CHECK(open_error(dir, raw_file("{" + ok_entry + "}", 4)) ==
        "tensor 'a' ends at data byte 8, past the end of the data (4 bytes; the file is truncated?)");
  CHECK(open_error(dir, raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)) ==
        "tensor 'a' has 8 data bytes, its shape [3] needs 12");
  CHECK(open_error(dir, raw_file("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)) ==
        "tensors 'a' and 'b' overlap in the data");
  CHECK(open_error(dir, raw_file("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16)) ==
        "data bytes [8, 12) belong to no tensor");
  CHECK(open_error(dir, raw_file("{" + ok_entry + "}", 12)) == "4 data bytes after the last tensor belong to no tensor");
}

// Hugging Face checkpoints store bf16 and f16; both widen to float exactly. The bit patterns are
// written by hand: 1.0, -2.5, the smallest subnormal and the largest finite value of each.
TEST_CASE("BF16 and F16 tensors are read and widened to float exactly", "[safetensors]") {
  TempDir dir;
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc020, 0x0001, 0x7f7f};
  const std::vector<std::uint16_t> f16 = {0x3c00, 0xc100, 0x0001, 0x7bff};
  std::vector<std::uint8_t> bytes = raw_file(
      R"({"b":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]},"h":{"dtype":"F16","shape":[2,2],"data_offsets":[8,16]}})",
      0);
  for (const auto* bits : {&bf16, &f16})
    for (std::uint16_t b : *bits)
      bytes.insert(bytes.end(), {static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(b >> 8)});
  auto file = SafetensorsFile::open(dir.write("half.safetensors", bytes));
  REQUIRE(file.ok());
  REQUIRE(file->tensors().size() == 2);
  CHECK(file->tensors()[0].dtype == StoredDType::bf16);
  CHECK(file->tensors()[1].dtype == StoredDType::f16);
  std::vector<float> out(4);
  copy_floats(file->tensors()[0], 0, out);
  CHECK(out == std::vector<float>{1.0f, -2.5f, std::bit_cast<float>(std::uint32_t{0x00010000}),
                                  std::bit_cast<float>(std::uint32_t{0x7f7f0000})});
  copy_floats(file->tensors()[1], 0, out);
  CHECK(out == std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24), 65504.0f});
  std::vector<float> tail(1);
  copy_floats(file->tensors()[1], 3, tail);
  CHECK(tail[0] == 65504.0f);
}
