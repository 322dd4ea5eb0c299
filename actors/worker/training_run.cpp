// One rank's training run (training_run.hpp), phase by phase (RankRun below): a line per step,
// the validation loss every train.val_every steps, a summary, and a sample from the trained model.

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>
#include <stdexcept>

#include <spdlog/fmt/fmt.h>

#include "actors/process_environment.hpp"
#include "actors/worker/training_run.hpp"
#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/decode.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/sampling.hpp"
#include "monitor/duration_text.hpp"
#include "monitor/log.hpp"
#include "monitor/run_board.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

// The bytes of `text`, each an int, as decode_bytes takes them.
std::vector<int> byte_values(std::string_view text) {
  std::vector<int> bytes(text.begin(), text.end());
  for (int& b : bytes) b = static_cast<unsigned char>(b);
  return bytes;
}

// In data.tokenizer's tokens when it is set (the tokenizer loaded with the data, so it reads),
// else in bytes; printed safe for a terminal either way.
void print_sample(compute::GPT& model, const ResolvedJob& job, spdlog::logger& log) {
  const SampleOptions& s = job.config.sample;
  std::optional<compute::BpeTokenizer> tokenizer;
  if (!job.config.data.tokenizer.empty()) tokenizer = compute::BpeTokenizer::load(job.config.data.tokenizer).value();
  std::vector<int> prompt = byte_values(s.prompt);
  if (tokenizer) {
    const std::vector<std::int32_t> ids = tokenizer->encode(s.prompt);
    prompt.assign(ids.begin(), ids.end());
  }
  if (prompt.empty()) prompt.push_back('\n');
  compute::SamplingOptions options{s.tokens, s.temperature, s.top_k, job.config.train.seed};
  log.info("sample ({} tokens, temperature {}, top_k {}):", s.tokens, s.temperature, s.top_k);
  std::vector<int> produced = compute::generate(model, prompt, options);
  std::vector<int> text = prompt;
  text.insert(text.end(), produced.begin(), produced.end());
  if (tokenizer) {
    std::string decoded;
    for (int id : text) decoded += tokenizer->token_bytes(id);
    text = byte_values(decoded);
  }
  std::printf("%s\n", compute::decode_bytes(text).c_str());
  std::fflush(stdout);
}

// The job's configuration as a manifest records it: every key's value as text.
nlohmann::json config_json(const ResolvedJob& job) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [key, value] : job.settings) json[key] = value;
  return json;
}

checkpoint::RunCheckpointOptions checkpoint_options(const CheckpointOptions& c, const RecoveryHooks& recovery) {
  checkpoint::RunCheckpointOptions o;
  o.dir = c.dir;
  o.every = c.every;
  o.keep_last = c.keep_last;
  o.async = c.async;
  o.resume = c.resume;
  o.while_committing = recovery.take_waiting_orders;
  o.joining = static_cast<bool>(recovery.join);
  return o;
}

// `troupe drill kill-worker` makes one worker of a fresh run throw, as a bug would: the variable
// TROUPE_DRILL_THROW_AT = "RANK:STEP" names the worker and the step it fails in. TROUPE_DRILL_KILL_AT
// = "RANK:STEP" makes its node process SIGKILL itself as the step begins instead (its `:sync` form
// is island_membership.hpp's). Read once per run.
struct DrilledFailure {
  int rank = -1;
  long step = -1;
  int killed_rank = -1;
  long kill_step = -1;

  static DrilledFailure from_environment() {
    // The command checked them before the job started (env::check_inherited).
    auto target = env::read_drill_throw_at();
    if (!target) throw std::invalid_argument(target.error().message);
    auto kill = env::read_drill_kill_at();
    if (!kill) throw std::invalid_argument(kill.error().message);
    DrilledFailure drilled;
    if (*target) drilled = {(*target)->rank, (*target)->step};
    if (*kill && !(*kill)->in_sync) {
      drilled.killed_rank = (*kill)->rank;
      drilled.kill_step = (*kill)->step;
    }
    return drilled;
  }

