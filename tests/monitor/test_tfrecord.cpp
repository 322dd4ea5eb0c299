// TFRecord framing (monitor/tfrecord.hpp): CRC32C against the published check values (RFC 3720's
// iSCSI vectors and the CRC catalogue's "123456789"), the mask against its definition, and a
// record's layout byte by byte.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "monitor/tfrecord.hpp"

using namespace troupe::monitor;

TEST_CASE("crc32c gives the published check values", "[tensorboard]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  CHECK(crc32c(ascending) == 0x46DD794Eu);
  CHECK(crc32c(descending) == 0x113FDB5Cu);
  CHECK(crc32c("") == 0u);
}

TEST_CASE("the masked crc rotates right by 15 and adds 0xa282ead8", "[tensorboard]") {
  const std::uint32_t c = 0xE3069283u;
  CHECK(masked_crc32c("123456789") == static_cast<std::uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("a record is its length, the length's masked crc, the data and the data's masked crc", "[tensorboard]") {
  const std::string data = "hello, tensorboard";
  const std::string record = tfrecord(data);
  REQUIRE(record.size() == 8 + 4 + data.size() + 4);
  auto u32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(record[at + i]);
    return v;
  };
  CHECK(static_cast<unsigned char>(record[0]) == data.size());
  CHECK(record.substr(1, 7) == std::string(7, '\0'));
  CHECK(u32(8) == masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, data.size()) == data);
  CHECK(u32(12 + data.size()) == masked_crc32c(data));
}
