// Token files (.bin, llm.c format): the round trip pins the byte layout documented in
// docs/formats/token-file.md; every malformed file gives an error naming the file and the problem.

#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compute/data/token_file.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::compute;
using troupe::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void put_le32(std::vector<std::uint8_t>& bytes, std::size_t offset, std::int32_t v) {
  for (int k = 0; k < 4; ++k) bytes[offset + k] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(v) >> (8 * k));
}

// A header with the given fields followed by `body_tokens` tokens (value 7).
std::vector<std::uint8_t> raw_token_file(std::int32_t magic, std::int32_t version, std::int32_t count,
                                         std::size_t body_tokens) {
  std::vector<std::uint8_t> bytes(1024 + 2 * body_tokens, 0);
  put_le32(bytes, 0, magic);
  put_le32(bytes, 4, version);
  put_le32(bytes, 8, count);
  for (std::size_t i = 0; i < body_tokens; ++i) bytes[1024 + 2 * i] = 7;
  return bytes;
}

std::string load_error(const std::string& path) {
  auto loaded = load_token_file(path);
  REQUIRE_FALSE(loaded.ok());
  return loaded.error().message;
}

}  // namespace

TEST_CASE("token file round trip pins the llm.c .bin layout", "[data]") {
  TempDir dir;
  const std::string path = dir.file("tokens.bin");
  const std::vector<std::uint16_t> tokens = {0, 1, 255, 256, 0x1234, 50256, 65535};
  REQUIRE(write_token_file(path, tokens).ok());
  CHECK_FALSE(fs::exists(path + ".tmp"));

  const std::vector<std::uint8_t> bytes = read_bytes(path);
  REQUIRE(bytes.size() == 1024 + 2 * tokens.size());
  // magic 20240520 = 0x0134D888, version 1, count 7, each little-endian int32; rest of header zero
  const std::vector<std::uint8_t> head = {0x88, 0xD8, 0x34, 0x01, 1, 0, 0, 0, 7, 0, 0, 0};
  CHECK(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + 12) == head);
  for (std::size_t i = 12; i < 1024; ++i) REQUIRE(bytes[i] == 0);
  // tokens are little-endian uint16 right after the header: 0x1234 is stored 34 12
  CHECK(bytes[1024 + 2 * 4] == 0x34);
  CHECK(bytes[1024 + 2 * 4 + 1] == 0x12);

  auto loaded = load_token_file(path);
  REQUIRE(loaded.ok());
  CHECK(*loaded == tokens);
}

TEST_CASE("token file with no tokens round-trips", "[data]") {
  TempDir dir;
  const std::string path = dir.file("empty.bin");
  REQUIRE(write_token_file(path, {}).ok());
  auto loaded = load_token_file(path);
  REQUIRE(loaded.ok());
  CHECK(loaded->empty());
}

TEST_CASE("token file write replaces an existing file", "[data]") {
  TempDir dir;
  const std::string path = dir.file("tokens.bin");
  REQUIRE(write_token_file(path, std::vector<std::uint16_t>(100, 3)).ok());
  REQUIRE(write_token_file(path, std::vector<std::uint16_t>{9, 8}).ok());
  auto loaded = load_token_file(path);
  REQUIRE(loaded.ok());
  CHECK(*loaded == std::vector<std::uint16_t>{9, 8});
}

TEST_CASE("token file errors name the file and the problem", "[data]") {
  TempDir dir;

  SECTION("missing file") {
    const std::string path = dir.file("missing.bin");
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("cannot open"));
  }
  SECTION("a device or a pipe, never opened") {
    CHECK(load_error("/dev/zero") == "token file '/dev/zero': is a character device, not a regular file");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);  // opening it would wait for a writer
    CHECK(load_error(fifo) == "token file '" + fifo + "': is a FIFO (named pipe), not a regular file");
  }
  SECTION("shorter than the header") {
    const std::string path = dir.write("short.bin", std::string(100, 'x'));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("shorter than the 1024-byte header") &&
                            Catch::Contains("100 bytes"));
  }
  SECTION("wrong magic") {
    const std::string path = dir.write("magic.bin", raw_token_file(12345, 1, 4, 4));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("wrong magic") && Catch::Contains("found 12345") &&
                            Catch::Contains("expected 20240520"));
  }
  SECTION("unsupported version") {
    const std::string path = dir.write("version.bin", raw_token_file(20240520, 2, 4, 4));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("unsupported version 2"));
  }
  SECTION("truncated body") {
    const std::string path = dir.write("truncated.bin", raw_token_file(20240520, 1, 10, 9));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("does not match the token count") &&
                            Catch::Contains("10 tokens") && Catch::Contains("1044 bytes") &&
                            Catch::Contains("1042 bytes"));
  }
  SECTION("trailing bytes after the tokens") {
    const std::string path = dir.write("long.bin", raw_token_file(20240520, 1, 3, 5));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("3 tokens") && Catch::Contains("1030 bytes") &&
                            Catch::Contains("1034 bytes"));
  }
  SECTION("negative count") {
    const std::string path = dir.write("negative.bin", raw_token_file(20240520, 1, -1, 0));
    const std::string message = load_error(path);
    CHECK_THAT(message, Catch::Contains(path) && Catch::Contains("negative token count -1"));
  }
  SECTION("write into a missing directory") {
    const std::string path = dir.file("no-such-dir/tokens.bin");
    troupe::Status written = write_token_file(path, std::vector<std::uint16_t>{1, 2});
    REQUIRE_FALSE(written.ok());
    CHECK_THAT(written.error().message, Catch::Contains(path + ".tmp") && Catch::Contains("cannot create"));
  }
}
