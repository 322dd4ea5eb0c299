// The memory each rank may use: --memory-limit as written, else this machine's memory shared by the
// job's ranks on it, with the figure's source said.

#include <catch2/catch.hpp>

#include <string>

#include "apps/config/rank_memory.hpp"
#include "apps/launch/host_memory.hpp"

using troupe::apps::parse_memory_limit;
using troupe::apps::rank_memory;

TEST_CASE("a --memory-limit takes binary and decimal units and plain bytes", "[config]") {
  CHECK(parse_memory_limit("512MiB").value() == 512.0 * 1024 * 1024);
  CHECK(parse_memory_limit("6GiB").value() == 6.0 * 1024 * 1024 * 1024);
  CHECK(parse_memory_limit("2G").value() == 2e9);
  CHECK(parse_memory_limit("1.5 GB").value() == 1.5e9);
  CHECK(parse_memory_limit("1048576").value() == 1048576.0);
  // Every unit Troupe prints sizes in is one it reads.
  CHECK(parse_memory_limit("2PiB").value() == 2.0 * 1024 * 1024 * 1024 * 1024 * 1024);
  CHECK(parse_memory_limit("1 EiB").value() == 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024);
  CHECK(parse_memory_limit("3PB").value() == 3e15);
  CHECK(parse_memory_limit("1P").value() == 1e15);
}

TEST_CASE("a --memory-limit that is not a positive size is one line naming it", "[config]") {
  for (const std::string bad : {"12XB", "0", "-1GiB", "GiB", "", "6 GiBs", "inf", "0x10", "0x1p30", " 5GB", "+5GB"}) {
    INFO(bad);
    const auto parsed = parse_memory_limit(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().message ==
          "--memory-limit " + bad + ": not a positive size (write it as 6GiB, 512MiB, 2G or a number of bytes)");
  }
}

TEST_CASE("a given limit is every rank's, wherever the ranks run", "[config]") {
  const auto limited = rank_memory(4e9, 0);
  REQUIRE(limited.has_value());
  CHECK(limited->bytes == 4e9);
  CHECK(limited->source == "--memory-limit");
}

// A limit beyond this machine (1e30 bytes) does not let a job past the memory check it would fail
// with this machine's own figure: the ranks here get the smaller, and the source says why.
TEST_CASE("a limit never gives the ranks on this machine more than their share of it", "[config]") {
  const auto host = troupe::launch::host_memory();
  REQUIRE(host.has_value());
  const auto capped = rank_memory(1e30, 2);
  REQUIRE(capped.has_value());
  CHECK(capped->bytes == Approx(double(host->available_bytes) / 2).epsilon(0.1));
  CHECK(capped->source == host->source + " / 2 ranks on this machine, less than --memory-limit");
  const auto lower = rank_memory(1e6, 2);
  REQUIRE(lower.has_value());
  CHECK(lower->bytes == 1e6);
  CHECK(lower->source == "--memory-limit");
}

TEST_CASE("without a limit the ranks on this machine share its memory, and none here means unknown", "[config]") {
  CHECK_FALSE(rank_memory(std::nullopt, 0).has_value());
  const auto host = troupe::launch::host_memory();
  REQUIRE(host.has_value());
  const auto shared = rank_memory(std::nullopt, 4);
  REQUIRE(shared.has_value());
  // The machine's figure moves between the two reads; the share is a quarter of it, give or take.
  CHECK(shared->bytes == Approx(double(host->available_bytes) / 4).epsilon(0.1));
  CHECK(shared->source == host->source + " / 4 ranks on this machine");
  CHECK(rank_memory(std::nullopt, 1)->source == host->source + " / 1 rank on this machine");
}