  void fail_if_due(int rank_now, long step_now) const {
    if (rank_now == killed_rank && step_now == kill_step) {
      monitor::logger("drill")->error("drill: the node process of rank {} kills itself as step {} begins", rank_now,
                                      step_now);
      ::raise(SIGKILL);
    }
    if (rank_now != rank || step_now != step) return;
    monitor::logger("drill")->error("drill: the worker of rank {} throws in step {}", rank, step);
    throw std::runtime_error("drill: injected failure in the worker of rank " + std::to_string(rank) + " at step " +
                             std::to_string(step));
  }
};

// Tells the shell's step control that no boundary is left, however the loop ends.
struct ControlFinisher {
  monitor::StepControl* control;
  ~ControlFinisher() {
    if (control) control->finished();
  }
};

// Obeys the shell's orders at the boundary before the step after `steps_done`: waits while held
// or paused, saves a checkpoint when told, throws when told to fail (kill worker). A stop while
// waiting ends the run with the returned outcome.
std::optional<RunOutcome> obey_orders(monitor::StepControl& control, long steps_done, int rank,
                                      checkpoint::RunCheckpoints& checkpoints, TrainingLoop& loop,
                                      monitor::WorkProgress& progress) {
  for (;;) {
    const monitor::BoundaryOrder order = control.at_boundary(steps_done, progress);
    if (order.stop) return RunOutcome{1, fmt::format("stopped while held after step {}", steps_done)};
    if (order.rescue) throw RescueAtBoundary(steps_done);
    if (order.fail) {
      monitor::logger("drill")->error("shell: the worker of rank {} fails after step {} (kill worker)", rank,
                                      steps_done);
      throw std::runtime_error(fmt::format("shell: kill worker {}: injected failure after step {}", rank, steps_done));
    }
    if (!order.checkpoint) return std::nullopt;
    loop.mirror_to_host();
    // A failed save is reported by the checkpoint reporter; training goes on as after a due one.
    (void)checkpoints.save_now(steps_done, loop.held());
  }
}

// The failure being handled (std::current_exception: a step that threw before its optimizer
// update, or a rescue order) left this rank holding the state of step `steps_done`: it writes that
// as a rescue snapshot when the job names it a writer.
void write_rescue_snapshot(const TrainingLoop& loop, const RescueHooks& rescue, checkpoint::RunCheckpoints& checkpoints,
                           long steps_done) {
  if (!rescue.role) return;
  const std::optional<RescueRole> role = rescue.role(std::current_exception());
  if (!role) return;
  monitor::logger("checkpoint")->info("rank {} writes its memory of step {} as a rescue snapshot (shard {} of {})",
                                      loop.checkpoint_place().rank, steps_done, role->writer, role->writers);
  const Status written = checkpoints.rescue(steps_done, loop.held(), role->writer, role->writers, role->commit_timeout);
  if (!written) monitor::logger("checkpoint")->error("rescue snapshot of step {}: {}", steps_done, written.error().message);
  if (rescue.done) rescue.done(steps_done, written);
}

// One rank's run, phase by phase: restore, then for every step the shell's orders at the step
// boundary, the step, its checkpoint and its validation; at the end the last validation and
// checkpoint, the summary and the sample.
class RankRun {
 public:
  RankRun(const ResolvedJob& job, const JobData& data, const std::string& backend_name, TrainingLoop& loop,
          const RunServices& services)
      : job_(job),
        t_(job.config.train),
        data_(data),
        backend_name_(backend_name),
        loop_(loop),
        services_(services),
        log_(services.reports ? monitor::logger("train") : monitor::silent_logger()),
        checkpoint_log_(monitor::logger("checkpoint")),
        checkpoints_(checkpoint_options(job.config.checkpoint, services.recovery), identity(),
                     reporter()),
        finisher_{services.control} {}

