#pragma once
// One rank's part in a training run's checkpoints: what it restores when the run resumes, when it
// saves, and — on the coordinator (global rank 0) — when a step's checkpoint is committed.
//
// Ranks meet only through the file system (store.hpp): each writing rank leaves its shard and
// sidecar record in the step's staging folder; the coordinator waits until every expected
// writer's record is there, then commits. In async mode a rank's shard is snapshot into memory
// when the step ends and written by a background thread while the next steps run, and the
// coordinator commits in the background too; the next save (or finish) waits for both first.
// A rank whose shard fails reports it at once, in async mode too, and marks it failed in the
// staging folder, where the coordinator sees it and gives up on that step without waiting.
//
// Restoring reads this rank's own ranges out of whatever grid wrote the checkpoint, so a run may
// resume on another (dp, pp) grid. Data position: batches are a pure function of (seed, global
// sample index), and a step consumes the global batch, so the step count places a resumed run;
// a checkpoint whose global batch differs from the job's is refused rather than silently shifted.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/async_writer.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint/store.hpp"
#include "compute/expected.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {

class LoadedCheckpoint;

// State this rank holds: elements [begin, end) of `kind` in the flat parameter order, at `data`
// (host memory). A rank saves only what `saved` marks (a replica that holds a copy of what
// another rank writes restores it but does not write it again).
struct HeldRange {
  std::string kind;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  float* data = nullptr;
  bool saved = true;
  bool copy = false;  // a copy of what another rank of the same replica holds (a tied embedding): a rescue skips it
  // A checkpoint without this kind leaves it as it is instead of being refused: state a rank
  // starts afresh without (a compression residual of a rank that no rescue snapshot wrote, or of
  // a run that did not compress).
  bool optional = false;
};

struct RunCheckpointOptions {
  std::filesystem::path dir;  // empty: no checkpoints
  long every = 0;             // save after every N steps; 0: only after the last step
  int keep_last = 3;
  bool async = false;
  bool resume = false;
  std::chrono::milliseconds commit_timeout{120000};  // the coordinator's wait for the other writers
  // Called between the coordinator's looks for the other writers' shards while a synchronous save
  // waits for them; it may throw to give the wait up (a writer died and the job ordered a
  // recovery), leaving that step uncommitted. May be empty.
  std::function<void()> while_committing;
  // A worker respawned in place, as the coordinator: the job's other ranks may still be finishing
  // their background writes, so the staging folders are left for forget_uncommitted, once every
  // rank has the recovery's plan, instead of cleared when the run starts.
  bool joining = false;
};

struct RunIdentity {
  compute::GPTConfig model;
  nlohmann::json job_config = nlohmann::json::object();  // recorded in every manifest
  Grid grid;
  int rank = 0;           // global; rank 0 coordinates
  int writers = 1;        // ranks that save something, the coordinator included
  std::uint64_t seed = 0;
  std::int64_t samples_per_step = 0;  // the global batch, in sequences
  long total_steps = 0;
};

// What the run says about its checkpoints: progress lines and failures (training goes on after a
// failed save). Called from the training thread and, in async mode, from background threads.
struct CheckpointReporter {
  std::function<void(const std::string&)> info;
  std::function<void(const std::string&)> error;
  // A save that succeeded, on the training thread: the seconds it held training up (the write, or
  // in async mode the snapshot; the commit too on rank 0 when not async) and this rank's bytes of
  // state in it (0 for a rank that writes nothing). May be left unset.
  std::function<void(double seconds, std::uint64_t bytes)> saved;
  // The checkpoint of `step` committed (on rank 0, which commits): its folder. May be left unset.
  std::function<void(long step, const std::string& folder)> committed;
  // The checkpoint of `step` failed here (the error): also said through `error`. May be left unset.
  std::function<void(long step, const std::string& error)> failed;
};

struct Resumed {
  long steps = 0;                    // steps the checkpoint had taken; 0: a fresh start
  std::string from;                  // the folder, when resumed
  std::vector<SkippedCheckpoint> skipped;  // newer folders passed over, and why
  std::vector<std::string> absent;   // optional kinds this rank holds that the checkpoint lacks
};

class RunCheckpoints {
 public:
  // The coordinator removes staging folders that a dead attempt left; construct it before any
  // rank can reach its first save.
  RunCheckpoints(RunCheckpointOptions options, RunIdentity identity, CheckpointReporter reporter);
  ~RunCheckpoints();
  RunCheckpoints(const RunCheckpoints&) = delete;
  RunCheckpoints& operator=(const RunCheckpoints&) = delete;

