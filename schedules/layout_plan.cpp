#include "schedules/layout_plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <map>
#include <tuple>
#include <utility>

#include "compute/check.hpp"
#include "compute/context/context_cost.hpp"
#include "compute/model/flops.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/stage_split.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::schedules {
namespace {

// Per token, a forward's model FLOPs and what recomputation adds to backward, both over the whole
// model; the backward of the model's FLOPs is twice the forward (compute/model/flops.hpp).
struct TokenFlops {
  double forward = 0;
  double recompute = 0;
};

TokenFlops token_flops(const compute::GPTConfig& model, int seq_len, compute::Recompute recompute) {
  const compute::ModelFlops f = compute::model_flops(model, seq_len);
  TokenFlops flops{f.total() / 3, 0};
  // Full recompute reruns each block's forward but its MLP output projection (2·4C² FLOPs per
  // token), which the block's backward does not read; selective, the attention's forward.
  const double C = model.n_embd;
  if (recompute == compute::Recompute::full) flops.recompute = model.n_layer * (f.block() / 3 - 8 * C * C);
  if (recompute == compute::Recompute::selective) flops.recompute = model.n_layer * f.block_attention / 3;
  return flops;
}

// How often a backward reruns the forward it recomputes: a split backward's B, then its W again.
double recompute_runs(const Layout& l) { return splits_backward(l.schedule) ? 2 : 1; }

constexpr compute::Recompute recompute_modes[] = {compute::Recompute::none, compute::Recompute::selective,
                                                  compute::Recompute::full};

// A chunk's share of the model's FLOPs per token: its blocks, and the lm head on the last chunk.
// What split_for_pipeline balances is memory, so a stage's compute is weighed here.
double chunk_flops(const compute::GPTConfig& m, const compute::StageLayers& chunk, int seq_len) {
  const compute::ModelFlops f = compute::model_flops(m, seq_len);
  return chunk.layers() * f.block() + (chunk.last_layer == m.n_layer ? f.head : 0);
}

// What every layout of p stages and v chunks in one placement and split method shares: the split,
// which stage holds each chunk, each stage's parameters, its compute weight relative to the mean,
// its speed, and the most blocks a stage holds.
struct StageSplit {
  std::vector<compute::StageLayers> chunks;
  std::vector<int> stage_of;  // per chunk (virtual stage)
  std::vector<double> params, scale;
  std::vector<double> speeds;  // Workload::stage_speeds, or empty: every stage at 1
  int most_layers = 0;

