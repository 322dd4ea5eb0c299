// Pins the islands of a host file (docs/formats/host-file.md, "Islands"): `island=K` on every node
// line, the lines ordered so that each line's ranks are in its island, and one error per host file
// that cannot be so placed.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/launch/host_file.hpp"
#include "apps/launch/island_placement.hpp"

using namespace troupe;
using namespace troupe::launch;

namespace {

std::vector<HostEntry> lines(const std::string& text) { return parse_host_text(text, "hosts.txt").value(); }

std::string placement_problem(const std::string& text) {
  auto parsed = parse_host_text(text, "hosts.txt");
  return parsed ? "" : parsed.error().message;
}

std::vector<std::string> hosts(const std::vector<HostEntry>& placed) {
  std::vector<std::string> names;
  for (const HostEntry& node : placed) names.push_back(node.host);
  return names;
}

// The islands of consecutive dp places: ranks r of K islands each of `size` consecutive ranks.
std::vector<int> consecutive(int islands, int size) {
  std::vector<int> of;
  for (int island = 0; island < islands; ++island) of.insert(of.end(), static_cast<std::size_t>(size), island);
  return of;
}

}  // namespace

TEST_CASE("host file islands: island=K read on node lines, every node line or none, never on a spare", "[hostfile]") {
  const auto nodes = lines("a slots=2 island=1\nb island=0 slots=2\nc slots=2 spare\n");
  CHECK(nodes[0].island == 1);
  CHECK(nodes[1].island == 0);
  CHECK(lines("a slots=2\nb slots=2\n")[0].island == -1);
  CHECK(placement_problem("a slots=1 island=0\nb slots=1\n") ==
        "hosts.txt:2: island missing for host 'b' (once a node line names its island, every node line does)");
  CHECK(placement_problem("a slots=1 island=0 island=1\n") == "hosts.txt:1: island given twice");
  CHECK(placement_problem("a slots=1 island=-1\n") ==
        "hosts.txt:1: island must be an integer from 0 to 65535, got '-1'");
  CHECK(placement_problem("a slots=1 island=65536\n") ==
        "hosts.txt:1: island must be an integer from 0 to 65535, got '65536'");
  CHECK(placement_problem("a slots=1 island=\n") == "hosts.txt:1: island must be an integer from 0 to 65535, got ''");
  CHECK(placement_problem("a slots=1 island=0\nb slots=1 spare island=0\n") ==
        "hosts.txt:2: a spare line names no island (it takes the island of the node it replaces)");
}

TEST_CASE("host file islands: the lines are ordered so that each line's ranks are in its island, file order within "
          "an island",
          "[hostfile]") {
  // Two sites written interleaved: islands of 4 consecutive ranks.
  const auto nodes = lines("siteB-1 slots=2 island=1\nsiteA-1 slots=2 island=0\nsiteB-2 slots=2 island=1\n"
                           "siteA-2 slots=2 island=0\n");
  auto placed = place_islands(nodes, consecutive(2, 4), 2, "hosts.txt");
  REQUIRE(placed.ok());
  CHECK(hosts(*placed) == std::vector<std::string>{"siteA-1", "siteA-2", "siteB-1", "siteB-2"});
  CHECK(describe_island_placement(*placed, 2) ==
        "island 0: siteA-1 (line 2), siteA-2 (line 4); island 1: siteB-1 (line 1), siteB-2 (line 3)");

  // Two pipeline stages, two islands of one replica each: ranks 0, 1 are stage 0 of islands 0 and 1,
  // ranks 2, 3 stage 1 of them (comm::island_of); one-slot lines interleave as the grid wants.
  const auto staged = lines("b0 slots=1 island=1\nb1 slots=1 island=1\na0 slots=1 island=0\na1 slots=1 island=0\n");
  auto interleaved = place_islands(staged, {0, 1, 0, 1}, 2, "hosts.txt");
  REQUIRE(interleaved.ok());
  CHECK(hosts(*interleaved) == std::vector<std::string>{"a0", "b0", "a1", "b1"});
}

TEST_CASE("host file islands: lines that cannot hold the job's islands are refused in one line naming the file",
          "[hostfile]") {
  auto error = [](const std::string& text, const std::vector<int>& of, int islands) {
    auto placed = place_islands(lines(text), of, islands, "hosts.txt");
    return placed ? std::string() : placed.error().message;
  };
  CHECK(error("a slots=1 island=0\nb slots=1 island=2\n", consecutive(2, 1), 2) ==
        "hosts.txt:2: island=2 is not an island of the job (train.islands 2: islands 0 to 1)");
  CHECK(error("a slots=1 island=0\nb slots=1 island=0\n", consecutive(2, 1), 2) ==
        "hosts.txt: island 1 has no line (train.islands 2: every island from 0 to 1 needs its lines)");
  CHECK(error("a slots=3 island=0\nb slots=1 island=1\n", consecutive(2, 2), 2) ==
        "hosts.txt: the lines of island 0 hold 3 slot(s), and each island of the job holds 2 rank(s) (train.islands 2 "
        "of 4)");
  CHECK(error("a slots=2 island=0\nb slots=2 island=1\n", {0, 1, 0, 1}, 2) ==
        "hosts.txt:1: its 2 slots would hold ranks 0 to 1, and rank 1 is in island 1, not 0 (with pipeline stages an "
        "island's ranks are not consecutive: give its lines fewer slots)");
}
