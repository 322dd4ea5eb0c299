// The hosts troupe launch takes from a Slurm allocation: node list, tasks per node in both of
// Slurm's forms, and the errors that name the variable.

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "apps/launch/slurm_allocation.hpp"

using namespace troupe::launch;

namespace {

VariableLookup table(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

std::vector<int> counts(std::string_view text, std::size_t nodes) {
  auto expanded = expand_tasks_per_node(text, nodes);
  INFO(text << ": " << (expanded ? "" : expanded.error().message));
  REQUIRE(expanded.ok());
  return *expanded;
}

std::string problem(std::string_view text, std::size_t nodes) {
  auto counts = expand_tasks_per_node(text, nodes);
  return counts ? "" : counts.error().message;
}

}  // namespace

TEST_CASE("Slurm's compressed tasks per node expand to one count per node", "[slurm]") {
  CHECK(counts("2(x3),1", 4) == std::vector<int>{2, 2, 2, 1});
  CHECK(counts("4", 1) == std::vector<int>{4});
  CHECK(counts("1,3(x2)", 3) == std::vector<int>{1, 3, 3});
  CHECK(problem("2(x3)", 2) == "SLURM_TASKS_PER_NODE '2(x3)' does not give one count per node of the 2 in the node list");
  CHECK(problem("2", 3) == "SLURM_TASKS_PER_NODE '2' does not give one count per node of the 3 in the node list");
  CHECK(problem("2(x0)", 1) == "SLURM_TASKS_PER_NODE '2(x0)': '2(x0)' is not COUNT or COUNT(xTIMES)");
  CHECK(problem("two", 1) == "SLURM_TASKS_PER_NODE 'two': 'two' is not a task count");
  CHECK(problem("", 1) == "SLURM_TASKS_PER_NODE '': '' is not a task count");
}

TEST_CASE("an allocation's hosts come from its node list with its tasks as slots, and nothing outside one",
          "[slurm]") {
  CHECK_FALSE(slurm_allocation(table({})).has_value());
  auto per_node = slurm_allocation(table({{"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_NTASKS_PER_NODE", "4"},
                                                {"SLURM_TASKS_PER_NODE", "1(x2)"}}));
  REQUIRE(per_node.has_value());
  REQUIRE(per_node->ok());
  REQUIRE((*per_node)->hosts.size() == 2);
  CHECK((*per_node)->hosts[0].host == "gpu07");
  CHECK((*per_node)->hosts[1].host == "gpu08");
  CHECK((*per_node)->hosts[1].slots == 4);
  CHECK((*per_node)->source == "SLURM_JOB_NODELIST=gpu[07-08], SLURM_NTASKS_PER_NODE=4");
  auto compressed = slurm_allocation(table({{"SLURM_JOB_NODELIST", "a,b[1-2]"}, {"SLURM_TASKS_PER_NODE", "2,1(x2)"}}));
  REQUIRE(compressed->ok());
  CHECK((*compressed)->hosts[0].slots == 2);
  CHECK((*compressed)->hosts[2].host == "b2");
  CHECK((*compressed)->hosts[2].slots == 1);
  auto plain = slurm_allocation(table({{"SLURM_JOB_NODELIST", "n1"}}));
  CHECK((*plain)->hosts[0].slots == 1);
  auto bad_list = slurm_allocation(table({{"SLURM_JOB_NODELIST", "n[2-1]"}}));
  REQUIRE_FALSE(bad_list->ok());
  CHECK_THAT(bad_list->error().message, Catch::StartsWith("SLURM_JOB_NODELIST: "));
  auto bad_count = slurm_allocation(table({{"SLURM_JOB_NODELIST", "n1"}, {"SLURM_NTASKS_PER_NODE", "0"}}));
  REQUIRE_FALSE(bad_count->ok());
  CHECK(bad_count->error().message == "SLURM_NTASKS_PER_NODE '0' is not a task count from 1 to 65536");
  CHECK(srun_template().expand("n1", "env A=1 troupe node") ==
        "srun --nodes=1 --ntasks=1 -w n1 sh -c 'env A=1 troupe node'");
}
