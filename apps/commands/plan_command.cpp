// troupe plan: will a model fit, and in which layout. Turns the flags into a workload and a
// cluster (this machine's figures where a flag is left out: its cores as devices, its available
// memory shared by them, one thread's measured sgemm peak and copy bandwidth), asks the layout planner
// (schedules/layout_plan.hpp) for every layout, and prints the ones that fit, fastest first, with
// memory per device by kind, bytes per step on each link and the predicted step time; then the
// ones that do not fit, each with its reason. docs/plan.md has the formulas; --context-shards C
// adds the layouts that split each sequence over up to C ranks (docs/context-parallel.md); a model
// with experts adds the layouts of every expert group size ep (docs/moe.md).
//
//   troupe plan --model.preset gpt3-13b --nodes 4 --devices-per-node 8 --device-memory 80GB
//     --peak-flops 312e12 --memory-bw 2e12 --intra-bw 150e9 --inter-bw 25e9 --global-batch 512 --seq 2048
//     --precision mixed

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "apps/commands/commands.hpp"
#include "apps/config/byte_size.hpp"
#include "apps/config/speeds.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/host_memory.hpp"
#include "compute/cpu/copy_bandwidth.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/sgemm_peak.hpp"
#include "compute/model/parameter_layout.hpp"
#include "schedules/layout_plan.hpp"