  RunOutcome run() {
    // A worker respawned in place takes over its slot's orders from the one that failed.
    if (services_.control && services_.recovery.join) services_.control->reopen();
    announce();
    if (std::optional<RunOutcome> failed = open_board()) return *failed;
    if (std::optional<RunOutcome> failed = restore()) return *failed;
    log_memory("start");
    run_start_ = Clock::now();
    for (long s = first_step_; s < t_.steps; ++s) {
      if (std::optional<RunOutcome> stopped = obey_boundary_orders(s)) return *stopped;
      try {
        if (std::optional<RunOutcome> failed = train_step(s)) return *failed;
        // An order the step was finished for (mailbox_comm.hpp) is taken here, at its boundary.
        if (services_.recovery.take_waiting_orders) services_.recovery.take_waiting_orders();
        const long done = s + 1;
        checkpoint_after(done);
        if (t_.val_every > 0 && done % t_.val_every == 0 && done != t_.steps) validate(done);
      } catch (const RecoveryOrdered& ordered) {
        if (!services_.recovery.survive) throw;
        if (ordered.finished_step_first())
          monitor::logger("train")->info("rank {} finished step {} before taking the recovery's order: rank {}, "
                                         "which failed, had completed it, so every message of it was on its way",
                                         loop_.checkpoint_place().rank, completed_,
                                         ordered.order().failed_ranks.at(0));
        s = survive(ordered.order(), completed_) - 1;
      }
    }
    return finish();
  }

 private:
  checkpoint::RunIdentity identity() const {
    const CheckpointPlace place = loop_.checkpoint_place();
    return {job_.model,  config_json(grown_ ? *grown_ : job_), place.grid, place.rank, place.writers, t_.seed,
            loop_.tokens_per_step() / t_.seq_len, t_.steps};
  }

  // Lines for people, and for the job's events the notes its heartbeat carries (committed: on the
  // rank that commits; failed: on the rank whose save failed).
  checkpoint::CheckpointReporter reporter() const {
    monitor::WorkProgress* progress = &services_.progress;
    return {[log = checkpoint_log_](const std::string& line) { log->info(line); },
            [log = checkpoint_log_](const std::string& line) { log->error(line); },
            [metrics = services_.metrics](double seconds, std::uint64_t bytes) {
              if (metrics) metrics->checkpoint_saved(seconds, bytes);
            },
            [progress](long step, const std::string& folder) {
              progress->note(monitor::NoticeKind::checkpoint_committed, step, folder);
            },
            [progress](long step, const std::string& error) {
              progress->note(monitor::NoticeKind::checkpoint_failed, step, error);
            }};
  }

  void announce() {
    const compute::GPTConfig& m = job_.model;
    log_->info("model: {} layers, {} embd, {} heads, block {}, vocab {} (padded {}), {:.2f}M parameters", m.n_layer,
               m.n_embd, m.n_head, m.block_size, m.vocab_size, m.padded_vocab_size,
               compute::ParameterLayout(m).total() / 1e6);
    if (m.experts > 0)
      log_->info(
          "experts: {} in each of {} MoE blocks (every {}), top-{}{}, {} wide, {:.2f}M parameters active per token",
          m.experts, m.moe_layers(), m.moe_every, m.top_k, m.shared_experts > 0 ? " and a shared expert" : "",
          m.expert_hidden(), compute::ParameterLayout(m).active() / 1e6);
    log_->info("data: {}", data_.description);
    log_->info("training {} steps of {} tokens ({}) on {} with {} thread(s) each", t_.steps, loop_.tokens_per_step(),
               loop_.layout(), backend_name_, t_.threads == 0 ? std::string("all") : std::to_string(t_.threads));
  }

  // Every rank, at the start (model, optimizer and activations allocated) and at the end: the
  // process's memory by kind, each kind's peak at the end, and the resident set beside it.
  void log_memory(const char* when) {
    const compute::MemoryReport host = compute::memory_ledger().report();
    monitor::rank_detail_logger("train")->info(
        "memory at {} of rank {}: {}; resident {}, peak resident {}", when, loop_.checkpoint_place().rank,
        compute::describe(host, std::string_view(when) == "end"), compute::format_bytes(compute::resident_bytes()),
        compute::format_bytes(compute::peak_resident_bytes()));
    const compute::MemoryReport device = compute::memory_ledger().report(compute::Device::cuda);
    if (device.total.peak > 0)
      monitor::rank_detail_logger("train")->info("device memory at {} of rank {}: {}", when,
                                                 loop_.checkpoint_place().rank, compute::describe(device, true));
  }

