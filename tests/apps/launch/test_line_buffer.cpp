// Line cutting for forwarded output: whole lines from arbitrary pieces, long lines cut.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/launch/line_buffer.hpp"

using namespace troupe::launch;

namespace {

using Lines = std::vector<std::string>;

Lines cut(std::size_t max_line, const std::vector<std::string>& pieces, bool finish = true) {
  Lines lines;
  LineBuffer buffer(max_line);
  const auto emit = [&](std::string_view line) { lines.emplace_back(line); };
  for (const auto& piece : pieces) buffer.append(piece, emit);
  if (finish) buffer.finish(emit);
  return lines;
}

}  // namespace

TEST_CASE("pieces become whole lines and the unterminated end comes out at finish", "[lines]") {
  CHECK(cut(100, {"ab", "c\nde", "f\n\ng"}, false) == Lines{"abc", "def", ""});
  CHECK(cut(100, {"ab", "c\nde", "f\n\ng"}) == Lines{"abc", "def", "", "g"});
  CHECK(cut(100, {"one\ntwo\n"}) == Lines{"one", "two"});
  CHECK(cut(100, {}) == Lines{});
  CHECK(cut(100, {"a", "b", "c"}) == Lines{"abc"});
}

TEST_CASE("every split of a stream gives the same lines", "[lines]") {
  const std::string stream = "first line\nsecond\n\nfourth is longer than the others\nend";
  const Lines whole = cut(100, {stream});
  for (std::size_t at = 0; at <= stream.size(); ++at) {
    CHECK(cut(100, {stream.substr(0, at), stream.substr(at)}) == whole);
  }
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  CHECK(cut(100, bytes) == whole);
}

TEST_CASE("a line longer than the limit is cut into pieces of the limit", "[lines]") {
  CHECK(cut(4, {"abcdefghij\nxy\n"}) == Lines{"abcd", "efgh", "ij", "xy"});
  CHECK(cut(4, {"ab", "cdef", "ghij\n"}) == Lines{"abcd", "efgh", "ij"});
  CHECK(cut(4, {"abcd\n"}) == Lines{"abcd"});
  CHECK(cut(4, {"abcd", "\n", "e"}) == Lines{"abcd", "e"});
  CHECK(cut(4, {"abcd"}) == Lines{"abcd"});
}
