// The layout planner against two references. On layouts Troupe runs on this machine (small and
// a gpt2-shaped model; data parallel, ZeRO 1, 2 and 3, pipeline stages under every schedule,
// recomputation) its memory per device must track compute::estimate_training_memory, which
// tests/compute/test_model_memory_estimate.cpp pins to what a rank really allocates, with the
// runtime's ZeRO sharding and each schedule's stashed micro-batches applied here independently.
// On the 13B GPT-3 shape over 32 A100s it must reproduce the published model-state figures the
// ZeRO paper's and Megatron's accountings give (docs/plan.md). And it rejects what does not fit
// with the reason, marks what the runtime cannot run yet, and refuses bad input.

#include <catch2/catch.hpp>

#include <algorithm>
#include <ctime>
#include <map>

#include "compute/context/context_cost.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/stage_split.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/layout_plan.hpp"
#include "schedules/simulator.hpp"

using namespace troupe;
using namespace troupe::schedules;
using compute::Recompute;
using compute::ZeroStage;

namespace {

compute::GPTConfig preset(const char* name) {
  auto model = compute::gpt_preset(name);
  REQUIRE(model);
  return *model;
}

Cluster machine(int devices, double memory = 1e12) {
  Cluster c;
  c.devices_per_node = devices;
  c.device_memory = memory;
  c.peak_flops = 100e9;
  c.memory_bandwidth = 14e9;
  c.mfu = 0.5;
  c.intra_bandwidth = 6e9;
  c.inter_bandwidth = 1e9;
  return c;
}

PlannedLayout plan(const Workload& w, const Cluster& c, const Layout& l) {
  auto planned = plan_layout(w, c, l);
  REQUIRE(planned);
  return *planned;
}

// What a rank of Troupe's runtime holds, from the estimate pinned to real allocations: for a
// pipeline, the largest stage's chunks with `stash[s]` micro-batch slots each (the stage trainer
// reserves its schedule's checked peak); ZeRO 1 and 2 keep 8/N of the 8 moment bytes per
// parameter (the runtime's ZeRO-2 keeps the whole gradient buffer), ZeRO-3 also 1/N of the
// parameters and gradients plus the units it gathers; a rank of several micro-batches (not
// ZeRO-3) another gradient buffer, the earlier micro-batches' sum.
double runtime_bytes(const compute::GPTConfig& model, const Workload& w, const Layout& l,
                     const std::vector<int>& stash) {
  auto split = compute::split_for_pipeline(model, l.pp, l.chunks);
  REQUIRE(split);
  double largest = 0;
  const Schedule placement{l.schedule, l.pp, 1, l.chunks, {}};  // ZB-V's chunks sit in a V
  for (int s = 0; s < l.pp; ++s) {
    double bytes = 0, params = 0;
    for (std::size_t k = 0; k < split->size(); ++k) {
      if (placement.stage_of(int(k)) != s) continue;
      const compute::StageLayers& chunk = (*split)[k];
      bytes += compute::estimate_training_memory(
                   model, {chunk.first_layer, chunk.last_layer, l.micro_batch, w.seq_len, stash[s], 4, l.recompute, 1,
                           splits_backward(l.schedule), 1, std::size_t(precision_bytes(w.precision).operand),
                           std::size_t(precision_bytes(w.precision).stored_activation)})
                   .total();
      params += double(chunk.params);
    }
    if (compute::shards_optimizer_state(l.zero)) bytes -= 8 * params * (1 - 1.0 / l.dp);
    if (l.microbatches > 1 && !compute::shards_parameters(l.zero)) bytes += 4 * params;
    if (compute::shards_parameters(l.zero)) {
      // Parameters and gradients sharded too; gathered: the embeddings (kept for the lm head and
      // the first backward), the block computing and the next, and as many unit gradients.
      const auto [block_begin, block_end] = compute::ParameterLayout(model).layer_range(0);
      bytes -= 8 * params * (1 - 1.0 / l.dp);
      bytes += 2 * 4 * (double(block_begin) + 2 * double(block_end - block_begin));
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

// The closed forms of the stash: GPipe keeps all m, 1F1B's stage s at most p - s.
std::vector<int> closed_form_stash(const Layout& l) {
  std::vector<int> stash;
  for (int s = 0; s < l.pp; ++s)
    stash.push_back(l.pp == 1                           ? 1
                    : l.schedule == ScheduleKind::gpipe ? l.microbatches
                                                        : std::min(l.pp - s, l.microbatches));
  return stash;
}

}  // namespace

TEST_CASE("planned memory tracks the estimate pinned to real allocations on layouts Troupe runs", "[plan]") {
  struct Case {
    const char* model;
    int seq;
    Layout layout;
  };
  const Case cases[] = {
      {"small", 256, {2, 1, 1, ZeroStage::none, Recompute::none, 8, 1}},
      {"small", 256, {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 8, 1}},
      {"small", 256, {2, 1, 1, ZeroStage::gradients, Recompute::none, 8, 1}},
      {"small", 256, {2, 1, 1, ZeroStage::parameters, Recompute::none, 8, 1}},
      {"small", 256, {4, 1, 1, ZeroStage::parameters, Recompute::full, 2, 1}},
      {"small", 256, {2, 1, 1, ZeroStage::none, Recompute::selective, 8, 1}},
      {"small", 256, {2, 1, 1, ZeroStage::none, Recompute::full, 4, 2}},
      {"small", 256, {1, 1, 2, ZeroStage::none, Recompute::none, 4, 8, ScheduleKind::gpipe}},
      {"small", 256, {1, 1, 2, ZeroStage::none, Recompute::none, 4, 8, ScheduleKind::one_f_one_b}},
      {"small", 256, {2, 1, 2, ZeroStage::none, Recompute::selective, 2, 4, ScheduleKind::one_f_one_b}},
      {"gpt2", 256, {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 4, 1}},
      {"gpt2", 256, {4, 1, 1, ZeroStage::parameters, Recompute::none, 2, 1}},
      {"gpt2", 256, {1, 1, 2, ZeroStage::none, Recompute::full, 2, 4, ScheduleKind::one_f_one_b}},
      {"gpt2", 256, {1, 1, 4, ZeroStage::none, Recompute::none, 2, 8, ScheduleKind::gpipe}},
  };
  // Both precisions Troupe trains in: bf16 adds the products' operand copies to fp32's bytes and
  // stores the activations a slot keeps in 2 bytes (on the CPU; a backend storing f32
  // keeps 4).
  for (const Precision precision : {Precision::fp32, Precision::bf16})
    for (const Case& c : cases) {
      const compute::GPTConfig model = preset(c.model);
      const Layout& l = c.layout;
      const Workload w{model, l.dp * l.micro_batch * l.microbatches, c.seq, precision};
      const PlannedLayout p = plan(w, machine(l.dp * l.pp), l);
      INFO(c.model << ": " << describe(l) << ", " << to_string(precision));
      CHECK(p.memory.total() == Approx(runtime_bytes(model, w, l, closed_form_stash(l))).epsilon(0.10));
      CHECK(p.not_built.empty());
      if (precision == Precision::bf16) {
        Workload stored_f32 = w;
        stored_f32.operands_stored_f32 = true;
        const double copies_only = plan(stored_f32, machine(l.dp * l.pp), l).memory.activations;
        CHECK(copies_only >
              plan({model, w.global_batch, c.seq, Precision::fp32}, machine(l.dp * l.pp), l).memory.activations);
        CHECK(p.memory.activations < copies_only);
      }
    }
}

TEST_CASE("interleaved layouts hold each chunk's activations for the stage's checked peak", "[plan]") {
  const compute::GPTConfig model = preset("small");  // 6 layers: 3 stages x 2 chunks
  const Layout l{1, 1, 3, ZeroStage::none, Recompute::none, 2, 6, ScheduleKind::interleaved, 2};
  const Workload w{model, 12, 256, Precision::fp32};
  auto schedule = generate_schedule(l.schedule, l.pp, l.microbatches, l.chunks);
  REQUIRE(schedule);
  auto report = check_schedule(*schedule);
  REQUIRE(report);
  const PlannedLayout p = plan(w, machine(3), l);
  CHECK(p.memory.total() == Approx(runtime_bytes(model, w, l, report->peak_stashed)).epsilon(0.10));
  CHECK(p.memory.stashed == *std::max_element(report->peak_stashed.begin(), report->peak_stashed.end()));
}

TEST_CASE("zb-h1 and zb-v are planned with their checked stash, what B keeps for W and their simulated bubble",
          "[plan]") {
  const compute::GPTConfig model = preset("gpt2");  // 12 layers: 2 stages of 2 equal chunks for ZB-V
  const Workload w{model, 8, 256, Precision::fp32};
  auto planned = plan_layouts(w, machine(2));
  REQUIRE(planned);
  // Each layout of pp 2, micro-batch 1, no ZeRO or recompute, by schedule.
  std::map<ScheduleKind, PlannedLayout> by_kind;
  for (const PlannedLayout& p : planned->feasible) {
    const Layout& l = p.layout;
    if (l.pp == 2 && l.micro_batch == 1 && l.zero == ZeroStage::none && l.recompute == Recompute::none)
      by_kind.emplace(l.schedule, p);
  }
  REQUIRE(by_kind.count(ScheduleKind::zb_h1) == 1);
  REQUIRE(by_kind.count(ScheduleKind::zb_v) == 1);
  const PlannedLayout& one_f_one_b = by_kind.at(ScheduleKind::one_f_one_b);
  for (ScheduleKind kind : {ScheduleKind::zb_h1, ScheduleKind::zb_v}) {
    const PlannedLayout& p = by_kind.at(kind);
    INFO(describe(p.layout) << ": bubble " << p.time.bubble << ", 1f1b " << one_f_one_b.time.bubble);
    CHECK(p.layout.chunks == (kind == ScheduleKind::zb_v ? 2 : 1));
    auto schedule = generate_schedule(kind, 2, 8, p.layout.chunks);
    REQUIRE(schedule);
    auto report = check_schedule(*schedule);
    REQUIRE(report);
    CHECK(p.memory.total() == Approx(runtime_bytes(model, w, p.layout, report->peak_stashed)).epsilon(0.10));
    // The same stash as 1F1B's first stage, plus what B keeps for W in every slot.
    CHECK(p.memory.activations > one_f_one_b.memory.activations);
    // gpt2's lm head weighs on the stage that holds it, so much of 1F1B's bubble (0.28 here) is
    // that imbalance, which no order removes: the zero-bubble schedules take off what they can.
    CHECK(p.time.bubble < one_f_one_b.time.bubble);
    CHECK(p.time.total < one_f_one_b.time.total);
  }
  CHECK(by_kind.at(ScheduleKind::zb_v).time.bubble < by_kind.at(ScheduleKind::zb_h1).time.bubble);
  // Where the layers do not cut into 2p equal chunks (small's 6 on 2 or 4 stages), no zb-v.
  const Workload small{preset("small"), 8, 256, Precision::fp32};
  auto small_plan = plan_layouts(small, machine(4));
  REQUIRE(small_plan);
  for (const PlannedLayout& p : small_plan->feasible) {
    INFO(describe(p.layout));
    CHECK(!(p.layout.schedule == ScheduleKind::zb_v && p.layout.pp == 2));
    if (p.layout.schedule == ScheduleKind::zb_v) CHECK(small.model.n_layer % (2 * p.layout.pp) == 0);
  }
}

// Published figures per device, model states only (docs/plan.md): Megatron's 18 bytes/param
// (6 + 12/dp with the distributed optimizer, = ZeRO-1) for the dp and tp rows, the ZeRO paper's
// 16 for ZeRO-2 and ZeRO-3 (the latter beside DeepSpeed's estimate 18·Ψ/N + 4·largest layer).
TEST_CASE("13B on 32 A100s reproduces the ZeRO paper's and Megatron's model-state figures within 5 %", "[plan]") {
  const compute::GPTConfig model = preset("gpt3-13b");
  Cluster a100 = machine(8, 80e9);
  a100.nodes = 4;
  a100.peak_flops = 312e12;
  struct Row {
    Precision precision;
    int dp, tp;
    ZeroStage zero;
    double published_gb;
  };
  const Row rows[] = {
      {Precision::mixed, 32, 1, ZeroStage::none, 208},  // 16 bytes/param, the 208 GB for 13e9
      {Precision::mixed_fp32_grads, 32, 1, ZeroStage::optimizer_state, 82},   // DP 32 + distributed optimizer
      {Precision::mixed, 32, 1, ZeroStage::gradients, 31},                    // ZeRO-2 dp 32
      {Precision::mixed, 32, 1, ZeroStage::parameters, 8.5},                  // ZeRO-3 dp 32
      {Precision::mixed_fp32_grads, 16, 2, ZeroStage::optimizer_state, 43},   // TP 2 x DP 16
      {Precision::mixed_fp32_grads, 8, 4, ZeroStage::optimizer_state, 24},    // TP 4 x DP 8
      {Precision::mixed_fp32_grads, 4, 8, ZeroStage::optimizer_state, 14.5},  // TP 8 x DP 4
  };
  for (const Row& r : rows) {
    const Layout l{r.dp, r.tp, 1, r.zero, Recompute::selective, 1, 1};
    const PlannedLayout p = plan({model, r.dp, 2048, r.precision}, a100, l);
    INFO(describe(l) << " " << to_string(r.precision) << ": " << format_bytes(p.memory.model_states()));
    CHECK(p.memory.model_states() == Approx(r.published_gb * 1e9).epsilon(0.05));
    CHECK(!p.not_built.empty());  // 2-byte weights are not built
  }
}

TEST_CASE("a layout that does not fit is rejected with its layout and its bytes against the device's", "[plan]") {
  const compute::GPTConfig model = preset("gpt3-13b");
  Cluster a100 = machine(8, 80e9);
  a100.nodes = 4;
  const Layout l{32, 1, 1, ZeroStage::optimizer_state, Recompute::none, 1, 1};
  const PlannedLayout p = plan({model, 32, 2048, Precision::mixed_fp32_grads}, a100, l);
  CHECK(!p.fits);
  CHECK_THAT(p.rejected, Catch::StartsWith("zero 1, dp 32, micro-batch 1 x 1, recompute none: "));
  CHECK_THAT(p.rejected, Catch::EndsWith(" GB > 80 GB"));

  // The whole enumeration splits on the device's memory and orders each list.
  auto all = plan_layouts({preset("gpt2"), 8, 1024, Precision::fp32}, machine(4, 3e9));
  REQUIRE(all);
  REQUIRE(!all->feasible.empty());
  REQUIRE(!all->rejected.empty());
  for (const PlannedLayout& f : all->feasible) CHECK(f.memory.total() <= 3e9);
  for (const PlannedLayout& r : all->rejected) CHECK(r.memory.total() > 3e9);
  CHECK(std::is_sorted(all->feasible.begin(), all->feasible.end(),
                       [](const auto& a, const auto& b) { return a.time.total < b.time.total; }));
  CHECK(std::is_sorted(all->rejected.begin(), all->rejected.end(),
                       [](const auto& a, const auto& b) { return a.memory.total() < b.memory.total(); }));
}

TEST_CASE("layouts the runtime cannot run are kept and marked planned, not built", "[plan]") {
  const Workload w{preset("small"), 8, 256, Precision::fp32};
  CHECK(plan(w, machine(4), {2, 2, 1, ZeroStage::optimizer_state, Recompute::none, 4, 1}).not_built.empty());
  CHECK(plan({preset("small"), 8, 256, Precision::mixed}, machine(4),
             {2, 2, 1, ZeroStage::optimizer_state, Recompute::none, 4, 1})
            .not_built == "2-byte weights and activations");
  // Troupe's bf16 (f32 weights, gradients and activations) runs.
  CHECK(plan({preset("small"), 8, 256, Precision::bf16}, machine(4),
             {2, 2, 1, ZeroStage::optimizer_state, Recompute::none, 4, 1})
            .not_built.empty());
  CHECK(plan(w, machine(4), {2, 2, 1, ZeroStage::none, Recompute::none, 4, 1}).not_built.empty());
  CHECK(plan(w, machine(8), {2, 2, 2, ZeroStage::parameters, Recompute::none, 2, 2}).not_built.empty());
  CHECK(plan(w, machine(2), {2, 1, 1, ZeroStage::parameters, Recompute::none, 4, 1}).not_built.empty());
  CHECK(plan(w, machine(4), {2, 1, 2, ZeroStage::parameters, Recompute::none, 2, 2}).not_built.empty());
  CHECK(plan(w, machine(4), {2, 1, 2, ZeroStage::optimizer_state, Recompute::none, 2, 2}).not_built.empty());
  auto all = plan_layouts(w, machine(4));
  REQUIRE(all);
  const auto has = [&](int tp, ZeroStage zero) {
    return std::any_of(all->feasible.begin(), all->feasible.end(),
                       [&](const PlannedLayout& p) { return p.layout.tp == tp && p.layout.zero == zero; });
  };
  CHECK(has(2, ZeroStage::none));
  CHECK(has(1, ZeroStage::parameters));
}

TEST_CASE("bytes per link: dp all-reduce, ZeRO-3 at 1.5 times, tp and pp activations", "[plan]") {
  const compute::GPTConfig model = preset("small");
  const double psi = double(compute::ParameterLayout(model).total());
  const Workload fp32{model, 16, 256, Precision::fp32};
  // Ring all-reduce of fp32 gradients over 2: 2 (N-1)/N 4Ψ = 4Ψ; Troupe's ZeRO-1 adds a gather of 2Ψ.
  CHECK(plan(fp32, machine(2), {2, 1, 1, ZeroStage::none, Recompute::none, 8, 1}).bytes.dp == Approx(4 * psi));
  CHECK(plan(fp32, machine(2), {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 8, 1}).bytes.dp ==
        Approx(6 * psi));
  const Workload mixed{model, 16, 256, Precision::mixed};
  const double dp = plan(mixed, machine(2), {2, 1, 1, ZeroStage::none, Recompute::none, 8, 1}).bytes.dp;
  CHECK(plan(mixed, machine(2), {2, 1, 1, ZeroStage::parameters, Recompute::none, 8, 1}).bytes.dp == Approx(1.5 * dp));
  // tp 2: 4 all-reduces of B·T·C per layer and micro-batch, each sending (2·½) of it.
  const double message = 8.0 * 256 * model.n_embd * 4;
  const PlannedLayout tp = plan(fp32, machine(4), {2, 2, 1, ZeroStage::none, Recompute::none, 8, 1});
  CHECK(tp.bytes.tp == Approx(model.n_layer * 4 * message));
  CHECK(!tp.bytes.tp_inter);
  // pp 2, 4 micro-batches of 4: an activation out and a gradient back per micro-batch.
  const PlannedLayout pp = plan(fp32, machine(2), {1, 1, 2, ZeroStage::none, Recompute::none, 4, 4});
  CHECK(pp.bytes.pp == Approx(2 * 4 * (4.0 * 256 * model.n_embd * 4)));
  CHECK(pp.time.bubble > 0.1);
  // Across two nodes of one device, the dp group leaves the node.
  Cluster two_nodes = machine(1);
  two_nodes.nodes = 2;
  CHECK(plan(fp32, two_nodes, {2, 1, 1, ZeroStage::none, Recompute::none, 8, 1}).bytes.dp_inter);
}

TEST_CASE("predicted step time: compute at the MFU, recompute costs more, a bubble stretches a pipeline", "[plan]") {
  const compute::GPTConfig model = preset("small");
  const Workload w{model, 16, 256, Precision::fp32};
  const PlannedLayout one = plan(w, machine(1), {1, 1, 1, ZeroStage::none, Recompute::none, 16, 1});
  // 72·L·C² + 6·L·C·(T + 1) + 6·V·C (compute/model/flops.hpp), small: 6 layers, C 384, V 256, T 256.
  const double flops = 72.0 * 6 * 384 * 384 + 6.0 * 6 * 384 * 257 + 6.0 * 256 * 384;
  CHECK(one.time.compute == Approx(flops * 16 * 256 / (100e9 * 0.5)));
  CHECK(one.time.total == Approx(one.time.compute));
  // Full recompute: one more forward of every block (not the lm head) but its MLP output
  // projection (8·L·C² a token).
  const double rerun = (24.0 * 6 * 384 * 384 + 2.0 * 6 * 384 * 257) - 8.0 * 6 * 384 * 384;
  CHECK(plan(w, machine(1), {1, 1, 1, ZeroStage::none, Recompute::full, 16, 1}).time.total ==
        Approx(one.time.total * (flops + rerun) / flops));
  const PlannedLayout pp = plan(w, machine(2), {1, 1, 2, ZeroStage::none, Recompute::none, 4, 4});
  CHECK(pp.time.bubble > 0);
  CHECK(pp.time.total > pp.time.compute);  // the bubble and the transfers come on top
  CHECK(pp.time.total < one.time.total);   // yet two stages beat one device
}

TEST_CASE(
    "Troupe's micro-batch gradient sums cost 4m - 2 passes of the gradient buffer through memory, none under "
    "ZeRO-3 or a precision it does not run",
    "[plan]") {
  const compute::GPTConfig model = preset("small");
  const Workload w{model, 16, 256, Precision::fp32};
  const Cluster c = machine(2);
  const PlannedLayout whole = plan(w, c, {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 8, 1});
  CHECK(whole.time.sums == 0);
  for (const int m : {2, 8}) {
    const PlannedLayout split = plan(w, c, {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 8 / m, m});
    // The doubled gradient buffer of a rank of several micro-batches: the one the sums pass over, twice.
    const double gradient_buffer = split.memory.gradients / 2;
    CHECK(gradient_buffer == Approx(whole.memory.gradients));
    CHECK(split.time.sums == Approx((4.0 * m - 2) * gradient_buffer / c.memory_bandwidth));
    CHECK(split.time.compute == Approx(whole.time.compute));
    CHECK(split.time.total == Approx(whole.time.total + split.time.sums));
  }
  // A pipeline stage's buffer is its own stage's.
  const PlannedLayout stages = plan(w, c, {1, 1, 2, ZeroStage::none, Recompute::none, 2, 8});
  CHECK(stages.time.sums == Approx(30 * (stages.memory.gradients / 2) / c.memory_bandwidth));
  CHECK(plan(w, c, {2, 1, 1, ZeroStage::parameters, Recompute::none, 1, 8}).time.sums == 0);
  CHECK(plan({model, 16, 256, Precision::mixed}, c, {2, 1, 1, ZeroStage::optimizer_state, Recompute::none, 1, 8})
            .time.sums == 0);
  // The planner ranks by it: of the same layout, the fewest micro-batches that fit come first.
  auto plan_all = plan_layouts(w, c);
  REQUIRE(plan_all.ok());
  CHECK(plan_all.value().feasible.front().layout.microbatches == 1);
}

TEST_CASE("the planner refuses bad input naming it, and plans 13B on 32 devices in well under a second", "[plan]") {
  Workload w{preset("small"), 8, 256, Precision::fp32};
  Cluster c = machine(2);
  c.nodes = 0;
  CHECK(check_plan_inputs(w, c).error().message == "nodes must be at least 1, got 0");
  c = machine(2);
  c.device_memory = 0;
  CHECK(check_plan_inputs(w, c).error().message == "device memory must be positive, got 0");
  c = machine(2);
  c.memory_bandwidth = 0;
  CHECK(check_plan_inputs(w, c).error().message == "memory bandwidth must be positive, got 0");
  c = machine(2);
  w.seq_len = 257;
  CHECK(check_plan_inputs(w, c).error().message == "sequence length 257 must be from 1 to the model's block size 256");
  CHECK(parse_precision("fp16").error().message ==
        "unknown precision 'fp16' (expected fp32, bf16, mixed or mixed-fp32-grads)");
  CHECK(format_bytes(95.6e9) == "95.6 GB");

  Cluster a100 = machine(8, 80e9);
  a100.nodes = 4;
  // Processor time, not wall time: on a machine shared with other work the wall clock says more
  // about the neighbours than about the planner.
  const std::clock_t start = std::clock();
  auto all = plan_layouts({preset("gpt3-13b"), 64, 2048, Precision::mixed}, a100);
  const double seconds = double(std::clock() - start) / CLOCKS_PER_SEC;
  REQUIRE(all);
  CHECK(!all->feasible.empty());
  CHECK(seconds < 1.0);
}

// Every size the planner accepts answers at once: a batch of 2^31 - 1 sequences (whose micro-batch
// sizes once overflowed into a division by zero) or of 2^30 (whose schedules of 2^30 micro-batches
// were simulated whole, gigabytes on), and a cluster whose device count overflows an int is refused.
TEST_CASE("the planner bounds its sizes: any accepted input plans at once, an overflow is refused", "[plan]") {
  const std::clock_t start = std::clock();
  for (int batch : {2147483647, 1 << 30, 1 << 20}) {
    auto all = plan_layouts({preset("tiny"), batch, 128, Precision::fp32}, machine(2, 1e9));
    REQUIRE(all);
    CHECK(!all->feasible.empty());
    const auto deepest = std::max_element(all->rejected.begin(), all->rejected.end(), [](const auto& a, const auto& b) {
      return a.layout.microbatches < b.layout.microbatches;
    });
    CHECK(deepest->layout.microbatches == batch);  // micro-batches of one sequence, planned too
  }
  CHECK(double(std::clock() - start) / CLOCKS_PER_SEC < 2.0);

  Cluster huge = machine(65536);
  huge.nodes = 65536;
  CHECK(check_plan_inputs({preset("tiny"), 8, 128, Precision::fp32}, huge).error().message ==
        "nodes 65536 x devices per node 65536 = 4294967296 devices is more than the planner takes (at most 1048576)");
  compute::GPTConfig deep = preset("tiny");
  deep.n_layer = max_plan_layers + 1;
  CHECK(check_plan_inputs({deep, 8, 128, Precision::fp32}, machine(2)).error().message ==
        "model.n_layer 513 is more than the planner takes (at most 512)");
  // Seven devices leave no dp that divides 8 sequences: said, not a plan of nothing.
  CHECK(plan_layouts({preset("tiny"), 8, 128, Precision::fp32}, machine(7)).error().message ==
        "no layout of 7 devices divides the global batch of 8 sequences among its replicas: dp = devices / (tp x pp) "
        "must divide it, tp dividing the 4 heads and at most 4, pp at most 4");
}

// A schedule longer than simulated_microbatches is simulated that far and extended at its busiest
// stage's pace: against the whole schedule simulated, with the stage weights of docs/plan.md (each
// stage's share of the model's FLOPs: its blocks, 12C² + C(T + 1) a token, and the lm head VC on
// the last).
TEST_CASE("a long pipeline schedule is extended from its simulated part within half a percent", "[plan]") {
  const compute::GPTConfig model = preset("gpt2-medium");  // 24 layers: 4 stages of 2 chunks
  const int T = 1024, m = 4 * simulated_microbatches;
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved}) {
    const int p = 4, v = kind == ScheduleKind::interleaved ? 2 : 1;
    const Layout l{1, 1, p, ZeroStage::none, Recompute::none, 1, m, kind, v};
    const PlannedLayout planned = plan({model, m, T, Precision::fp32}, machine(p), l);

    auto split = compute::split_for_pipeline(model, p, v);
    REQUIRE(split);
    const double C = model.n_embd;
    std::vector<double> weight(p, 0);
    for (std::size_t k = 0; k < split->size(); ++k)
      weight[k % p] += (*split)[k].layers() * (12 * C * C + C * (T + 1)) +
                       ((*split)[k].last_layer == model.n_layer ? model.vocab_size * C : 0);
    double mean = 0;
    for (double w : weight) mean += w / p;
    CostModel costs;
    for (double w : weight) costs.forward_scale.push_back(w / mean);
    costs.backward_scale = costs.forward_scale;
    auto schedule = generate_schedule(kind, p, m, v);
    REQUIRE(schedule);
    auto whole = simulate(*schedule, costs);
    REQUIRE(whole);
    auto report = check_schedule(*schedule);
    REQUIRE(report);
    INFO(describe(l));
    CHECK(planned.time.bubble == Approx(whole->bubble).margin(0.005));
    // The stash of the stage the plan answers for: GPipe keeps all m.
    CHECK(std::count(report->peak_stashed.begin(), report->peak_stashed.end(), planned.memory.stashed) > 0);
    if (kind == ScheduleKind::gpipe) CHECK(planned.memory.stashed == m);
  }
}

TEST_CASE("context layouts keep T / cp rows' activations and their exchange, and send the messages' bytes",
          "[plan][context]") {
  compute::GPTConfig model = preset("tiny");
  model.block_size = 8192;
  const Workload w{model, 2, 8192, Precision::fp32};
  auto without = plan_layouts(w, machine(2));
  REQUIRE(without);
  CHECK(std::none_of(without->feasible.begin(), without->feasible.end(),
                     [](const PlannedLayout& p) { return p.layout.cp > 1; }));
  auto all = plan_layouts(w, machine(2), 2);
  REQUIRE(all);
  std::map<compute::context::ContextMethod, int> methods;
  for (const PlannedLayout& p : all->feasible)
    if (p.layout.cp == 2) ++methods[p.layout.context];
  CHECK(methods[compute::context::ContextMethod::ring] > 0);
  CHECK(methods[compute::context::ContextMethod::all_to_all] > 0);  // 2 divides tiny's 4 heads

  Layout whole{2, 1, 1, ZeroStage::none, Recompute::none, 1, 1};
  Layout split{1, 1, 1, ZeroStage::none, Recompute::none, 1, 2};
  split.cp = 2;
  const PlannedLayout one = plan(w, machine(2), whole), two = plan(w, machine(2), split);
  // Model states stay whole; activations fall to about half, the exchange's buffers on top.
  CHECK(two.memory.parameters == one.memory.parameters);
  CHECK(two.memory.optimizer == one.memory.optimizer);
  CHECK(two.memory.activations < 0.6 * one.memory.activations);
  CHECK(two.memory.activations > 0.5 * one.memory.activations);
  const compute::context::ContextLayerCost cost = compute::context::context_layer_cost(
      compute::context::ContextMethod::ring, 1, 8192, model.n_embd, model.n_head, 2);
  CHECK(two.bytes.cp == Approx(model.n_layer * 2 * (cost.forward_sent + cost.backward_sent) * 4));
  CHECK(one.bytes.cp == 0);
  CHECK(describe(split) == "zero 0, dp 1, cp 2 ring, micro-batch 1 x 2, recompute none");
  split.context = compute::context::ContextMethod::all_to_all;
  CHECK(plan(w, machine(2), split).memory.activations > two.memory.activations);  // whole-sequence q, k, v
}

TEST_CASE("a model with experts: a rank's share of the experts, the expert group's all-to-all bytes by hand",
          "[plan][moe]") {
  const compute::GPTConfig model = preset("moe-tiny");
  REQUIRE(model.n_embd == 128);
  REQUIRE(model.experts == 4);
  REQUIRE(model.top_k == 2);
  REQUIRE(model.moe_layers() == 2);
  const compute::ParameterLayout parameters(model);
  REQUIRE(parameters.active() < parameters.total());
  const Workload w{model, 8, 64, Precision::fp32};
  Layout plain{2, 1, 1, ZeroStage::none, Recompute::none, 4, 1};
  Layout sharded = plain;
  sharded.ep = 2;
  const PlannedLayout one = plan(w, machine(2), plain), two = plan(w, machine(2), sharded);
  // 4 bytes a parameter: of all E experts without expert shards, of a rank's E/2 under ep 2 (as
  // its local layout holds them).
  CHECK(one.memory.parameters == 4.0 * double(parameters.total()));
  CHECK(two.memory.parameters == 4.0 * double(compute::ParameterLayout(model, {0, 2}).total()));
  CHECK(two.memory.optimizer == 2 * two.memory.parameters);
  // The data-parallel sums: without expert shards every parameter over the 2 replicas; under ep 2
  // (one expert group) the rank's experts over no one, the rest as before.
  const double expert = 8.0 * 128 * 128 + 5 * 128, held = 2 * 2 * expert;  // 2 of 4 experts in 2 blocks
  CHECK(one.bytes.dp == Approx(2 * 0.5 * 4 * double(parameters.total())));
  CHECK(two.bytes.dp == Approx(2 * 0.5 * 4 * (double(compute::ParameterLayout(model, {0, 2}).total()) - held)));
  // Under ep 2 a rank's experts may receive R = 2 · N · min(2, 4/2) = 1024 rows of its N = 256
  // tokens' group, against its own N · k = 512: per MoE block the hidden and GELU rows (H = 512)
  // grow by 2 · 512 · 512 and three (R, C) exchange buffers come; the shared backward scratch grows
  // by 512 · 512 and three (R, C) buffers. In f32.
  const double R = 1024, Nk = 512, H = 512, C = 128;
  CHECK(two.memory.activations - one.memory.activations ==
        Approx(4 * (2 * (2 * (R - Nk) * H + 3 * R * C) + (R - Nk) * H + 3 * R * C)));
  // A rank's 4 sequences of 64 tokens, 2 slots a token, rows of 128 fp32: 262144 bytes each way;
  // dispatch and combine, forward and backward, in 2 MoE blocks, half of it leaving the rank.
  CHECK(one.bytes.ep == 0);
  CHECK(two.bytes.ep == Approx(4 * 64 * 2 * 128 * 4.0 * 4 * 2 / 2));
  CHECK(!two.bytes.ep_inter);
  CHECK(two.time.ep == Approx(two.bytes.ep / machine(2).intra_bandwidth));
  // The step adds the all-to-alls and saves the experts' share of the data-parallel sum.
  CHECK(two.time.dp < one.time.dp);
  CHECK(two.time.total == Approx(one.time.total + two.time.ep - (one.time.dp - two.time.dp)));
  CHECK(describe(sharded) == "zero 0, dp 2, ep 2, micro-batch 4 x 1, recompute none");
  CHECK(two.not_built.empty());
  // Full recompute is built with experts; its rerun forward dispatches and combines again.
  Layout recomputed = sharded;
  recomputed.recompute = Recompute::full;
  const PlannedLayout three = plan(w, machine(2), recomputed);
  CHECK(three.not_built.empty());
  CHECK(three.bytes.ep == Approx(two.bytes.ep * 6 / 4));
  CHECK(three.memory.activations < two.memory.activations);
  // ZeRO-3 with expert shards is built, on pipeline stages too.
  sharded.zero = ZeroStage::parameters;
  CHECK(plan(w, machine(2), sharded).not_built.empty());
  Layout staged_zero3{2, 1, 2, ZeroStage::parameters, Recompute::none, 2, 2};
  CHECK(plan(w, machine(4), staged_zero3).not_built.empty());
  staged_zero3.ep = 2;
  CHECK(plan(w, machine(4), staged_zero3).not_built.empty());
  // Two pipeline stages: built under 1F1B and under the zero-bubble schedules, with expert shards too.
  CHECK(plan(w, machine(2), {1, 1, 2, ZeroStage::none, Recompute::none, 4, 2}).not_built.empty());
  Layout zero_bubble{1, 1, 2, ZeroStage::none, Recompute::none, 4, 2, ScheduleKind::zb_h1};
  CHECK(plan(w, machine(2), zero_bubble).not_built.empty());
  // Context shards (each holding every expert) are built with experts.
  Layout context_sharded{1, 1, 1, ZeroStage::none, Recompute::none, 4, 2};
  context_sharded.cp = 2;
  CHECK(plan(w, machine(2), context_sharded).not_built.empty());
  // Tensor shards (each holding its slice of every expert) are built with experts, and hold less of
  // each MoE block's activations; inside expert groups too, each holding its slices of E/ep experts.
  Layout tensor_sharded{1, 2, 1, ZeroStage::none, Recompute::none, 4, 2};
  const PlannedLayout split = plan(w, machine(2), tensor_sharded);
  CHECK(split.not_built.empty());
  CHECK(split.memory.activations <
        plan(w, machine(1), {1, 1, 1, ZeroStage::none, Recompute::none, 4, 2}).memory.activations);
  Layout tensor_and_experts{2, 2, 1, ZeroStage::none, Recompute::none, 4, 1};
  tensor_and_experts.ep = 2;
  const PlannedLayout split_experts = plan(w, machine(4), tensor_and_experts);
  CHECK(split_experts.not_built.empty());
  Layout experts_alone = tensor_and_experts;
  experts_alone.tp = 1;
  CHECK(split_experts.memory.parameters < plan(w, machine(2), experts_alone).memory.parameters);
  Layout staged_shards{2, 1, 2, ZeroStage::optimizer_state, Recompute::none, 2, 2};
  staged_shards.ep = 2;
  CHECK(plan(w, machine(4), staged_shards).not_built.empty());
  staged_shards.zero = ZeroStage::none;
  const PlannedLayout staged = plan(w, machine(4), staged_shards);
  CHECK(staged.not_built.empty());
  // Stage 0 (blocks 0 and 1, the embeddings; it stashes the most) holds MoE block 1's router and 2
  // of its 4 experts: its slice less the 2 experts it does not hold.
  CHECK(staged.memory.parameters == Approx(4.0 * (double(compute::stage_parameter_count(model, 0, 2)) - 2 * expert)));
  // Four replicas: expert groups of 1, 2 and 4; a dense model has none.
  auto all = plan_layouts(w, machine(4));
  REQUIRE(all);
  std::map<int, int> groups;
  for (const PlannedLayout& p : all->feasible)
    if (p.layout.dp == 4) ++groups[p.layout.ep];
  CHECK(groups.size() == 3);
  CHECK(groups[2] > 0);
  CHECK(groups[4] > 0);
  auto dense = plan_layouts({preset("tiny"), 8, 64, Precision::fp32}, machine(4));
  REQUIRE(dense);
  CHECK(std::none_of(dense->feasible.begin(), dense->feasible.end(),
                     [](const PlannedLayout& p) { return p.layout.ep > 1; }));
}

// Under ZeRO 1 to 3 with expert shards a rank's dense moments are its share over the dp replicas,
// its experts' over the dp/ep replicas holding them; the sums and gathers too, and ZeRO-3's
// parameters and gradients.
TEST_CASE("a model with experts under ZeRO 1 to 3: the dense state sharded over dp, the experts' over dp/ep",
          "[plan][moe][zero]") {
  const compute::GPTConfig model = preset("moe-tiny");
  const Workload w{model, 16, 64, Precision::fp32};
  const double local = double(compute::ParameterLayout(model, {0, 2}).total());
  const double experts = 2 * 2 * (8.0 * 128 * 128 + 5 * 128);  // 2 of 4 experts in 2 blocks
  const Layout plain{4, 1, 1, ZeroStage::none, Recompute::none, 4, 1};
  for (ZeroStage zero : {ZeroStage::optimizer_state, ZeroStage::gradients}) {
    INFO("zero " << compute::zero_number(zero));
    Layout layout = plain;
    layout.zero = zero;
    layout.ep = 2;
    const PlannedLayout planned = plan(w, machine(4), layout);
    CHECK(planned.not_built.empty());
    CHECK(planned.memory.parameters == Approx(4 * local));
    // Troupe's ZeRO-2 reduce-scatters in place: it keeps the whole gradient buffer.
    CHECK(planned.memory.gradients == Approx(4 * local));
    CHECK(planned.memory.optimizer == Approx(8 * ((local - experts) / 4 + experts / 2)));
    // Gradients reduced and parameters gathered: the dense ones over 4 ranks, the experts over 2.
    const double ring = 3.0 / 4 * (local - experts) + 1.0 / 2 * experts;
    CHECK(planned.bytes.dp == Approx((zero == ZeroStage::gradients ? 2 : 3) * 4 * ring));
  }
  Layout zero3 = plain;
  zero3.zero = ZeroStage::parameters;
  zero3.ep = 2;
  const PlannedLayout planned = plan(w, machine(4), zero3);
  CHECK(planned.not_built.empty());
  const double shard = (local - experts) / 4 + experts / 2;
  CHECK(planned.memory.parameters == Approx(4 * shard));
  CHECK(planned.memory.gradients == Approx(4 * shard));
  CHECK(planned.memory.optimizer == Approx(8 * shard));
  // Gathered: the embeddings and two blocks, each an MoE block with its 2 of 4 experts, and as many
  // unit gradients.
  const double C = 128, block = 12 * C * C + 13 * C + model.moe_block_extra_parameters(2);
  CHECK(planned.memory.gathered == Approx(8 * (double(model.padded_vocab_size + model.block_size) * C + 2 * block)));
}

TEST_CASE(
    "diloco islands: ZeRO shards and sums inside an island, the outer state is 12 bytes a held parameter, 16 on a "
    "stage of two chunks",
    "[plan][diloco]") {
  const compute::GPTConfig model = preset("gpt2");  // 12 layers: 2 stages of 2 equal chunks for ZB-V
  const Workload w{model, 16, 256, Precision::fp32};
  Layout zero3{4, 1, 1, ZeroStage::parameters, Recompute::none, 4, 1};
  const PlannedLayout job_wide = plan(w, machine(4), zero3);
  CHECK(job_wide.memory.outer == 0);
  zero3.sync = compute::SyncMode::diloco;
  zero3.islands = 2;
  const PlannedLayout islands = plan(w, machine(4), zero3);
  CHECK_THAT(describe(zero3), Catch::Contains(", diloco 2 island(s)"));
  // Sharded over the 2 ranks of an island, not the job's 4: twice the parameters and moments.
  CHECK(islands.memory.parameters == Approx(2 * job_wide.memory.parameters));
  CHECK(islands.memory.optimizer == Approx(2 * job_wide.memory.optimizer));
  CHECK(islands.memory.outer == Approx(3 * islands.memory.parameters));
  // The ring of an island's 2 ranks sends (2 - 1) / 2 of the bytes where the job's 4 sent 3 / 4.
  CHECK(islands.bytes.dp == Approx(job_wide.bytes.dp * (1.0 / 2) / (3.0 / 4)));
  for (const ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::zb_v}) {
    Layout stages{2, 1, 2, ZeroStage::none, Recompute::none, 1, 8, kind, kind == ScheduleKind::zb_v ? 2 : 1};
    stages.sync = compute::SyncMode::diloco;
    stages.islands = 2;
    const PlannedLayout p = plan(w, machine(4), stages);
    INFO(describe(stages));
    CHECK(p.memory.outer == Approx((kind == ScheduleKind::zb_v ? 4 : 3) * p.memory.parameters));
  }
  // A search for a DiLoCo job keeps its islands: only replicas that split into them, each with its
  // outer state.
  Workload diloco = w;
  diloco.sync = compute::SyncMode::diloco;
  diloco.islands = 2;
  auto searched = plan_layouts(diloco, machine(4));
  REQUIRE(searched);
  REQUIRE_FALSE(searched->feasible.empty());
  for (const PlannedLayout& p : searched->feasible) {
    INFO(describe(p.layout));
    CHECK(p.layout.islands == 2);
    CHECK(p.layout.dp % 2 == 0);
    CHECK(p.memory.outer > 0);
  }
}
