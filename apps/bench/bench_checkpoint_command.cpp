// troupe bench checkpoint: the two checkpoint figures with targets (docs/benchmarks.md), each
// against a reference measured in the same run and the same folder.
//
// Throughput: a synchronous save of one process's whole state through RunCheckpoints (the save
// after a run's last step: shard, sidecar record, manifest, rename, `latest`, every fsync), timed
// from the after_step call to the committed folder, against the disk's sequential write speed
// (big blocks, one fsync) measured just before it.
//
// Stall: the state is that of a real Trainer after a step (parameters and AdamW moments where the
// trainer keeps them), so the async snapshot copies what a run copies. With checkpoint.async and
// a save after every step, the training thread loses the after_step call (snapshot into memory,
// hand-off) per step; the background write also runs while the next step computes, so the
// end-to-end step time is reported beside it. Rounds alternate plain and saving phases because a
// shared machine's speed drifts between phases by more than the stall.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/exit_codes.hpp"
#include "checkpoint/disk_speed.hpp"
#include "checkpoint/run_checkpoints.hpp"
#include "checkpoint/store.hpp"
#include "compute/model/gpt.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int micro_batch = 8;  // as bench dp and bench compute

// The bench's folder goes, whatever path the command leaves by.
struct RemovedOnExit {
  fs::path path;
  ~RemovedOnExit() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// What the checkpoints report. Progress lines would interleave with the figures; errors end the
// bench (exit 1), including those of a background commit.
class BenchReporter {
 public:
  checkpoint::CheckpointReporter reporter() {
    return {[](const std::string&) {},
            [this](const std::string& message) {
              std::lock_guard lock(mutex_);
              if (first_error_.empty()) first_error_ = message;
            },
            {}};
  }
  std::string first_error() {
    std::lock_guard lock(mutex_);
    return first_error_;
  }

 private:
  std::mutex mutex_;
  std::string first_error_;
};

struct CommittedFolder {
  std::uint64_t bytes = 0;
  int files = 0;
};

CommittedFolder committed_folder(const fs::path& folder) {
  CommittedFolder found;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (!entry.is_regular_file()) continue;
    found.bytes += entry.file_size();
    ++found.files;
  }
  return found;
}

struct SyncSave {
  CommittedFolder folder;
  double seconds = 0;  // from the after_step call to the committed folder
};

// The save after a run's last step (identity.total_steps), into `dir`, which it then removes so
// that every round writes afresh.
Expected<SyncSave> save_synchronously(const fs::path& dir, const checkpoint::RunIdentity& identity,
                                      std::span<const checkpoint::HeldRange> held, BenchReporter& reporter) {
  checkpoint::RunCheckpointOptions options;
  options.dir = dir;
  SyncSave save;
  {
    checkpoint::RunCheckpoints checkpoints(options, identity, reporter.reporter());
    if (!checkpoints.startup()) return checkpoints.startup().error();
    const auto start = Clock::now();
    if (Status done = checkpoints.after_step(identity.total_steps, held); !done) return done.error();
    save.seconds = seconds_since(start);
  }
  save.folder = committed_folder(checkpoint::step_dir(dir, identity.total_steps));
  fs::remove_all(dir);
  return save;
}

struct RoundFigures {
  double disk_bytes_per_s = 0, save_bytes_per_s = 0;
  double plain_step_s = 0, after_step_s = 0, saving_step_s = 0;  // medians within the round
};

}  // namespace