  // The busiest stage's compute time relative to a mean stage's at speed 1.
  double slowest() const {
    double most = 0;
    for (std::size_t s = 0; s < scale.size(); ++s) most = std::max(most, scale[s] / (speeds.empty() ? 1 : speeds[s]));
    return most;
  }
};

// Interleaving puts chunk k on stage k % p; ZB-V's V puts chunks p..2p-1 back up the stages.
Expected<StageSplit> stage_split(const Workload& w, const Layout& l) {
  const int pp = l.pp;
  if (!w.stage_speeds.empty() && int(w.stage_speeds.size()) != pp)
    return Error{std::to_string(w.stage_speeds.size()) + " stage speeds for a layout of " + std::to_string(pp) +
                 " pipeline stages"};
  auto split = compute::split_for_pipeline(
      w.model, pp, l.chunks, l.split == compute::SplitMethod::speed ? w.stage_speeds : std::vector<double>{},
      w.seq_len);
  if (!split) return split.error();
  const Schedule placement{l.schedule, pp, 1, l.chunks, {}};
  StageSplit out{*split, {}, std::vector<double>(pp, 0), std::vector<double>(pp, 0), w.stage_speeds, 0};
  std::vector<int> layers(pp, 0);
  double mean_weight = 0;
  for (std::size_t k = 0; k < split->size(); ++k) {
    const int s = out.stage_of.emplace_back(placement.stage_of(int(k)));
    out.params[s] += double((*split)[k].params);
    const double weight = chunk_flops(w.model, (*split)[k], w.seq_len);
    out.scale[s] += weight;
    mean_weight += weight / pp;
    out.most_layers = std::max(out.most_layers, layers[s] += (*split)[k].layers());
  }
  for (double& x : out.scale) x /= mean_weight;
  return out;
}

// A schedule simulated once for every recompute mode: per stage the stashed peak, and per mode
// the flush, in units of one mean chunk's forward of one micro-batch, and the stages' busy time.
struct SimulatedSchedule {
  int microbatches = 0;
  std::vector<int> peak_stashed;
  struct Costs {
    double flush = 0, busy = 0, busiest = 0;  // busy: summed over stages; busiest: the most on one
  } costs[std::size(recompute_modes)];        // indexed by the mode: recompute_modes is in enum order
};

// What the plan reads of a pipeline: per stage the stashed peak, the span and the bubble.
struct PipelineShape {
  std::vector<int> peak_stashed;
  double flush = 0;
  double bubble = 0;
};

using ShapeKey = std::tuple<int, int, int, int, int>;  // kind, p, simulated m, v, split method

// What plan_layouts computes once and every layout of the same shape shares.
struct PlanCache {
  std::map<std::tuple<int, int, bool, int>, StageSplit> splits;  // (p, v, V placement, split method)
  std::map<ShapeKey, SimulatedSchedule> schedules;
};

Expected<const StageSplit*> cached_split(const Workload& w, const Layout& l, PlanCache& cache) {
  const std::tuple key{l.pp, l.chunks, l.schedule == ScheduleKind::zb_v, int(l.split)};
  if (auto found = cache.splits.find(key); found != cache.splits.end()) return &found->second;
  auto split = stage_split(w, l);
  if (!split) return split.error();
  return &cache.splits.emplace(key, std::move(*split)).first->second;
}

// The schedule is simulated with at most simulated_microbatches micro-batches (for interleaving the
// largest multiple of p within it); a longer one is extended from there at the busiest stage's pace:
// each further micro-batch adds its forward and backward there to the flush, and under GPipe one
// more stashed micro-batch (1F1B and interleaving stash no more once in their steady state).
Expected<PipelineShape> pipeline_shape(const Workload& w, const Layout& l, const StageSplit& split, PlanCache& cache) {
  int simulated = std::min(l.microbatches, simulated_microbatches);
  if (l.schedule == ScheduleKind::interleaved) simulated -= simulated % l.pp;
  const ShapeKey key{int(l.schedule), l.pp, simulated, l.chunks, int(l.split)};
  auto found = cache.schedules.find(key);
  if (found == cache.schedules.end()) {
    auto schedule = generate_schedule(l.schedule, l.pp, simulated, l.chunks);
    if (!schedule) return schedule.error();
    auto report = check_schedule(*schedule);
    if (!report) return report.error();
    SimulatedSchedule simulation{simulated, report->peak_stashed, {}};
    for (std::size_t r = 0; r < std::size(recompute_modes); ++r) {
      const TokenFlops flops = token_flops(w.model, w.seq_len, recompute_modes[r]);
      CostModel costs;
      costs.forward = 1;
      // A split backward recomputes twice (B, then W again) and W takes half of what is left.
      costs.backward = (2 * flops.forward + recompute_runs(l) * flops.recompute) / flops.forward;
      costs.forward_scale = split.scale;
      costs.backward_scale = split.scale;
      costs.speeds = split.speeds;
      auto sim = simulate(*schedule, costs);
      if (!sim) return sim.error();
      SimulatedSchedule::Costs& c = simulation.costs[r];
      c.flush = sim->flush;
      for (double b : sim->busy) c.busy += b, c.busiest = std::max(c.busiest, b);
    }
    found = cache.schedules.emplace(key, std::move(simulation)).first;
  }
  const SimulatedSchedule& s = found->second;
  const SimulatedSchedule::Costs& c = s.costs[std::size_t(l.recompute)];
  const double more = l.microbatches - s.microbatches;
  PipelineShape shape{s.peak_stashed, c.flush + more * c.busiest / s.microbatches, 0};
  if (l.schedule == ScheduleKind::gpipe)
    for (int& peak : shape.peak_stashed) peak += int(more);
  shape.bubble = 1 - c.busy * l.microbatches / s.microbatches / (l.pp * shape.flush);
  return shape;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

Status positive(const char* field, double value) {
  if (std::isfinite(value) && value > 0) return Status::success();
  return Error{std::string(field) + " must be positive, got " + number(value)};
}

// An all-reduce sends 2(n-1)/n of its bytes from each member, a reduce-scatter or all-gather (n-1)/n.
double ring_share(int members) { return double(members - 1) / members; }

std::string not_built(const Workload& w, const Layout& l) {
  std::vector<std::string> missing;
  // Troupe's bf16 keeps weights, gradients and activations in f32 (precision_bytes).
  if (!precision_bytes(w.precision).as_troupe_runs) missing.push_back("2-byte weights and activations");
  std::string text;
  for (const std::string& m : missing) text += (text.empty() ? "" : ", ") + m;
  return text;
}

Expected<PlannedLayout> plan_one(const Workload& w, const Cluster& cluster, const Layout& l, PlanCache& cache) {
  const compute::GPTConfig& model = w.model;
  PrecisionBytes bytes = precision_bytes(w.precision);
  if (w.emulated_products && bytes.operand > 0) bytes.operand = 4;
  if (w.operands_stored_f32) bytes.stored_activation = bytes.activation;
  auto cached = cached_split(w, l, cache);
  if (!cached) return cached.error();
  const StageSplit& split = **cached;
  const TokenFlops flops = token_flops(model, w.seq_len, l.recompute);
  PipelineShape shape{std::vector<int>(l.pp, 1), 0, 0};
  if (l.pp > 1) {
    auto found = pipeline_shape(w, l, split, cache);
    if (!found) return found.error();
    shape = *found;
  }

  TROUPE_CHECK(l.islands >= 1 && l.dp % l.islands == 0, "planned diloco islands that do not divide dp");
  PlannedLayout planned;
  planned.layout = l;
  planned.not_built = not_built(w, l);
  // The data-parallel group holds every context shard: ZeRO shards over dp · cp ranks, of one island
  // under DiLoCo.
  const double dp = double(l.dp / l.islands) * l.cp, tp = l.tp;
  const int rows = w.seq_len / l.cp;  // of each sequence, on a rank
  const compute::context::ContextLayerCost context = compute::context::context_layer_cost(
      l.context, l.micro_batch, w.seq_len, int(model.n_embd / l.tp), model.n_head / l.tp, l.cp);
  const bool zero3 = compute::shards_parameters(l.zero);
  // Troupe's ZeRO-2 reduce-scatters in place: it keeps the whole gradient buffer.
  const bool shard_gradients = zero3 || (compute::shards_gradients(l.zero) && !bytes.as_troupe_runs);
  // ZeRO-3's units: a block (under ep its E/ep experts), and the embeddings.
  const double C = model.n_embd;
  const double block = (12 * C * C + 13 * C + (model.experts > 0 ? model.moe_block_extra_parameters(l.ep) : 0)) / tp;
  const double embeddings = double(model.padded_vocab_size + model.block_size) * C / tp;
  const double largest_unit = std::max(block, double(model.padded_vocab_size) * C / tp);

  // The stage that needs the most memory is the device the plan answers for. Under ep a rank holds
  // E/ep of each MoE block's experts: its expert parameters, summed over the dp/ep ranks holding them.
  double stage_params = 0, stage_experts = 0;
  int most_moe_layers = 0;  // on one stage
  for (int s = 0; s < l.pp; ++s) {
    double activations = 0, operand_copies = 0;
    int layers = 0, moe_layers = 0;
    for (std::size_t k = 0; k < split.chunks.size(); ++k) {
      if (split.stage_of[k] != s) continue;
      const compute::StageLayers& chunk = split.chunks[k];
      layers += chunk.layers();
      moe_layers += model.moe_layers_in(chunk.first_layer, chunk.last_layer);
      compute::StageFootprint footprint{chunk.first_layer,
                                        chunk.last_layer,
                                        l.micro_batch,
                                        rows,
                                        shape.peak_stashed[s],
                                        std::size_t(bytes.activation),
                                        l.recompute,
                                        l.tp,
                                        splits_backward(l.schedule),
                                        l.ep};
      footprint.stored_activation_bytes = std::size_t(bytes.stored_activation);
      activations += compute::estimate_training_memory(model, footprint).activation_bytes;
      // The backend's operand copies serve every chunk of the stage: the largest chunk's, once.
      const compute::ProductOperands operands = compute::largest_product_operands(model, footprint);
      operand_copies = std::max(operand_copies, (operands.first + operands.second) * bytes.operand);
    }
    activations += operand_copies;
    if (l.cp > 1) activations += (layers * shape.peak_stashed[s] * context.kept + context.held) * bytes.activation;
    most_moe_layers = std::max(most_moe_layers, moe_layers);
    DeviceMemory m;
    const double not_held = moe_layers * (model.moe_block_extra_parameters() - model.moe_block_extra_parameters(l.ep));
    const double p = (split.params[s] - not_held) / tp;
    const double experts = moe_layers * (model.experts / l.ep) * (8 * C * C + 5 * C) / tp;
    // What ZeRO shards of them: the dense parameters over the dp group; under ep the rank's experts
    // over the dp/ep ranks holding them.
    const double sharded = l.ep > 1 ? (p - experts) / dp + experts / (dp / l.ep) : p / dp;
    m.parameters = bytes.weight * (zero3 ? sharded : p);
    m.gradients = bytes.gradient * (shard_gradients ? sharded : p);
    // A rank of several micro-batches keeps the earlier ones' sum apart (compute/train/micro_batch_sum.hpp).
    if (bytes.as_troupe_runs && l.microbatches > 1 && !zero3) m.gradients *= 2;
    m.optimizer = bytes.optimizer * (compute::shards_optimizer_state(l.zero) ? sharded : p);
    // Troupe keeps the embeddings gathered through the step (the lm head and the first backward
    // use them) besides the block computing and the next (prefetched), and as many unit gradients:
    // the embeddings', the block's that backward fills, the one in its reduce-scatter. DeepSpeed
    // (the mixed precisions) holds two of the largest units and that unit's gradient.
    if (zero3)
      m.gathered = bytes.as_troupe_runs ? (bytes.weight + bytes.gradient) * (embeddings + 2 * block)
                                        : 2 * bytes.weight * largest_unit + bytes.gradient * largest_unit;
    if (l.sync == compute::SyncMode::diloco) m.outer = 4 * (l.chunks > 1 ? 4 : 3) * (zero3 ? sharded : p);
    m.activations = activations;
    m.stashed = shape.peak_stashed[s];
    if (s == 0 || m.total() > planned.memory.total()) {
      planned.memory = m;
      stage_params = p;
      stage_experts = l.ep > 1 ? experts : 0;
    }
  }

  // Bytes per step each device sends, by group.
  LinkBytes& link = planned.bytes;
  const double m_count = l.microbatches;
  if (dp > 1) {
    // Under ep the rank's experts are reduced and gathered over the dp/ep ranks holding them.
    // Under DiLoCo every step's sums stay inside an island; its outer syncs are not counted here.
    const double ring_bytes =
        ring_share(int(dp)) * (stage_params - stage_experts) + ring_share(l.dp / l.ep) * stage_experts;
    const double scatter = bytes.gradient * ring_bytes, gather = bytes.weight * ring_bytes;
    switch (l.zero) {
      case compute::ZeroStage::none: link.dp = 2 * scatter; break;
      case compute::ZeroStage::optimizer_state:
        link.dp = bytes.as_troupe_runs ? 2 * scatter + gather : scatter + gather;
        break;
      case compute::ZeroStage::gradients: link.dp = scatter + gather; break;
      // Gathered for every micro-batch's forward and backward, reduce-scattered after every backward.
      case compute::ZeroStage::parameters: link.dp = m_count * (scatter + 2 * gather); break;
    }
  }
  const double activation_message = double(l.micro_batch) * rows * C * bytes.activation;
  if (l.tp > 1) {                                                                // on the stage with the most blocks
    const double all_reduces = l.recompute == compute::Recompute::full ? 6 : 4;  // a rerun forward adds two
    link.tp = split.most_layers * m_count * all_reduces * 2 * ring_share(l.tp) * activation_message;
  }
  if (l.pp > 1) link.pp = 2 * m_count * l.chunks * activation_message / tp;
  if (l.cp > 1)  // on the stage with the most blocks
    link.cp = split.most_layers * m_count * (context.forward_sent + context.backward_sent) * bytes.activation;
  if (l.ep > 1) {  // per MoE block, micro-batch and slot: dispatch and combine, forward and backward
    const double exchanges = l.recompute == compute::Recompute::full ? 6 : 4;  // a rerun forward adds two
    link.ep = most_moe_layers * m_count * exchanges * (activation_message * model.top_k) * ring_share(l.ep);
  }
  link.tp_inter = l.tp > cluster.devices_per_node;
  link.cp_inter = l.tp * l.cp > cluster.devices_per_node;
  link.dp_inter = l.tp * dp > cluster.devices_per_node;
  link.ep_inter = l.tp * l.ep > cluster.devices_per_node;
  link.pp_inter = l.pp > 1 && cluster.nodes > 1;

  // Time.
  StepTime& t = planned.time;
  const double rate = cluster.peak_flops * cluster.mfu;
  const double replica_tokens = double(w.global_batch) / l.dp * w.seq_len;
  t.compute = (3 * flops.forward + recompute_runs(l) * flops.recompute) * replica_tokens / (l.pp * tp * l.cp) *
              split.slowest() / rate;
  if (bytes.as_troupe_runs && l.microbatches > 1 && !zero3)
    t.sums = (4.0 * l.microbatches - 2) * bytes.gradient * stage_params / cluster.memory_bandwidth;
  double span = t.compute;
  if (l.pp > 1) {
    // One unit: a mean chunk's forward of one micro-batch.
    const double unit_seconds = flops.forward * l.micro_batch * rows / (l.pp * l.chunks * tp) / rate;
    span = shape.flush * unit_seconds;
    t.bubble = shape.bubble;
  }
  auto bandwidth = [&](bool inter) { return inter ? cluster.inter_bandwidth : cluster.intra_bandwidth; };
  t.dp = link.dp / bandwidth(link.dp_inter);
  t.tp = link.tp / bandwidth(link.tp_inter);
  if (l.pp > 1) t.pp = 2 * (l.pp - 1) * (activation_message / tp) / bandwidth(link.pp_inter);
  t.cp = link.cp / bandwidth(link.cp_inter);
  t.ep = link.ep / bandwidth(link.ep_inter);
  t.total = span + t.sums + t.dp + t.tp + t.pp + t.cp + t.ep;

  planned.fits = planned.memory.total() <= cluster.device_memory;
  if (!planned.fits) {
    // More digits where three would print the two sizes alike ("80 GB > 80 GB").
    int digits = 3;
    while (digits < 9 && format_bytes(planned.memory.total(), digits) == format_bytes(cluster.device_memory, digits))
      ++digits;
    planned.rejected = describe(l) + ": " + format_bytes(planned.memory.total(), digits) + " > " +
                       format_bytes(cluster.device_memory, digits);
  }
  return planned;
}

}  // namespace

PrecisionBytes precision_bytes(Precision precision) {
  switch (precision) {
    case Precision::bf16: return {4, 4, 8, 4, true, 2, 2};
    case Precision::mixed: return {2, 2, 12, 2, false, 0, 2};
    case Precision::mixed_fp32_grads: return {2, 4, 12, 2, false, 0, 2};
    case Precision::fp32: break;
  }
  return {4, 4, 8, 4, true};
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::bf16: return "bf16";
    case Precision::mixed: return "mixed";
    case Precision::mixed_fp32_grads: return "mixed-fp32-grads";
    case Precision::fp32: break;
  }
  return "fp32";
}

