// troupe schedule: shows what a pipeline schedule does before anything runs it. Generates the
// per-stage instruction streams (schedules/generate.hpp), proves them sound under blocking sends
// (checker.hpp), simulates them (simulator.hpp) and prints the shape, each stage's peak of
// stashed activations, the makespan and the bubble beside its closed form. --print adds every
// stream; --trace FILE writes the simulated timeline as Chrome trace JSON, one track per stage,
// with 1 cost unit drawn as 1 ms. --cost-spread adds the bubble when every op's cost varies
// (cost_spread.hpp): how much a schedule's bubble grows on a machine whose ops do not take the same
// time twice.
//
//   troupe schedule --kind 1f1b --stages 4 --microbatches 8 --trace 1f1b.json

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "apps/commands/commands.hpp"
#include "apps/config/named_choice.hpp"
#include "apps/config/speeds.hpp"
#include "apps/exit_codes.hpp"
#include "monitor/trace.hpp"
#include "schedules/checker.hpp"
#include "schedules/cost_spread.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {
namespace {

using schedules::Op;
using schedules::ScheduleKind;

// Trace time of a simulated time: 1 cost unit = 1 ms, in the format's microseconds, rounded to
// whole nanoseconds so sums like 4.2 = 1 + 1 + 0.1 + ... print as 4200, not 4199.999999999999.
double trace_us(double cost_units) { return std::round(cost_units * 1e6) / 1e3; }

// Shortest form of a cost: "1", "0.5", "33".
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

Status check_count(const char* option, int value, int max) {
  if (value >= 1 && value <= max) return Status::success();
  return Error{std::string(option) + " must be between 1 and " + std::to_string(max) + ", got " +
               std::to_string(value)};
}

Status check_cost(const char* option, double value, bool zero_allowed) {
  if (std::isfinite(value) && (value > 0 || (zero_allowed && value == 0))) return Status::success();
  return Error{std::string(option) + " must be " + (zero_allowed ? "zero or positive" : "positive") + ", got " +
               number(value)};
}

// The option a shape error from check_schedule_shape is about (the counts are each >= 1 here).
const char* shape_option(ScheduleKind kind, const ScheduleOptions& o) {
  if (kind == ScheduleKind::zb_v) return o.stages < 2 ? "--stages" : "--virtual-stages";
  if (kind != ScheduleKind::interleaved) return "--virtual-stages";  // only v > 1 fails gpipe, 1f1b, zb-h1
  if (o.stages < 2) return "--stages";
  if (o.virtual_stages < 2) return "--virtual-stages";
  return "--microbatches";
}

int shape_value(const char* option, const ScheduleOptions& o) {
  if (option == std::string("--stages")) return o.stages;
  if (option == std::string("--microbatches")) return o.microbatches;
  return o.virtual_stages;
}

// "(p-1)/(m+p-1) = 3/11 = 0.273"; interleaving divides by v*m + p - 1, ZB-H1 by 3m + p - 1 (its
// bubble with F = B = W, i.e. --backward twice --forward); ZB-V has no closed form.
std::string closed_form(const schedules::Schedule& s) {
  if (s.kind == ScheduleKind::zb_v) return "none (ZB-V: near zero)";
  if (s.kind == ScheduleKind::zb_h1) {
    char text[96];
    std::snprintf(text, sizeof text, "(p-1)/(3m+p-1) = %d/%d = %.3f with F = B = W", s.stages - 1,
                  3 * s.microbatches + s.stages - 1,
                  static_cast<double>(s.stages - 1) / (3 * s.microbatches + s.stages - 1));
    return text;
  }
  const bool interleaved = s.kind == ScheduleKind::interleaved;
  const int idle = s.stages - 1;
  const int total = (interleaved ? s.chunks : 1) * s.microbatches + s.stages - 1;
  char text[96];
  std::snprintf(text, sizeof text, "%s = %d/%d = %.3f", interleaved ? "(p-1)/(v*m+p-1)" : "(p-1)/(m+p-1)", idle, total,
                static_cast<double>(idle) / total);
  return text;
}

// forward/backward as "F3" / "B3" ("F3.1" with chunks, as docs/schedules.md writes them), a split
// backward's weight half as "W3", so one micro-batch keeps its name, and Perfetto its colour, on
// every stage.
std::string compute_name(const schedules::Schedule& s, const schedules::Instruction& ins) {
  const char* letter = ins.op == Op::forward ? "F" : ins.op == Op::backward_weights ? "W" : "B";
  std::string name = letter + std::to_string(ins.microbatch);
  if (s.chunks > 1) name += "." + std::to_string(ins.chunk);
  return name;
}

// One track per stage. Computes and the closing reduce/optimizer span their simulated time; a
// send is a zero-length event where it is posted and a recv one where its data arrives, so
// every stage's events nest (a recv posted early would otherwise overlap the next compute).
void record_trace(const schedules::Schedule& s, const schedules::Simulation& sim, monitor::TraceRecorder& trace) {
  trace.name_process(0, "troupe schedule " + std::string(to_string(s.kind)) + " p=" + std::to_string(s.stages) +
                            " m=" + std::to_string(s.microbatches) + " v=" + std::to_string(s.chunks) +
                            " (1 cost unit = 1 ms)");
  for (int stage = 0; stage < s.stages; ++stage) {
    const monitor::TraceTrack track{0, stage};
    trace.name_track(track, "stage " + std::to_string(stage));
    for (std::size_t i = 0; i < s.streams[stage].size(); ++i) {
      const schedules::Instruction& ins = s.streams[stage][i];
      const schedules::OpTiming& t = sim.timings[stage][i];
      const monitor::TraceArgs args{{"microbatch", std::to_string(ins.microbatch)},
                                    {"chunk", std::to_string(ins.chunk)}};
      if (schedules::is_compute(ins.op)) {
        trace.add_complete(track, compute_name(s, ins), std::string(to_string(ins.op)), trace_us(t.start),
                           trace_us(t.end) - trace_us(t.start), args);
      } else if (schedules::is_transfer(ins.op)) {
        const bool send = schedules::is_send(ins.op);
        monitor::TraceArgs transfer_args = args;
        transfer_args.emplace_back(send ? "to" : "from", "stage " + std::to_string(ins.peer));
        if (!send) transfer_args.emplace_back("posted_ms", number(t.start));
        trace.add_complete(track, std::string(to_string(ins.op)), "transfer", trace_us(send ? t.start : t.end), 0.0,
                           std::move(transfer_args));
      } else {
        trace.add_complete(track, std::string(to_string(ins.op)), "step", trace_us(t.start),
                           trace_us(t.end) - trace_us(t.start));
      }
    }
  }
}

}  // namespace

