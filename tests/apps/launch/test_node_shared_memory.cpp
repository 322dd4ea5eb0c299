// A local node's UCX shared-memory folder: made per node process, removed with its contents, and
// left to UCX when the environment chose its own settings; folders of a launcher that died are
// removed by the next. The same with a real job whose node is killed: test_data_parallel_run.cpp.

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "apps/launch/node_shared_memory.hpp"
#include "support/scoped_env.hpp"

using namespace troupe::launch;
using troupe::test::ScopedEnv;
namespace fs = std::filesystem;

namespace {

// A pid that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  return child;
}

}  // namespace

TEST_CASE("a node's shared-memory folder is removed with the files UCX left in it", "[launch]") {
  const ScopedEnv tls("UCX_TLS", nullptr), dir("UCX_POSIX_DIR", nullptr);
  std::string folder;
  {
    auto memory = NodeSharedMemory::create();
    REQUIRE(memory.has_value());
    folder = memory->folder();
    CHECK(folder.starts_with("/dev/shm/troupe-ucx-" + std::to_string(::getpid()) + "-"));
    CHECK(memory->variable() == std::pair<std::string, std::string>{"UCX_POSIX_DIR", folder});
    REQUIRE(fs::is_directory(folder));
    std::ofstream(folder + "/ucx_shm_posix_1a2b3c") << "a segment";
    auto other = NodeSharedMemory::create();
    REQUIRE(other.has_value());
    CHECK(other->folder() != folder);
  }
  CHECK_FALSE(fs::exists(folder));
}

TEST_CASE("UCX's own transport or folder settings are left alone", "[launch]") {
  {
    const ScopedEnv tls("UCX_TLS", "tcp,self"), dir("UCX_POSIX_DIR", nullptr);
    CHECK_FALSE(NodeSharedMemory::create().has_value());
  }
  const ScopedEnv tls("UCX_TLS", nullptr), dir("UCX_POSIX_DIR", "/dev/shm");
  CHECK_FALSE(NodeSharedMemory::create().has_value());
}

TEST_CASE("folders of a launcher that no longer runs are removed, a running one's kept", "[launch]") {
  const ScopedEnv tls("UCX_TLS", nullptr), dir("UCX_POSIX_DIR", nullptr);
  const std::string orphan = "/dev/shm/troupe-ucx-" + std::to_string(dead_pid()) + "-0";
  REQUIRE(fs::create_directory(orphan));
  std::ofstream(orphan + "/ucx_shm_posix_9f") << "left by a killed node";
  auto live = NodeSharedMemory::create();
  REQUIRE(live.has_value());
  CHECK(NodeSharedMemory::remove_orphans() >= 1);
  CHECK_FALSE(fs::exists(orphan));
  CHECK(fs::is_directory(live->folder()));
}