Expected<Precision> parse_precision(std::string_view name) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::mixed, Precision::mixed_fp32_grads})
    if (name == to_string(p)) return p;
  return Error{"unknown precision '" + std::string(name) + "' (expected fp32, bf16, mixed or mixed-fp32-grads)"};
}

std::string describe(const Layout& l) {
  std::string text = "zero " + std::to_string(compute::zero_number(l.zero)) + ", dp " + std::to_string(l.dp);
  if (l.tp > 1) text += ", tp " + std::to_string(l.tp);
  if (l.pp > 1) {
    text += ", pp " + std::to_string(l.pp) + " " + std::string(to_string(l.schedule));
    if (l.chunks > 1) text += " v " + std::to_string(l.chunks);
    if (l.split == compute::SplitMethod::speed) text += " by speed";
  }
  if (l.cp > 1)
    text += ", cp " + std::to_string(l.cp) + " " + std::string(compute::context::context_method_name(l.context));
  if (l.ep > 1) text += ", ep " + std::to_string(l.ep);
  if (l.sync == compute::SyncMode::diloco) text += ", diloco " + std::to_string(l.islands) + " island(s)";
  text += ", micro-batch " + std::to_string(l.micro_batch) + " x " + std::to_string(l.microbatches);
  text += ", recompute " + compute::recompute_name(l.recompute);
  return text;
}

