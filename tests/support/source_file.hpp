#pragma once
// A file of the source tree (a doc, a source file) read whole by a test that checks the tree
// agrees with itself; the test fails when the file is missing.

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

namespace troupe::test {

inline std::string source_text(const std::string& relative) {
  std::ifstream file(std::string(TROUPE_SOURCE_DIR) + "/" + relative, std::ios::binary);
  INFO(relative);
  REQUIRE(file.good());
  return {std::istreambuf_iterator<char>(file), {}};
}

}  // namespace troupe::test
