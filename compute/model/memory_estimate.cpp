#include "compute/model/memory_estimate.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace troupe::compute {
namespace {

// Parameters of blocks [first, last), the embeddings on a first stage, ln_f (and a last stage's
// own wte copy) on a last one: stage_parameter_count's rule, in double.
double stage_parameters(const GPTConfig& c, int first, int last) {
  const double C = c.n_embd, per_layer = 12 * C * C + 13 * C, wte = double(c.padded_vocab_size) * C;
  double n = per_layer * (last - first);
  if (first == 0) n += wte + double(c.block_size) * C;
  if (last == c.n_layer) n += 2 * C + (first == 0 ? 0 : wte);
  return n;
}

}  // namespace

MemoryEstimate estimate_training_memory(const GPTConfig& c, const StageFootprint& s) {
  const bool first = s.first_layer == 0, last = s.last_layer == c.n_layer;
  const double BT = double(s.B) * s.T, C = c.n_embd, Vp = c.padded_vocab_size, layers = s.last_layer - s.first_layer;
  const double att = double(s.B) * c.n_head * s.T;                // one log-sum-exp per query row and head
  const double bytes = double(s.element_bytes), token_bytes = 4;  // token ids are i32

  // GPTStage::reserve: per layer ln1, qkv, atty, residual2, ln2, fch, fch_gelu, residual3 (16 C
  // wide in all), four per-token statistics and the attention state. What recomputation does not
  // keep per layer, every layer's slots share once.
  const double block = 16 * BT * C + 4 * BT + att;
  double per_layer = block, recomputed = 0;
  if (s.recompute == Recompute::selective) {
    recomputed = 4 * BT * C + att;  // fch_gelu and the attention state
    per_layer = block - recomputed;
  } else if (s.recompute == Recompute::full) {
    recomputed = block - BT * C;  // rerun up to the GELU output: no residual3
    per_layer = BT * C;           // residual3, the next block's input
  }
  double per_slot = layers * per_layer + 2 * BT * C;  // + input and dinput
  if (last) per_slot += BT * C + 2 * BT + BT * Vp;    // ln_f and its statistics, probabilities
  // Branch output and per-block gradient scratch: dln, dfch_gelu (which d(qkv) and d(atty) reuse)
  // and the attention state's gradient; d(fch) reuses the block's GELU output.
  double shared = 6 * BT * C + att + recomputed;
  if (last) shared += BT * Vp + BT;                   // logits, losses
  const double token_buffers = s.slots * BT * ((first ? 1 : 0) + (last ? 1 : 0));

  MemoryEstimate estimate;
  estimate.parameter_bytes = 4 * stage_parameters(c, s.first_layer, s.last_layer) * bytes;
  estimate.activation_bytes = (s.slots * per_slot + shared) * bytes + token_buffers * token_bytes;
  return estimate;
}

Status check_element_counts(const GPTConfig& c, int B, int T) {
  // 2^62 leaves room for the sums and doublings of counts that the model computes in int64.
  constexpr double most = 4611686018427387904.0;
  const double BT = double(B) * T;
  const double largest = std::max({stage_parameters(c, 0, c.n_layer), BT * c.padded_vocab_size,
                                   BT * c.n_head * double(T), BT * 4 * double(c.n_embd)});
  if (largest < most) return Status::success();
  char count[32];
  std::snprintf(count, sizeof count, "%.3g", largest);
  return Error{"model.n_layer " + std::to_string(c.n_layer) + ", model.n_embd " + std::to_string(c.n_embd) +
               ", model.vocab_size " + std::to_string(c.vocab_size) + ", train.batch_size " + std::to_string(B) +
               " and train.seq_len " + std::to_string(T) + " make a tensor of " + count +
               " elements, more than a 64-bit count holds"};
}

}  // namespace troupe::compute
