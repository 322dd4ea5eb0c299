#include "apps/launch/node_shared_memory.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace troupe::launch {
namespace {

namespace fs = std::filesystem;

constexpr const char* shm_root = "/dev/shm";
constexpr std::string_view folder_prefix = "troupe-ucx-";

// The launcher pid in a folder name troupe-ucx-<pid>-<serial>; 0 for any other name.
pid_t owner_of(std::string_view name) {
  if (!name.starts_with(folder_prefix)) return 0;
  name.remove_prefix(folder_prefix.size());
  const auto dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos) return 0;
  pid_t pid = 0;
  for (char c : name.substr(0, dash)) {
    if (c < '0' || c > '9' || pid > 100'000'000) return 0;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

bool running(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

std::optional<NodeSharedMemory> NodeSharedMemory::create() {
  if (std::getenv("UCX_TLS") != nullptr || std::getenv("UCX_POSIX_DIR") != nullptr) return std::nullopt;
  static std::atomic<unsigned> serial{0};
  const std::string folder = std::string(shm_root) + "/" + std::string(folder_prefix) + std::to_string(::getpid()) +
                             "-" + std::to_string(serial++);
  if (::mkdir(folder.c_str(), 0700) != 0) return std::nullopt;
  return NodeSharedMemory(folder);
}

NodeSharedMemory::~NodeSharedMemory() {
  if (folder_.empty()) return;
  std::error_code ignored;
  fs::remove_all(folder_, ignored);
}

int NodeSharedMemory::remove_orphans() {
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(shm_root, ec), end; !ec && it != end; it.increment(ec)) {
    const pid_t owner = owner_of(it->path().filename().native());
    if (owner <= 0 || running(owner)) continue;
    std::error_code ignored;
    if (fs::remove_all(it->path(), ignored) > 0) ++removed;
  }
  return removed;
}

}  // namespace troupe::launch
