// GPTStage's parameters: which part of the model a stage (and tensor shard) holds, in which
// units, found by name, and their initial values (gpt_stage.hpp).

#include <algorithm>

#include "compute/memory_ledger.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/random.hpp"

namespace troupe::compute {
namespace {

// A stage's parameters in local order: the rank's layout's views of its slice (its experts under
// expert shards) as tensor shard `shard` holds them, then on a last stage that is not the first its
// copy of wte.
struct StageViews {
  std::vector<ParameterView> views;     // local offsets and shapes
  std::vector<std::size_t> init_index;  // each view's index in the layout: its init stream
  std::vector<ShardedView> sharded;     // runs relative to each view's start
  std::int64_t total = 0;
};

StageViews stage_views(const GPTConfig& config, const ParameterLayout& layout, int first_layer, int last_layer,
                       TensorShard shard) {
  const bool first = first_layer == 0, last = last_layer == config.n_layer;
  const std::int64_t begin = first ? 0 : layout.layer_range(first_layer).first;
  const std::int64_t end = last ? layout.total() : layout.layer_range(last_layer - 1).second;
  StageViews out;
  auto add = [&](std::size_t k) {
    ParameterView v = layout.views()[k];
    // The runs are where the view's elements sit in the whole model's layout.
    ParameterView whole = v;
    whole.offset = v.global_offset;
    ShardedView sharded = shard_view(whole, config, shard);
    v.offset = out.total;
    v.shape = sharded.shape;
    out.total += v.numel();
    out.views.push_back(std::move(v));
    out.init_index.push_back(k);
    out.sharded.push_back(std::move(sharded));
  };
  const auto& all = layout.views();
  for (std::size_t k = 0; k < all.size(); ++k)
    if (all[k].offset >= begin && all[k].offset < end) add(k);
  if (last && !first) {
    TROUPE_CHECK(all[0].name == "wte.weight", "the layout no longer starts with wte.weight");
    add(0);  // global index 0, so the copy draws the same values
  }
  return out;
}

// The units (parameter_source.hpp) of such a stage: the embeddings, each block ("h.<l>."), and the
// tail (ln_f and a copy of wte), each a run of consecutive views.
std::vector<ParameterUnit> units_of(const StageViews& stage) {
  std::vector<ParameterUnit> units;
  std::string unit_name;
  bool after_blocks = false;
  for (const ParameterView& v : stage.views) {
    const bool block = v.name.rfind("h.", 0) == 0;
    after_blocks = after_blocks || block;
    const std::string name = block ? v.name.substr(0, v.name.find('.', 2) + 1) : after_blocks ? "tail" : "front";
    if (units.empty() || name != unit_name) {
      units.push_back({v.offset, v.offset});
      unit_name = name;
    }
    units.back().end = v.offset + v.numel();
  }
  return units;
}

}  // namespace

std::vector<ParameterUnit> GPTStage::parameter_units(const GPTConfig& config, int first_layer, int last_layer,
                                                     TensorShard shard, ExpertShard experts) {
  return units_of(stage_views(config, ParameterLayout(config, experts), first_layer, last_layer, shard));
}

std::vector<ParameterView> GPTStage::parameter_views(const GPTConfig& config, int first_layer, int last_layer,
                                                     TensorShard shard, ExpertShard experts) {
  return stage_views(config, ParameterLayout(config, experts), first_layer, last_layer, shard).views;
}

GPTStage::GPTStage(const GPTConfig& config, Backend& backend, int first_layer, int last_layer, DType dtype,
                   Recompute recompute, ParameterSource* source, TensorShardGroup shards, ContextShardGroup context,
                   ExpertGroup experts)
    : config_(config),
      shards_(std::move(shards)),
      backend_(backend),
      dtype_(dtype),
      recompute_(recompute),
      first_layer_(first_layer),
      last_layer_(last_layer),
      global_layout_(config),
      layout_(config, {experts.rank(), experts.shards()}),
      source_(source) {
  TROUPE_CHECK(validate(config).ok(), "invalid GPTConfig reached the model");
  TROUPE_CHECK(dtype == DType::f32 || dtype == DType::f64, "GPT parameters are f32 or f64");
  TROUPE_CHECK(0 <= first_layer && first_layer < last_layer && last_layer <= config.n_layer,
               "stage layers [" + std::to_string(first_layer) + ", " + std::to_string(last_layer) + ") of " +
                   std::to_string(config.n_layer));
  const TensorShard shard = shards_.shard;
  TROUPE_CHECK(check_tensor_shards(config, shard.count).ok() && shard.index >= 0 && shard.index < shard.count &&
                   (!shards_.split() || (shards_.all_reduce && shards_.all_gather)) &&
                   (!shards_.sequence_parallel || (shards_.split() && shards_.reduce_scatter)),
               "tensor shard " + std::to_string(shard.index) + " of " + std::to_string(shard.count));
  TROUPE_CHECK(!experts.sharded() || (config.experts > 0 && config.experts % experts.shards() == 0),
               std::to_string(config.experts) + " experts over " + std::to_string(experts.shards()) + " expert shards");
  experts_ = experts;
  const int T = shard.count;
  heads_ = config.n_head / T;
  attn_width_ = config.n_embd / T;
  if (context.sharded())
    context_ = std::make_unique<ContextLayers>(context, last_layer - first_layer, heads_, attn_width_, dtype);
  mlp_width_ = 4 * config.n_embd / T;
  expert_width_ = config.experts > 0 ? static_cast<int>(config.expert_hidden() / T) : 0;
  vocab_width_ = config.padded_vocab_size / T;
  vocab_begin_ = shard.index * vocab_width_;
  StageViews stage = stage_views(config, layout_, first_layer, last_layer, shard);
  units_ = units_of(stage);
  views_ = std::move(stage.views);
  init_index_ = std::move(stage.init_index);
  num_params_ = stage.total;
  const bool copy = has_embedding_copy();
  for (std::size_t i = 0; i < views_.size(); ++i) {
    const ShardedView& sharded = stage.sharded[i];
    const bool embedding_copy = copy && i + 1 == views_.size();
    for (const GlobalRun& r : sharded.runs) {
      Run run;
      run.local = views_[i].offset + r.local;
      run.global = r.global;
      run.count = r.count;
      run.replicated = sharded.replicated;
      run.embedding_copy = embedding_copy;
      run.expert_shard = views_[i].expert && experts.sharded();
      Run* prev = runs_.empty() ? nullptr : &runs_.back();
      if (prev && prev->local + prev->count == run.local && prev->global + prev->count == run.global &&
          prev->replicated == run.replicated && prev->embedding_copy == run.embedding_copy &&
          prev->expert_shard == run.expert_shard)
        prev->count += run.count;
      else
        runs_.push_back(run);
    }
    view_runs_.push_back(sharded.runs);
  }
  for (std::size_t i = 0; i < views_.size(); ++i) by_name_.emplace(views_[i].name, i);
  auto index_of = [&](const std::string& name) {
    auto it = by_name_.find(name);
    TROUPE_CHECK(it != by_name_.end(), "stage misses " + name);
    return it->second;
  };
  if (is_first() || is_last()) wte_ = index_of("wte.weight");
  if (is_first()) wpe_ = index_of("wpe.weight");
  if (is_last()) {
    lnf_w_ = index_of("ln_f.weight");
    lnf_b_ = index_of("ln_f.bias");
  }
  // A block's tensors are found by position from its first (parameter_layout.cpp's order).
  for (int l = first_layer; l < last_layer; ++l)
    block_first_.push_back(index_of("h." + std::to_string(l) + ".ln_1.weight"));
  TROUPE_CHECK(config.experts == 0 || !(experts_.sharded() && context.sharded()),
               "a model with experts runs with context shards without expert shards");
  if (config.experts > 0 && context.sharded()) experts_.token_group = context.exchange;
  if (config.experts > 0 && shards_.split()) {
    experts_.slice = shard.index;
    experts_.slices = shard.count;
    experts_.slice_sum = shards_.all_reduce;
  }

  TROUPE_CHECK(units_.back().end == num_params_, "the stage's units do not cover its parameters");
  for (const ParameterView& v : views_) {
    std::size_t u = 0;
    while (units_[u].end <= v.offset) ++u;
    TROUPE_CHECK(v.offset + v.numel() <= units_[u].end, v.name + " straddles two units");
    unit_of_view_.push_back(static_cast<int>(u));
  }
  if (is_first()) front_unit_ = 0;
  if (is_last()) tail_unit_ = static_cast<int>(units_.size()) - 1;
  if (!source_) {
    resident_ = std::make_unique<ResidentParameters>(backend_, units_, dtype_);
    source_ = resident_.get();
  }
}

const Tensor& GPTStage::whole(const Tensor& kept, const std::string& name) const {
  TROUPE_CHECK(kept.numel() == num_params_, "stage [" + std::to_string(first_layer_) + ", " +
                                                std::to_string(last_layer_) + ") keeps only a shard of '" + name +
                                                "': its parameters are sharded (ZeRO-3)");
  return kept;
}

Tensor GPTStage::param(const std::string& name) const {
  auto it = by_name_.find(name);
  TROUPE_CHECK(it != by_name_.end(), "stage [" + std::to_string(first_layer_) + ", " + std::to_string(last_layer_) +
                                         ") holds no parameter named '" + name + "'");
  return view(whole(source_->kept_parameters(), name), it->second);
}

Tensor GPTStage::grad(const std::string& name) const {
  auto it = by_name_.find(name);
  TROUPE_CHECK(it != by_name_.end(), "stage [" + std::to_string(first_layer_) + ", " + std::to_string(last_layer_) +
                                         ") holds no parameter named '" + name + "'");
  return view(whole(source_->kept_gradients(), name), it->second);
}

Tensor GPTStage::tied_embedding_grad() const {
  TROUPE_CHECK(is_first() || is_last(), "only the first and the last stage hold wte.weight");
  return view(whole(source_->kept_gradients(), "wte.weight"), wte_);
}

int GPTStage::tied_embedding_unit() const {
  TROUPE_CHECK(is_first() || is_last(), "only the first and the last stage hold wte.weight");
  return unit_of_view_[wte_];
}

Tensor GPTStage::tied_embedding_in(const Tensor& unit_buffer) const {
  TROUPE_CHECK(unit_buffer.numel() == units_[static_cast<std::size_t>(tied_embedding_unit())].size(),
               "a buffer that is not the tied embedding's unit");
  return in_unit(unit_buffer, wte_);
}

void GPTStage::init_parameters(std::uint64_t seed) {
  // Written in place on the host; a device backend's parameters are filled through a host copy.
  // Only what this rank keeps: its kept runs, one after another in the kept buffer.
  MemoryScope scope(MemoryKind::parameters);
  Tensor& kept = source_->kept_parameters();
  if (kept.is_token()) return;  // a token tensor keeps no values (the sim backend's)
  Tensor host = kept.device() == Device::cpu ? kept : Tensor::zeros(kept.shape(), dtype_);
  std::int64_t kept_at = 0;  // where the kept run starts in the kept buffer
  for (const ParameterUnit& held : source_->kept_runs()) {
    // A local element's init value is the global element's: its index within the global view.
    for (std::size_t i = 0; i < views_.size(); ++i) {
      const auto& v = views_[i];
      const std::int64_t view_global = global_layout_.views()[init_index_[i]].offset;
      for (const GlobalRun& r : view_runs_[i]) {
        const std::int64_t run_begin = v.offset + r.local;
        const std::int64_t lo = std::max(held.begin, run_begin), hi = std::min(held.end, run_begin + r.count);
        for (std::int64_t at = lo; at < hi; ++at) {
          const auto e = static_cast<std::uint64_t>(r.global - view_global + (at - run_begin));
          double x = v.init_std > 0 ? v.init_std * counter_normal(seed, init_index_[i], e) : v.init_value;
          if (dtype_ == DType::f32)
            host.data_as<float>()[kept_at + at - held.begin] = static_cast<float>(x);
          else
            host.data_as<double>()[kept_at + at - held.begin] = x;
        }
      }
    }
    kept_at += held.size();
  }
  if (host.data() != kept.data()) backend_.copy(kept, host);
}

void GPTStage::zero_grad() { backend_.fill_zero(source_->kept_gradients()); }

}  // namespace troupe::compute