Status validate(const ScheduleOptions& o) {
  const auto kind = parse_choice<schedules::ScheduleKind>(o.kind);
  if (!kind) return Error{"--kind: expected " + choice_list<schedules::ScheduleKind>() + ", got '" + o.kind + "'"};
  // Caps keep the printed streams and the checker's lock-step run small; real pipelines are far
  // below them.
  if (Status s = check_count("--stages", o.stages, 256); !s) return s;
  if (Status s = check_count("--microbatches", o.microbatches, 4096); !s) return s;
  if (Status s = check_count("--virtual-stages", o.virtual_stages, 64); !s) return s;
  if (Status s = schedules::check_schedule_shape(*kind, o.stages, o.microbatches, o.virtual_stages); !s) {
    const char* option = shape_option(*kind, o);
    return Error{std::string(option) + " " + std::to_string(shape_value(option, o)) + ": " + s.error().message};
  }
  if (Status s = check_cost("--forward", o.forward, false); !s) return s;
  if (Status s = check_cost("--backward", o.backward, false); !s) return s;
  if (!(o.weight_share >= 0 && o.weight_share <= 1))
    return Error{"--weight-share must be between 0 and 1, got " + number(o.weight_share)};
  auto speeds = parse_speeds("--stage-speeds", o.stage_speeds);
  if (!speeds) return speeds.error();
  if (!speeds->empty() && static_cast<int>(speeds->size()) != o.stages)
    return Error{"--stage-speeds " + o.stage_speeds + ": " + std::to_string(speeds->size()) + " speeds for " +
                 std::to_string(o.stages) + " stages (one a stage)"};
  for (double speed : *speeds)
    if (Status s = check_cost("--stage-speeds", speed, false); !s) return s;
  if (!(o.cost_spread >= 0 && o.cost_spread <= 3))
    return Error{"--cost-spread must be between 0 and 3, got " + number(o.cost_spread)};
  if (Status s = check_count("--trials", o.trials, 100000); !s) return s;
  return check_cost("--latency", o.latency, true);
}

