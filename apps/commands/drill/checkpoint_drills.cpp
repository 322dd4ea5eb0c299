// The checkpoints' own faults (drill.hpp): the newest checkpoint corrupted, then a restore forced
// with --resume (corrupt-checkpoint); the job killed while a checkpoint is being written, then
// resumed (kill-during-checkpoint); and a write error while saving (disk-full).

#include <sys/resource.h>

#include <csignal>
#include <fstream>
#include <thread>

#include "apps/commands/drill/drill.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"

namespace troupe::apps::drill {
namespace {

using namespace std::chrono_literals;
using actors::CheckpointOutcome;
using actors::job_event;

Match checkpoint(CheckpointOutcome outcome) {
  return body_is<actors::checkpoint_noted>([outcome](const auto& noted) { return noted.outcome == outcome; });
}

// Flips one byte in the middle of the newest checkpoint's first shard.
Status corrupt_newest(const fs::path& dir, long step, std::string& what) {
  const fs::path shard = checkpoint::step_dir(dir, step) / checkpoint::shard_file_name(0);
  std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
  if (!file) return Error{"cannot open " + shard.string()};
  const auto middle = static_cast<std::streamoff>(fs::file_size(shard) / 2);
  file.seekg(middle);
  const char old = static_cast<char>(file.get());
  file.seekp(middle);
  file.put(static_cast<char>(old ^ 0x5a));
  what = "flipped bits of byte " + std::to_string(middle) + " of " + shard.string();
  return file ? Status::success() : Status(Error{"cannot write " + shard.string()});
}

// The checkpoint being written in `dir`: its staging folder's name (step-….tmp), or empty.
bool checkpoint_in_flight(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".tmp") return true;
  return false;
}

}  // namespace

Verdict drill_checkpoints(const Drill& drill) {
  Verdict v;
  const bool corrupt = drill.options().scenario == "corrupt-checkpoint";
  const fs::path drilled = drill.dir() / "drilled";
  auto first = drill.start("drilled", false, true);
  if (!first) {
    v.fault = first.error().message;
    return v;
  }
  double fault_at = 0;
  long last = drill.steps();
  if (corrupt) {
    if (await_end(*first, v) != 0) {
      v.fault = "the run to corrupt did not finish";
      return v;
    }
    std::string what;
    if (Status s = corrupt_newest(drilled, drill.steps(), what); !s) {
      v.fault = s.error().message;
      return v;
    }
    fault_at = now();
    v.fault = what + ", then a restore forced with --resume";
  } else {
    const long at_step = drill.options().at_step;
    if (!first->events->wait_for(
            body_is<actors::step_trained>([at_step](const auto& s) { return s.step == at_step; }), 300s)) {
      v.fault = "step " + std::to_string(at_step) + " never appeared";
      await_end(*first, v);
      return v;
    }
    // Kill the job while a staging folder exists: a checkpoint is being written.
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    bool caught = false;
    while (!caught && std::chrono::steady_clock::now() < deadline && !first->process->wait_exit(0ms)) {
      caught = checkpoint_in_flight(drilled);
      if (caught) first->process->kill_all();
      std::this_thread::sleep_for(1ms);
    }
    (void)first->process->wait_exit(30s);
    fault_at = now();
    if (!caught) {
      v.fault = "the job never had a checkpoint in flight to kill";
      await_end(*first, v);
      return v;
    }
    v.fault = "SIGKILL to the job and its nodes while a checkpoint was being written (after step " +
              std::to_string(at_step) + ")";
    last = last_step_before(first->events->events(), fault_at);
  }
  auto newest = checkpoint::open_newest_valid(drilled);
  if (newest && newest->checkpoint)
    v.checks.push_back("newest valid checkpoint before the restore: " + newest->checkpoint->dir().string() +
                       (newest->skipped.empty() ? "" : " (" + newest->skipped.front().why + ")"));
  first->events.reset();
  auto second = drill.start("drilled", true, true);
  if (!second) {
    v.fault = second.error().message;
    return v;
  }
  // What tells the resume saw the fault: the checkpoint it passed over, or the resume itself.
  const Match detection = corrupt ? checkpoint(CheckpointOutcome::skipped) : body_is<actors::training_resumed>();
  watch_recovery(*second->events, fault_at, detection, false, v);
  const std::optional<int> code = await_end(*second, v);
  bool torn = false;
  for (const job_event& event : second->events->final_events(30s))
    if (const auto* resumed = caf::get_if<actors::training_resumed>(&event.body))
      torn = torn || resumed->from.find(".tmp") != std::string::npos;
  // The steps before the fault were the first run's: lost are those it reported and the resume
  // did not find.
  if (const auto resumed = second->events->wait_for(body_is<actors::training_resumed>(), 0ms)) {
    const long after_step = static_cast<long>(caf::get<actors::training_resumed>(resumed->body).after_step);
    v.steps_lost = std::max(0L, last - after_step);
    // A resume that restored nothing, the run starting again at step 0, recovered nothing.
    if (after_step == 0) {
      v.resumed_after.reset();
      v.recovered_after.reset();
    }
  }
  v.checks.push_back("resumed job finished: " + std::string(code == 0 ? "yes" : "NO"));
  v.checks.push_back(std::string("a torn checkpoint was loaded: ") + (torn ? "YES" : "no"));
  compare_weights(drill, v);
  v.passed = v.detected_after && v.recovered_after && code == 0 && !torn && v.weights_equal.value_or(false);
  return v;
}

