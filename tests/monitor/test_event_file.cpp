// TensorBoard event files (monitor/event_file.hpp, docs/formats/tensorboard-events.md): what we
// write is decoded here by a protobuf reader of the test's own — framing and CRCs checked, every
// field where the format puts it — and by TensorBoard's own reader
// (scripts/reference/tensorboard_read.py), which the last case skips by name without it.

#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "monitor/event_file.hpp"
#include "monitor/tfrecord.hpp"
#include "support/temp_dir.hpp"
#include "support/tensorboard_reader.hpp"

using namespace troupe::monitor;
using namespace troupe::test;

namespace {

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int count) {
  std::uint64_t v = 0;
  for (int i = count - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes.at(at + i));
  return v;
}

// The records of a file, each one's two CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at < bytes.size()) {
    REQUIRE(at + 12 <= bytes.size());
    const std::uint64_t length = little_endian(bytes, at, 8);
    REQUIRE(little_endian(bytes, at + 8, 4) == masked_crc32c(bytes.substr(at, 8)));
    REQUIRE(at + 12 + length + 4 <= bytes.size());
    const std::string data = bytes.substr(at + 12, length);
    REQUIRE(little_endian(bytes, at + 12 + length, 4) == masked_crc32c(data));
    records.push_back(data);
    at += 12 + length + 4;
  }
  return records;
}

// A protobuf message's fields: number -> raw values (varints as numbers, fixed as their bits,
// length-delimited as bytes), in order.
struct Fields {
  std::map<std::uint32_t, std::vector<std::uint64_t>> numbers;
  std::map<std::uint32_t, std::vector<std::string>> bytes;

  static Fields parse(const std::string& message) {
    Fields f;
    std::size_t at = 0;
    auto varint = [&] {
      std::uint64_t v = 0;
      for (int shift = 0;; shift += 7) {
        const auto byte = static_cast<unsigned char>(message.at(at++));
        v |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
        if (!(byte & 0x80)) return v;
      }
    };
    while (at < message.size()) {
      const std::uint64_t key = varint();
      const auto field = static_cast<std::uint32_t>(key >> 3);
      switch (key & 7) {
        case 0: f.numbers[field].push_back(varint()); break;
        case 1: f.numbers[field].push_back(little_endian(message, at, 8)), at += 8; break;
        case 5: f.numbers[field].push_back(little_endian(message, at, 4)), at += 4; break;
        case 2: {
          const std::uint64_t length = varint();
          f.bytes[field].push_back(message.substr(at, length));
          at += length;
          break;
        }
        default: FAIL("wire type " << (key & 7) << " of field " << field);
      }
    }
    return f;
  }
  std::uint64_t number(std::uint32_t field) const { return numbers.at(field).at(0); }
  const std::string& text(std::uint32_t field) const { return bytes.at(field).at(0); }
};

std::string only_file_in(const std::filesystem::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

std::string write_sample_run(const std::filesystem::path& dir) {
  auto events = EventFile::create(dir.string());
  REQUIRE(events);
  REQUIRE(events->scalar(1, "train/loss", 5.5));
  REQUIRE(events->scalar(2, "train/loss", 4.25));
  REQUIRE(events->scalar(2, "train/lr", 3e-4));
  REQUIRE(events->text(2, "recovery", "rank 1 respawned in place: 1234 bytes from rank 0 in 0.5 s"));
  return events->path();
}

}  // namespace

TEST_CASE("an event file holds the version, then scalars and texts, each framed with its crcs", "[tensorboard]") {
  TempDir dir;
  const double before = static_cast<double>(std::time(nullptr)) - 1;
  const std::string path = write_sample_run(dir.path() / "run");
  CHECK(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  CHECK(only_file_in(dir.path() / "run") == path);

  const std::vector<std::string> records = read_records(path);
  REQUIRE(records.size() == 5);
  const Fields version = Fields::parse(records[0]);
  CHECK(version.text(3) == "brain.Event:2");
  CHECK(std::bit_cast<double>(version.number(1)) >= before);

  const Fields second = Fields::parse(records[2]);
  CHECK(second.number(2) == 2);  // step
  const Fields value = Fields::parse(Fields::parse(second.text(5)).text(1));
  CHECK(value.text(1) == "train/loss");
  CHECK(std::bit_cast<float>(static_cast<std::uint32_t>(value.number(2))) == 4.25f);

  const Fields lr = Fields::parse(Fields::parse(Fields::parse(records[3]).text(5)).text(1));
  CHECK(std::bit_cast<float>(static_cast<std::uint32_t>(lr.number(2))) == 3e-4f);

  // The text: a scalar DT_STRING tensor (dtype 7, no dimensions) whose metadata names the plugin.
  const Fields text = Fields::parse(Fields::parse(Fields::parse(records[4]).text(5)).text(1));
  CHECK(text.text(1) == "recovery");
  CHECK(Fields::parse(Fields::parse(text.text(9)).text(1)).text(1) == "text");
  const Fields tensor = Fields::parse(text.text(8));
  CHECK(tensor.number(1) == 7);
  CHECK(tensor.text(2).empty());
  CHECK(tensor.text(8) == "rank 1 respawned in place: 1234 bytes from rank 0 in 0.5 s");
}

TEST_CASE("an event file that cannot be made names the folder", "[tensorboard]") {
  TempDir dir;
  const std::string blocker = dir.write("file", "not a folder");
  auto events = EventFile::create(blocker + "/run");
  REQUIRE_FALSE(events);
  CHECK_THAT(events.error().message, Catch::Contains("cannot create the folder '" + blocker + "/run'"));
}

TEST_CASE("TensorBoard's own reader reads our event files", "[tensorboard]") {
  TempDir dir;
  write_sample_run(dir.path() / "run");
  const auto read =
      read_with_tensorboard(TROUPE_SOURCE_DIR "/scripts/reference/tensorboard_read.py", (dir.path() / "run").string(),
                            Catch::getResultCapture().getCurrentTestName());
  if (!read) return;
  INFO(read->out << read->err);
  REQUIRE(read->exit_code == 0);

  CHECK_THAT(read->out, Catch::Contains("scalar train/loss 1 5.5\n"));
  CHECK_THAT(read->out, Catch::Contains("scalar train/loss 2 4.25\n"));
  CHECK_THAT(read->out, Catch::Contains("scalar train/lr 2 0.0003"));
  CHECK_THAT(read->out,
             Catch::Contains("text recovery 2 rank 1 respawned in place: 1234 bytes from rank 0 in 0.5 s\n"));
}
