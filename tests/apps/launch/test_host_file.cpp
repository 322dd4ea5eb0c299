// Pins the host-file format of docs/formats/host-file.md: DeepSpeed's `hostname slots=N` lines,
// comments, repeated hosts, and one error per malformed input naming file and line.

#include <catch2/catch.hpp>

#include <string>
#include <tuple>
#include <vector>

#include "apps/launch/host_file.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::launch;

namespace {

std::string host_file_problem(const std::string& text) {
  auto parsed = parse_host_text(text, "hosts.txt");
  return parsed ? "" : parsed.error().message;
}

}  // namespace

TEST_CASE("host file format: DeepSpeed lines, comments, blanks, repeated hosts in file order", "[hostfile]") {
  const std::string text =
      "# the cluster\n"
      "node1 slots=4\n"
      "node2\tslots=2   # a trailing comment\n"
      "\n"
      "   \t\n"
      "  node1 slots=1\n"
      "gpu-7.example.com slots=8\r\n"
      "::1 slots=1#no blank before the comment\n"
      "last_host slots=3";
  auto hosts = parse_host_text(text, "hosts.txt");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 6);
  const std::vector<std::tuple<std::string, int, int>> expected = {{"node1", 4, 2}, {"node2", 2, 3},
                                                                   {"node1", 1, 6}, {"gpu-7.example.com", 8, 7},
                                                                   {"::1", 1, 8},   {"last_host", 3, 9}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK((*hosts)[i].host == std::get<0>(expected[i]));
    CHECK((*hosts)[i].slots == std::get<1>(expected[i]));
    CHECK((*hosts)[i].line == std::get<2>(expected[i]));
  }
}

TEST_CASE("host file errors name the file and line", "[hostfile]") {
  CHECK(host_file_problem("node1\n") == "hosts.txt:1: slots missing for host 'node1' (write 'node1 slots=N')");
  CHECK(host_file_problem("# c\n\nnode1 slots=0\n") == "hosts.txt:3: slots must be a positive integer, got '0'");
  CHECK(host_file_problem("node1 slots=-1") == "hosts.txt:1: slots must be a positive integer, got '-1'");
  CHECK(host_file_problem("node1 slots=+2") == "hosts.txt:1: slots must be a positive integer, got '+2'");
  CHECK(host_file_problem("node1 slots=two") == "hosts.txt:1: slots must be a positive integer, got 'two'");
  CHECK(host_file_problem("node1 slots=1.5") == "hosts.txt:1: slots must be a positive integer, got '1.5'");
  CHECK(host_file_problem("node1 slots=") == "hosts.txt:1: slots must be a positive integer, got ''");
  CHECK(host_file_problem("node1 slots=70000") == "hosts.txt:1: slots=70000 is more than 65536");
  CHECK(host_file_problem("node1 slots=99999999999999999999") ==
        "hosts.txt:1: slots=99999999999999999999 is more than 65536");
  CHECK(host_file_problem("node1 slots=2\nnode2 gpus=2\n") ==
        "hosts.txt:2: unknown key 'gpus' (the keys are slots, speed and island)");
  CHECK(host_file_problem("node1 slots=2 slots=3") == "hosts.txt:1: slots given twice");
  CHECK(host_file_problem("node1 slots 4") ==
        "hosts.txt:1: unknown word 'slots' (a line takes slots=N, speed=X, island=K and, on a spare line, spare)");
  CHECK(host_file_problem("node1 slots=2 =3") == "hosts.txt:1: expected key=value after the hostname, got '=3'");
  CHECK(host_file_problem("slots=4") == "hosts.txt:1: expected a hostname first, got 'slots=4'");
  CHECK(host_file_problem("user@node1 slots=4") ==
        "hosts.txt:1: hostname 'user@node1' may hold only letters, digits, '.', '-', '_' and ':'");
}

TEST_CASE("spare lines: DeepSpeed lines with the word spare, held apart from the node lines", "[hostfile]") {
  auto file =
      parse_host_lines("h0 slots=2\nh5 slots=2 spare # the stand-by\nh1 slots=1\nh6 spare slots=4\n", "hosts.txt");
  REQUIRE(file.ok());
  REQUIRE(file->nodes.size() == 2);
  CHECK(file->nodes[0].host == "h0");
  CHECK(file->nodes[1].host == "h1");
  CHECK(file->nodes[1].line == 3);
  REQUIRE(file->spares.size() == 2);
  CHECK(file->spares[0].host == "h5");
  CHECK(file->spares[0].slots == 2);
  CHECK(file->spares[0].line == 2);
  CHECK(file->spares[1].host == "h6");
  CHECK(file->spares[1].slots == 4);
  // Those that read only the node lines see no spare: ranks are the node lines' alone.
  auto nodes = parse_host_text("h0 slots=2\nh5 slots=2 spare\n", "hosts.txt");
  REQUIRE(nodes.ok());
  REQUIRE(nodes->size() == 1);
  CHECK((*nodes)[0].host == "h0");
}