// A write error while saving: once the first checkpoint is committed, every node process gets a
// file-size limit the next shard cannot fit (EFBIG, as a full disk gives ENOSPC). Training must go
// on to the last step with the error reported and the previous checkpoint intact; the failed last
// checkpoint then fails the run, and the job restarts from the intact one (without the limit: a
// restarted node is a new process) and finishes.
Verdict drill_disk_full(const Drill& drill) {
  Verdict v;
  const fs::path drilled = drill.dir() / "drilled";
  auto run = drill.start("drilled", false, true);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  EventFeed& feed = *run->events;
  if (!feed.wait_for(checkpoint(CheckpointOutcome::committed), 300s)) {
    v.fault = "no checkpoint was committed before the limit";
    await_end(*run, v);
    return v;
  }
  const long intact_step = drill.every();
  const rlimit tiny{64 * 1024, 64 * 1024};
  for (pid_t node : run->process->descendants()) prlimit(node, RLIMIT_FSIZE, &tiny, nullptr);
  const std::size_t from = feed.size();
  const double fault_at = now();
  v.fault = "file-size limit of 64 KiB on every node process after the checkpoint of step " + std::to_string(intact_step);
  if (auto reported = feed.wait_for(checkpoint(CheckpointOutcome::failed), 300s, from)) {
    const auto& failed = caf::get<actors::checkpoint_noted>(reported->body);
    v.detected_after = reported->unix_seconds - fault_at;
    v.detected_by = "checkpoint after step " + std::to_string(failed.step) + " failed: " + failed.detail +
                    "; training goes on, earlier checkpoints are intact";
  }
  std::size_t done_index = 0;
  const long last = drill.steps();
  const auto done = feed.wait_for(body_is<actors::step_trained>([last](const auto& s) { return s.step == last; }), 600s,
                                  from, &done_index);
  v.checks.push_back(std::string("training went on to the last step: ") + (done ? "yes" : "NO"));
  auto intact = checkpoint::open_checkpoint(checkpoint::step_dir(drilled, intact_step));
  v.checks.push_back("previous checkpoint (step " + std::to_string(intact_step) + ") intact: " +
                     (intact ? "yes" : "NO: " + intact.error().message));
  if (done) {
    if (auto resumed = feed.wait_for(body_is<actors::training_resumed>(), 300s, done_index)) {
      const auto& how = caf::get<actors::training_resumed>(resumed->body);
      v.recovered_after = resumed->unix_seconds - fault_at;
      v.recovered_how = "the failed last checkpoint failed the run; resumed from " + how.from + " after step " +
                        std::to_string(how.after_step);
    }
  }
  const std::optional<int> code = await_end(*run, v);
  v.checks.push_back("job finished: " + finished(code));
  compare_weights(drill, v);
  v.passed = v.detected_after && done && intact && code == 0 && v.weights_equal.value_or(false);
  return v;
}

}  // namespace troupe::apps::drill
