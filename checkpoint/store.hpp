#pragma once
// The checkpoint directory and its commit protocol (docs/formats/checkpoint.md):
//   DIR/step-0000100/      manifest.json + rank-00000.safetensors ... (one per writing rank)
//   DIR/step-0000100.tmp/  a checkpoint being written; never read as a checkpoint
//   DIR/step-0000100.rescue.tmp/  a rescue snapshot of that step being written, apart from a
//                          save of the same step the failure interrupted
//   DIR/lock               the job that writes here (folder_lock.hpp)
//   DIR/latest             the newest committed folder's name
// The coordinator clears stale staging folders when a run starts; every writing rank calls
// begin(step) and writes its shard into the staging folder with write_shard, which leaves a
// sidecar record next to the shard; the coordinator collects the records (collect_records, or
// records sent to it) and calls commit.
// Ranks meet only through the file system, so they may be separate processes on one machine or
// on a shared file system.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/file_record.hpp"
#include "checkpoint/manifest.hpp"
#include "compute/expected.hpp"

namespace troupe::checkpoint {

std::string step_folder_name(std::int64_t step);  // "step-0000100"
std::string shard_file_name(int rank);            // "rank-00003.safetensors"
std::filesystem::path step_dir(const std::filesystem::path& dir, std::int64_t step);
// What a staging folder holds: a save of a step, or a rescue snapshot of it (written by other
// ranks as other shards, so never mixed with what an interrupted save of that step left).
enum class Staging { save, rescue };
// step_dir + ".tmp", or + ".rescue.tmp"
std::filesystem::path staging_dir(const std::filesystem::path& dir, std::int64_t step, Staging staging = Staging::save);
// The steps of DIR's committed folders (step-NNNNNNN, no suffix), newest first; none when DIR
// does not exist.
Expected<std::vector<std::int64_t>> committed_steps(const std::filesystem::path& dir);

class CheckpointStore {
 public:
  // Keeps the newest `keep_last` committed checkpoints (at least 1).
  explicit CheckpointStore(std::filesystem::path dir, int keep_last = 3);

  const std::filesystem::path& dir() const { return dir_; }

  // Creates DIR (if needed) and removes every staging folder: attempts that died. The coordinator
  // calls it when a run starts, before any rank can write.
  Status clear_staging() const;

  // Creates the staging folder for `step` if it is not there yet; every writing rank may call it
  // (it never removes what another rank wrote).
  Expected<std::filesystem::path> begin(std::int64_t step, Staging staging = Staging::save) const;

  // The sidecar records in the staging folder, by rank: what the ranks have finished writing.
  Expected<std::vector<FileRecord>> collect_records(std::int64_t step, Staging staging = Staging::save) const;

  // A writer whose shard failed leaves rank-NNNNN.failed in the staging folder, holding its error
  // as far as the disk lets it (a full one may leave it empty), so the coordinator stops waiting
  // for that shard at once instead of at its timeout.
  void mark_failed(std::int64_t step, int rank, const std::string& error, Staging staging = Staging::save) const;
  // The writers that marked their shard of `step` failed: "rank R: ERROR" each, by rank.
  std::vector<std::string> failed_writers(std::int64_t step, Staging staging = Staging::save) const;

  // The steps some writer has finished its shard of a rescue snapshot of (a record in
  // step-NNNNNNN.rescue.tmp/), oldest first.
  std::vector<std::int64_t> rescue_steps_written() const;

  // Publishes the staging folder as step-NNNNNNN: checks every file in manifest.files exists with
  // its recorded size and that every kind covers the whole flat order, writes manifest.json
  // (with hash_algorithm set), syncs files and folders, renames the folder into place, replaces
  // DIR/latest atomically and removes checkpoints older than the newest keep_last (never this
  // one). On an error nothing committed before is touched.
  Status commit(std::int64_t step, Manifest manifest, Staging staging = Staging::save) const;

 private:
  Status prune(std::int64_t committed) const;

  std::filesystem::path dir_;
  int keep_last_;
};

}  // namespace troupe::checkpoint
