#include "checkpoint/run_checkpoints.hpp"

#include <algorithm>
#include <cstdio>

#include "checkpoint/loader.hpp"
#include "checkpoint/shard.hpp"
#include "compute/check.hpp"

namespace troupe::checkpoint {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<Piece> saved_pieces(std::span<const HeldRange> held) {
  std::vector<Piece> pieces;
  for (const HeldRange& h : held)
    if (h.saved)
      pieces.push_back({h.kind, h.begin, h.end, {h.data, static_cast<std::size_t>(h.end - h.begin)}});
  return pieces;
}

std::string megabytes(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

std::string seconds_since(Clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", std::chrono::duration<double>(Clock::now() - start).count());
  return text;
}

}  // namespace

RunCheckpoints::RunCheckpoints(RunCheckpointOptions options, RunIdentity identity, CheckpointReporter reporter)
    : options_(std::move(options)),
      identity_(std::move(identity)),
      reporter_(std::move(reporter)),
      layout_(identity_.model),
      store_(options_.dir, options_.keep_last) {
  if (!enabled()) return;
  if (identity_.rank == 0 && !options_.joining) startup_ = store_.clear_staging();
  // A background write that fails is told at once: in this rank's log, and to the coordinator,
  // which would otherwise wait out its commit timeout for the shard.
  if (options_.async)
    async_writer_ = std::make_unique<AsyncCheckpointWriter>(
        options_.dir, layout_, identity_.rank, [this](std::int64_t step, const Error& error) {
          store_.mark_failed(step, identity_.rank, error.message);
          report_failure(static_cast<long>(step), error);
        });
}

RunCheckpoints::~RunCheckpoints() {
  if (committer_.joinable()) committer_.join();
}

Expected<Resumed> RunCheckpoints::restore(std::span<const HeldRange> held) const {
  Resumed resumed;
  if (!enabled() || !options_.resume) return resumed;
  auto newest = open_newest_valid(options_.dir);
  if (!newest) return newest.error();
  resumed.skipped = newest->skipped;
  if (!newest->checkpoint) return resumed;
  if (Status read = fill(*newest->checkpoint, held, resumed); !read) return read.error();
  return resumed;
}

std::int64_t RunCheckpoints::newest_committed() const {
  if (!enabled()) return -1;
  auto steps = committed_steps(options_.dir);
  return steps && !steps->empty() ? steps->front() : -1;
}

Expected<Resumed> RunCheckpoints::roll_back_to(long step, std::span<const HeldRange> held) const {
  TROUPE_CHECK(enabled(), "a rollback reads checkpoints only where the run writes them");
  auto loaded = open_checkpoint(step_dir(options_.dir, step));
  if (!loaded) return loaded.error();
  Resumed resumed;
  if (Status read = fill(*loaded, held, resumed); !read) return read.error();
  return resumed;
}

Status RunCheckpoints::fill(const LoadedCheckpoint& loaded, std::span<const HeldRange> held, Resumed& resumed) const {
  const Manifest& m = loaded.manifest();
  const std::string where = "checkpoint " + loaded.dir().string();
  if (Status same_model = check_model(m, identity_.model); !same_model)
    return Error{where + ": " + same_model.error().message};
  // A step-0 checkpoint (an import) has consumed no data: any seed starts its order afresh.
  if (m.step > 0 && m.data.seed != identity_.seed)
    return Error{where + " was written with train.seed " + std::to_string(m.data.seed) + ", this job has " +
                 std::to_string(identity_.seed) + ": its data order would not continue"};
  if (m.step > 0 && m.data.samples_consumed != static_cast<std::uint64_t>(m.step * identity_.samples_per_step))
    return Error{where + " consumed " + std::to_string(m.data.samples_consumed) + " sequences in " +
                 std::to_string(m.step) + " steps; this job's global batch is " +
                 std::to_string(identity_.samples_per_step) +
                 " sequences per step (data-parallel ranks x batch_size x micro-batches must stay the same)"};
  for (const HeldRange& h : held) {
    if (!loaded.holds(h.kind) && h.optional) {
      resumed.absent.push_back(h.kind);
      continue;
    }
    if (!loaded.holds(h.kind)) return Error{where + " holds no '" + h.kind + "' state"};
    if (Status read = loaded.read(h.kind, h.begin, h.end, {h.data, static_cast<std::size_t>(h.end - h.begin)}); !read)
      return read.error();
  }
  resumed.steps = static_cast<long>(m.step);
  resumed.from = loaded.dir().string();
  return Status::success();
}

bool RunCheckpoints::due(long steps_done) const {
  if (!enabled()) return false;
  if (steps_done == identity_.total_steps) return true;
  return options_.every > 0 && steps_done % options_.every == 0;
}

Status RunCheckpoints::after_step(long steps_done, std::span<const HeldRange> held) {
  if (!due(steps_done)) return Status::success();
  return save_reported(steps_done, held);
}

Status RunCheckpoints::save_now(long steps_done, std::span<const HeldRange> held) {
  if (!enabled()) return Error{"no checkpoint.dir to save into"};
  // after_step saved a due step already, and a resumed run starts from a committed one.
  if (due(steps_done)) return Status::success();
  if (auto committed = committed_steps(options_.dir);
      committed && std::find(committed->begin(), committed->end(), steps_done) != committed->end())
    return Status::success();
  return save_reported(steps_done, held);
}

void RunCheckpoints::report_failure(long steps_done, const Error& error) const {
  reporter_.error("checkpoint after step " + std::to_string(steps_done) + " failed: " + error.message +
                  "; training goes on, earlier checkpoints are intact");
  if (reporter_.failed) reporter_.failed(steps_done, error.message);
}

Status RunCheckpoints::save_reported(long steps_done, std::span<const HeldRange> held) {
  const auto started = Clock::now();
  Status saved = save(steps_done, held);
  if (!saved) {
    report_failure(steps_done, saved.error());
  } else if (reporter_.saved) {
    std::uint64_t bytes = 0;
    for (const Piece& piece : saved_pieces(held)) bytes += piece.values.size_bytes();
    reporter_.saved(std::chrono::duration<double>(Clock::now() - started).count(), bytes);
  }
  return saved;
}

Status RunCheckpoints::take_background_outcome() {
  Status outcome = Status::success();
  // This rank's own write first: its error names the file and the system's reason.
  if (async_pending_) {
    async_pending_ = false;
    if (auto written = async_writer_->wait(); !written) outcome = written.error();
  }
  if (committer_.joinable()) committer_.join();
  std::lock_guard lock(outcome_mutex_);
  if (outcome) outcome = committer_outcome_;
  committer_outcome_ = Status::success();
  return outcome;
}

Status RunCheckpoints::save(long steps_done, std::span<const HeldRange> held) {
  const auto started = Clock::now();
  // The previous background save must be over before this one starts (one snapshot at a time);
  // its failure was reported when it happened.
  (void)take_background_outcome();
  const std::vector<Piece> pieces = saved_pieces(held);
  if (!pieces.empty()) {
    auto staging = store_.begin(steps_done);
    if (!staging) return staging.error();
    if (options_.async) {
      if (Status submitted = async_writer_->submit(steps_done, pieces); !submitted) return submitted;
      async_pending_ = true;
    } else {
      auto written = write_shard(*staging / shard_file_name(identity_.rank), layout_, identity_.rank, pieces);
      if (!written) {
        store_.mark_failed(steps_done, identity_.rank, written.error().message);
        return written.error();
      }
    }
  }
  if (identity_.rank != 0) return Status::success();
  if (!options_.async)
    return commit_when_written(steps_done, started, identity_.grid, identity_.writers, options_.commit_timeout,
                               options_.while_committing);
  committer_ = std::thread([this, steps_done, started] {
    struct GivenUp {};
    Status committed = Status::success();
    try {
      committed = commit_when_written(steps_done, started, identity_.grid, identity_.writers, options_.commit_timeout,
                                      [this] {
                                        if (giving_up_commit_) throw GivenUp{};
                                      });
    } catch (const GivenUp&) {
      reporter_.info("checkpoint after step " + std::to_string(steps_done) +
                     " given up: the job recovers in place while it waited for another rank's shard; that step "
                     "stays uncommitted");
      return;
    }
    if (committed) return;
    // A writer that failed reported it itself the moment it failed; the rest only this thread knows.
    if (store_.failed_writers(steps_done).empty()) report_failure(steps_done, committed.error());
    std::lock_guard lock(outcome_mutex_);
    committer_outcome_ = Error{"step " + std::to_string(steps_done) + ": " + committed.error().message};
  });
  return Status::success();
}

Status RunCheckpoints::commit_when_written(long step, Clock::time_point started, const Grid& grid, int writers,
                                           std::chrono::milliseconds timeout,
                                           const std::function<void()>& between_looks, Staging staging) const {
  const auto deadline = Clock::now() + timeout;
  std::vector<FileRecord> records;
  for (;;) {
    auto collected = store_.collect_records(step, staging);
    if (!collected) return collected.error();
    records = std::move(*collected);
    if (static_cast<int>(records.size()) >= writers) break;
    if (const std::vector<std::string> failed = store_.failed_writers(step, staging); !failed.empty()) {
      std::string which;
      for (const std::string& failure : failed) which += (which.empty() ? "" : "; ") + failure;
      return Error{"not every shard was written (" + which + ")"};
    }
    if (Clock::now() > deadline)
      return Error{"only " + std::to_string(records.size()) + " of " + std::to_string(writers) +
                   " ranks wrote their shard of step " + std::to_string(step) + " within " +
                   std::to_string(timeout.count() / 1000) + " s"};
    if (between_looks) between_looks();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Manifest manifest;
  manifest.model = identity_.model;
  manifest.job_config = identity_.job_config;
  manifest.grid = grid;
  manifest.step = step;
  manifest.optimizer_steps = step;
  manifest.data.seed = identity_.seed;
  manifest.data.samples_consumed = static_cast<std::uint64_t>(step * identity_.samples_per_step);
  manifest.rng.seed = identity_.seed;
  std::uint64_t bytes = 0;
  for (const FileRecord& r : records) bytes += r.bytes;
  manifest.files = std::move(records);
  const std::size_t files = manifest.files.size();
  if (Status committed = store_.commit(step, std::move(manifest), staging); !committed) return committed;
  reporter_.info("checkpoint " + step_dir(options_.dir, step).string() + " committed: " + std::to_string(files) +
                 " file(s), " + megabytes(bytes) + ", " + seconds_since(started) + " after the step");
  if (reporter_.committed) reporter_.committed(static_cast<long>(step), step_dir(options_.dir, step).string());
  return Status::success();
}

void RunCheckpoints::give_up_background_commit() {
  giving_up_commit_ = true;
  (void)take_background_outcome();  // a failure was reported when it happened
  giving_up_commit_ = false;
}

void RunCheckpoints::forget_uncommitted() {
  if (!enabled() || identity_.rank != 0) return;
  if (Status cleared = store_.clear_staging(); !cleared)
    reporter_.error("uncommitted checkpoints left after the in-place recovery: " + cleared.error().message);
}

void RunCheckpoints::regrid(Grid grid, nlohmann::json job_config) {
  identity_.grid = grid;
  identity_.job_config = std::move(job_config);
}

Status RunCheckpoints::finish() {
  if (!enabled()) return Status::success();
  return take_background_outcome();
}

Status RunCheckpoints::rescue(long steps_done, std::span<const HeldRange> held, int writer, int writers,
                              std::chrono::milliseconds timeout) {
  if (!enabled()) return Error{"no checkpoint.dir to write it to"};
  const auto started = Clock::now();
  // A background save of this very step would write the same shard names: let it end first. Its
  // failure was reported when it happened.
  (void)take_background_outcome();
  std::error_code ec;
  if (steps_done == 0 || std::filesystem::exists(step_dir(options_.dir, steps_done), ec)) return Status::success();
  std::vector<Piece> pieces;
  for (const HeldRange& h : held)
    if (!h.copy) pieces.push_back({h.kind, h.begin, h.end, {h.data, static_cast<std::size_t>(h.end - h.begin)}});
  auto staging = store_.begin(steps_done, Staging::rescue);
  if (!staging) return staging.error();
  auto written = write_shard(*staging / shard_file_name(writer), layout_, writer, pieces);
  if (!written) {
    store_.mark_failed(steps_done, writer, written.error().message, Staging::rescue);
    return written.error();
  }
  if (writer != 0) return Status::success();
  // A loss mid-step can leave the surviving replicas a step apart: a writer that completed another
  // step writes its snapshot of that one, so none of this step can be whole, and waiting would
  // only spend the timeout.
  struct OtherStep {
    std::int64_t step;
  };
  try {
    return commit_when_written(
        steps_done, started, Grid{1, writers, 1}, writers, timeout,
        [&] {
          for (std::int64_t step : store_.rescue_steps_written())
            if (step != steps_done) throw OtherStep{step};
        },
        Staging::rescue);
  } catch (const OtherStep& other) {
    return Error{"another writer's rescue snapshot is of step " + std::to_string(other.step) + ", this rank's of step " +
                 std::to_string(steps_done) + ": the survivors hold different steps"};
  }
}

}  // namespace troupe::checkpoint
