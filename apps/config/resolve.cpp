#include "apps/config/resolve.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "apps/config/speeds.hpp"
#include "apps/config/value.hpp"
#include "checkpoint/import_gpt2.hpp"
#include "comm/compression.hpp"
#include "compute/check.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/model/tensor_shard.hpp"
#include "compute/train/balance.hpp"
#include "monitor/log.hpp"
#include "schedules/generate.hpp"

namespace troupe::apps {
namespace {

// Numbers in messages read as the user would write them: 0.001, not 0.001000.
template <typename Number>
std::string str(Number value) {
  if constexpr (std::is_floating_point_v<Number>)
    return format_number(value);
  else
    return std::to_string(value);
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ", ") + name;
  return out;
}


// With init.from the model is the folder's (its config.json); a model key given another value
// is a mistake, named, not a silent choice between the two.
Expected<compute::GPTConfig> initial_model(const ModelOptions& options, const std::string& from) {
  auto model = checkpoint::read_hf_gpt2_config(from);
  if (!model) return Error{"init.from: " + model.error().message};
  const std::tuple<const char*, int, int> given[] = {{"model.n_layer", options.n_layer, model->n_layer},
                                                     {"model.n_embd", options.n_embd, model->n_embd},
                                                     {"model.n_head", options.n_head, model->n_head},
                                                     {"model.block_size", options.block_size, model->block_size},
                                                     {"model.vocab_size", options.vocab_size, model->vocab_size}};
  for (const auto& [key, value, folder] : given)
    if (value > 0 && value != folder)
      return Error{std::string(key) + " " + str(value) + " differs from the " + str(folder) + " of init.from " + from +
                   "/config.json; leave the model keys out"};
  return model;
}

// The first problem with DiLoCo's keys: counts out of range, or a layout its islands do not take yet.
std::optional<std::string> diloco_problem(const JobConfig& c, const compute::GPTConfig& model) {
  const TrainOptions& t = c.train;
  if (t.islands < 1) return "train.islands must be at least 1, got " + str(t.islands);
  if (t.diloco_steps < 1) return "train.diloco_steps must be at least 1, got " + str(t.diloco_steps);
  if (!(t.outer_lr > 0)) return "train.outer_lr must be positive, got " + str(t.outer_lr);
  if (!(t.outer_momentum >= 0 && t.outer_momentum < 1))
    return "train.outer_momentum must be in [0, 1), got " + str(t.outer_momentum);
  if (t.diloco_fragments < 1) return "train.diloco_fragments must be at least 1, got " + str(t.diloco_fragments);
  if (t.diloco_fragments > model.n_layer)
    return "train.diloco_fragments " + str(t.diloco_fragments) + " exceeds the model's " + str(model.n_layer) +
           " blocks";
  if (t.diloco_fragments > t.diloco_steps)
    return "train.diloco_fragments " + str(t.diloco_fragments) + " exceeds train.diloco_steps " + str(t.diloco_steps) +
           ": each fragment needs its own step";
  if (t.diloco_overlap < 0 || t.diloco_overlap >= t.diloco_steps / t.diloco_fragments)
    return "train.diloco_overlap must be in [0, train.diloco_steps / train.diloco_fragments = " +
           str(t.diloco_steps / t.diloco_fragments) + "), got " + str(t.diloco_overlap);
  if (t.sync != compute::SyncMode::diloco) {
    if (t.islands > 1) return "train.islands " + str(t.islands) + " needs train.sync diloco";
    if (t.diloco_fragments > 1) return "train.diloco_fragments " + str(t.diloco_fragments) + " needs train.sync diloco";
    return std::nullopt;
  }
  const std::pair<bool, const char*> not_yet[] = {{c.expert.shards > 1, "expert.shards > 1"},
                                                  {c.comm.compress != comm::Compression::none, "comm.compress"},
                                                  {c.fault.elastic, "fault.elastic"}};
  for (const auto& [set, keys] : not_yet)
    if (set)
      return "train.sync diloco does not work with " + std::string(keys) +
             " yet: an island is data-parallel replicas (of pipeline stages, tensor shards and context shards) summing "
             "plain gradients";
  // A stage of several chunks (interleaved, ZB-V) syncs them as one buffer, one fragment; a stage of
  // one chunk or a tensor shard keeps each fragment's part in one run, a ZeRO-3 shard the part of
  // each inside it.
  if (t.backend != compute::BackendKind::cpu)
    return "train.sync diloco works with train.backend cpu only so far: the outer step runs on host memory (got '" +
           std::string(compute::backend_name(t.backend)) + "')";
  return std::nullopt;
}

// The first problem with train.balance and train.replica_speeds: a speed that is not a positive
// number, or a layout whose replicas cannot take uneven shares yet (docs/balance.md).
std::optional<std::string> balance_problem(const JobConfig& c, const compute::GPTConfig& model) {
  const TrainOptions& t = c.train;
  auto speeds = parse_speeds("train.replica_speeds", t.replica_speeds, "a replica");
  if (!speeds) return speeds.error().message;
  for (double speed : *speeds)
    if (!(speed > 0) || !std::isfinite(speed))
      return "train.replica_speeds '" + t.replica_speeds + "': every speed must be a positive number";
  if (t.balance_window < 1) return "train.balance_window must be at least 1, got " + str(t.balance_window);
  if (t.balance == compute::BalanceMode::none) {
    if (!speeds->empty())
      return "train.replica_speeds '" + t.replica_speeds + "' needs train.balance static or dynamic";
    return std::nullopt;
  }
  const bool dynamic = t.balance == compute::BalanceMode::dynamic;
  if (c.expert.shards > 1)
    return "train.balance " + std::string(compute::balance_mode_name(t.balance)) +
           " does not work with expert.shards > 1 yet: uneven shares are data-parallel replicas (of pipeline "
           "stages, tensor or context shards too) summing their gradients every step";
  // Under ZeRO-3 a replica of whole models runs its whole share as one batch (compute/train/trainer.hpp).
  if (compute::shards_parameters(t.zero) && c.pipeline.stages == 1 && c.tensor.shards == 1 && model.experts > 0)
    return "train.balance " + std::string(compute::balance_mode_name(t.balance)) +
           " does not work with train.zero 3 on a model with experts: a replica runs its share as one batch, "
           "whose routing losses would not be its micro-batches'";
  // Each replica's pipeline runs its share: the schedule must take that many micro-batches.
  const PipelineOptions& p = c.pipeline;
  if (dynamic && p.stages > 1 && p.schedule == schedules::ScheduleKind::interleaved)
    return "train.balance dynamic does not work with pipeline.schedule interleaved: its shares move by one "
           "micro-batch, and interleaving runs only multiples of pipeline.stages (use static, or another schedule)";
  if (p.stages > 1 && !speeds->empty()) {
    auto shares = compute::proportional_shares(p.microbatches * static_cast<int>(speeds->size()), *speeds);
    if (!shares) return "train.replica_speeds '" + t.replica_speeds + "': " + shares.error().message;
    for (std::size_t r = 0; r < shares->size(); ++r)
      if (Status shape = schedules::check_schedule_shape(p.schedule, p.stages, (*shares)[r], p.virtual_stages); !shape)
        return "train.balance " + std::string(compute::balance_mode_name(t.balance)) + ": replica " +
               str(static_cast<int>(r)) + "'s share of " + str((*shares)[r]) +
               " micro-batches: " + shape.error().message;
  }
  return std::nullopt;
}

// The first problem with the train, data and sample keys, given the resolved model.
std::optional<std::string> problem_with(const JobConfig& c, const compute::GPTConfig& model) {
  const TrainOptions& t = c.train;
  const std::string backend(compute::backend_name(t.backend));
  if (t.steps <= 0) return "train.steps must be positive, got " + str(t.steps);
  if (t.batch_size <= 0) return "train.batch_size must be positive, got " + str(t.batch_size);
  if (t.seq_len < 0) return "train.seq_len must be positive (or 0 for model.block_size), got " + str(t.seq_len);
  if (t.seq_len > model.block_size)
    return "train.seq_len " + str(t.seq_len) + " exceeds model.block_size " + str(model.block_size);
  if (Status counts = compute::check_element_counts(model, t.batch_size, t.seq_len > 0 ? t.seq_len : model.block_size);
      !counts)
    return counts.error().message;
  if (t.grad_accum <= 0) return "train.grad_accum must be positive, got " + str(t.grad_accum);
  if (!(t.lr > 0)) return "train.lr must be positive, got " + str(t.lr);
  if (!(t.min_lr >= 0)) return "train.min_lr must not be negative, got " + str(t.min_lr);
  if (t.min_lr > t.lr) return "train.min_lr " + str(t.min_lr) + " exceeds train.lr " + str(t.lr);
  if (t.warmup_steps < 0) return "train.warmup_steps must not be negative, got " + str(t.warmup_steps);
  if (!(t.beta1 >= 0 && t.beta1 < 1)) return "train.beta1 must be in [0, 1), got " + str(t.beta1);
  if (!(t.beta2 >= 0 && t.beta2 < 1)) return "train.beta2 must be in [0, 1), got " + str(t.beta2);
  if (!(t.eps > 0)) return "train.eps must be positive, got " + str(t.eps);
  if (!(t.weight_decay >= 0)) return "train.weight_decay must not be negative, got " + str(t.weight_decay);
  if (!(t.grad_clip >= 0)) return "train.grad_clip must not be negative (0 = off), got " + str(t.grad_clip);
  if (t.threads < 0) return "train.threads must not be negative (0 = all cores), got " + str(t.threads);
  if (t.precision != compute::Precision::fp32 && t.backend == compute::BackendKind::sim)
    return "train.precision " + std::string(compute::precision_name(t.precision)) +
           " works with train.backend cpu or cuda: the sim backend models fp32 products only";
  if (compute::on_device(t.backend) && compute::shards_optimizer_state(t.zero))
    return "train.zero " + std::to_string(compute::zero_number(t.zero)) +
           " works with train.backend cpu only so far: ZeRO over NCCL is not wired; use 0";
  if (t.val_every < 0) return "train.val_every must not be negative (0 = only at the end), got " + str(t.val_every);
  if (t.val_batches <= 0) return "train.val_batches must be positive, got " + str(t.val_batches);
  if (t.log_every <= 0) return "train.log_every must be positive, got " + str(t.log_every);

  const DataOptions& d = c.data;
  if (d.train_tokens.empty() && d.corpus.empty()) return "data.corpus is empty and data.train_tokens is not set";
  if (d.train_tokens.empty() && !d.val_tokens.empty())
    return "data.val_tokens '" + d.val_tokens + "' needs data.train_tokens as well";
  if (!d.tokenizer.empty() && !d.train_tokens.empty())
    return "data.tokenizer '" + d.tokenizer + "' tokenizes data.corpus; data.train_tokens holds tokens already";
  if (d.train_tokens.empty() && d.tokenizer.empty() && model.vocab_size < 256)
    return "model.vocab_size " + str(model.vocab_size) + " is too small for the byte tokens of data.corpus (256)";
  if (!(d.val_fraction > 0 && d.val_fraction < 1))
    return "data.val_fraction must be in (0, 1), got " + str(d.val_fraction);

  const SampleOptions& s = c.sample;
  if (s.tokens < 0) return "sample.tokens must not be negative (0 = no sample), got " + str(s.tokens);
  if (!(s.temperature > 0)) return "sample.temperature must be positive, got " + str(s.temperature);
  if (s.top_k < 0) return "sample.top_k must not be negative (0 = all tokens), got " + str(s.top_k);
  if (s.top_k > model.vocab_size)
    return "sample.top_k " + str(s.top_k) + " exceeds model.vocab_size " + str(model.vocab_size);

  if (model.experts > 0) {
    if (!(t.moe_aux_coef >= 0)) return "train.moe_aux_coef must not be negative, got " + str(t.moe_aux_coef);
    if (!(t.moe_z_coef >= 0)) return "train.moe_z_coef must not be negative, got " + str(t.moe_z_coef);
    if (t.backend != compute::BackendKind::cpu)
      return "model.experts works with train.backend cpu only so far: the router and the token dispatch run on host "
             "memory (got '" +
             backend + "')";
  }
  const int ep = c.expert.shards;
  if (ep < 1) return "expert.shards must be at least 1 (1 = none), got " + str(ep);
  if (ep > 1) {
    if (model.experts == 0) return "expert.shards " + str(ep) + " needs a model with experts (model.experts > 0)";
    if (model.experts % ep != 0)
      return "expert.shards " + str(ep) + " does not divide model.experts " + str(model.experts) +
             " (each rank holds as many experts)";
    // A rank holds only its experts: ZeRO 1 to 3 shard its experts over the ranks holding them.
    if (c.context.shards > 1)
      return "expert.shards > 1 does not work with context.shards > 1 yet: an expert group is made of data "
             "replicas, not of a replica's context shards (use expert.shards 1: every context shard then holds every "
             "expert)";
    if (c.fault.elastic)
      return "expert.shards > 1 does not work with fault.elastic yet: an expert group keeps its " + str(ep) +
             " ranks, and a shrink or grow moves single ranks";
  }

  const PipelineOptions& p = c.pipeline;
  if (Status shape = schedules::check_schedule_shape(p.schedule, p.stages, p.microbatches, p.virtual_stages); !shape)
    return "pipeline: " + shape.error().message;
  if (p.split == compute::SplitMethod::balanced && !p.stage_speeds.empty())
    return "pipeline.stage_speeds '" + p.stage_speeds +
           "' is read only with pipeline.split speed (balanced splits the layers by parameters)";
  if (p.split == compute::SplitMethod::speed && p.stage_speeds.empty())
    return "pipeline.split speed needs pipeline.stage_speeds, one relative speed a stage (1,0.5: the second at half "
           "speed)";
  auto speeds = parse_speeds("pipeline.stage_speeds", p.stage_speeds);
  if (!speeds) return speeds.error().message;
  if (!speeds->empty() && p.stages < 2)
    return "pipeline.stage_speeds '" + p.stage_speeds + "' needs pipeline.stages > 1 (one speed a stage)";
  if (p.stages > 1 || p.virtual_stages > 1) {
    auto split = compute::split_for_pipeline(model, p.stages, p.virtual_stages, *speeds,
                                             t.seq_len > 0 ? t.seq_len : model.block_size);
    if (!split) return "pipeline: " + split.error().message;
    if (compute::on_device(t.backend))
      return "pipeline.stages > 1 works with train.backend cpu only so far: pipeline transfers over NCCL are not wired "
             "(got '" +
             backend + "')";
    if (t.grad_accum != 1)
      return "train.grad_accum must be 1 with pipeline.stages > 1 (pipeline.microbatches accumulates), got " +
             str(t.grad_accum);
  }

  const TensorOptions& tp = c.tensor;
  if (Status shards = compute::check_tensor_shards(model, tp.shards); !shards) return shards.error().message;
  if (tp.shards > 1) {
    if (compute::on_device(t.backend))
      return "tensor.shards > 1 works with train.backend cpu only so far: the vocabulary-shard kernels and the shard "
             "sums over NCCL are not built (got '" +
             backend + "')";
  }
  if (tp.sequence_parallel) {
    const int seq_len = t.seq_len > 0 ? t.seq_len : model.block_size;
    if (tp.shards == 1) return "tensor.sequence_parallel needs tensor.shards > 1";
    if (seq_len % tp.shards != 0)
      return "tensor.sequence_parallel splits train.seq_len " + str(seq_len) + " over tensor.shards " +
             str(tp.shards) + ", which does not divide it";
    if (compute::shards_parameters(t.zero))
      return "train.zero 3 is not supported with tensor.sequence_parallel yet; use 0";
  }

  const ContextOptions& cp = c.context;
  if (cp.shards < 1) return "context.shards must be at least 1 (1 = none), got " + str(cp.shards);
  if (cp.shards > 1) {
    const int seq_len = t.seq_len > 0 ? t.seq_len : model.block_size;
    if (seq_len % (2 * cp.shards) != 0)
      return "train.seq_len " + str(seq_len) + " does not split into 2 x context.shards = " + str(2 * cp.shards) +
             " equal chunks (the causal load-balanced split; train.seq_len 0 is model.block_size)";
    if (cp.method == compute::context::ContextMethod::all_to_all && tp.shards == 1 && model.n_head % cp.shards != 0)
      return "context.method all_to_all needs context.shards " + str(cp.shards) + " to divide model.n_head " +
             str(model.n_head);
    if (cp.method == compute::context::ContextMethod::all_to_all && (model.n_head / tp.shards) % cp.shards != 0)
      return "context.method all_to_all needs context.shards " + str(cp.shards) +
             " to divide a tensor shard's heads, model.n_head " + str(model.n_head) + " / tensor.shards " +
             str(tp.shards) + " = " + str(model.n_head / tp.shards);
    if (tp.sequence_parallel && (seq_len / cp.shards) % tp.shards != 0)
      return "tensor.sequence_parallel splits a context shard's train.seq_len " + str(seq_len) + " / context.shards " +
             str(cp.shards) + " = " + str(seq_len / cp.shards) + " rows over tensor.shards " + str(tp.shards) +
             ", which does not divide them";
    if (t.backend != compute::BackendKind::cpu)
      return "context.shards > 1 works with train.backend cpu only so far: context attention runs on the CPU "
             "kernels (got '" +
             backend + "')";
    if (c.fault.elastic)
      return "context.shards > 1 does not work with fault.elastic yet: a context group keeps its " + str(cp.shards) +
             " ranks, and a shrink or grow moves single ranks";
  }

  const CommOptions& co = c.comm;
  const comm::Compression compression = co.compress;
  if (co.powersgd_rank < 1) return "comm.powersgd_rank must be positive, got " + str(co.powersgd_rank);
  if (co.compress_start_step < -1)
    return "comm.compress_start_step must not be negative (-1 = 10% of train.steps), got " +
           str(co.compress_start_step);
  if (compression == comm::Compression::powersgd && compute::shards_gradients(t.zero))
    return "comm.compress powersgd does not work with " + compute::zero_setting(t.zero) +
           ": ZeRO-2 and 3 sum gradient shards, not whole matrices; use comm.compress bf16 or train.zero 0 or 1";
  if (compression == comm::Compression::bf16 && compute::shards_parameters(t.zero))
    return "comm.compress bf16 does not work with train.zero 3 (its gradients move block by block); "
           "use train.zero 0, 1 or 2";
  if (compression != comm::Compression::none && compute::on_device(t.backend))
    return "comm.compress works with train.backend cpu only so far: NCCL sums device gradients as they are (got '" +
           backend + "')";
  if (compression == comm::Compression::bf16 && (p.stages > 1 || tp.shards > 1) && compute::shards_gradients(t.zero))
    return "comm.compress bf16 with pipeline.stages or tensor.shards works with train.zero 0 or 1 only, got " +
           str(compute::zero_number(t.zero));

  if (auto problem = diloco_problem(c, model)) return problem;
  if (auto problem = balance_problem(c, model)) return problem;

  const FaultOptions& f = c.fault;
  if (!(f.heartbeat_seconds > 0)) return "fault.heartbeat_seconds must be positive, got " + str(f.heartbeat_seconds);
  // One late heartbeat must not look like a hang.
  if (!(f.heartbeat_timeout >= 2 * f.heartbeat_seconds))
    return "fault.heartbeat_timeout " + str(f.heartbeat_timeout) + " must be at least twice fault.heartbeat_seconds " +
           str(f.heartbeat_seconds);
  if (!(f.step_timeout >= 0)) return "fault.step_timeout must not be negative (0 = off), got " + str(f.step_timeout);
  if (f.max_restarts < 0) return "fault.max_restarts must not be negative, got " + str(f.max_restarts);
  // The writers' commit gets five sixths of it: under a second leaves no time to write.
  if (!(f.rescue_timeout >= 1 && f.rescue_timeout <= 3600))
    return "fault.rescue_timeout must be between 1 and 3600 seconds, got " + str(f.rescue_timeout);

  const CheckpointOptions& k = c.checkpoint;
  if (k.every < 0) return "checkpoint.every must not be negative (0 = only after the last step), got " + str(k.every);
  if (k.keep_last < 1) return "checkpoint.keep_last must be at least 1, got " + str(k.keep_last);
  if (!c.init.from.empty() && k.dir.empty())
    return "init.from needs checkpoint.dir: the imported weights are written there as step 0";
  if (k.resume && k.dir.empty()) return "checkpoint.resume (--resume) needs checkpoint.dir: where are the checkpoints?";

  const MonitorOptions& mon = c.monitor;
  if (mon.metrics_port < -1 || mon.metrics_port > 65535)
    return "monitor.metrics_port must be -1 (off), 0 (any free port) or a port up to 65535, got " +
           str(mon.metrics_port);
  if (in_addr address{}; ::inet_pton(AF_INET, mon.metrics_bind.c_str(), &address) != 1)
    return "monitor.metrics_bind '" + mon.metrics_bind + "' is not an IPv4 address such as 127.0.0.1 or 0.0.0.0";
  if (!(mon.peak_flops >= 0))
    return "monitor.peak_flops must not be negative (0 = measure), got " + str(mon.peak_flops);
  if (auto levels = monitor::parse_log_levels(mon.log_level); !levels)
    return "monitor.log_level: " + levels.error().message;
  if (mon.control_port < 0 || mon.control_port > 65535)
    return "monitor.control_port must be 0 (any free port) or a port up to 65535, got " + str(mon.control_port);
  if (in_addr address{}; ::inet_pton(AF_INET, mon.control_bind.c_str(), &address) != 1)
    return "monitor.control_bind '" + mon.control_bind + "' is not an IPv4 address such as 127.0.0.1 or 0.0.0.0";
  if (mon.web_port < -1 || mon.web_port > 65535)
    return "monitor.web_port must be -1 (off), 0 (any free port) or a port up to 65535, got " + str(mon.web_port);
  return std::nullopt;
}

// The first problem with the sim.* keys: set for another backend, or a rate that is not positive.
std::optional<std::string> sim_problem(const JobConfig& c) {
  const compute::SimOptions& sim = c.sim;
  const compute::SimOptions defaults;
  const std::pair<const char*, double compute::SimOptions::*> rates[] = {
      {"sim.flops", &compute::SimOptions::flops},
      {"sim.memory_bandwidth", &compute::SimOptions::memory_bandwidth},
      {"sim.link_bandwidth_intra", &compute::SimOptions::link_bandwidth_intra},
      {"sim.link_bandwidth_inter", &compute::SimOptions::link_bandwidth_inter},
      {"sim.link_latency_intra", &compute::SimOptions::link_latency_intra},
      {"sim.link_latency_inter", &compute::SimOptions::link_latency_inter}};
  for (const auto& [key, member] : rates) {
    if (c.train.backend != compute::BackendKind::sim && sim.*member != defaults.*member)
      return std::string(key) + " is set, but train.backend is '" +
             std::string(compute::backend_name(c.train.backend)) +
             "': the sim.* keys describe the device of train.backend sim";
    const bool latency = std::string_view(key).starts_with("sim.link_latency");
    if (latency ? !(sim.*member >= 0) : !(sim.*member > 0))
      return std::string(key) + (latency ? " must not be negative, got " : " must be positive, got ") +
             str(sim.*member);
  }
  return std::nullopt;
}

}  // namespace