int run_bench_checkpoint(const BenchCheckpointOptions& options) {
  const compute::GPTConfig cfg = *compute::gpt_preset(options.model);
  const fs::path work = fs::path(options.dir) / ("troupe-bench-checkpoint-" + std::to_string(::getpid()));
  std::error_code created;
  if (!fs::create_directory(work, created) || created)
    return error_exit(ExitCode::bad_input, "--dir " + options.dir + ": cannot create a folder in it: " +
                                               (created ? created.message() : std::string("it exists")));
  const RemovedOnExit remove_work{work};

  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return error_exit(ExitCode::failure, backend.error().message);
  const std::vector<std::uint16_t> stream = bench_tokens(cfg, static_cast<std::size_t>(micro_batch) * cfg.block_size * 4 + 1);
  compute::GPT model(cfg, **backend);
  model.init_parameters(1);
  const long total_steps = 1 + static_cast<long>(options.rounds) * (2 * options.steps + 1);
  compute::TrainerOptions trainer_options;
  trainer_options.batch_size = micro_batch;
  trainer_options.seq_len = cfg.block_size;
  trainer_options.lr = {1e-4, 1e-5, 0, total_steps};
  compute::Trainer trainer(model, trainer_options, stream, stream);
  trainer.step();  // the moments hold training values from here on, and the first step's allocations are done

  compute::AdamW& adamw = trainer.optimizer();
  const auto [moments_begin, moments_end] = adamw.range();
  const std::vector<checkpoint::HeldRange> held = {
      {"param", 0, model.layout().total(), model.params().data_as<float>()},
      {"adam_m", moments_begin, moments_end, adamw.first_moments().data_as<float>()},
      {"adam_v", moments_begin, moments_end, adamw.second_moments().data_as<float>()}};
  const auto state_bytes =
      static_cast<std::uint64_t>(model.layout().total() + 2 * (moments_end - moments_begin)) * sizeof(float);
  // Twice the checkpoint, so the disk figure is not a cache's; at least 64 MiB for tiny models.
  const std::uint64_t disk_test_bytes = std::max<std::uint64_t>(2 * state_bytes, 64u << 20);

  checkpoint::RunIdentity identity;
  identity.model = cfg;
  identity.samples_per_step = micro_batch;
  BenchReporter reporter;

  std::printf(
      "bench checkpoint: %s (%.2fM params), one process's state (param, adam_m, adam_v: %.1f MB), %d round(s)\n",
      options.model.c_str(), static_cast<double>(model.layout().total()) / 1e6, static_cast<double>(state_bytes) / 1e6,
      options.rounds);
  std::printf(
      "(in %s, removed after. Sync save against the disk's sequential write of %.0f MB with one fsync;\n"
      " async save against a training step of %s, batch %d x seq %d, 1 thread, save after every step,\n"
      " median of %d steps per phase; figures are the medians of the rounds')\n",
      work.string().c_str(), static_cast<double>(disk_test_bytes) / 1e6, options.model.c_str(), micro_batch,
      cfg.block_size, options.steps);
  std::fflush(stdout);

  std::vector<RoundFigures> rounds;
  CommittedFolder saved;
  checkpoint::RunCheckpointOptions async_options;
  async_options.dir = work / "async";
  async_options.every = 1;
  async_options.async = true;
  checkpoint::RunCheckpoints async_checkpoints(async_options, identity, reporter.reporter());
  if (!async_checkpoints.startup()) return error_exit(ExitCode::failure, async_checkpoints.startup().error().message);

  for (int round = 1; round <= options.rounds; ++round) {
    RoundFigures figures;
    // Whichever goes first meets the disk as the training phase left it: the order alternates.
    for (const bool disk_now : {round % 2 == 1, round % 2 == 0}) {
      if (disk_now) {
        auto disk = checkpoint::measure_sequential_write(work, disk_test_bytes);
        if (!disk) return error_exit(ExitCode::failure, disk.error().message);
        figures.disk_bytes_per_s = *disk;
        continue;
      }
      identity.total_steps = trainer.steps_taken();
      auto save = save_synchronously(work / "sync", identity, held, reporter);
      if (!save) return error_exit(ExitCode::failure, save.error().message);
      saved = save->folder;
      figures.save_bytes_per_s = static_cast<double>(saved.bytes) / save->seconds;
    }

    std::vector<double> plain_steps;
    for (int i = 0; i < options.steps; ++i) {
      const auto start = Clock::now();
      trainer.step();
      plain_steps.push_back(seconds_since(start));
    }
    // The first save has no write of its own in the background during its step: not measured.
    trainer.step();
    if (Status done = async_checkpoints.after_step(trainer.steps_taken(), held); !done)
      return error_exit(ExitCode::failure, done.error().message);
    std::vector<double> after_steps, saving_steps;
    for (int i = 0; i < options.steps; ++i) {
      const auto start = Clock::now();
      trainer.step();
      const auto stepped = Clock::now();
      if (Status done = async_checkpoints.after_step(trainer.steps_taken(), held); !done)
        return error_exit(ExitCode::failure, done.error().message);
      after_steps.push_back(seconds_since(stepped));
      saving_steps.push_back(seconds_since(start));
    }
    // The last write must not spill into the next round's plain steps.
    if (Status done = async_checkpoints.finish(); !done) return error_exit(ExitCode::failure, done.error().message);
    if (const std::string error = reporter.first_error(); !error.empty()) return error_exit(ExitCode::failure, error);
    figures.plain_step_s = median(plain_steps);
    figures.after_step_s = median(after_steps);
    figures.saving_step_s = median(saving_steps);
    rounds.push_back(figures);

    std::printf(
        "round %d: disk %.2f GB/s, sync save %.2f GB/s (%.2f of disk); step %.3f s, async after_step %.1f ms "
        "(%.1f%%), step with a save in the background %.3f s (%+.1f%%)\n",
        round, figures.disk_bytes_per_s / 1e9, figures.save_bytes_per_s / 1e9,
        figures.save_bytes_per_s / figures.disk_bytes_per_s, figures.plain_step_s, figures.after_step_s * 1e3,
        100 * figures.after_step_s / figures.plain_step_s, figures.saving_step_s,
        100 * (figures.saving_step_s / figures.plain_step_s - 1));
    std::fflush(stdout);
  }

  auto median_of = [&](auto figure) {
    std::vector<double> values;
    for (const RoundFigures& r : rounds) values.push_back(figure(r));
    return median(values);
  };
  const double disk = median_of([](const RoundFigures& r) { return r.disk_bytes_per_s; });
  const double save = median_of([](const RoundFigures& r) { return r.save_bytes_per_s; });
  const double save_ratio = median_of([](const RoundFigures& r) { return r.save_bytes_per_s / r.disk_bytes_per_s; });
  const double step = median_of([](const RoundFigures& r) { return r.plain_step_s; });
  const double after_step = median_of([](const RoundFigures& r) { return r.after_step_s; });
  const double stall = median_of([](const RoundFigures& r) { return r.after_step_s / r.plain_step_s; });
  const double saving_step = median_of([](const RoundFigures& r) { return r.saving_step_s; });
  const double slowdown = median_of([](const RoundFigures& r) { return r.saving_step_s / r.plain_step_s - 1; });
  std::printf("disk sequential write: %.2f GB/s (%.0f MB, one fsync)\n", disk / 1e9,
              static_cast<double>(disk_test_bytes) / 1e6);
  std::printf(
      "checkpoint save (sync, %.1f MB in %d files, after_step to committed folder): %.2f GB/s = %.2f of disk "
      "(target >= 0.7)\n",
      static_cast<double>(saved.bytes) / 1e6, saved.files, save / 1e9, save_ratio);
  std::printf(
      "async save: after_step returns in %.1f ms = %.1f%% of a %.3f s step (target < 5%%); steps with a save "
      "in the background take %.3f s (%+.1f%%)\n",
      after_step * 1e3, 100 * stall, step, saving_step, 100 * slowdown);
  return to_int(ExitCode::success);
}

Command add_bench_checkpoint_command(CLI::App& bench) {
  auto options = std::make_shared<BenchCheckpointOptions>();
  CLI::App* command = bench.add_subcommand(
      "checkpoint", "Checkpoint save throughput against the disk's write speed; async save's stall against a step.");
  add_model_option(*command, options->model);
  command->add_option("--dir", options->dir, "folder to write in (a fresh subfolder, removed after)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  command->add_option("--rounds", options->rounds, "measurement rounds (medians)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  command->add_option("--steps", options->steps, "measured steps per phase and round")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_checkpoint(*options); });
}

}  // namespace troupe::apps
