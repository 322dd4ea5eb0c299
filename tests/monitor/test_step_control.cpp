// The shell's orders at step boundaries (monitor/step_control.hpp) with a worker on its own
// thread, the validation loss a worker's progress carries for its heartbeat, and the loss
// sparkline.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "monitor/sparkline.hpp"
#include "monitor/step_control.hpp"

using namespace troupe::monitor;
using namespace std::chrono_literals;

namespace {

// A worker stepping through boundaries 0, 1, 2, ... until told to stop; counts checkpoints.
struct Worker {
  StepControl control;
  WorkProgress progress;
  std::atomic<std::int64_t> boundary{-1};
  std::atomic<int> checkpoints{0};
  std::atomic<bool> failed{false}, stopped{false}, rescued{false};
  std::thread thread{[this] {
    for (std::int64_t s = 0; s < 100000; ++s) {
      for (;;) {
        const BoundaryOrder order = control.at_boundary(s, progress);
        if (order.stop) return void(stopped = true);
        if (order.fail) return void(failed = true);
        if (order.rescue) return void(rescued = true);
        if (!order.checkpoint) break;
        ++checkpoints;
      }
      boundary = s;
      std::this_thread::sleep_for(1ms);
    }
    control.finished();
  }};
  ~Worker() {
    control.stop();
    thread.join();
  }
};

template <class Condition>
bool eventually(Condition condition) {
  for (int i = 0; i < 2000 && !condition(); ++i) std::this_thread::sleep_for(1ms);
  return condition();
}

// Pauses `w` at its next boundary, once it has passed `after`; returns that boundary.
std::int64_t pause_after(Worker& w, std::int64_t after) {
  REQUIRE(eventually([&] { return w.boundary >= after; }));
  const std::int64_t at = w.control.hold();
  w.control.act(at, BoundaryAction::pause);
  REQUIRE(eventually([&] { return w.progress.snapshot().activity == "paused after step " + std::to_string(at); }));
  return at;
}

}  // namespace

TEST_CASE("hold stops a worker at its next boundary and act pauses it there until resume", "[step_control]") {
  Worker w;
  REQUIRE(eventually([&] { return w.boundary >= 3; }));
  const std::int64_t held = w.control.hold();
  REQUIRE(held >= 4);
  REQUIRE(eventually([&] { return w.progress.snapshot().activity == "held after step " + std::to_string(held); }));
  CHECK(w.boundary == held - 1);  // reached the boundary, did not start the step after it
  w.control.act(held + 2, BoundaryAction::pause);
  REQUIRE(eventually([&] { return w.progress.snapshot().activity == "paused after step " + std::to_string(held + 2); }));
  std::this_thread::sleep_for(20ms);
  CHECK(w.boundary == held + 1);  // steps stopped

  // A checkpoint while paused is saved at the paused boundary, and the pause holds.
  CHECK(w.control.hold() == held + 2);
  w.control.act(held + 2, BoundaryAction::checkpoint);
  REQUIRE(eventually([&] { return w.checkpoints == 1; }));
  std::this_thread::sleep_for(20ms);
  CHECK(w.boundary == held + 1);

  w.control.resume();
  CHECK(eventually([&] { return w.boundary > held + 3; }));
}

// A rank one boundary behind the agreed one runs a step before it pauses: a resume in that step
// once left it to pause there after all, with the job told it runs.
TEST_CASE("a resume before the paused boundary is reached cancels the pause", "[step_control]") {
  StepControl control;
  WorkProgress progress;
  CHECK(!control.at_boundary(4, progress).fail);
  REQUIRE(control.hold() == 5);
  control.act(6, BoundaryAction::pause);
  control.resume();
  std::atomic<bool> returned{false};
  std::thread rank([&] {
    control.at_boundary(5, progress);
    control.at_boundary(6, progress);
    returned = true;
  });
  const bool ran_on = eventually([&] { return returned.load(); });
  CHECK(ran_on);
  if (!ran_on) control.stop();
  rank.join();
}

