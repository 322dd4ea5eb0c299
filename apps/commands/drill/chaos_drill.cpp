// chaos (drill.hpp): the node kill repeated, one in every --kill-every-th step, each at a random
// moment within the step and never the node killed the time before, the choices drawn from a
// printed seed.

#include <cstdio>
#include <random>
#include <thread>

#include "actors/idle_class.hpp"
#include "apps/commands/drill/drill.hpp"

namespace troupe::apps::drill {
namespace {

using namespace std::chrono_literals;
using actors::job_event;

// The chaos drill's random choices, the same for the same seed on any machine (no standard
// distribution: their results differ between standard libraries).
class KillChoices {
 public:
  explicit KillChoices(std::uint64_t seed) : random_(seed) {}
  // Where in its step a kill lands, in [0, 1).
  double moment() { return static_cast<double>(random_() >> 11) * 0x1p-53; }
  // A node of `nodes` other than `previous` (−1: any).
  int node(int nodes, int previous) {
    const int candidates = previous < 0 ? nodes : nodes - 1;
    const int drawn = static_cast<int>(random_() % static_cast<std::uint64_t>(candidates));
    return previous >= 0 && drawn >= previous ? drawn + 1 : drawn;
  }

 private:
  std::mt19937_64 random_;
};

std::string fixed2(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

// The checkpoint being written in `dir`: its staging folder's name (step-….tmp), or empty.
std::string checkpoint_in_flight(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".tmp") return it->path().filename().string();
  return "";
}

// How long step `step` took, by its end and the end of the step before it among the events from
// `from` on; 1 s when that one is not there (the first step after a restore).
double step_seconds(const std::vector<job_event>& events, std::size_t from, const job_event& step_event, long step) {
  for (std::size_t i = from; i < events.size(); ++i)
    if (const auto* s = caf::get_if<actors::step_trained>(&events[i].body); s && s->step == step - 1)
      return step_event.unix_seconds - events[i].unix_seconds;
  return 1.0;
}

}  // namespace

// Before the next kill the drill waits for the job to be training again (the first step trained
// after the restore), so no kill lands in a recovery; a kill may land while a checkpoint is being
// written. PASS needs every kill recovered, the job finished, and the final weights bitwise those
// of the undisturbed run.
Verdict drill_chaos(const Drill& drill, std::uint64_t seed) {
  const DrillOptions& options = drill.options();
  Verdict v;
  v.fault = "SIGKILL to a node process every " + std::to_string(options.kill_every) + " steps of " +
            std::to_string(drill.steps()) + " (" + std::to_string(drill.kills()) +
            " kills), each at a random moment within its step and never the node killed the time before; seed " +
            std::to_string(seed) + " (--seed " + std::to_string(seed) + " replays the choices)";
  auto started = drill.start("drilled", false, true);
  if (!started) {
    v.fault = started.error().message;
    return v;
  }
  EventFeed& feed = *started->events;
  KillChoices choices(seed);
  std::size_t from = 0;  // the events before this one are done with: the last recovery's
  int previous = -1;
  long kills = 0, recovered = 0, steps_lost = 0, during_checkpoint = 0;
  double recovery_sum = 0, resume_sum = 0;
  for (long step = options.kill_every; step < drill.steps(); step += options.kill_every) {
    const std::string kill = "kill " + std::to_string(kills + 1) + " (step " + std::to_string(step) + ")";
    const auto before = feed.wait_for(
        body_is<actors::step_trained>([step](const auto& s) { return s.step == step - 1; }), 300s, from);
    if (!before) {
      v.checks.push_back(kill + ": the job never reached step " + std::to_string(step - 1));
      break;
    }
    // Drawn in the same order every time, so that a seed replays the nodes and the moments.
    const double moment = choices.moment();
    const int node = choices.node(options.workers, previous);
    std::this_thread::sleep_for(
        std::chrono::duration<double>(moment * step_seconds(feed.events(), from, *before, step - 1)));
    const auto pids = joined_pids(feed.events());
    const auto joined = pids.find(node);
    if (joined == pids.end()) {
      v.checks.push_back(kill + ": node " + std::to_string(node) + " never joined");
      break;
    }
    const std::size_t kill_index = feed.size();
    const std::string writing = checkpoint_in_flight(drill.dir() / "drilled");
    actors::kill_node_process(joined->second.back());
    const double fault_at = now();
    if (!writing.empty()) ++during_checkpoint;
    ++kills;
    previous = node;
    Verdict one;
    const std::size_t trained = watch_recovery(feed, fault_at, body_is<actors::failure_detected>(), true, one,
                                               kill_index, from);
    // The kill landed after the newest step the job heard of: the drawn moment may reach past a
    // short step.
    const long last = last_step_before(feed.events(), fault_at, from);
    double last_at = before->unix_seconds;
    for (const job_event& event : feed.events())
      if (const auto* s = caf::get_if<actors::step_trained>(&event.body); s && s->step == last && event.unix_seconds <= fault_at)
        last_at = event.unix_seconds;
    from = trained;
    std::string account = "kill " + std::to_string(kills) + ": node " + std::to_string(node) + " (pid " +
                          std::to_string(joined->second.back()) + ") in step " + std::to_string(last + 1) + " (" +
                          fixed2(fault_at - last_at) + " s after step " + std::to_string(last) +
                          " ended; drawn at " + std::to_string(static_cast<int>(moment * 100)) + "% of a step)" +
                          (writing.empty() ? std::string() : ", while " + writing + " was being written") + "; ";
    account += one.detected_after ? "detected after " + fixed2(*one.detected_after) + " s; " : "detected: NO; ";
    if (!one.recovered_after) {
      v.checks.push_back(account + "training again: NO");
      break;
    }
    ++recovered;
    recovery_sum += *one.recovered_after;
    resume_sum += one.resumed_after.value_or(0.0);
    if (one.resumed_after) account += "resumed after " + fixed2(*one.resumed_after) + " s; ";
    steps_lost += one.steps_lost.value_or(0);
    v.checks.push_back(account + "training again after " + fixed2(*one.recovered_after) + " s: " + one.recovered_how +
                       "; steps lost " + std::to_string(one.steps_lost.value_or(0)));
    if (one.detected_after && (!v.detected_after || *one.detected_after > *v.detected_after)) {
      v.detected_after = one.detected_after;
      v.detected_by = "the slowest of the detections, kill " + std::to_string(kills) + ": " + one.detected_by;
    }
    if (!v.recovered_after || *one.recovered_after > *v.recovered_after) {
      v.recovered_after = one.recovered_after;
      v.recovered_how = "the slowest of the recoveries, kill " + std::to_string(kills) + ": " + one.recovered_how;
    }
  }
  v.steps_lost = steps_lost;
  const std::optional<int> code = await_end(*started, v);
  add_job_account(feed.final_events(30s), v);
  v.checks.push_back("totals: " + std::to_string(kills) + " of " + std::to_string(drill.kills()) + " kills made (" +
                     std::to_string(during_checkpoint) + " while a checkpoint was being written), " +
                     std::to_string(recovered) + " recovered; steps lost " + std::to_string(steps_lost) +
                     (recovered > 0 ? "; resumed after " + fixed2(resume_sum / static_cast<double>(recovered)) +
                                          " s and training again after " +
                                          fixed2(recovery_sum / static_cast<double>(recovered)) + " s on average"
                                    : std::string()));
  v.checks.push_back("job finished: " + finished(code));
  compare_weights(drill, v);
  v.passed = kills == drill.kills() && recovered == kills && code == 0 && v.weights_equal.value_or(false);
  return v;
}

}  // namespace troupe::apps::drill