  // monitor.tensorboard_dir: this rank's event file; one that cannot be made is bad input (exit 2).
  std::optional<RunOutcome> open_board() {
    if (job_.config.monitor.tensorboard_dir.empty()) return std::nullopt;
    auto board =
        monitor::RunBoard::open(job_.config.monitor.tensorboard_dir, loop_.checkpoint_place().rank, services_.reports);
    if (!board) return RunOutcome{2, "monitor.tensorboard_dir: " + board.error().message};
    board_.emplace(std::move(*board));
    return std::nullopt;
  }

  // Writes to the board, if any; after a failed write (said once) training goes on without it.
  template <class Write>
  void to_board(Write write) {
    if (!board_) return;
    if (Status written = write(*board_); !written) {
      monitor::logger("monitor")->error("monitor.tensorboard_dir: {}; training goes on without TensorBoard",
                                        written.error().message);
      board_.reset();
    }
  }

  // This rank's part in a recovery or a grow, for people: a rank-detail line (monitor/log.hpp) that
  // also goes to the board as text at `step`.
  void tell(long step, const std::string& line) {
    monitor::rank_detail_logger("train")->info("{}", line);
    to_board([&](monitor::RunBoard& board) { return board.note(step, line); });
  }

  // With checkpoint.resume: the newest valid checkpoint's state, and the step to go on from. A
  // checkpoint that cannot be restored is exit code 2.
  std::optional<RunOutcome> restore() {
    if (!checkpoints_.startup()) return RunOutcome{2, checkpoints_.startup().error().message};
    if (services_.recovery.join) {
      const RecoveryResult joined = services_.recovery.join(loop_, rollback());
      checkpoints_.forget_uncommitted();
      first_step_ = joined.steps;
      resume_holding(first_step_);
      if (joined.rejoined_island)
        tell(first_step_,
             fmt::format("rank {} rejoined the islands: the outer state from rank {} after step {} ({} "
                         "bytes in {:.3f} s); its weights the outer weights, its moments zero",
                         loop_.checkpoint_place().rank, joined.donor, joined.steps, joined.bytes, joined.seconds));
      else if (joined.checkpoint.empty())
        tell(first_step_,
             fmt::format("rank {} respawned in place: resumed from rank {}'s memory over the data plane "
                         "after step {} ({} bytes in {:.3f} s)",
                         loop_.checkpoint_place().rank, joined.donor, joined.steps, joined.bytes, joined.seconds));
      else
        tell(first_step_,
             fmt::format("rank {} respawned in place: resumed from checkpoint {} after step {}, rolled "
                         "back with every rank ({} bytes of its own shards in {:.3f} s)",
                         loop_.checkpoint_place().rank, joined.checkpoint, joined.steps, joined.bytes, joined.seconds));
      return std::nullopt;
    }
    auto resumed = checkpoints_.restore(loop_.held());
    if (!resumed) return RunOutcome{2, resumed.error().message};
    if (services_.restored) services_.restored();
    for (const checkpoint::SkippedCheckpoint& skipped : resumed->skipped) {
      if (services_.reports) checkpoint_log_->warn(skipped.why);
      services_.progress.note(monitor::NoticeKind::checkpoint_skipped, skipped.step, skipped.why);
    }
    first_step_ = resumed->steps;
    resume_holding(first_step_);
    if (first_step_ == 0 && !resumed->from.empty()) {
      // A step-0 checkpoint (imported weights, init.from): the weights, a fresh optimizer.
      loop_.mirror_to_device();
      log_->info("starting from the weights of {} (step 0)", resumed->from);
    } else if (first_step_ > 0) {
      loop_.mirror_to_device();
      loop_.resume_at(first_step_);
      log_->info("resumed from {} after step {} (data position and optimizer state included)", resumed->from,
                 first_step_);
      services_.progress.note(monitor::NoticeKind::resumed, first_step_, resumed->from);
      for (const std::string& kind : resumed->absent)
        checkpoint_log_->warn("{} holds no '{}' state: this rank starts it afresh, so the run is no longer bitwise "
                              "that of one that never stopped",
                              resumed->from, kind);
    } else if (job_.config.checkpoint.resume) {
      log_->info("no checkpoint in {} to resume from: starting fresh", job_.config.checkpoint.dir);
      services_.progress.note(monitor::NoticeKind::resumed, 0, "the start (no checkpoint yet)");
    }
    return std::nullopt;
  }

