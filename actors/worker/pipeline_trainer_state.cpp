// What a pipeline rank holds and reports beyond its step: its state as global ranges of the whole
// model for checkpoints, and the step's expert routing summed over the pipeline (docs/moe.md,
// "Pipeline stages").

#include <algorithm>
#include <string>
#include <vector>

#include "actors/worker/held_zeros.hpp"
#include "actors/worker/pipeline_trainer.hpp"

namespace troupe::actors {

compute::Tensor& PipelineTrainer::chunk_parameters() {
  TROUPE_CHECK(chunks_.size() == 1, "a rank of more than one model chunk");
  return chunks_.front().stage->params();
}

std::int64_t PipelineTrainer::chunk_kept_begin() const {
  TROUPE_CHECK(chunks_.size() == 1, "a rank of more than one model chunk");
  return chunks_.front().stage->kept_begin();
}

std::int64_t PipelineTrainer::parameter_count() const {
  std::int64_t count = 0;
  for (const Chunk& chunk : chunks_) count += chunk.stage->params().numel();
  return count;
}

void PipelineTrainer::gather_parameters(compute::Tensor& flat) const {
  TROUPE_CHECK(flat.numel() == parameter_count() && flat.dtype() == compute::DType::f32,
               "a buffer that is not the rank's parameters");
  float* to = flat.data_as<float>();
  for (const Chunk& chunk : chunks_) {
    const compute::Tensor& params = chunk.stage->params();
    std::copy_n(params.data_as<float>(), params.numel(), to);
    to += params.numel();
  }
}

void PipelineTrainer::scatter_parameters(const compute::Tensor& flat) {
  TROUPE_CHECK(flat.numel() == parameter_count() && flat.dtype() == compute::DType::f32,
               "a buffer that is not the rank's parameters");
  const float* from = flat.data_as<float>();
  for (Chunk& chunk : chunks_) {
    compute::Tensor& params = chunk.stage->params();
    std::copy_n(from, params.numel(), params.data_as<float>());
    from += params.numel();
  }
}

std::vector<checkpoint::HeldRange> PipelineTrainer::held_state(const std::vector<LikeParameters>& like_parameters) {
  std::vector<checkpoint::HeldRange> held;
  // Replicas hold equal parameters and replica 0 saves them (under ZeRO-3 each its shard); the
  // moments are each replica's own under any ZeRO stage. Under DiLoCo replica 0 is island 0's, and
  // the inner state saved is island 0's alone: the commit waits for island 0's writers only.
  const bool island_zero = setup_.options.island == 0;
  const bool saves_parameters = replica_ == 0 || (compute::shards_parameters(setup_.zero) && island_zero);
  const bool saves_moments = replica_ == 0 || (compute::shards_optimizer_state(setup_.zero) && island_zero);
  std::int64_t like_at = 0;  // the chunk's parameters in `like_parameters`' buffers
  // PowerSGD's residuals, this replica's own: one kind over the whole model.
  const std::string residual_kind = "powersgd_residual_dp" + std::to_string(groups_.dp.position());
  for (const Chunk& chunk : chunks_) {
    compute::GPTStage& stage = *chunk.stage;
    const std::int64_t kept = stage.kept_begin(), kept_end = kept + stage.params().numel();
    // Under expert shards a compressor's state covers one kind of run: the dense one's, or the
    // experts' one's.
    enum class Runs { all, dense, experts };
    struct Held {
      std::string kind;
      std::int64_t begin, end;  // local range of the stage's buffer that `data` holds from its start
      float* data;
      bool saves;
      bool optional = false;
      // Every replica writes its own, of the experts' runs too: ZeRO 1 and 2's moments' segments,
      // PowerSGD's residuals.
      bool own_segment = false;
      Runs runs = Runs::all;
    };
    // Under ZeRO-3 with the chunk's buffer in runs (of a kind, or around a tied embedding) the kept
    // parameters are a segment of each, each rank writing its own.
    const bool kept_runs = chunk.runs && compute::shards_parameters(setup_.zero);
    TROUPE_CHECK(!kept_runs || like_parameters.empty(), "parameters' likes of a rank that keeps segments of runs");
    std::vector<Held> kinds;
    if (!kept_runs) kinds.push_back({"param", kept, kept_end, stage.params().data_as<float>(), saves_parameters});
    for (const LikeParameters& like : like_parameters)
      kinds.push_back({like.kind, kept, kept_end, like.data + like_at, saves_parameters});
    like_at += stage.params().numel();
    // Each of the chunk's buffers in the step (one, or under expert shards one a run of a kind)
    // keeps its own moments.
    for (std::size_t i = 0; i < chunk.buffer_begins.size(); ++i) {
      compute::AdamW& adamw = zero_->optimizer(chunk.first_buffer + static_cast<int>(i));
      const std::int64_t at = chunk.buffer_begins[i];
      const auto [moments, moments_end] = adamw.range();
      const bool segment = compute::shards_optimizer_state(setup_.zero);
      kinds.push_back({"adam_m", at + moments, at + moments_end, adamw.first_moments().data_as<float>(), saves_moments,
                       false, segment});
      kinds.push_back({"adam_v", at + moments, at + moments_end, adamw.second_moments().data_as<float>(), saves_moments,
                       false, segment});
      if (kept_runs) {
        const compute::ZeroStep::Buffer& buffer = zero_->buffer(chunk.first_buffer + static_cast<int>(i));
        kinds.push_back({"param", at + buffer.kept_begin, at + buffer.kept_begin + buffer.params.numel(),
                         buffer.params.data_as<float>(), saves_parameters, false, true});
      }
    }
    if (compressor_ && setup_.compression.kind == comm::Compression::powersgd) {
      // Laid out like the gradients, so they map to global ranges as the moments do. Q (the same on
      // every replica) fits only the tensor split that made it: under tensor shards its kind names
      // their count, and a run resumed with another count starts Q afresh. Optional both: a
      // checkpoint of a run that did not compress starts them afresh as well. Under expert shards
      // the experts' runs' are their compressor's (the first expert group writes their Q).
      const std::int64_t at = chunk.compressed_at, whole = stage.num_params();
      const std::string q_kind =
          setup_.grid.tp > 1 ? "powersgd_q_tp" + std::to_string(setup_.grid.tp) : std::string("powersgd_q");
      const Runs dense = expert_compressor_ ? Runs::dense : Runs::all;
      kinds.push_back(
          {q_kind, 0, whole, compressor_->factors().data_as<float>() + at, replica_ == 0, true, false, dense});
      kinds.push_back(
          {residual_kind, 0, whole, compressor_->residuals().data_as<float>() + at, true, true, true, dense});
      if (expert_compressor_) {
        kinds.push_back({q_kind, 0, whole, expert_compressor_->factors().data_as<float>() + at, replica_ == 0, true,
                         false, Runs::experts});
        kinds.push_back({residual_kind, 0, whole, expert_compressor_->residuals().data_as<float>() + at, true, true,
                         true, Runs::experts});
      }
    }
    for (const Held& h : kinds)
      for (const compute::GPTStage::Run& run : stage.global_runs()) {
        if (h.runs != Runs::all && run.expert_shard != (h.runs == Runs::experts)) continue;
        // Each run's part of the held range maps to one global range.
        const std::int64_t from = std::max(h.begin, run.local), to = std::min(h.end, run.local + run.count);
        if (from >= to) continue;
        // A last stage's wte copy, and what every tensor shard holds (shard 0 saves it), copy what
        // another rank of the same replica holds: restored, never saved, skipped by a rescue.
        const bool copy = run.embedding_copy || (run.replicated && shard_ != 0);
        // Under expert shards the first expert group's ranks (dp positions below EP) hold every
        // expert once, and write them (ZeRO 1 and 2's moments: each replica its segments).
        const bool saves = run.expert_shard && !h.own_segment ? replica_ < setup_.experts.shards() : h.saves;
        const std::int64_t global = run.global + (from - run.local);
        held.push_back(
            {h.kind, global, global + (to - from), h.data + (from - h.begin), saves && !copy, copy, h.optional});
      }
    if (expert_compressor_ && setup_.compression.kind == comm::Compression::powersgd) {
      // A residual kind covers the whole model as without expert shards: the experts of the
      // chunk's blocks that this rank does not hold (what its runs leave of its blocks' span) are
      // written as zeros, their residuals being the holding ranks' (PowerSGD takes only the
      // ranks' sum of the residuals).
      const compute::ParameterLayout& model = stage.global_layout();
      const std::int64_t blocks_begin = model.layer_range(stage.first_layer()).first,
                         blocks_end = model.layer_range(stage.last_layer() - 1).second;
      std::vector<std::pair<std::int64_t, std::int64_t>> own;  // global, within the blocks
      for (const compute::GPTStage::Run& run : stage.global_runs()) {
        const std::int64_t begin = std::max(run.global, blocks_begin),
                           end = std::min(run.global + run.count, blocks_end);
        if (!run.embedding_copy && begin < end) own.emplace_back(begin, end);
      }
      hold_zeros_outside(held, residual_kind, std::move(own), blocks_begin, blocks_end, other_experts_residuals_);
    }
  }
  return held;
}

compute::GPTStage::MoERouting PipelineTrainer::pipeline_routing() {
  const std::vector<std::int64_t>& slots = routing_.slots;
  compute::Tensor t = compute::Tensor::zeros({2 + static_cast<std::int64_t>(slots.size())}, compute::DType::f64);
  double* sums = t.data_as<double>();
  sums[0] = routing_.aux;
  sums[1] = routing_.z;
  std::copy(slots.begin(), slots.end(), sums + 2);  // counts far below 2^53: exact in a double
  {
    auto waiting = progress_.wait_for("the experts' routing over the pipeline");
    check_comm(mailbox_.wait(mailbox_.all_reduce(groups_.pp, t)));
  }
  compute::GPTStage::MoERouting whole = routing_;
  whole.aux = sums[0];
  whole.z = sums[1];
  for (std::size_t i = 0; i < slots.size(); ++i) whole.slots[i] = static_cast<std::int64_t>(sums[2 + i]);
  return whole;
}

}  // namespace troupe::actors