std::string format_bytes(double bytes, int digits) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  std::size_t unit = 0;
  double value = bytes;
  for (; std::abs(value) >= 1000 && unit + 1 < std::size(units); ++unit) value /= 1000;
  char text[32];
  std::snprintf(text, sizeof text, "%.*g %s", digits, value, units[unit]);
  return text;
}

Status check_plan_inputs(const Workload& w, const Cluster& c) {
  if (Status valid = compute::validate(w.model); !valid) return valid;
  const std::pair<const char*, int> dimensions[] = {
      {"model.n_layer", w.model.n_layer}, {"model.n_embd", w.model.n_embd}, {"model.vocab_size", w.model.vocab_size}};
  const int most[] = {max_plan_layers, max_plan_width, max_plan_vocabulary};
  for (std::size_t i = 0; i < std::size(dimensions); ++i)
    if (dimensions[i].second > most[i])
      return Error{std::string(dimensions[i].first) + " " + std::to_string(dimensions[i].second) +
                   " is more than the planner takes (at most " + std::to_string(most[i]) + ")"};
  TROUPE_CHECK(w.islands >= 1, "a workload of no diloco islands");
  if (c.nodes < 1) return Error{"nodes must be at least 1, got " + std::to_string(c.nodes)};
  if (c.devices_per_node < 1)
    return Error{"devices per node must be at least 1, got " + std::to_string(c.devices_per_node)};
  if (const std::int64_t devices = std::int64_t{c.nodes} * c.devices_per_node; devices > max_plan_devices)
    return Error{"nodes " + std::to_string(c.nodes) + " x devices per node " + std::to_string(c.devices_per_node) +
                 " = " + std::to_string(devices) + " devices is more than the planner takes (at most " +
                 std::to_string(max_plan_devices) + ")"};
  if (w.global_batch < 1) return Error{"global batch must be at least 1, got " + std::to_string(w.global_batch)};
  if (w.stage_speeds.size() == 1) return Error{"stage speeds: one speed a pipeline stage, and at least 2 stages"};
  if (int(w.stage_speeds.size()) > std::min(w.model.n_layer, max_planned_stages))
    return Error{"stage speeds: " + std::to_string(w.stage_speeds.size()) + " stages, more than the planner splits (" +
                 std::to_string(std::min(w.model.n_layer, max_planned_stages)) + ")"};
  for (double speed : w.stage_speeds)
    if (Status s = positive("a stage speed", speed); !s) return s;
  if (w.seq_len < 1 || w.seq_len > w.model.block_size)
    return Error{"sequence length " + std::to_string(w.seq_len) + " must be from 1 to the model's block size " +
                 std::to_string(w.model.block_size)};
  if (Status s = positive("device memory", c.device_memory); !s) return s;
  if (Status s = positive("peak FLOP/s", c.peak_flops); !s) return s;
  if (Status s = positive("memory bandwidth", c.memory_bandwidth); !s) return s;
  if (Status s = positive("MFU", c.mfu); !s) return s;
  if (c.mfu > 1) return Error{"MFU must be at most 1, got " + number(c.mfu)};
  if (Status s = positive("bandwidth inside a node", c.intra_bandwidth); !s) return s;
  if (Status s = positive("bandwidth between nodes", c.inter_bandwidth); !s) return s;
  return Status::success();
}