int run_schedule(const ScheduleOptions& o) {
  // validate() has passed, so every step below failing is a bug in schedules/, reported as a
  // run-time failure.
  const auto kind = parse_choice<schedules::ScheduleKind>(o.kind);
  auto generated = schedules::generate_schedule(*kind, o.stages, o.microbatches, o.virtual_stages);
  if (!generated) throw generated.error();
  const schedules::Schedule& s = *generated;
  auto report = schedules::check_schedule(s);
  if (!report) throw report.error();
  schedules::CostModel costs;
  costs.forward = o.forward;
  costs.backward = o.backward;
  costs.weight_share = o.weight_share;
  costs.latency = o.latency;
  costs.speeds = parse_speeds("--stage-speeds", o.stage_speeds).value();
  costs.fill_waits_with_weights = schedules::fills_waits_with_weights(s.kind);
  auto sim = schedules::simulate(s, costs);
  if (!sim) throw sim.error();

  int instructions = 0;
  for (int n : report->instructions) instructions += n;
  std::printf("%s p=%d m=%d v=%d: %d stages, %d micro-batches, %d chunk%s per stage\n",
              std::string(to_string(s.kind)).c_str(), s.stages, s.microbatches, s.chunks, s.stages, s.microbatches,
              s.chunks, s.chunks == 1 ? "" : "s");
  std::printf("checked: %d instructions, %d transfers, no deadlock under blocking sends\n", instructions,
              report->transfers);
  std::printf("costs in units per chunk of one micro-batch: forward %s, backward %s, latency %s",
              number(o.forward).c_str(), number(o.backward).c_str(), number(o.latency).c_str());
  if (!costs.speeds.empty())
    std::printf("; at stage speeds %s (a stage's costs over its speed)", o.stage_speeds.c_str());
  std::printf("\n\n");

  const bool split = schedules::splits_backward(s.kind);
  if (split) {
    std::printf("a backward is B (input gradient) then W (weight gradients): W %s of --backward, B the rest%s\n\n",
                number(o.weight_share).c_str(),
                costs.fill_waits_with_weights
                    ? "; a stage whose F or B would wait for its input runs its next W first, as the runtime does"
                    : "");
  }
  std::printf("stage  instructions  peak stashed%s%s  busy\n", s.chunks > 1 ? " (chunks)" : "",
              split ? "  peak B kept for W" : "");
  const int stash_width = s.chunks > 1 ? 21 : 12;
  for (int stage = 0; stage < s.stages; ++stage) {
    std::printf("%5d  %12d  %*d", stage, report->instructions[stage], stash_width, report->peak_stashed[stage]);
    if (split) std::printf("  %17d", report->peak_weights_owed[stage]);
    std::printf("  %4s\n", number(sim->busy[stage]).c_str());
  }
  std::printf("\nmakespan  %s cost units (flush %s)\n", number(sim->makespan).c_str(), number(sim->flush).c_str());
  const char* assumed = o.latency > 0 && !costs.speeds.empty() ? " (at zero latency and equal speeds)"
                        : o.latency > 0                        ? " (at zero latency)"
                        : !costs.speeds.empty()                ? " (at equal speeds)"
                                                               : "";
  std::printf("bubble    %.3f simulated; closed form %s%s\n", sim->bubble, closed_form(s).c_str(), assumed);
  if (o.cost_spread > 0) {
    auto spread = schedules::simulate_with_spread(s, costs, o.cost_spread, o.trials);
    if (!spread) throw spread.error();
    std::printf(
        "          %.3f mean over %d simulations with each op's cost varying by a spread of %s (log-normal), "
        "%.3f to %.3f in 90 %% of them\n",
        spread->mean, o.trials, number(o.cost_spread).c_str(), spread->low, spread->high);
  }

  if (o.print) std::printf("\n%s", to_string(s).c_str());

  if (!o.trace.empty()) {
    monitor::TraceRecorder trace;
    record_trace(s, *sim, trace);
    if (Status written = monitor::write_trace(trace, o.trace); !written) throw written.error();
    std::printf("\ntrace     %s: one track per stage, 1 cost unit = 1 ms\n", o.trace.c_str());
  }
  std::fflush(stdout);
  return to_int(ExitCode::success);
}

Command add_schedule_command(CLI::App& app) {
  auto options = std::make_shared<ScheduleOptions>();
  CLI::App* command = app.add_subcommand(
      "schedule", "Generate, check and simulate a pipeline schedule: memory, makespan, bubble; optionally a trace.");
  command->add_option("--kind", options->kind, "gpipe, 1f1b, interleaved, zb-h1 or zb-v")->required();
  command->add_option("--stages", options->stages, "pipeline stages p")->required();
  command->add_option("--microbatches", options->microbatches, "micro-batches per step m")->required();
  command->add_option("--virtual-stages", options->virtual_stages, "model chunks per stage v (interleaved; 2 for zb-v)")
      ->capture_default_str();
  command->add_option("--forward", options->forward, "cost units per forward of one chunk")->capture_default_str();
  command->add_option("--backward", options->backward, "cost units per backward of one chunk")->capture_default_str();
  command
      ->add_option("--weight-share", options->weight_share,
                   "share of --backward a split backward's W takes (zb-h1, zb-v); B takes the rest")
      ->capture_default_str();
  command->add_option("--latency", options->latency, "cost units from a send to its data arriving")
      ->capture_default_str();
  command
      ->add_option("--stage-speeds", options->stage_speeds,
                   "relative speed of each stage, comma-separated (1,0.5: the second at half speed); a stage's costs "
                   "are over its speed")
      ->type_name("LIST");
  CLI::Option* spread =
      command
          ->add_option("--cost-spread", options->cost_spread,
                       "also simulate with every forward, B and W taking its cost times exp(N(0, spread^2)), drawn "
                       "anew each time: the bubble on a machine whose ops vary (0.1: about 10 %)")
          ->capture_default_str();
  command->add_option("--trials", options->trials, "simulations drawn for --cost-spread")
      ->capture_default_str()
      ->needs(spread);
  command->add_flag("--print", options->print, "print every stage's instruction stream");
  command
      ->add_option("--trace", options->trace, "write the simulated timeline as Chrome trace JSON (1 cost unit = 1 ms)")
      ->type_name("FILE");
  return refusing_unknown(*command, [options] {
    if (Status valid = validate(*options); !valid) return error_exit(ExitCode::bad_input, valid.error().message);
    return run_schedule(*options);
  });
}

}  // namespace troupe::apps
