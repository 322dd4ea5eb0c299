// Rank and node lists in log lines (monitor/numbers_text.hpp): short ones as given, long ones in runs and
// bounded, so a line at a thousand ranks stays a line.

#include <catch2/catch.hpp>

#include <numeric>

#include "monitor/numbers_text.hpp"

using troupe::monitor::numbered;
using troupe::monitor::numbers_text;

TEST_CASE("a short list of numbers is listed as given, the last after and", "[numbers_text]") {
  CHECK(numbers_text({}).empty());
  CHECK(numbers_text({3}) == "3");
  CHECK(numbers_text({2, 1}) == "2 and 1");
  CHECK(numbers_text({1, 2, 3}) == "1, 2 and 3");  // no run under the limit: a list a person checks one by one
  CHECK(numbered("node", {2}) == "node 2");
  CHECK(numbered("rank", {0, 2}) == "ranks 0 and 2");
}

TEST_CASE("a long list is sorted into runs, and past the limit ends in the last two and the count", "[numbers_text]") {
  std::vector<int> node(32);
  std::iota(node.begin(), node.end(), 32);  // a node of 32 ranks, as a new process holds them
  CHECK(numbered("rank", node) == "ranks 32-63");

  std::vector<int> two_nodes = node;
  two_nodes.push_back(0);
  two_nodes.push_back(5);
  two_nodes.push_back(6);
  CHECK(numbers_text(two_nodes) == "0, 5, 6 and 32-63");  // a pair is not a run

  std::vector<int> every_other;  // the donors of a recovery: one replica's ranks
  for (int rank = 2; rank <= 1018; rank += 2) every_other.push_back(rank);
  every_other.push_back(7);
  every_other.push_back(9);
  every_other.push_back(8);  // given twice: listed and counted once
  const std::string text = numbers_text(every_other);
  CHECK(text == "2, 4, 6-10, 12, 14, 16, 18, 20, 22, 24, …, 1016 and 1018 (511 in all)");
  CHECK(numbers_text(every_other, 5) == "2, 4, 6-10, …, 1016 and 1018 (511 in all)");
  CHECK(text.size() < 100);
}
