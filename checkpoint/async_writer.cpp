#include "checkpoint/async_writer.hpp"

#include <exception>

#include "checkpoint/store.hpp"

namespace troupe::checkpoint {

AsyncCheckpointWriter::AsyncCheckpointWriter(std::filesystem::path dir, compute::ParameterLayout layout, int rank)
    : dir_(std::move(dir)), layout_(std::move(layout)), rank_(rank) {}

AsyncCheckpointWriter::~AsyncCheckpointWriter() { join(); }

void AsyncCheckpointWriter::join() {
  if (thread_.joinable()) thread_.join();
}

Status AsyncCheckpointWriter::submit(std::int64_t step, std::span<const Piece> pieces) {
  join();
  Status earlier;
  if (outcome_ && !outcome_->ok()) earlier = outcome_->error();
  outcome_.reset();

  // Checked here, on the caller's thread, so a caller's bug throws where it was made.
  for (const auto& p : pieces) {
    TROUPE_CHECK(valid_kind(p.kind), "piece kind '" + p.kind + "'");
    TROUPE_CHECK(0 <= p.begin && p.begin <= p.end && p.end <= layout_.total(), p.kind);
    TROUPE_CHECK(static_cast<std::int64_t>(p.values.size()) == p.end - p.begin, p.kind);
  }
  snapshot_.clear();
  for (const auto& p : pieces) snapshot_.push_back({p.kind, p.begin, p.end, {p.values.begin(), p.values.end()}});

  const std::filesystem::path path = staging_dir(dir_, step) / shard_file_name(rank_);
  thread_ = std::thread([this, path] {
    try {
      std::vector<Piece> copies;
      for (const auto& s : snapshot_) copies.push_back({s.kind, s.begin, s.end, s.values});
      outcome_.emplace(write_shard(path, layout_, rank_, copies));
    } catch (const std::exception& e) {
      outcome_.emplace(Error{"checkpoint shard '" + path.string() + "': internal error while writing: " + e.what()});
    } catch (...) {
      outcome_.emplace(Error{"checkpoint shard '" + path.string() + "': internal error while writing"});
    }
    snapshot_ = {};
  });
  return earlier;
}

Expected<FileRecord> AsyncCheckpointWriter::wait() {
  join();
  TROUPE_CHECK(outcome_.has_value(), "wait() without a submitted job");
  Expected<FileRecord> outcome = std::move(*outcome_);
  outcome_.reset();
  return outcome;
}

}  // namespace troupe::checkpoint
