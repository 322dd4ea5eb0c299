#include "checkpoint/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace troupe::checkpoint {
namespace {

Error path_error(const std::filesystem::path& path, const std::string& action, int err) {
  return Error{"'" + path.string() + "': cannot " + action + ": " + std::strerror(err)};
}

}  // namespace

Expected<DurableWriter> DurableWriter::create(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return path_error(path, "create", errno);
  return DurableWriter(path, fd);
}

DurableWriter::DurableWriter(DurableWriter&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}

DurableWriter::~DurableWriter() {
  if (fd_ >= 0) ::close(fd_);
}

Error DurableWriter::error(const std::string& action, int err) const { return path_error(path_, action, err); }

Status DurableWriter::write(const void* data, std::size_t size) {
  TROUPE_CHECK(fd_ >= 0, "write after finish");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    // Linux writes at most ~2 GiB per call; a short write is not an error, just a partial one.
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return error("write", errno);
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return Status::success();
}

Status DurableWriter::finish() {
  TROUPE_CHECK(fd_ >= 0, "finish twice");
  if (::fsync(fd_) != 0) return error("sync to disk", errno);
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) return error("close", errno);
  return Status::success();
}

Status fsync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return path_error(path, "open to sync", errno);
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!synced) return path_error(path, "sync to disk", err);
  return Status::success();
}

Status replace_file(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  auto writer = DurableWriter::create(tmp);
  if (!writer) return writer.error();
  Status written = writer->write(content.data(), content.size());
  if (written) written = writer->finish();
  std::error_code ec;
  if (!written) {
    std::filesystem::remove(tmp, ec);
    return written;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Error{"'" + path.string() + "': cannot rename " + tmp.filename().string() + " into place: " + ec.message()};
  }
  return fsync_path(path.parent_path().empty() ? "." : path.parent_path());
}

}  // namespace troupe::checkpoint