Expected<compute::GPTConfig> resolve_model(const ModelOptions& options) {
  auto preset = compute::gpt_preset(options.preset);
  if (!preset)
    return Error{"model.preset '" + options.preset +
                 "' is not a preset (known: " + joined(compute::gpt_preset_names()) + ")"};
  compute::GPTConfig model = *preset;
  const std::pair<const char*, int> overrides[] = {
      {"model.n_layer", options.n_layer},       {"model.n_embd", options.n_embd},
      {"model.n_head", options.n_head},         {"model.block_size", options.block_size},
      {"model.vocab_size", options.vocab_size}, {"model.top_k", options.top_k},
      {"model.moe_every", options.moe_every},   {"model.expert_width", options.expert_width}};
  for (const auto& [key, value] : overrides) {
    if (value < 0)
      return Error{std::string(key) + " must be positive (or 0 for the preset's value), got " + str(value)};
  }
  if (options.n_layer > 0) model.n_layer = options.n_layer;
  if (options.n_embd > 0) model.n_embd = options.n_embd;
  if (options.n_head > 0) model.n_head = options.n_head;
  if (options.block_size > 0) model.block_size = options.block_size;
  if (options.vocab_size > 0) model.vocab_size = options.vocab_size;
  model.padded_vocab_size = compute::padded_vocab(model.vocab_size);
  if (options.experts < -1)
    return Error{"model.experts must not be negative (0 = dense, -1 = the preset's), got " + str(options.experts)};
  if (options.shared_experts < -1)
    return Error{"model.shared_experts must be 0 or 1 (-1 = the preset's), got " + str(options.shared_experts)};
  if (options.experts >= 0) model.experts = options.experts;
  if (options.top_k > 0) model.top_k = options.top_k;
  if (options.moe_every > 0) model.moe_every = options.moe_every;
  if (options.shared_experts >= 0) model.shared_experts = options.shared_experts;
  if (options.expert_width > 0) model.expert_width = options.expert_width;
  // A dense preset given experts routes each token to two (one when there is one) unless told.
  if (model.experts > 0 && model.top_k == 0) model.top_k = std::min(2, model.experts);
  if (Status valid = compute::validate(model); !valid) return valid.error();
  return model;
}