  // How this rank rolls back in place (in_place_recovery.hpp): its own shards of a checkpoint, read
  // by the code that resumes a run.
  CheckpointRollback rollback() const {
    if (!checkpoints_.enabled()) return {};
    return {[this] { return checkpoints_.newest_committed(); },
            [this](std::int64_t steps) -> Expected<std::string> {
              auto back = checkpoints_.roll_back_to(static_cast<long>(steps), loop_.held());
              if (!back) return back.error();
              return back->from;
            }};
  }

  // The job recovers in place: this rank gives up what it was doing and goes on after the steps
  // the recovery agreed on, which it returns.
  long survive(const recover_msg& order, long steps_done) {
    // A failed rank's shard of a step being committed in the background never comes.
    checkpoints_.give_up_background_commit();
    RecoveryResult result;
    try {
      result = services_.recovery.survive(order, steps_done, loop_, rollback());
    } catch (const RescueRequested&) {
      // The recovery failed before any state moved: this rank still holds `steps_done` steps.
      write_rescue_snapshot(loop_, services_.rescue, checkpoints_, steps_done);
      throw;
    }
    checkpoints_.forget_uncommitted();
    if (order.grown_world > 0) {
      grown_ = split_batch(job_, order.grown_batch_size, order.grown_grad_accum, order.grown_speeds);
      // "balance static: replica shares 4, 2 of 6 micro-batches" (dynamic: the first shares, which
      // the next step moves to the survivors' measured speeds, a grown replica at their mean).
      // A job grows in place on plain data parallelism only: a rank is a replica.
      announce_shares(*grown_, micro_shares(*grown_, order.grown_world), loop_.checkpoint_place().rank);
      const checkpoint::RunIdentity grown = identity();
      checkpoints_.regrid(grown.grid, grown.job_config);
      tell(static_cast<long>(result.steps),
           fmt::format("rank {} kept its process through an in-place grow (epoch {}): goes on after step {} as {}",
                       loop_.checkpoint_place().rank, order.epoch, result.steps, loop_.layout()));
      resume_holding(static_cast<long>(result.steps));
      return completed_;
    }
    tell(static_cast<long>(result.steps),
         fmt::format(
             "rank {} kept its process through an in-place recovery (epoch {}): goes on after step {}{}",
             loop_.checkpoint_place().rank, order.epoch, result.steps,
             !result.checkpoint.empty()
                 ? fmt::format(", rolled back from step {} to checkpoint {} ({} bytes of its own shards in {:.3f} s)",
                               steps_done, result.checkpoint, result.bytes, result.seconds)
             : result.received ? fmt::format(", its state from rank {} ({} bytes in {:.3f} s)", result.donor,
                                             result.bytes, result.seconds)
                               : std::string{}));
    resume_holding(static_cast<long>(result.steps));
    return completed_;
  }

  // This rank's state now holds `steps` steps without having trained the last of them here (a
  // resume, or an in-place recovery's plan): what its node reports should its worker fail, and
  // what its mailbox finishes a step for.
  void resume_holding(long steps) {
    completed_ = steps;
    services_.progress.resumed_at(steps);
    if (services_.recovery.holds_steps) services_.recovery.holds_steps(steps);
  }

  std::optional<RunOutcome> obey_boundary_orders(long steps_done) {
    if (!services_.control) return std::nullopt;
    try {
      return obey_orders(*services_.control, steps_done, loop_.checkpoint_place().rank, checkpoints_, loop_,
                         services_.progress);
    } catch (const RescueAtBoundary&) {
      write_rescue_snapshot(loop_, services_.rescue, checkpoints_, steps_done);
      throw;
    }
  }