TEST_CASE("fail_next fails the next boundary, and stop ends a pause", "[step_control]") {
  {
    Worker w;
    REQUIRE(eventually([&] { return w.boundary >= 1; }));
    w.control.fail_next();
    CHECK(eventually([&] { return w.failed.load(); }));
  }
  Worker w;
  pause_after(w, 1);
  w.control.stop();
  CHECK(eventually([&] { return w.stopped.load(); }));
}

TEST_CASE("a rescue ends a pause at once, and reaches a running worker at its next boundary", "[step_control]") {
  {
    Worker paused;
    const std::int64_t held = pause_after(paused, 2);
    paused.control.rescue();
    REQUIRE(eventually([&] { return paused.rescued.load(); }));
    CHECK(paused.boundary == held - 1);  // it took no step after the pause
  }
  Worker running;
  REQUIRE(eventually([&] { return running.boundary >= 2; }));
  running.control.rescue();
  REQUIRE(eventually([&] { return running.rescued.load(); }));
  CHECK_FALSE(running.failed);
}

TEST_CASE("hold says when a worker has not started or has finished", "[step_control]") {
  StepControl fresh;
  CHECK(fresh.hold() == StepControl::not_started);
  StepControl done;
  done.finished();
  CHECK(done.hold() == StepControl::finished_boundary);
}

TEST_CASE("a slot reopened for a respawned worker is held at its boundaries again", "[step_control]") {
  StepControl control;
  WorkProgress progress;
  CHECK(!control.at_boundary(4, progress).fail);
  control.finished();
  REQUIRE(control.hold() == StepControl::finished_boundary);
  control.reopen();
  CHECK(control.hold() == 5);
  control.act(5, BoundaryAction::checkpoint);
  CHECK(control.at_boundary(5, progress).checkpoint);
}

TEST_CASE("a validation's loss rides on the kept record of the step it followed, for the next heartbeat",
          "[step_control][web]") {
  WorkProgress progress;
  progress.step_done(StepRecord{1, 0, 0.5, 4.5});
  progress.step_done(StepRecord{2, 0, 0.5, 4.25});
  const std::int64_t before = progress.snapshot().progress;
  progress.validation_done(2, 4.125);
  const ProgressSnapshot s = progress.snapshot();
  CHECK(s.progress == before + 1);  // a validation is progress for the step watchdog
  REQUIRE(s.recent_steps.size() == 2);
  CHECK_FALSE(s.recent_steps[0].validated);
  CHECK(s.recent_steps[1].validated);
  CHECK(s.recent_steps[1].val_loss == 4.125);
  progress.validation_done(7, 1.0);  // a step no longer (or never) kept: nothing to carry it
  CHECK(progress.snapshot().recent_steps[1].val_loss == 4.125);
}

TEST_CASE("a sparkline spans the eight blocks and averages down to its width", "[sparkline]") {
  CHECK(sparkline({1, 2, 3, 4, 5, 6, 7, 8}, 8) == "▁▂▃▄▅▆▇█");
  CHECK(sparkline({5, 5, 5}, 10) == "▄▄▄");
  CHECK(sparkline({0, 0, 10, 10}, 2) == "▁█");
  CHECK(sparkline({}, 10).empty());
}

// The shell's rejoin: the job must grow at the boundary of its checkpoint, so the worker waits
// there after saving until the job's answer releases it.
TEST_CASE("checkpoint_and_hold saves at the agreed boundary and waits there until released", "[step_control]") {
  Worker w;
  REQUIRE(eventually([&] { return w.boundary >= 3; }));
  const std::int64_t held = w.control.hold();
  w.control.act(held + 1, BoundaryAction::checkpoint_and_hold);
  REQUIRE(eventually([&] { return w.checkpoints == 1; }));
  REQUIRE(eventually([&] { return w.progress.snapshot().activity == "held after step " + std::to_string(held + 1); }));
  std::this_thread::sleep_for(20ms);
  CHECK(w.boundary == held);  // saved after step held + 1 and started no step after it
  CHECK(w.checkpoints == 1);
  CHECK(w.control.hold() == held + 1);  // a second hold finds it standing there
  w.control.act(-1, BoundaryAction::none);
  CHECK(eventually([&] { return w.boundary > held + 2; }));
  CHECK(w.checkpoints == 1);
}
