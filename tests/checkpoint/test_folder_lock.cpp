// The checkpoint folder's lock file: its format (docs/formats/checkpoint.md, "The lock"), a second
// taker refused with the holder named, release on destruction and the take-over of a dead
// holder's leftover. A flock conflicts between two open files of one process as between two
// processes, so one test process can play both jobs.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "checkpoint/folder_lock.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::checkpoint;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST_CASE("the lock file is one JSON line naming the holder's pid, host, start time and command", "[checkpoint]") {
  troupe::test::TempDir dir;
  const fs::path folder = dir.path() / "new" / "ckpt";
  auto lock = FolderLock::take(folder);
  REQUIRE(lock.ok());
  CHECK_FALSE((*lock)->taken_over());
  const std::string text = read_text(lock_path(folder));
  REQUIRE(text.ends_with("}\n"));
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  const nlohmann::json json = nlohmann::json::parse(text);
  CHECK(json.size() == 4);
  CHECK(json.at("pid").get<long>() == ::getpid());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(json.at("host").get<std::string>() == host);
  CHECK(std::regex_match(json.at("started").get<std::string>(),
                         std::regex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")));
  CHECK_THAT(json.at("command").get<std::string>(), Contains("test_checkpoint"));
}

TEST_CASE("a second taker is refused with the holder named, and takes the folder once it is released",
          "[checkpoint]") {
  troupe::test::TempDir dir;
  auto first = FolderLock::take(dir.path());
  REQUIRE(first.ok());
  const auto second = FolderLock::take(dir.path());
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(second.error().message,
             Contains("checkpoint folder " + dir.path().string() + " is in use by another job (pid " +
                      std::to_string(::getpid()) + " on host ") &&
                 Contains("test_checkpoint") && Contains("give this job another checkpoint.dir"));
  first->reset();
  CHECK_FALSE(fs::exists(lock_path(dir.path())));
  auto third = FolderLock::take(dir.path());
  REQUIRE(third.ok());
  CHECK_FALSE((*third)->taken_over());
}

TEST_CASE("a lock file nobody holds is a dead job's and is taken over, naming it", "[checkpoint]") {
  troupe::test::TempDir dir;
  std::ofstream(lock_path(dir.path()))
      << R"({"command":"troupe train --checkpoint.dir x","host":"gone","pid":999999,"started":"2026-01-02T03:04:05Z"})"
      << "\n";
  auto lock = FolderLock::take(dir.path());
  REQUIRE(lock.ok());
  REQUIRE((*lock)->taken_over());
  CHECK(describe(*(*lock)->taken_over()) ==
        "pid 999999 on host gone, started 2026-01-02T03:04:05Z: troupe train --checkpoint.dir x");
  CHECK(nlohmann::json::parse(read_text(lock_path(dir.path()))).at("pid").get<long>() == ::getpid());
}

TEST_CASE("a held lock file that names nobody yet is refused as in use", "[checkpoint]") {
  troupe::test::TempDir dir;
  const int fd = ::open(lock_path(dir.path()).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const auto refused = FolderLock::take(dir.path());
  ::close(fd);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Contains("is in use by another job (its lock file " +
                                               lock_path(dir.path()).string() + " names no holder yet)"));
}
