// The control port's token file (actors/control/control_token.hpp): readable by its user alone,
// removed when the job ends, and a killed job's leftover removed by the next job that writes one.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "actors/control/control_token.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::actors;
using troupe::test::TempDir;
namespace fs = std::filesystem;

TEST_CASE("a token file is the job's alone while it runs and gone when it ends", "[control_token]") {
  TempDir dir;
  const fs::path path = dir.path() / "troupe" / "job-4100.token";
  {
    auto file = ControlTokenFile::write(path, "0123abcd");
    REQUIRE(file);
    CHECK(read_control_token(path).value() == "0123abcd");
    struct stat st{};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat(path.parent_path().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK_FALSE(fs::exists(path.string() + ".tmp"));
  }
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("token files no live job holds are removed by the next job, held ones are kept", "[control_token]") {
  TempDir dir;
  const fs::path folder = dir.path() / "troupe";
  fs::create_directories(folder);
  // What a SIGKILLed job leaves: the file, and nobody holding it.
  for (const char* name : {"job-4001.token", "job-4002.token"}) std::ofstream(folder / name) << "deadbeef\n";
  std::ofstream(folder / "notes.txt") << "not a token file\n";
  auto running = ControlTokenFile::write(folder / "job-4003.token", "live");
  REQUIRE(running);
  CHECK(running.value()->stale_removed() == 2);
  CHECK_FALSE(fs::exists(folder / "job-4001.token"));
  CHECK_FALSE(fs::exists(folder / "job-4002.token"));
  CHECK(fs::exists(folder / "notes.txt"));

  auto next = ControlTokenFile::write(folder / "job-4004.token", "also live");
  REQUIRE(next);
  CHECK(next.value()->stale_removed() == 0);
  CHECK(read_control_token(folder / "job-4003.token").value() == "live");
  CHECK(remove_unheld_control_tokens(folder) == 0);
}