  monitor::CompressionReading compression_reading() const {
    return services_.compression ? services_.compression() : monitor::CompressionReading{};
  }

  std::optional<RunOutcome> train_step(long s) {
    services_.progress.begin(fmt::format("step {}", s + 1));
    const auto start = Clock::now();
    const auto wall_start = std::chrono::system_clock::now().time_since_epoch();
    if (first_step_ == 0 && !services_.recovery.join) drilled_.fail_if_due(loop_.checkpoint_place().rank, s + 1);
    const monitor::CompressionReading compressed_before = compression_reading();
    compute::StepResult r;
    try {
      r = loop_.step();
    } catch (const RecoveryOrdered&) {
      throw;  // the step's state is abandoned, not rescued: the job recovers in place
    } catch (...) {
      write_rescue_snapshot(loop_, services_.rescue, checkpoints_, s);
      throw;
    }
    completed_ = s + 1;
    if (services_.recovery.holds_steps) services_.recovery.holds_steps(completed_);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    const std::int64_t tokens = loop_.tokens_per_step();
    const monitor::CompressionReading compressed = compression_reading();
    monitor::StepRecord record{s + 1,
                               std::chrono::duration<double>(wall_start).count(),
                               secs,
                               r.loss,
                               tokens,
                               static_cast<std::int64_t>(compressed.wire_bytes - compressed_before.wire_bytes),
                               static_cast<std::int64_t>(compressed.plain_bytes - compressed_before.plain_bytes),
                               compressed.seconds - compressed_before.seconds,
                               r.lr,
                               r.grad_norm};
    const compute::GPTStage::MoERouting& routed = r.moe_of_rank ? *r.moe_of_rank : r.moe;  // each slot once over ranks
    record.experts = routed.experts;
    record.expert_slots = routed.slots;
    record.batch_share = r.batch_share;
    record.micro_batch_seconds = r.micro_batch_seconds;
    record.islands = r.islands;
    record.outer_syncs = r.outer_syncs;
    record.outer_bytes = r.outer_bytes;
    record.next_sync_step = r.next_sync_step;
    services_.progress.step_done(record);
    if (services_.metrics) {
      services_.metrics->step_done(s + 1, secs, tokens, r.loss, r.lr, r.grad_norm);
      if (!routed.slots.empty())
        services_.metrics->experts_routed(routed.slots, routed.experts, routed.load_imbalance());
    }
    to_board([&](monitor::RunBoard& board) {
      const double mfu = services_.metrics && secs > 0 ? services_.metrics->mfu(static_cast<double>(tokens) / secs) : 0;
      return board.step({s + 1, secs, tokens, r.loss, r.lr, r.grad_norm, mfu});
    });
    train_seconds_ += secs;
    last_loss_ = r.loss;
    if (!std::isfinite(r.loss))
      return RunOutcome{1, fmt::format("training diverged at step {} (loss {}); lower train.lr", s + 1, r.loss)};
    const long done = s + 1;
    if (t_.log_every > 0 && (done % t_.log_every == 0 || done == t_.steps)) {
      const double eta =
          train_seconds_ / static_cast<double>(done - first_step_) * static_cast<double>(t_.steps - done);
      // A model with experts adds its blocks' mean load-balancing and z-losses and its worst
      // block's load (docs/moe.md).
      const std::string moe = job_.model.experts > 0 ? fmt::format(" | aux {:.4f} | z {:.3f} | load {:.2f}", r.moe.aux,
                                                                   r.moe.z, r.moe.load_imbalance())
                                                     : std::string();
      log_->info("step {:>5}/{} | loss {:.4f}{} | lr {:.2e} | norm {:.3f} | {:.0f} tok/s | {:.0f} ms | ETA {}", done,
                 t_.steps, r.loss, moe, r.lr, r.grad_norm, static_cast<double>(tokens) / secs, secs * 1e3,
                 monitor::duration_text(eta));
    }
    return std::nullopt;
  }

