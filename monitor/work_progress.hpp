#pragma once
// What one worker is doing, for heartbeats and the step watchdog: how far it got, what it is
// working on, and what it waits for. The work thread writes it; the node supervisor reads a
// snapshot for every heartbeat from another thread, so every access takes the lock (a few per
// step: far off the hot path).
//
// `progress` counts finished units of work (steps, validations) and `idle_seconds` is the time
// since the last one, on the worker's own clock (so a watchdog elsewhere is not misled by the
// heartbeat's period); a worker idle too long is stuck, and `activity` / `waiting_for` say where.
// Make one when the work begins: the idle clock starts at construction.

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace troupe::monitor {

// One finished step as the shell shows it (status, top, loss, trace).
struct StepRecord {
  std::int64_t step = 0;
  double start_unix_seconds = 0;  // wall clock, so ranks on several hosts line up in a trace
  double seconds = 0;
  double loss = 0;
  std::int64_t tokens = 0;  // trained in the step by the whole job
  // Gradient compression in the step: bytes its sums carried, the bytes they would have carried
  // uncompressed, seconds compressing (all 0 when the worker does not compress).
  std::int64_t wire_bytes = 0;
  std::int64_t plain_bytes = 0;
  double compress_seconds = 0;
  double lr = 0;  // the step's learning rate and gradient norm (the job's web page draws them)
  double grad_norm = 0;
  // The validation run after the step (train.val_every, and the last step): its mean loss.
  bool validated = false;
  double val_loss = 0;
  // A model with experts: the token-slots this rank's tokens sent to each of `experts` experts in
  // the step, MoE block by block in layer order (the shell's experts); empty without experts.
  int experts = 0;
  std::vector<std::int64_t> expert_slots;
  // A data replica's share of the step's global batch (its micro-batches over the step's; 0 on a
  // pipeline stage), and under train.balance dynamic its measured seconds per micro-batch (else 0).
  double batch_share = 0;
  double micro_batch_seconds = 0;
  // train.sync diloco: the islands in the last outer sync (0: not diloco), the fragment syncs
  // landed since the process started, the bytes this rank sent for the newest, and the step after
  // which the next starts (0: none).
  int islands = 0;
  std::int64_t outer_syncs = 0;
  std::int64_t outer_bytes = 0;
  std::int64_t next_sync_step = 0;
};

// What a worker notes for the job's events (actors/job_events.hpp): each is taken once, by the
// next heartbeat.
enum class NoticeKind : std::uint8_t {
  resumed,               // the run restored a checkpoint (step: its steps; detail: the folder) or none (0, "the start")
  checkpoint_committed,  // step: the checkpoint's; detail: its folder
  checkpoint_failed,     // step: the checkpoint's; detail: the error
  checkpoint_skipped,    // a resume passed over it; detail: why
};
struct WorkNotice {
  NoticeKind kind = NoticeKind::resumed;
  std::int64_t step = 0;
  double unix_seconds = 0;  // when it was noted
  std::string detail;
};

struct ProgressSnapshot {
  std::int64_t steps_done = 0;
  std::int64_t progress = 0;
  double idle_seconds = 0;  // since the last finished unit (or since the work began)
  std::string activity;     // "step 12", "validation after step 50"
  std::string waiting_for;  // "the gradient sums: <the engine's oldest receive>"; empty when not waiting
  double waiting_seconds = 0;
  std::vector<StepRecord> recent_steps;  // the last WorkProgress::kept_steps, oldest first
};

class WorkProgress {
 public:
  // `oldest_receive` describes what the data plane waits for (comm::Engine's oldest pending
  // receive); it is asked only while the worker waits.
  explicit WorkProgress(std::function<std::string()> oldest_receive = {});

  void begin(std::string activity);
  void step_done(std::int64_t steps_done);
  void step_done(const StepRecord& step);  // the same, with the step's figures kept for the shell
  static constexpr std::size_t kept_steps = 64;
  // Progress without a step: the validation after step `after_step` gave mean loss `loss`, which
  // the kept record of that step carries from now on.
  void validation_done(std::int64_t after_step, double loss);
  // The worker's state now holds `steps_done` steps (a resume, an in-place recovery's plan or
  // rollback) without a unit finished.
  void resumed_at(std::int64_t steps_done);

  // Marks the worker as waiting for `what` until the returned guard goes away.
  class Wait {
   public:
    Wait(Wait&&) = delete;
    ~Wait();

   private:
    friend class WorkProgress;
    explicit Wait(WorkProgress& owner) : owner_(owner) {}
    WorkProgress& owner_;
  };
  [[nodiscard]] Wait wait_for(std::string what);

  ProgressSnapshot snapshot() const;

  // Notes `kind` of step `step` now, for the next heartbeat; any thread (checkpoints commit in the
  // background).
  void note(NoticeKind kind, std::int64_t step, std::string detail);
  // The notices since the last call, oldest first.
  std::vector<WorkNotice> take_notices();

 private:
  std::function<std::string()> oldest_receive_;
  mutable std::mutex mutex_;
  std::chrono::steady_clock::time_point last_progress_ = std::chrono::steady_clock::now();
  std::int64_t steps_done_ = 0, progress_ = 0;
  std::string activity_, waiting_for_;
  std::chrono::steady_clock::time_point waiting_since_;
  std::vector<StepRecord> recent_steps_;
  std::vector<WorkNotice> notices_;
};

}  // namespace troupe::monitor
