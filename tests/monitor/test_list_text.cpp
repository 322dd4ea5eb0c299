// Lists in log lines (monitor/list_text.hpp): numbers short as given, long in runs and bounded;
// described parts bounded with the count of the rest; so a line at a thousand ranks stays a line.

#include <catch2/catch.hpp>

#include <numeric>

#include "monitor/list_text.hpp"

using troupe::monitor::BoundedList;
using troupe::monitor::numbered;
using troupe::monitor::numbers_text;

TEST_CASE("a short list of numbers is listed as given, the last after and", "[list_text]") {
  CHECK(numbers_text({}).empty());
  CHECK(numbers_text({3}) == "3");
  CHECK(numbers_text({2, 1}) == "2 and 1");
  CHECK(numbers_text({1, 2, 3}) == "1, 2 and 3");  // no run under the limit: a list a person checks one by one
  CHECK(numbered("node", {2}) == "node 2");
  CHECK(numbered("rank", {0, 2}) == "ranks 0 and 2");
}

TEST_CASE("a long list is sorted into runs, and past the limit ends in the last two and the count", "[list_text]") {
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

TEST_CASE("a bounded list shows its first parts and counts the rest, describing only what it shows", "[list_text]") {
  BoundedList nodes(2, ", ");
  CHECK(nodes.empty());
  nodes.add("node 0 pid 7");
  CHECK(nodes.text("nodes") == "node 0 pid 7");
  int described = 0;
  for (int node = 1; node < 5; ++node)
    nodes.add_described([&] {
      ++described;
      return "node " + std::to_string(node) + " pid " + std::to_string(7 + node);
    });
  CHECK(described == 1);  // node 1 only: the list was full from node 2 on
  CHECK(nodes.text("nodes") == "node 0 pid 7, node 1 pid 8, and 3 more nodes");
  BoundedList reasons(1);
  reasons.add("rank 0 in step 3");
  reasons.add("rank 1 in step 3");
  CHECK(reasons.text("ranks") == "rank 0 in step 3; and 1 more ranks");
}