Expected<ResolvedJob> resolve(const JobConfig& config) {
  auto model = config.init.from.empty() ? resolve_model(config.model) : initial_model(config.model, config.init.from);
  if (!model) return model.error();
  ResolvedJob job{config, *model};
  // The imported step 0 (or a later checkpoint of the fine-tune) is where every rank starts.
  if (!job.config.init.from.empty()) job.config.checkpoint.resume = true;
  if (auto problem = problem_with(job.config, job.model)) return Error{*problem};
  if (auto problem = sim_problem(job.config)) return Error{*problem};
  if (job.config.train.seq_len == 0) job.config.train.seq_len = job.model.block_size;
  if (job.config.comm.compress_start_step == -1) job.config.comm.compress_start_step = job.config.train.steps / 10;
  for (const ConfigKey& key : config_keys()) job.settings.emplace_back(key.name, format_text(job.config, key));
  const PipelineOptions& p = job.config.pipeline;
  if (p.stages > 1 || p.virtual_stages > 1 || job.config.tensor.shards > 1) {
    auto split = compute::split_for_pipeline(job.model, p.stages, p.virtual_stages,
                                             parse_speeds("pipeline.stage_speeds", p.stage_speeds).value(),
                                             job.config.train.seq_len);
    TROUPE_CHECK(split.ok(), "resolve: a checked pipeline split failed");
    job.pipeline_split = std::move(*split);
  }
  job.replica_speeds = parse_speeds("train.replica_speeds", job.config.train.replica_speeds, "a replica").value();
  return job;
}

}  // namespace troupe::apps
