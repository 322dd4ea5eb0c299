#include "compute/model/gpt_config.hpp"

#include <cstdint>
#include <limits>

namespace troupe::compute {

// In 64 bits: a vocabulary within 127 of the int range (far beyond what memory checks and the
// planner let through) stays unpadded rather than wrapping round.
int padded_vocab(int vocab_size) {
  if (vocab_size <= 256) return vocab_size;
  const std::int64_t padded = (std::int64_t{vocab_size} + 127) / 128 * 128;
  return padded > std::numeric_limits<int>::max() ? vocab_size : static_cast<int>(padded);
}

namespace {

struct Preset {
  const char* name;
  int n_layer, n_embd, n_head, block_size, vocab_size;
  int experts = 0, top_k = 0, moe_every = 1, shared_experts = 0, expert_width = 0;
};

// tiny and small train in seconds on a CPU. The GPT-2 family as OpenAI released it (Radford et
// al., 2019); the GPT-3 family's shapes as Brown et al. (2020, table 2.1) give them, with the
// head counts that divide d_model where the table's do not (1.3B: 16 heads of 128, as GPT-Neo and
// Megatron train it; 13B: d_model 5120 = 40 heads of 128, where the table says 5140).
constexpr Preset presets[] = {
    // nano is for runs of the control plane at many ranks (train.backend sim, docs/scale.md): its
    // 22,000 parameters make a rank cost its runtime, not its model.
    {"nano", 1, 32, 1, 32, 256},
    {"tiny", 4, 128, 4, 128, 256},
    {"small", 6, 384, 6, 256, 256},
    // Mixtures of experts: moe-tiny is tiny with 4 experts (top-2) in every other block; moe-small
    // is small with, in every block, a shared expert and 8 routed ones (top-2), each a third of
    // the dense MLP's width (512 of 1536), so a token's active parameters are small's (10.87M of
    // 25.06M, against small's 10.8M) and the model keeps small's width.
    {"moe-tiny", 4, 128, 4, 128, 256, 4, 2, 2, 0},
    {"moe-small", 6, 384, 6, 256, 256, 8, 2, 1, 1, 512},
    {"gpt2", 12, 768, 12, 1024, 50257},
    {"gpt2-medium", 24, 1024, 16, 1024, 50257},
    {"gpt2-large", 36, 1280, 20, 1024, 50257},
    {"gpt2-xl", 48, 1600, 25, 1024, 50257},
    {"gpt3-1.3b", 24, 2048, 16, 2048, 50257},
    {"gpt3-2.7b", 32, 2560, 32, 2048, 50257},
    {"gpt3-6.7b", 32, 4096, 32, 2048, 50257},
    {"gpt3-13b", 40, 5120, 40, 2048, 50257},
};

}  // namespace

std::optional<GPTConfig> gpt_preset(const std::string& name) {
  for (const Preset& p : presets)
    if (name == p.name)
      return GPTConfig{p.n_layer, p.n_embd, p.n_head,    p.block_size,     p.vocab_size,  padded_vocab(p.vocab_size),
                       p.experts, p.top_k,  p.moe_every, p.shared_experts, p.expert_width};
  return std::nullopt;
}

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> names;
  for (const Preset& p : presets) names.push_back(p.name);
  return names;
}

Status validate(const GPTConfig& c) {
  auto bad = [](const std::string& m) { return Status(Error{m}); };
  if (c.n_layer <= 0) return bad("model.n_layer must be positive, got " + std::to_string(c.n_layer));
  if (c.n_embd <= 0) return bad("model.n_embd must be positive, got " + std::to_string(c.n_embd));
  if (c.n_head <= 0) return bad("model.n_head must be positive, got " + std::to_string(c.n_head));
  if (c.n_embd % c.n_head != 0)
    return bad("model.n_embd (" + std::to_string(c.n_embd) + ") must be divisible by model.n_head (" +
               std::to_string(c.n_head) + ")");
  if (c.block_size <= 0) return bad("model.block_size must be positive, got " + std::to_string(c.block_size));
  if (c.vocab_size <= 0) return bad("model.vocab_size must be positive, got " + std::to_string(c.vocab_size));
  if (c.padded_vocab_size < c.vocab_size)
    return bad("padded vocabulary " + std::to_string(c.padded_vocab_size) + " is smaller than model.vocab_size " +
               std::to_string(c.vocab_size));
  if (c.experts < 0) return bad("model.experts must not be negative (0 = dense), got " + std::to_string(c.experts));
  if (c.experts > 0) {
    if (c.top_k < 1 || c.top_k > c.experts)
      return Status(Error{"model.top_k " + std::to_string(c.top_k) + " must be between 1 and model.experts " +
                          std::to_string(c.experts)});
    if (c.moe_every < 1 || c.moe_every > c.n_layer)
      return Status(Error{"model.moe_every " + std::to_string(c.moe_every) + " must be between 1 and model.n_layer " +
                          std::to_string(c.n_layer)});
    if (c.shared_experts != 0 && c.shared_experts != 1)
      return Status(Error{"model.shared_experts must be 0 or 1, got " + std::to_string(c.shared_experts)});
    if (c.expert_width < 0)
      return Status(Error{"model.expert_width must not be negative (0 = 4 x model.n_embd), got " +
                          std::to_string(c.expert_width)});
  }
  return Status::success();
}

}  // namespace troupe::compute