Expected<PlannedLayout> plan_layout(const Workload& workload, const Cluster& cluster, const Layout& layout) {
  PlanCache cache;
  return plan_one(workload, cluster, layout, cache);
}

namespace {

// Every layout of one grid (dp, tp, pp, cp and the context method set in `grid`) into `plan`: each
// ZeRO stage, recompute mode and micro-batch, and with pp > 1 each schedule.
Status add_grid_layouts(const Workload& w, const Cluster& cluster, const Layout& grid, Plan& plan, PlanCache& cache) {
  const int share = w.global_batch / grid.dp;
  std::vector<int> micro_batches;
  for (std::int64_t b = 1; b < share; b *= 2)
    if (share % b == 0) micro_batches.push_back(int(b));
  micro_batches.push_back(share);
  for (compute::ZeroStage zero : compute::zero_stages) {
    if (grid.dp * grid.cp == 1 && compute::shards_optimizer_state(zero)) break;  // nothing to shard over
    for (compute::Recompute recompute : recompute_modes) {
      for (int b : micro_batches) {
        Layout l = grid;
        l.zero = zero;
        l.recompute = recompute;
        l.micro_batch = b;
        l.microbatches = share / b;
        std::vector<Layout> variants;
        if (l.pp == 1) {
          variants.push_back(l);
        } else {
          for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
            l.schedule = kind;
            variants.push_back(l);
          }
          l.schedule = ScheduleKind::zb_h1;
          variants.push_back(l);
          if (w.model.n_layer % (2 * l.pp) == 0) {  // two equal chunks per stage
            l.chunks = 2;
            if (l.microbatches % l.pp == 0) {
              l.schedule = ScheduleKind::interleaved;
              variants.push_back(l);
            }
            l.schedule = ScheduleKind::zb_v;
            variants.push_back(l);
          }
        }
        // Declared stage speeds: each one-chunk schedule also split by them.
        const std::size_t unsplit = variants.size();
        for (std::size_t i = 0; i < unsplit && !w.stage_speeds.empty(); ++i) {
          if (variants[i].chunks > 1) continue;
          variants.push_back(variants[i]);
          variants.back().split = compute::SplitMethod::speed;
        }
        for (const Layout& v : variants) {
          auto planned = plan_one(w, cluster, v, cache);
          if (!planned) return planned.error();
          (planned->fits ? plan.feasible : plan.rejected).push_back(std::move(*planned));
        }
      }
    }
  }
  return Status::success();
}

}  // namespace

