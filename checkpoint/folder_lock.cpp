#include "checkpoint/folder_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

namespace troupe::checkpoint {
namespace {

namespace fs = std::filesystem;

// Arguments joined by spaces, control characters as spaces: the holder is named on one line.
std::string this_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  for (char& c : text)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return text;
}

std::string this_host() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// The holder the open lock file names; none when it is empty (being written) or not ours.
std::optional<LockHolder> read_holder(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<std::size_t>(n));
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object() || !json.contains("pid") || !json["pid"].is_number_integer()) return std::nullopt;
  LockHolder holder;
  holder.pid = json["pid"].get<long>();
  holder.host = json.value("host", "");
  holder.started = json.value("started", "");
  holder.command = json.value("command", "");
  return holder;
}

Status write_holder(int fd, const LockHolder& holder) {
  const std::string text =
      nlohmann::json{{"pid", holder.pid}, {"host", holder.host}, {"started", holder.started}, {"command", holder.command}}
          .dump() +
      "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    return Error{std::strerror(errno)};
  return Status::success();
}

// Whether `fd` is still the file at `path`: a holder that releases removes the file while it
// holds it, and a lock taken on the removed file guards nothing.
bool still_at(int fd, const fs::path& path) {
  struct stat opened {}, named {};
  return ::fstat(fd, &opened) == 0 && ::stat(path.c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
         opened.st_ino == named.st_ino;
}

}  // namespace

std::string describe(const LockHolder& holder) {
  return "pid " + std::to_string(holder.pid) + " on host " + holder.host + ", started " + holder.started + ": " +
         holder.command;
}

fs::path lock_path(const fs::path& dir) { return dir / "lock"; }

Expected<std::unique_ptr<FolderLock>> FolderLock::take(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error{"cannot create the checkpoint folder " + dir.string() + ": " + ec.message()};
  const fs::path path = lock_path(dir);
  auto cannot = [&](int err) { return Error{"cannot take the checkpoint folder's lock " + path.string() + ": " + std::strerror(err)}; };
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return cannot(errno);
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::optional<LockHolder> holder = err == EWOULDBLOCK ? read_holder(fd) : std::nullopt;
      ::close(fd);
      if (err != EWOULDBLOCK) return cannot(err);
      if (!holder)
        return Error{"checkpoint folder " + dir.string() + " is in use by another job (its lock file " + path.string() +
                     " names no holder yet); let it finish or give this job another checkpoint.dir"};
      return Error{"checkpoint folder " + dir.string() + " is in use by another job (" + describe(*holder) +
                   "); let it finish or give this job another checkpoint.dir"};
    }
    if (!still_at(fd, path)) {
      ::close(fd);
      continue;
    }
    std::optional<LockHolder> dead = read_holder(fd);
    const LockHolder self{static_cast<long>(::getpid()), this_host(), utc_now(), this_command_line()};
    if (Status written = write_holder(fd, self); !written) {
      ::unlink(path.c_str());
      ::close(fd);
      return Error{"cannot write the checkpoint folder's lock " + path.string() + ": " + written.error().message};
    }
    return std::unique_ptr<FolderLock>(new FolderLock(path, fd, std::move(dead)));
  }
}

FolderLock::~FolderLock() {
  ::unlink(path_.c_str());
  ::close(held_fd_);
}

}  // namespace troupe::checkpoint
