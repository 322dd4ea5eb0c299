#pragma once
// Shared memory a local node process leaves behind when it is killed. UCX's posix transport
// names its backing files /dev/shm/ucx_shm_posix_<random hex> (src/uct/sm/mm/posix/mm_posix.c):
// nothing in the name says whose they are. It unlinks a file once the segment is mapped, unless
// UCX_POSIX_USE_PROC_LINK=n, but a process killed before that (while UCX fills a large segment,
// say, under memory pressure) leaves the file behind for good.
//
// So the launcher gives each local node process a folder of its own, /dev/shm/troupe-ucx-<the
// launcher's pid>-<serial>, through UCX_POSIX_DIR, and removes the folder with whatever is in
// it once the node has exited, however it ended. Folders of a launcher that was itself killed
// are removed by the next launcher on this machine. Only when the environment leaves UCX's
// transports and the posix folder to Troupe (UCX_TLS and UCX_POSIX_DIR unset); otherwise UCX's
// own settings stand.

#include <optional>
#include <string>
#include <utility>

namespace troupe::launch {

class NodeSharedMemory {
 public:
  // A new folder for one node process; nullopt when the environment chose UCX's settings or the
  // folder cannot be made (the node then uses UCX's default and nothing is cleaned).
  static std::optional<NodeSharedMemory> create();
  // Removes the folder and its files.
  ~NodeSharedMemory();
  NodeSharedMemory(NodeSharedMemory&& other) noexcept : folder_(std::exchange(other.folder_, {})) {}
  // The folder this held goes with `other`, which removes it.
  NodeSharedMemory& operator=(NodeSharedMemory&& other) noexcept {
    std::swap(folder_, other.folder_);
    return *this;
  }
  NodeSharedMemory(const NodeSharedMemory&) = delete;

  const std::string& folder() const { return folder_; }
  // The variable that points the node's UCX there.
  std::pair<std::string, std::string> variable() const { return {"UCX_POSIX_DIR", folder_}; }

  // Removes the folders whose launcher is no longer running; returns how many.
  static int remove_orphans();

 private:
  explicit NodeSharedMemory(std::string folder) : folder_(std::move(folder)) {}
  std::string folder_;
};

}  // namespace troupe::launch