  bool enabled() const { return !options_.dir.empty(); }
  // Startup problems (the folder cannot be created): the run should not begin.
  const Status& startup() const { return startup_; }

  // With options.resume: fills every held range from the newest valid checkpoint. Errors are the
  // user's (another model, another global batch, a kind the checkpoint lacks).
  Expected<Resumed> restore(std::span<const HeldRange> held) const;
  // The newest committed checkpoint's step (a listing, no file read), resume or not; −1 when there
  // is none or no dir.
  std::int64_t newest_committed() const;
  // Fills every held range from checkpoint `step`, as restore() does from the newest (an in-place
  // rollback: every rank of a running job goes back to one checkpoint).
  Expected<Resumed> roll_back_to(long step, std::span<const HeldRange> held) const;

  // Whether after_step(steps_done) saves: a multiple of every, or the last step.
  bool due(long steps_done) const;
  // Saves if `steps_done` is due. A failed save is reported, returned, and leaves every committed
  // checkpoint as it was.
  Status after_step(long steps_done, std::span<const HeldRange> held);
  // Saves now, due or not (the shell's `checkpoint`); reported and returned as after_step's.
  Status save_now(long steps_done, std::span<const HeldRange> held);

  // Waits for the background write and commit, if any; their outcome.
  Status finish();

  // The job recovers in place: a background commit still waiting for another writer's shard (a
  // writer that may be dead) gives up at its next look, leaving its step uncommitted, and this
  // rank's background write is finished. Without it the next save would wait out commit_timeout.
  void give_up_background_commit();
  // The coordinator, once every rank has taken the in-place recovery's plan (none writes then; a
  // respawned coordinator once it has its state): removes the staging folders of the steps not
  // committed. A step trained again is then written whole, and no record of an earlier attempt
  // is committed beside a shard being written again.
  void forget_uncommitted();
  // The job grew in place (more data-parallel replicas, the same global batch): the manifests of
  // later saves record `grid` and `job_config`. Between saves (after forget_uncommitted).
  void regrid(Grid grid, nlohmann::json job_config);

  // A rescue snapshot after a lost peer: this rank's memory of `steps_done` (every held range that
  // is not a copy), written as shard `writer` of `writers` — one surviving replica per pipeline
  // stage, recorded as the grid (1, writers, 1) — and committed by writer 0 once every shard is
  // there (within `timeout`; at once an error where another writer wrote a snapshot of another
  // step). It is staged apart from a save of the same step, which the failure may have left half
  // written (Staging::rescue). A background save is finished first. Nothing to do after 0 steps or
  // when that step's checkpoint is committed already.
  Status rescue(long steps_done, std::span<const HeldRange> held, int writer, int writers,
                std::chrono::milliseconds timeout);

 private:
  // Fills `held` from `loaded` after checking it fits this run; sets resumed's steps, from and absent.
  Status fill(const LoadedCheckpoint& loaded, std::span<const HeldRange> held, Resumed& resumed) const;
  Status save(long steps_done, std::span<const HeldRange> held);
  // save(), its failure reported and its success counted (training goes on after a failure).
  Status save_reported(long steps_done, std::span<const HeldRange> held);
  // Coordinator: waits for `writers` records of `step` in its `staging` folder (up to `timeout`;
  // calling `between_looks`, if set, between its looks), then commits it as written by `grid`.
  Status commit_when_written(long step, std::chrono::steady_clock::time_point started, const Grid& grid, int writers,
                             std::chrono::milliseconds timeout, const std::function<void()>& between_looks = {},
                             Staging staging = Staging::save) const;
  // Waits for the background write and commit; the first failure (this rank's write first).
  Status take_background_outcome();
  // "checkpoint after step N failed: ...": on the training thread, or at once on a background one.
  void report_failure(long steps_done, const Error& error) const;

  RunCheckpointOptions options_;
  RunIdentity identity_;
  CheckpointReporter reporter_;
  compute::ParameterLayout layout_;
  CheckpointStore store_;
  Status startup_ = Status::success();
  std::unique_ptr<AsyncCheckpointWriter> async_writer_;
  bool async_pending_ = false;
  std::thread committer_;
  std::atomic<bool> giving_up_commit_{false};
  mutable std::mutex outcome_mutex_;
  Status committer_outcome_ = Status::success();
};

}  // namespace troupe::checkpoint