namespace troupe::apps {
namespace {

using schedules::PlannedLayout;

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// Nodes and devices per node of a host file: its distinct hosts, each with the slots of every line
// naming it; every host must have as many.
Expected<std::pair<int, int>> cluster_of_host_file(const std::string& path) {
  auto hosts = launch::parse_host_file(path);
  if (!hosts) return hosts.error();
  std::map<std::string, int> slots;
  for (const launch::HostEntry& h : *hosts) slots[h.host] += h.slots;
  const auto& [first_host, first_slots] = *slots.begin();
  for (const auto& [host, count] : slots)
    if (count != first_slots)
      return Error{"--hostfile " + path + ": " + first_host + " has " + std::to_string(first_slots) + " slots and " +
                   host + " has " + std::to_string(count) + "; troupe plan needs as many devices on every host"};
  return std::pair{int(slots.size()), first_slots};
}


// "     memory 46.7 GB: parameters 6.56 GB, ..., activations 34.4 GB (5 micro-batches stashed)".
void print_memory(const schedules::DeviceMemory& m) {
  std::printf("     memory %s: parameters %s, gradients %s, optimizer %s, activations %s (%d micro-batch%s stashed)",
              schedules::format_bytes(m.total()).c_str(), schedules::format_bytes(m.parameters).c_str(),
              schedules::format_bytes(m.gradients).c_str(), schedules::format_bytes(m.optimizer).c_str(),
              schedules::format_bytes(m.activations).c_str(), m.stashed, m.stashed == 1 ? "" : "es");
  if (m.gathered > 0) std::printf(", gathered zero-3 parameters %s", schedules::format_bytes(m.gathered).c_str());
  std::printf("\n");
}

// One layout in three or four lines: step time and layout; memory by kind; traffic and time by
// part; what the runtime cannot run yet.
void print_layout(int rank, const PlannedLayout& p, double tokens_per_step) {
  const schedules::DeviceMemory& m = p.memory;
  const schedules::LinkBytes& b = p.bytes;
  const schedules::StepTime& t = p.time;
  std::printf("%3d  %s s/step  %.0f tokens/s  %s\n", rank, figure(t.total).c_str(), tokens_per_step / t.total,
              describe(p.layout).c_str());
  print_memory(m);
  std::printf("     per step and device:");
  auto link = [](const char* group, double bytes, bool inter) {
    if (bytes > 0)
      std::printf(" %s %s (%s)", group, schedules::format_bytes(bytes).c_str(), inter ? "between nodes" : "in node");
  };
  link("dp", b.dp, b.dp_inter);
  link("tp", b.tp, b.tp_inter);
  link("pp", b.pp, b.pp_inter);
  link("cp", b.cp, b.cp_inter);
  link("ep", b.ep, b.ep_inter);
  if (b.dp + b.tp + b.pp + b.cp + b.ep == 0) std::printf(" no traffic");
  std::printf("; compute %s s", figure(t.compute).c_str());
  if (t.sums > 0) std::printf(", micro-batch sums %s s", figure(t.sums).c_str());
  if (p.layout.pp > 1) std::printf(", bubble %.3f", t.bubble);
  if (t.dp > 0) std::printf(", dp %s s", figure(t.dp).c_str());
  if (t.tp > 0) std::printf(", tp %s s", figure(t.tp).c_str());
  if (t.pp > 0) std::printf(", pp %s s", figure(t.pp).c_str());
  if (t.cp > 0) std::printf(", cp %s s", figure(t.cp).c_str());
  if (t.ep > 0) std::printf(", ep %s s", figure(t.ep).c_str());
  std::printf("\n");
  if (!p.not_built.empty()) std::printf("     planned, not built: %s\n", p.not_built.c_str());
}

}  // namespace

int run_plan(const PlanOptions& o) {
  auto model = resolve_model(o.model);
  if (!model) return error_exit(ExitCode::bad_input, model.error().message);
  auto precision = schedules::parse_precision(o.precision);
  if (!precision) return error_exit(ExitCode::bad_input, precision.error().message);
  if (o.top < 1) return error_exit(ExitCode::bad_input, "--top must be at least 1, got " + std::to_string(o.top));
  if (o.context_shards < 1)
    return error_exit(ExitCode::bad_input,
                      "--context-shards must be at least 1 (1 = none), got " + std::to_string(o.context_shards));

  auto speeds = parse_speeds("--stage-speeds", o.stage_speeds);
  if (!speeds) return error_exit(ExitCode::bad_input, speeds.error().message);
  schedules::Workload workload{*model, o.global_batch, o.seq.value_or(model->block_size), *precision, *speeds};
  schedules::Cluster cluster;
  cluster.nodes = o.nodes.value_or(1);
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  cluster.devices_per_node = o.devices_per_node.value_or(cores);
  if (!o.host_file.empty()) {
    if (o.nodes || o.devices_per_node)
      return error_exit(ExitCode::bad_input, "--hostfile and --nodes or --devices-per-node: give the cluster one way");
    auto shape = cluster_of_host_file(o.host_file);
    if (!shape) return error_exit(ExitCode::bad_input, shape.error().message);
    cluster.nodes = shape->first;
    cluster.devices_per_node = shape->second;
  }
  std::string memory_source = "--device-memory";
  if (!o.device_memory.empty()) {
    auto size = parse_byte_size(o.device_memory);
    if (!size)
      return error_exit(ExitCode::bad_input, "--device-memory " + o.device_memory +
                                                 ": not a positive size (write it as 80GB, 512MiB or a number of bytes)");
    cluster.device_memory = *size;
  } else {
    const auto host = launch::host_memory();
    if (!host)
      return error_exit(ExitCode::bad_input, "--device-memory: this machine's available memory cannot be read; give it");
    cluster.device_memory = double(host->available_bytes) / cluster.devices_per_node;
    memory_source = "this machine's " + host->source + " / " + std::to_string(cluster.devices_per_node);
  }
  std::string peak_source = "--peak-flops";
  if (o.peak_flops) {
    cluster.peak_flops = *o.peak_flops;
  } else {
    compute::cpu::configure_openblas(1);
    cluster.peak_flops = compute::cpu::measure_sgemm_peak({512, 1024});
    peak_source = "one thread's sgemm peak, measured now";
  }
  std::string memory_bw_source = "--memory-bw";
  if (o.memory_bw) {
    cluster.memory_bandwidth = *o.memory_bw;
  } else {
    cluster.memory_bandwidth = compute::cpu::measure_copy_bandwidth();
    memory_bw_source = "one thread's copy, measured now";
  }
  cluster.mfu = o.mfu;
  cluster.intra_bandwidth = o.intra_bw;
  cluster.inter_bandwidth = o.inter_bw;
  if (Status valid = schedules::check_plan_inputs(workload, cluster); !valid)
    return error_exit(ExitCode::bad_input, valid.error().message);
  auto plan = schedules::plan_layouts(workload, cluster, o.context_shards);
  if (!plan) return error_exit(ExitCode::bad_input, plan.error().message);

  const schedules::PrecisionBytes bytes = schedules::precision_bytes(*precision);
  const double params = double(compute::ParameterLayout(*model).total());
  const ModelOptions& m = o.model;
  const bool dims = m.n_layer > 0 || m.n_embd > 0 || m.n_head > 0 || m.block_size > 0 || m.vocab_size > 0 ||
                    m.experts >= 0 || m.top_k > 0 || m.moe_every > 0 || m.shared_experts >= 0 || m.expert_width > 0;
  std::printf("model %s%s: %d layers, n_embd %d, %d heads, vocabulary %d: %.0f parameters\n", m.preset.c_str(),
              dims ? " with the dimensions given" : "", model->n_layer, model->n_embd, model->n_head,
              model->vocab_size, params);
  if (model->experts > 0)
    std::printf(
        "experts: %d in each of %d MoE blocks, top-%d, %lld wide, %.0f parameters active per token; under ep e a "
        "rank holds E/e of each block's experts (their parameters, gradients and moments)\n",
        model->experts, model->moe_layers(), model->top_k, static_cast<long long>(model->expert_hidden()),
        double(compute::ParameterLayout(*model).active()));
  std::printf(
      "cluster: %d node%s x %d devices, %s each (%s); peak %s FLOP/s per device (%s) at MFU %s; memory %s/s "
      "(%s); links %s/s in a node, %s/s between nodes\n",
      cluster.nodes, cluster.nodes == 1 ? "" : "s", cluster.devices_per_node,
      schedules::format_bytes(cluster.device_memory).c_str(), memory_source.c_str(), figure(cluster.peak_flops).c_str(),
      peak_source.c_str(), figure(cluster.mfu).c_str(), schedules::format_bytes(cluster.memory_bandwidth).c_str(),
      memory_bw_source.c_str(), schedules::format_bytes(cluster.intra_bandwidth).c_str(),
      schedules::format_bytes(cluster.inter_bandwidth).c_str());
  std::printf(
      "step: global batch %d x %d tokens; precision %s: %g weight + %g gradient + %g optimizer bytes per "
      "parameter, %g-byte activations%s%s%s\n",
      workload.global_batch, workload.seq_len, std::string(to_string(*precision)).c_str(), bytes.weight, bytes.gradient,
      bytes.optimizer, bytes.activation,
      bytes.stored_activation < bytes.activation ? " (2 bytes for what the slots keep)" : "",
      bytes.operand > 0 ? ", 2-byte copies of the largest products' operands" : "",
      bytes.as_troupe_runs ? " (as Troupe trains today)" : "");
  if (!speeds->empty())
    std::printf(
        "stage speeds %s: pipelines of %zu stages only, each stage's compute over its speed; \"by speed\" "
        "splits the layers so, the others by parameters\n",
        o.stage_speeds.c_str(), speeds->size());
  std::printf("%zu layouts: %zu fit, %zu do not\n", plan->feasible.size() + plan->rejected.size(),
              plan->feasible.size(), plan->rejected.size());

  const double tokens_per_step = double(workload.global_batch) * workload.seq_len;
  const std::size_t top = std::size_t(o.top);
  if (!plan->feasible.empty())
    std::printf("\nfit, fastest first (%zu of %zu):\n", std::min(top, plan->feasible.size()), plan->feasible.size());
  for (std::size_t i = 0; i < plan->feasible.size() && i < top; ++i)
    print_layout(int(i + 1), plan->feasible[i], tokens_per_step);
  if (!plan->rejected.empty())
    std::printf("\ndo not fit, least memory first (%zu of %zu):\n", std::min(top, plan->rejected.size()),
                plan->rejected.size());
  for (std::size_t i = 0; i < plan->rejected.size() && i < top; ++i) {
    std::printf("  %s\n", plan->rejected[i].rejected.c_str());
    print_memory(plan->rejected[i].memory);
  }
  std::fflush(stdout);
  return to_int(ExitCode::success);
}

Command add_plan_command(CLI::App& app) {
  auto options = std::make_shared<PlanOptions>();
  CLI::App* command = app.add_subcommand(
      "plan",
      "Every dp x tp x pp x cp x ep x zero x recompute layout of a model on a cluster: memory, traffic, step time.");
  ModelOptions& model = options->model;
  command->add_option("--model.preset", model.preset, "model preset; the dimension flags replace its figures")
      ->capture_default_str();
  command->add_option("--model.n_layer", model.n_layer, "transformer blocks");
  command->add_option("--model.n_embd", model.n_embd, "channels");
  command->add_option("--model.n_head", model.n_head, "attention heads");
  command->add_option("--model.block_size", model.block_size, "longest sequence");
  command->add_option("--model.vocab_size", model.vocab_size, "vocabulary");
  command->add_option("--model.experts", model.experts, "experts per MoE block (0: a dense model)");
  command->add_option("--model.top_k", model.top_k, "experts each token reaches");
  command->add_option("--model.moe_every", model.moe_every, "an MoE block every n-th block, dense between");
  command->add_option("--model.shared_experts", model.shared_experts, "always-on experts beside them (0 or 1)");
  command->add_option("--model.expert_width", model.expert_width, "an expert's hidden width (0: 4 x n_embd)");
  command->add_option("--nodes", options->nodes, "machines (default: 1)");
  command
      ->add_option("--hostfile", options->host_file,
                   "nodes and devices from a host file: its hosts, each with its slots")
      ->type_name("FILE");
  command->add_option("--devices-per-node", options->devices_per_node,
                      "devices (ranks) per machine (default: this machine's cores)");
  command
      ->add_option("--device-memory", options->device_memory,
                   "memory per device, as 80GB or 512MiB (default: this machine's available memory / devices)")
      ->type_name("SIZE");
  command->add_option("--peak-flops", options->peak_flops,
                      "peak FLOP/s per device (default: one thread's sgemm peak, measured at start)");
  command->add_option("--memory-bw", options->memory_bw,
                      "bytes/s between a device's memory and its cores, for the micro-batch gradient sums (default: "
                      "one thread's copy bandwidth, measured at start)");
  command->add_option("--mfu", options->mfu, "share of the peak the model's FLOPs reach")->capture_default_str();
  command->add_option("--intra-bw", options->intra_bw, "bytes/s per device inside a node (bus bandwidth)")
      ->capture_default_str();
  command->add_option("--inter-bw", options->inter_bw, "bytes/s per device between nodes")->capture_default_str();
  command->add_option("--global-batch", options->global_batch, "sequences per optimizer step")->capture_default_str();
  command->add_option("--seq", options->seq, "tokens per sequence (default: the model's block size)");
  command
      ->add_option("--context-shards", options->context_shards,
                   "the most context shards per replica planned, each sequence split over them (1: none)")
      ->capture_default_str();
  command
      ->add_option("--precision", options->precision,
                   "fp32 or bf16 (as Troupe trains: 4+4+8, bf16 the products' operand copies too), mixed (2+2+12) "
                   "or mixed-fp32-grads (2+4+12)")
      ->capture_default_str();
  command
      ->add_option("--stage-speeds", options->stage_speeds,
                   "relative speed of each pipeline stage, comma-separated (1,0.5): plans pipelines of that many "
                   "stages, split by parameters and by speed")
      ->type_name("LIST");
  command->add_option("--top", options->top, "layouts listed that fit, and that do not")->capture_default_str();
  return refusing_unknown(*command, [options] { return run_plan(*options); });
}

}  // namespace troupe::apps
