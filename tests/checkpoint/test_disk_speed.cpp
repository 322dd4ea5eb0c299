// The disk speed reference for the checkpoint bench: a positive rate, no file left behind.

#include <catch2/catch.hpp>

#include "checkpoint/disk_speed.hpp"
#include "support/temp_dir.hpp"

using troupe::test::TempDir;

TEST_CASE("sequential write speed is positive and leaves no file", "[disk]") {
  TempDir dir;
  auto speed = troupe::checkpoint::measure_sequential_write(dir.path(), 4u << 20);
  REQUIRE(speed.ok());
  CHECK(*speed > 0.0);
  CHECK(std::filesystem::is_empty(dir.path()));

  auto missing = troupe::checkpoint::measure_sequential_write(dir.path() / "missing", 1024);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.starts_with("disk speed test '" + (dir.path() / "missing").string()));
}
