// SLURM_JOB_NODELIST expansion: ranges, zero padding, several bracket groups, and malformed lists.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/launch/slurm_nodelist.hpp"

using namespace troupe::launch;

namespace {

std::vector<std::string> hosts(const std::string& nodelist) {
  auto expanded = expand_slurm_nodelist(nodelist);
  INFO(nodelist << ": " << (expanded ? "" : expanded.error().message));
  REQUIRE(expanded.ok());
  return *expanded;
}

std::string nodelist_problem(const std::string& nodelist) {
  auto expanded = expand_slurm_nodelist(nodelist);
  return expanded ? "" : expanded.error().message;
}

using Hosts = std::vector<std::string>;

}  // namespace

TEST_CASE("Slurm node lists expand in order with zero padding kept", "[slurm]") {
  CHECK(hosts("node[01-03,07],gpu5") == Hosts{"node01", "node02", "node03", "node07", "gpu5"});
  CHECK(hosts("gpu5") == Hosts{"gpu5"});
  CHECK(hosts("n[8-10]") == Hosts{"n8", "n9", "n10"});
  CHECK(hosts("n[08-10]") == Hosts{"n08", "n09", "n10"});
  CHECK(hosts("n[007]") == Hosts{"n007"});
  CHECK(hosts("r[1-2]n[1-2]") == Hosts{"r1n1", "r1n2", "r2n1", "r2n2"});
  CHECK(hosts("a,b[1-2]-ib,c.example.com") == Hosts{"a", "b1-ib", "b2-ib", "c.example.com"});
  CHECK(hosts("[1-2]x") == Hosts{"1x", "2x"});
}

TEST_CASE("malformed Slurm node lists are errors naming the list", "[slurm]") {
  CHECK(nodelist_problem("") == "node list is empty");
  CHECK(nodelist_problem("node[01-03") == "node list 'node[01-03': '[' without ']'");
  CHECK(nodelist_problem("node01]") == "node list 'node01]': ']' without '['");
  CHECK(nodelist_problem("n[[1]]") == "node list 'n[[1]]': nested '['");
  CHECK(nodelist_problem("a,,b") == "node list 'a,,b': empty item");
  CHECK(nodelist_problem("a,") == "node list 'a,': empty item");
  CHECK(nodelist_problem(",a") == "node list ',a': empty item");
  CHECK(nodelist_problem("n[3-1]") == "node list 'n[3-1]': range '3-1' runs backwards");
  CHECK(nodelist_problem("n[a-b]") == "node list 'n[a-b]': '[a-b]' holds 'a-b', not a number or a range low-high");
  CHECK(nodelist_problem("n[]") == "node list 'n[]': '[]' holds '', not a number or a range low-high");
  CHECK(nodelist_problem("n[1,]") == "node list 'n[1,]': '[1,]' holds '', not a number or a range low-high");
  CHECK(nodelist_problem("n[1-2-3]") ==
        "node list 'n[1-2-3]': '[1-2-3]' holds '1-2-3', not a number or a range low-high");
  CHECK(nodelist_problem("n[1234567890]") ==
        "node list 'n[1234567890]': '1234567890' has a number of more than 9 digits");
  CHECK(nodelist_problem("a b") == "node list 'a b': character ' ' is not allowed");
  CHECK(nodelist_problem("n[0-99999]") == "node list 'n[0-99999]': expands to more than 65536 hosts");
  CHECK(nodelist_problem("r[0-999]n[0-999]") == "node list 'r[0-999]n[0-999]': expands to more than 65536 hosts");
}
