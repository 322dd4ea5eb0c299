#include "checkpoint/disk_speed.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "checkpoint/durable_file.hpp"

namespace troupe::checkpoint {

Expected<double> measure_sequential_write(const std::filesystem::path& dir, std::uint64_t bytes) {
  TROUPE_CHECK(bytes > 0, "measure zero bytes");
  constexpr std::size_t block_bytes = 8u << 20;
  // Non-zero, varied content, so a compressing or deduplicating file system cannot flatter it.
  std::vector<std::uint8_t> block(std::min<std::uint64_t>(block_bytes, bytes));
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = static_cast<std::uint8_t>(i * 2654435761u >> 13);
  const auto path = dir / (".troupe-disk-speed-" + std::to_string(::getpid()) + ".tmp");

  const auto start = std::chrono::steady_clock::now();
  auto writer = DurableWriter::create(path);
  if (!writer) return Error{"disk speed test " + writer.error().message};
  Status status;
  for (std::uint64_t left = bytes; status && left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, block.size()));
    status = writer->write(block.data(), n);
    left -= n;
  }
  if (status) status = writer->finish();
  const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  if (!status) return Error{"disk speed test " + status.error().message};
  return static_cast<double>(bytes) / std::max(seconds.count(), 1e-9);
}

}  // namespace troupe::checkpoint
