// The failure kinds (actors/failure_kind.hpp): names round-trip, and the docs list
// exactly the kinds the code has — docs/drills.md's table all of them, with who names each, and
// docs/protocols/control-plane.md the ones in the job supervisor's job_outcome_msg.

#include <catch2/catch.hpp>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "actors/failure_kind.hpp"
#include "support/source_file.hpp"

using namespace troupe::actors;
using troupe::test::source_text;

TEST_CASE("every failure kind's name parses back to it, and nothing else parses", "[recovery]") {
  std::set<std::string> names;
  for (FailureKind kind : all_failure_kinds()) {
    const std::string name(to_string(kind));
    INFO(name);
    CHECK(parse_failure_kind(name) == kind);
    CHECK(names.insert(name).second);
  }
  CHECK(names.size() == 10);
  CHECK(!parse_failure_kind(""));
  CHECK(!parse_failure_kind("Node_Lost"));
  CHECK(!parse_failure_kind("meteor"));
}

TEST_CASE("docs/drills.md's table of failure kinds is the code's list, with who names each", "[recovery]") {
  const std::string doc = source_text("docs/drills.md");
  const auto section = doc.find("\n## Failure kinds\n");
  REQUIRE(section != std::string::npos);
  const std::string rest = doc.substr(section + 1);
  const std::string table = rest.substr(0, rest.find("\n## ", 1));
  // Rows: | `kind` | named by | ...
  const std::regex row(R"(\n\| `([a-z_]+)` \| ([a-z ]+) \|)");
  std::vector<std::pair<std::string, std::string>> documented;
  for (std::sregex_iterator it(table.begin(), table.end(), row), end; it != end; ++it)
    documented.emplace_back((*it)[1].str(), (*it)[2].str());
  std::vector<std::pair<std::string, std::string>> code;
  for (FailureKind kind : all_failure_kinds())
    code.emplace_back(std::string(to_string(kind)), named_by_job_supervisor(kind) ? "job supervisor" : "launch");
  CHECK(documented == code);
}

TEST_CASE("docs/protocols/control-plane.md lists the kinds the job supervisor names", "[recovery]") {
  const std::string doc = source_text("docs/protocols/control-plane.md");
  std::smatch cell;
  REQUIRE(std::regex_search(doc, cell, std::regex(R"(failure_kind \(the kinds the job supervisor names: ([^—]*)—)")));
  const std::string listed = cell[1].str();
  std::set<std::string> documented;
  const std::regex name("`([a-z_]+)`");
  for (std::sregex_iterator it(listed.begin(), listed.end(), name), end; it != end; ++it)
    documented.insert((*it)[1].str());
  std::set<std::string> code;
  for (FailureKind kind : all_failure_kinds())
    if (named_by_job_supervisor(kind)) code.insert(std::string(to_string(kind)));
  CHECK(documented == code);
}
