#pragma once
// Writes a rank's shard in the background so training goes on while the disk works. submit()
// snapshots the pieces into host memory before it returns (the originals may change at once),
// then a thread writes the snapshot into the step's staging folder. One job at a time keeps the
// memory bound at one snapshot, which stays allocated for the next job: copying into resident
// memory is what keeps the training thread's stall short. Failures (a full disk, a missing
// folder) are told to the failure callback the moment they happen, on the writer's thread, and
// come back from wait() as errors, never as exceptions on another thread; they leave committed
// checkpoints untouched.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "checkpoint/file_record.hpp"
#include "checkpoint/shard.hpp"
#include "compute/expected.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {

class AsyncCheckpointWriter {
 public:
  // Called on the writer's thread when the shard of `step` could not be written.
  using FailureCallback = std::function<void(std::int64_t step, const Error& error)>;

  // Writes staging_dir(dir, step)/shard_file_name(rank) for each submitted step.
  AsyncCheckpointWriter(std::filesystem::path dir, compute::ParameterLayout layout, int rank,
                        FailureCallback on_failure = {});
  ~AsyncCheckpointWriter();  // waits for a job in flight
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  // Copies the pieces and starts writing them. A job still in flight is waited for first; if
  // nobody fetched its outcome and it failed, that error is returned (the new job starts anyway).
  Status submit(std::int64_t step, std::span<const Piece> pieces);
  // The outcome of the last submitted job, once it is written. Call after a submit.
  Expected<FileRecord> wait();

 private:
  struct Snapshot {
    std::string kind;
    std::int64_t begin;
    std::int64_t end;
    std::vector<float> values;
  };

  void join();

  std::filesystem::path dir_;
  compute::ParameterLayout layout_;
  int rank_;
  FailureCallback on_failure_;
  std::thread thread_;
  std::vector<Snapshot> snapshot_;  // used by thread_ only while it runs; kept for the next submit
  std::optional<Expected<FileRecord>> outcome_;  // set by thread_, read after join
};

}  // namespace troupe::checkpoint