Expected<Plan> plan_layouts(const Workload& w, const Cluster& cluster, int most_context_shards) {
  if (Status valid = check_plan_inputs(w, cluster); !valid) return valid.error();
  Plan plan;
  PlanCache cache;
  const int devices = cluster.devices();
  if (const int stages = int(w.stage_speeds.size()); stages > 0 && devices % stages != 0)
    return Error{std::to_string(stages) + " stage speeds: " + std::to_string(devices) + " devices do not form " +
                 std::to_string(stages) + " pipeline stages"};
  const int most_tp = std::min({w.model.n_head, cluster.devices_per_node, max_planned_shards});
  for (int tp = 1; tp <= most_tp; ++tp) {
    if (w.model.n_head % tp != 0 || devices % tp != 0) continue;
    const int most_pp = std::min({devices / tp, w.model.n_layer, max_planned_stages});
    for (int pp = 1; pp <= most_pp; ++pp) {
      if (devices / tp % pp != 0 || (!w.stage_speeds.empty() && pp != int(w.stage_speeds.size()))) continue;
      for (int cp = 1; cp <= std::min(most_context_shards, devices / tp / pp); ++cp) {
        const int dp = devices / tp / pp / cp;
        if (devices / tp / pp % cp != 0 || (cp > 1 && w.seq_len % (2 * cp) != 0) || w.global_batch % dp != 0 ||
            dp % w.islands != 0)
          continue;
        Layout grid{dp, tp, pp};
        grid.cp = cp;
        grid.sync = w.sync;
        grid.islands = w.islands;
        for (compute::context::ContextMethod method : compute::context::context_methods) {
          const bool heads_split = (w.model.n_head / tp) % cp == 0;
          if (method == compute::context::ContextMethod::all_to_all && (cp == 1 || !heads_split)) continue;
          grid.context = method;
          // Expert groups of ep replicas, each ep dividing dp and the experts; with cp, or dense, ep 1.
          const int most_ep = cp == 1 ? std::max(1, std::min(dp, w.model.experts)) : 1;
          for (grid.ep = 1; grid.ep <= most_ep; ++grid.ep) {
            if (grid.ep > 1 && (dp % grid.ep != 0 || w.model.experts % grid.ep != 0)) continue;
            if (Status added = add_grid_layouts(w, cluster, grid, plan, cache); !added) return added.error();
          }
        }
      }
    }
  }
  if (plan.feasible.empty() && plan.rejected.empty())
    return Error{"no layout of " + std::to_string(devices) + " devices divides the global batch of " +
                 std::to_string(w.global_batch) + " sequences among its replicas: dp = devices / (tp x pp) must " +
                 "divide it, tp dividing the " + std::to_string(w.model.n_head) + " heads and at most " +
                 std::to_string(most_tp) + ", pp at most " +
                 std::to_string(std::min(w.model.n_layer, max_planned_stages))};
  std::stable_sort(plan.feasible.begin(), plan.feasible.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    if (a.time.total != b.time.total) return a.time.total < b.time.total;
    return a.memory.total() < b.memory.total();
  });
  std::stable_sort(plan.rejected.begin(), plan.rejected.end(),
                   [](const PlannedLayout& a, const PlannedLayout& b) { return a.memory.total() < b.memory.total(); });
  return plan;
}

}  // namespace troupe::schedules