TEST_CASE("spare lines that cannot serve are errors naming the file and line", "[hostfile]") {
  CHECK(host_file_problem("h0 slots=1\nh1 slots=1 spare spare\n") == "hosts.txt:2: spare given twice");
  CHECK(host_file_problem("h0 slots=1\nh1 slots=1 standby\n") ==
        "hosts.txt:2: unknown word 'standby' (a line takes slots=N, speed=X, island=K and, on a spare line, spare)");
  CHECK(host_file_problem("h1 spare\n") == "hosts.txt:1: slots missing for host 'h1' (write 'h1 slots=N')");
  CHECK(
      host_file_problem("h0 slots=2\nh1 slots=4\nh2 slots=1 spare\n") ==
      "hosts.txt:3: spare host 'h2' has slots=1, fewer than any node line's (the fewest is 2): it could replace none");
  CHECK(host_file_problem("# only spares\nh1 slots=1 spare\n") ==
        "hosts.txt: no node line: every host is a spare (a spare holds no ranks until a node is lost)");
}

TEST_CASE("a host file without hosts is an error naming the file", "[hostfile]") {
  CHECK(host_file_problem("") == "hosts.txt: no hosts: every line is blank or a comment");
  CHECK(host_file_problem("# only a comment\n\n   \n") == "hosts.txt: no hosts: every line is blank or a comment");
}

TEST_CASE("a host file may not ask for more than 2^24 ranks", "[hostfile]") {
  std::string text;
  for (int i = 0; i < 256; ++i) text += "node slots=65536\n";
  CHECK(parse_host_text(text, "hosts.txt").ok());
  text += "node slots=1\n";
  CHECK(host_file_problem(text) == "hosts.txt:257: the host file asks for more than 16777216 ranks");
}

TEST_CASE("parse_host_file reads a file and names it in errors", "[hostfile]") {
  test::TempDir dir;
  const std::string path = dir.write("hosts", "localhost slots=2\nlocalhost slots=1\n");
  auto hosts = parse_host_file(path);
  REQUIRE(hosts.ok());
  CHECK(hosts->size() == 2);

  const std::string bad = dir.write("bad", "localhost slots=2\nlocalhost\n");
  auto rejected = parse_host_file(bad);
  REQUIRE(!rejected.ok());
  CHECK(rejected.error().message == bad + ":2: slots missing for host 'localhost' (write 'localhost slots=N')");

  auto missing = parse_host_file(dir.file("absent"));
  REQUIRE(!missing.ok());
  CHECK(missing.error().message == dir.file("absent") + ": cannot read host file: No such file or directory");
}

TEST_CASE("speed=X declares a line's relative speed, 1 when absent, and a bad one names the file and line",
          "[hostfile][balance]") {
  auto hosts = parse_host_text("h0 slots=2 speed=0.5\nh1 slots=1\nh2 speed=2 slots=1 # fast\n", "hosts.txt");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 3);
  CHECK((*hosts)[0].speed == 0.5);
  CHECK((*hosts)[0].slots == 2);
  CHECK((*hosts)[1].speed == 1);
  CHECK((*hosts)[2].speed == 2);
  CHECK(host_file_problem("h0 slots=1\nh1 slots=1 speed=0\n") ==
        "hosts.txt:2: speed must be a positive number, got '0'");
  CHECK(host_file_problem("h0 slots=1 speed=-1") == "hosts.txt:1: speed must be a positive number, got '-1'");
  CHECK(host_file_problem("h0 slots=1 speed=fast") == "hosts.txt:1: speed must be a positive number, got 'fast'");
  CHECK(host_file_problem("h0 slots=1 speed=") == "hosts.txt:1: speed must be a positive number, got ''");
  CHECK(host_file_problem("h0 slots=1 speed=0.5x") == "hosts.txt:1: speed must be a positive number, got '0.5x'");
  CHECK(host_file_problem("h0 slots=1 speed=inf") == "hosts.txt:1: speed must be a positive number, got 'inf'");
  CHECK(host_file_problem("h0 slots=1 speed=1 speed=2") == "hosts.txt:1: speed given twice");
}
