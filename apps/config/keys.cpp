#include "apps/config/keys.hpp"

#include <algorithm>
#include <type_traits>

#include "apps/config/named_choice.hpp"
#include "apps/config/spelling.hpp"

namespace troupe::apps {
namespace {

// field<&JobConfig::train, &TrainOptions::steps> points a key at config.train.steps.
template <auto section, auto member>
ConfigField field(JobConfig& config) {
  return &(config.*section.*member);
}

using J = JobConfig;
using M = ModelOptions;
using T = TrainOptions;
using D = DataOptions;
using I = InitOptions;
using S = SampleOptions;
using F = FaultOptions;
using P = PipelineOptions;
using Tp = TensorOptions;
using Cp = ContextOptions;
using Ep = ExpertOptions;
using Co = CommOptions;
using C = CheckpointOptions;
using Mon = MonitorOptions;
using Sim = compute::SimOptions;

constexpr ConfigKey keys[] = {
    {"model.preset",
     "architecture preset: nano, tiny, small, moe-tiny, moe-small, gpt2, gpt2-medium, gpt2-large, gpt2-xl, gpt3-1.3b, "
     "gpt3-2.7b, gpt3-6.7b or gpt3-13b; the model keys below override it",
     field<&J::model, &M::preset>},
    {"model.n_layer", "transformer blocks; 0 = the preset's", field<&J::model, &M::n_layer>},
    {"model.n_embd", "channels C; 0 = the preset's", field<&J::model, &M::n_embd>},
    {"model.n_head", "attention heads NH, must divide n_embd; 0 = the preset's", field<&J::model, &M::n_head>},
    {"model.block_size", "longest sequence the model accepts; 0 = the preset's", field<&J::model, &M::block_size>},
    {"model.vocab_size", "vocabulary V (padded to a multiple of 128 above 256); 0 = the preset's",
     field<&J::model, &M::vocab_size>},
    {"model.experts", "experts E of each mixture-of-experts MLP (docs/moe.md); 0 = a dense model, -1 = the preset's",
     field<&J::model, &M::experts>},
    {"model.top_k", "experts each token is routed to, 1 to model.experts; 0 = the preset's",
     field<&J::model, &M::top_k>},
    {"model.moe_every", "the mixture-of-experts MLP in every n-th block, dense MLPs elsewhere; 0 = the preset's",
     field<&J::model, &M::moe_every>},
    {"model.shared_experts", "always-on experts beside the routed ones, 0 or 1; -1 = the preset's",
     field<&J::model, &M::shared_experts>},
    {"model.expert_width",
     "hidden width of each expert's MLP (a dense MLP's is 4 x n_embd; narrower experts with a larger top_k are "
     "fine-grained experts); 0 = the preset's",
     field<&J::model, &M::expert_width>},
    {"init.from",
     "Hugging Face GPT-2 folder to start from (config.json, safetensors); its config replaces the model keys and it "
     "is written into checkpoint.dir as step 0 when that holds no checkpoint; empty = random weights",
     field<&J::init, &I::from>},

    {"train.steps", "optimizer steps", field<&J::train, &T::steps>},
    {"train.batch_size", "micro-batch B per worker", field<&J::train, &T::batch_size>},
    {"train.seq_len", "sequence length T; 0 = model.block_size", field<&J::train, &T::seq_len>},
    {"train.grad_accum", "micro-batches per optimizer step", field<&J::train, &T::grad_accum>},
    {"train.lr", "peak learning rate, reached after warmup", field<&J::train, &T::lr>},
    {"train.min_lr", "learning rate the cosine schedule decays to", field<&J::train, &T::min_lr>},
    {"train.warmup_steps", "steps of linear learning-rate warmup", field<&J::train, &T::warmup_steps>},
    {"train.beta1", "AdamW first-moment decay", field<&J::train, &T::beta1>},
    {"train.beta2", "AdamW second-moment decay", field<&J::train, &T::beta2>},
    {"train.eps", "AdamW epsilon", field<&J::train, &T::eps>},
    {"train.weight_decay", "AdamW decoupled weight decay", field<&J::train, &T::weight_decay>},
    {"train.grad_clip", "clip the global gradient norm to this; 0 = off", field<&J::train, &T::grad_clip>},
    {"train.moe_aux_coef", "weight of each mixture-of-experts block's load-balancing loss in the objective",
     field<&J::train, &T::moe_aux_coef>},
    {"train.moe_z_coef", "weight of each mixture-of-experts block's router z-loss in the objective",
     field<&J::train, &T::moe_z_coef>},
    {"train.zero", "ZeRO stage with --workers/launch: 0 off, 1 shard AdamW state, 2 also gradients, 3 also parameters",
     field<&J::train, &T::zero>},
    {"train.zero3_reshard",
     "ZeRO-3: free each block's gathered parameters after its forward (false keeps them for backward)",
     field<&J::train, &T::zero3_reshard>},
    {"train.recompute", "activations recomputed in backward instead of kept: none, selective or full",
     field<&J::train, &T::recompute>},
    {"train.sync",
     "how replicas keep their weights together: allreduce (gradients summed every step) or diloco (islands sum "
     "inside every step and average their pseudo-gradients every train.diloco_steps with an outer Nesterov step)",
     field<&J::train, &T::sync>},
    {"train.islands",
     "DiLoCo's islands K, each of N/K consecutive data-parallel replicas (whole models, or pipeline stages and "
     "tensor shards, under ZeRO 0 to 2); 1 = one island",
     field<&J::train, &T::islands>},
    {"train.diloco_steps", "DiLoCo: inner steps H between outer syncs", field<&J::train, &T::diloco_steps>},
    {"train.outer_lr", "DiLoCo: the outer step's learning rate", field<&J::train, &T::outer_lr>},
    {"train.outer_momentum", "DiLoCo: the outer step's Nesterov momentum", field<&J::train, &T::outer_momentum>},
    {"train.diloco_precision",
     "DiLoCo: the pseudo-gradients' sum over the islands in f32, bf16, or int8 (blocks of 256 with a scale each)",
     field<&J::train, &T::diloco_precision>},
    {"train.diloco_fragments",
     "Streaming DiLoCo: fragments F of consecutive blocks, each synced every H steps at staggered steps; 1 = the "
     "whole model at once",
     field<&J::train, &T::diloco_fragments>},
    {"train.diloco_overlap",
     "Streaming DiLoCo: inner steps d a fragment's sum is in flight before it is applied; 0 = applied at once",
     field<&J::train, &T::diloco_overlap>},
    {"train.balance",
     "data-parallel shares of each step's global batch: none (even), static (in proportion to "
     "train.replica_speeds, or the host file's speed= per line) or dynamic (starting as static, following each "
     "replica's measured time per micro-batch)",
     field<&J::train, &T::balance>},
    {"train.replica_speeds",
     "train.balance static (and dynamic, its first shares): each data-parallel replica's relative speed, "
     "comma-separated (1,0.5); empty = the host file's speed= of each rank's line",
     field<&J::train, &T::replica_speeds>},
    {"train.balance_window",
     "train.balance dynamic: steps each replica's time per micro-batch is averaged over, and the fewest steps "
     "between two changes of the shares",
     field<&J::train, &T::balance_window>},
    {"train.seed", "random seed for initialization and data order", field<&J::train, &T::seed>},
    {"train.threads", "CPU threads per worker; 0 = all cores", field<&J::train, &T::threads>},
    {"train.backend",
     "compute backend: cpu, cuda, or sim (ops take the modelled time of the sim.* device and do no arithmetic); "
     "cuda-bf16 is read as cuda with train.precision bf16",
     field<&J::train, &T::backend>},
    {"train.precision",
     "the linear layers' products: fp32, or bf16 (operands rounded to bf16, f32 accumulation; weights, gradients, "
     "AdamW moments and checkpoints stay f32; docs/precision.md)",
     field<&J::train, &T::precision>},
    {"train.val_every", "validate every this many steps; 0 = only at the end", field<&J::train, &T::val_every>},
    {"train.val_batches",
     "validation set in global batches: the first val_batches x (sequences per step) windows of the validation "
     "tokens, the same in every layout",
     field<&J::train, &T::val_batches>},
    {"train.log_every", "print a training line every this many steps", field<&J::train, &T::log_every>},

    {"data.corpus", "text file or directory of text files, tokenized as bytes", field<&J::data, &D::corpus>},
    {"data.tokenizer",
     "Hugging Face tokenizer.json (byte-level BPE): data.corpus and the sample in its tokens; empty = byte tokens",
     field<&J::data, &D::tokenizer>},
    {"data.train_tokens", "llm.c .bin token file; when set, replaces data.corpus", field<&J::data, &D::train_tokens>},
    {"data.val_tokens", "llm.c .bin token file for validation; empty = split off the training tokens",
     field<&J::data, &D::val_tokens>},
    {"data.val_fraction", "share of the tokens held out for validation when data.val_tokens is empty",
     field<&J::data, &D::val_fraction>},

    {"sample.tokens", "tokens to generate after training; 0 = no sample", field<&J::sample, &S::tokens>},
    {"sample.temperature", "sampling temperature", field<&J::sample, &S::temperature>},
    {"sample.top_k", "sample among the k most likely tokens; 0 = all", field<&J::sample, &S::top_k>},
    {"sample.prompt", "text the sample continues", field<&J::sample, &S::prompt>},

    {"pipeline.stages", "pipeline stages p per data-parallel replica; 1 = no pipeline (workers = dp x p)",
     field<&J::pipeline, &P::stages>},
    {"pipeline.microbatches", "micro-batches m per step, each of train.batch_size sequences",
     field<&J::pipeline, &P::microbatches>},
    {"pipeline.schedule", "gpipe, 1f1b, interleaved, zb-h1 or zb-v (zero bubble: backward split into B and W)",
     field<&J::pipeline, &P::schedule>},
    {"pipeline.virtual_stages", "model chunks v per stage; more than 1 only with interleaved, and 2 with zb-v",
     field<&J::pipeline, &P::virtual_stages>},
    {"pipeline.split",
     "balanced (layers split by parameters) or speed (by pipeline.stage_speeds: every stage's model FLOPs over its "
     "speed even)",
     field<&J::pipeline, &P::split>},
    {"pipeline.stage_speeds",
     "with pipeline.split speed: relative speed of each stage, comma-separated (1,0.5: the second at half speed)",
     field<&J::pipeline, &P::stage_speeds>},
    {"pipeline.trace",
     "file for a Chrome trace (Perfetto) of every stage's forward, backward, waits and sends (with context shards "
     "alone: every rank's ring shifts and all-to-alls; under train.sync diloco without stages or tensor shards: "
     "every rank's steps and outer syncs, with them: each rank's outer syncs beside its stage's ops), written at the "
     "end; empty = none",
     field<&J::pipeline, &P::trace>},

    {"tensor.shards",
     "tensor shards T per pipeline stage: heads, MLP width and vocabulary split over T neighbouring ranks; "
     "1 = none (workers = dp x p x T)",
     field<&J::tensor, &Tp::shards>},
    {"tensor.sequence_parallel",
     "with tensor.shards > 1: the residual stream and LayerNorms hold 1/T of the sequence; sums become "
     "reduce-scatter + all-gather",
     field<&J::tensor, &Tp::sequence_parallel>},

    {"context.shards",
     "context shards C per data replica: each sequence's positions split over C neighbouring ranks (causal "
     "load-balanced chunks), attention joined by context.method; 1 = none (workers = dp x C)",
     field<&J::context, &Cp::shards>},
    {"context.method",
     "ring (K/V blocks travel around the context group) or all_to_all (heads exchanged; C must divide "
     "model.n_head)",
     field<&J::context, &Cp::method>},
    {"expert.shards",
     "expert shards EP: each mixture-of-experts block's experts split over EP consecutive data-parallel ranks, "
     "tokens exchanged by all-to-all (docs/moe.md); 1 = none",
     field<&J::expert, &Ep::shards>},

    {"comm.compress",
     "gradients summed over the data-parallel group as they are (none), as bfloat16 (bf16), or as rank-r factors with "
     "error feedback (powersgd)",
     field<&J::comm, &Co::compress>},
    {"comm.powersgd_rank", "columns r of PowerSGD's factors P and Q", field<&J::comm, &Co::powersgd_rank>},
    {"comm.compress_start_step", "steps summed plain before compression starts; -1 = 10% of train.steps",
     field<&J::comm, &Co::compress_start_step>},

    {"fault.heartbeat_seconds", "seconds between a node's heartbeats to the job",
     field<&J::fault, &F::heartbeat_seconds>},
    {"fault.heartbeat_timeout", "seconds of silence after which a node counts as lost (unreachable, stopped or hung)",
     field<&J::fault, &F::heartbeat_timeout>},
    {"fault.step_timeout",
     "seconds a worker may go without finishing a step or validation before the job stops, naming what it waits for; "
     "0 = off",
     field<&J::fault, &F::step_timeout>},
    {"fault.max_restarts",
     "times a job with checkpoint.dir restarts every node from the newest checkpoint after a node fails or is lost",
     field<&J::fault, &F::max_restarts>},
    {"fault.elastic",
     "when the restart budget is spent or a node cannot come back, go on without it (fewer data-parallel replicas, "
     "the same global batch) instead of stopping",
     field<&J::fault, &F::elastic>},
    {"fault.rescue_timeout",
     "seconds (1 to 3600) the job waits for the survivors' rescue snapshot after a node fails or is lost; the writers "
     "commit within five sixths of it, and the survivors are held 5 s longer",
     field<&J::fault, &F::rescue_timeout>},
    {"fault.recovery",
     "in_place: respawn only what failed, its state from a surviving replica over the data plane (without one, every "
     "rank rolls back to the newest checkpoint), where that applies, else restart; restart: every node restarts from "
     "the rescue snapshot or newest checkpoint",
     field<&J::fault, &F::recovery>},

    {"checkpoint.dir", "folder of the job's checkpoints (step-NNNNNNN/ inside); empty = none",
     field<&J::checkpoint, &C::dir>},
    {"checkpoint.every", "save after every N steps; 0 = only after the last step", field<&J::checkpoint, &C::every>},
    {"checkpoint.keep_last", "committed checkpoints to keep; older ones are removed",
     field<&J::checkpoint, &C::keep_last>},
    {"checkpoint.async", "snapshot to memory and write in the background while training goes on",
     field<&J::checkpoint, &C::async>},
    {"checkpoint.resume",
     "start from the newest valid checkpoint in checkpoint.dir, data position included (--resume); none = a fresh "
     "start",
     field<&J::checkpoint, &C::resume>},

    {"monitor.metrics_port",
     "port of the Prometheus /metrics endpoint; 0 = any free port, -1 = off; node i of a job listens on this + i",
     field<&J::monitor, &Mon::metrics_port>},
    {"monitor.metrics_bind", "IPv4 address the /metrics endpoint listens on; 0.0.0.0 = every interface",
     field<&J::monitor, &Mon::metrics_bind>},
    {"monitor.peak_flops", "a rank's peak FLOP/s, the denominator of troupe_mfu; 0 = measure OpenBLAS sgemm at start",
     field<&J::monitor, &Mon::peak_flops>},
    {"monitor.log_dir",
     "each node process also logs to DIR/JOB/node-I.log; auto = checkpoint.dir/logs, or troupe-logs without "
     "checkpoint.dir; empty = no file",
     field<&J::monitor, &Mon::log_dir>},
    {"monitor.log_format", "format of the log file: text, or json (one JSON object a line); the console is text",
     field<&J::monitor, &Mon::log_format>},
    {"monitor.log_level",
     "log level of every subsystem, then SUBSYSTEM=LEVEL overrides, e.g. info or warn,comm=debug (docs/logging.md)",
     field<&J::monitor, &Mon::log_level>},
    {"monitor.control_port",
     "port of the monitor actor that `troupe shell` attaches to; 0 = any free port (printed); kept across restarts",
     field<&J::monitor, &Mon::control_port>},
    {"monitor.control_bind", "IPv4 address the shell's control port listens on; 0.0.0.0 = every interface",
     field<&J::monitor, &Mon::control_bind>},
    {"monitor.web_port",
     "port of the job's web page and job-level /metrics (on monitor.control_bind, behind the control token); 0 = any "
     "free port (printed), -1 = off",
     field<&J::monitor, &Mon::web_port>},
    {"monitor.tensorboard_dir",
     "folder of TensorBoard event files: DIR/rank-R/ per rank (rank 0 with the training curves), DIR/job/ the job's "
     "failures and recoveries as text; empty = none",
     field<&J::monitor, &Mon::tensorboard_dir>},

    {"sim.flops",
     "train.backend sim: a rank's FLOP/s; an op takes the longer of its FLOPs and its bytes at these rates",
     field<&J::sim, &Sim::flops>},
    {"sim.memory_bandwidth", "train.backend sim: bytes/s between a rank's memory and its cores",
     field<&J::sim, &Sim::memory_bandwidth>},
    {"sim.link_bandwidth_intra", "train.backend sim: bytes/s a rank sends to a rank of its own node process",
     field<&J::sim, &Sim::link_bandwidth_intra>},
    {"sim.link_bandwidth_inter", "train.backend sim: bytes/s a rank sends to a rank of another node process",
     field<&J::sim, &Sim::link_bandwidth_inter>},
    {"sim.link_latency_intra", "train.backend sim: seconds each message to a rank of its own node process takes extra",
     field<&J::sim, &Sim::link_latency_intra>},
    {"sim.link_latency_inter", "train.backend sim: seconds each message to a rank of another node process takes extra",
     field<&J::sim, &Sim::link_latency_inter>},
};

std::vector<std::string> key_names() {
  std::vector<std::string> names;
  for (const auto& key : keys) names.emplace_back(key.name);
  return names;
}

}  // namespace

std::span<const ConfigKey> config_keys() { return keys; }

std::vector<std::string> config_sections() {
  std::vector<std::string> sections;
  for (const auto& key : keys) {
    if (sections.empty() || sections.back() != key.section()) sections.emplace_back(key.section());
  }
  return sections;
}

const ConfigKey* find_config_key(std::string_view name) {
  const auto it = std::find_if(std::begin(keys), std::end(keys), [&](const ConfigKey& k) { return k.name == name; });
  return it == std::end(keys) ? nullptr : it;
}

namespace {

// The CUDA backend's bf16 mode was a backend of its own before precision became one policy.
constexpr std::pair<std::string_view, std::string_view> cuda_bf16_means[] = {{"train.backend", "cuda"},
                                                                             {"train.precision", "bf16"}};
constexpr ValueAlias value_aliases[] = {{"train.backend", "cuda-bf16", cuda_bf16_means}};

}  // namespace

const ValueAlias* find_value_alias(std::string_view key, std::string_view value) {
  const auto it = std::find_if(std::begin(value_aliases), std::end(value_aliases),
                               [&](const ValueAlias& a) { return a.key == key && a.value == value; });
  return it == std::end(value_aliases) ? nullptr : it;
}

std::optional<std::string> closest_config_key(std::string_view name) { return closest_match(name, key_names()); }

std::optional<std::string> closest_config_section(std::string_view name) {
  return closest_match(name, config_sections());
}

std::string_view type_name(const ConfigKey& key) {
  JobConfig scratch;
  const ConfigField field = key.field(scratch);
  return std::visit(
      [](auto* value) -> std::string_view {
        using Value = std::remove_pointer_t<decltype(value)>;
        if constexpr (std::is_same_v<Value, bool>) return "boolean";
        if constexpr (std::is_same_v<Value, double>) return "number";
        if constexpr (std::is_same_v<Value, std::string> || named_choice<Value>) return "string";
        return "integer";
      },
      field);
}

}  // namespace troupe::apps
