// The memory figures a job is checked against: MemAvailable and a cgroup's limit, as the kernel
// writes them, and this machine's own figure.

#include <catch2/catch.hpp>

#include "apps/launch/host_memory.hpp"

using namespace troupe::launch;

TEST_CASE("MemAvailable is read from /proc/meminfo text in bytes", "[launch]") {
  const char* meminfo =
      "MemTotal:       24576000 kB\n"
      "MemFree:        20000000 kB\n"
      "MemAvailable:   22025252 kB\n"
      "Buffers:          123456 kB\n";
  CHECK(parse_mem_available(meminfo) == std::uint64_t{22025252} * 1024);
  CHECK_FALSE(parse_mem_available("MemTotal: 1 kB\n").has_value());
  CHECK_FALSE(parse_mem_available("MemAvailable: lots\n").has_value());
}

TEST_CASE("a cgroup limit is a number of bytes, and max or v1's huge value mean none", "[launch]") {
  CHECK(parse_cgroup_limit("1073741824\n") == std::uint64_t{1} << 30);
  CHECK_FALSE(parse_cgroup_limit("max\n").has_value());
  CHECK_FALSE(parse_cgroup_limit("9223372036854771712\n").has_value());
  CHECK_FALSE(parse_cgroup_limit("").has_value());
}

TEST_CASE("this machine reports some memory available", "[launch]") {
  const auto memory = host_memory();
  REQUIRE(memory.has_value());
  CHECK(memory->available_bytes > 0);
  CHECK((memory->source == "MemAvailable" || memory->source == "cgroup memory limit"));
}