  // A failed save is reported and training goes on; only the last one decides the exit code. A
  // rescue order can reach the coordinator while it waits for the other shards of this save (a
  // writer was lost): this rank holds `done` steps, and writes them as its rescue snapshot.
  void checkpoint_after(long done) {
    if (checkpoints_.due(done)) loop_.mirror_to_host();
    try {
      if (Status saved = checkpoints_.after_step(done, loop_.held()); !saved && done == t_.steps) last_save_ = saved;
    } catch (const RescueRequested&) {
      write_rescue_snapshot(loop_, services_.rescue, checkpoints_, done);
      throw;
    }
  }

  double validate(long step) {
    services_.progress.begin(fmt::format("validation after step {}", step));
    const auto start = Clock::now();
    const double val = loop_.evaluate(t_.val_batches);
    services_.progress.validation_done(step, val);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    log_->info("step {:>5}/{} | val loss {:.4f} ({} tokens, {:.1f}s)", step, t_.steps, val,
               loop_.tokens_per_step() * t_.val_batches, secs);
    if (services_.reports) to_board([&](monitor::RunBoard& board) { return board.validation(step, val); });
    return val;
  }

  RunOutcome finish() {
    const double last_val = validate(t_.steps);
    if (Status saved = checkpoints_.finish(); !saved && last_save_) last_save_ = saved;
    const double wall = std::chrono::duration<double>(Clock::now() - run_start_).count();
    const double trained_tokens = static_cast<double>(loop_.tokens_per_step() * (t_.steps - first_step_));
    // The parameter norm fingerprints the weights: equal layouts of one job print the same digits.
    log_->info(
        "done: {} steps in {} | {:.0f} tok/s while training | final train loss {:.4f} | final val loss {:.4f} | "
        "param norm {:.9g}",
        t_.steps, monitor::duration_text(wall), train_seconds_ > 0 ? trained_tokens / train_seconds_ : 0.0, last_loss_,
        last_val, loop_.param_norm());
    log_memory("end");
    if (!last_save_) return {1, "the last checkpoint failed: " + last_save_.error().message};
    if (services_.reports && job_.config.sample.tokens > 0) {
      if (job_.config.train.backend == compute::BackendKind::sim)
        log_->info("no sample: the sim backend computes no logits to sample from");
      else if (compute::GPT* model = loop_.whole_model())
        print_sample(*model, job_, *log_);
      else
        log_->info(
            "no sample: no rank runs the whole model (pipeline.stages > 1, train.zero 3, context.shards > 1 or "
            "expert.shards > 1)");
    }
    return {};
  }

  const ResolvedJob& job_;
  const TrainOptions& t_;
  const JobData& data_;
  const std::string& backend_name_;
  TrainingLoop& loop_;
  const RunServices& services_;
  std::shared_ptr<spdlog::logger> log_, checkpoint_log_;
  std::optional<monitor::RunBoard> board_;  // monitor.tensorboard_dir's event file of this rank
  std::optional<ResolvedJob> grown_;  // the job's batch split since it grew in place; before checkpoints_, whose identity reads it
  checkpoint::RunCheckpoints checkpoints_;
  const ControlFinisher finisher_;
  const DrilledFailure drilled_ = DrilledFailure::from_environment();
  long first_step_ = 0;
  long completed_ = 0;  // steps whose update this rank has made (what an in-place recovery starts from)
  Clock::time_point run_start_;
  double train_seconds_ = 0, last_loss_ = 0;
  Status last_save_ = Status::success();
};

}  // namespace

RunOutcome drive_training(const ResolvedJob& job, const JobData& data, const std::string& backend_name,
                          TrainingLoop& loop, const RunServices& services) {
  return RankRun(job, data, backend_name, loop, services).run();
}

RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, const RunServices& services,
                        compute::ContextShardGroup context, compute::IslandGroup islands,
                        compute::ExpertGroup experts) {
  compute::memory_ledger().measure_runtime();  // what the process holds before the model
  ReplicaLoop loop(job, backend, data, std::move(data_parallel), !services.recovery.join, context, std::move(islands),
                   experts, services.metrics);
  if (services.trace) loop.record_into(*services.trace);
  return drive_training(job, data, backend.name(), loop, services);
}

}  // namespace troupe::actors
