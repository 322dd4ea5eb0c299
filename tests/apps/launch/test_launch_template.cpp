// The launcher template and the remote command line: quoting that a real shell reads back to the
// exact argv and environment.

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "apps/launch/launch_template.hpp"
#include "support/run_process.hpp"

using namespace troupe::launch;

TEST_CASE("a launcher template needs {host} and {command}", "[template]") {
  auto no_command = LaunchTemplate::parse("ssh {host}");
  REQUIRE(!no_command.ok());
  CHECK(no_command.error().message ==
        "launcher template 'ssh {host}' has no {command} (for example 'ssh {host} {command}')");
  auto no_host = LaunchTemplate::parse("srun {command}");
  REQUIRE(!no_host.ok());
  CHECK(no_host.error().message ==
        "launcher template 'srun {command}' has no {host} (for example 'ssh {host} {command}')");
  auto srun = LaunchTemplate::parse("srun -N1 -n1 -w {host} sh -c {command}");
  REQUIRE(srun.ok());
  CHECK(srun->expand("gpu01", "env RANK=0 troupe node") == "srun -N1 -n1 -w gpu01 sh -c 'env RANK=0 troupe node'");
}

TEST_CASE("the ssh template puts the quoted command after the host", "[template]") {
  const Environment env = {{"RANK", "4"}, {"TROUPE_TOKEN", "a b"}};
  const std::string command = remote_command_line(env, {"/opt/troupe", "node", "--config", "it's.toml"});
  CHECK(command == R"(env RANK=4 'TROUPE_TOKEN=a b' /opt/troupe node --config 'it'\''s.toml')");
  CHECK(LaunchTemplate::ssh().expand("node7", command) ==
        R"(ssh -o BatchMode=yes node7 'env RANK=4 '\''TROUPE_TOKEN=a b'\'' )"
        R"(/opt/troupe node --config '\''it'\''\'\'''\''s.toml'\''')");
  CHECK(LaunchTemplate::ssh().text() == "ssh -o BatchMode=yes {host} {command}");
}

TEST_CASE("shell_quote leaves safe words alone and quotes the rest", "[template]") {
  CHECK(shell_quote("node-1.example.com") == "node-1.example.com");
  CHECK(shell_quote("RANK=0") == "RANK=0");
  CHECK(shell_quote("") == "''");
  CHECK(shell_quote("a b") == "'a b'");
  CHECK(shell_quote("it's") == R"('it'\''s')");
  CHECK(shell_quote("$HOME") == "'$HOME'");
}

TEST_CASE("a shell reads a quoted word back unchanged", "[template]") {
  const std::vector<std::string> words = {"plain", "", "two words", "it's", "\"dq\"", "$HOME `x` \\n", "a\nb", "*"};
  for (const std::string& word : words) {
    // printf '%s|' WORD, run by sh: the word as the shell parsed it, between bars.
    const auto result =
        troupe::test::run_process({"/bin/sh", "-c", "printf '%s|' " + shell_quote(word)}, ".", std::chrono::seconds(5));
    CHECK(result.out == word + "|");
  }
}

TEST_CASE("a command line run by a template's shell gets the argv and environment given", "[template]") {
  const Environment env = {{"RANK", "3"}, {"ODD", "x 'y' $z"}};
  const std::string command = remote_command_line(
      env, {"/bin/sh", "-c", "printf '%s|%s|%s' \"$RANK\" \"$ODD\" \"$1\"", "sh", "arg with 'quotes'"});
  auto fake_remote = LaunchTemplate::parse("sh -c {command} {host}");
  REQUIRE(fake_remote.ok());
  const auto result =
      troupe::test::run_process({"/bin/sh", "-c", fake_remote->expand("far", command)}, ".", std::chrono::seconds(5));
  CHECK(result.exit_code == 0);
  CHECK(result.out == "3|x 'y' $z|arg with 'quotes'");
}
