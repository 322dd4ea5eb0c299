#include "checkpoint/async_writer.hpp"

#include <exception>

#include "checkpoint/store.hpp"

namespace troupe::checkpoint {

AsyncCheckpointWriter::AsyncCheckpointWriter(std::filesystem::path dir, compute::ParameterLayout layout, int rank,
                                             FailureCallback on_failure)
    : dir_(std::move(dir)), layout_(std::move(layout)), rank_(rank), on_failure_(std::move(on_failure)) {}

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
  // Copied into the previous job's buffers: a run's pieces keep their sizes from save to save, and
  // fresh memory would cost the training thread its page faults, three to four times the copy.
  snapshot_.resize(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    Snapshot& s = snapshot_[i];
    s.kind = p.kind;
    s.begin = p.begin;
    s.end = p.end;
    s.values.assign(p.values.begin(), p.values.end());
  }

  const std::filesystem::path path = staging_dir(dir_, step) / shard_file_name(rank_);
  thread_ = std::thread([this, path, step] {
    try {
      std::vector<Piece> copies;
      for (const auto& s : snapshot_) copies.push_back({s.kind, s.begin, s.end, s.values});
      outcome_.emplace(write_shard(path, layout_, rank_, copies));
    } catch (const std::exception& e) {
      outcome_.emplace(Error{"checkpoint shard '" + path.string() + "': internal error while writing: " + e.what()});
    } catch (...) {
      outcome_.emplace(Error{"checkpoint shard '" + path.string() + "': internal error while writing"});
    }
    if (!outcome_->ok() && on_failure_) on_failure_(step, outcome_->error());
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
