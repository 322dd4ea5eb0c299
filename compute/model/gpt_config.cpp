#include "compute/model/gpt_config.hpp"

namespace troupe::compute {

int padded_vocab(int vocab_size) { return vocab_size <= 256 ? vocab_size : (vocab_size + 127) / 128 * 128; }

std::optional<GPTConfig> gpt_preset(const std::string& name) {
  auto make = [](int l, int c, int nh, int t, int v) { return GPTConfig{l, c, nh, t, v, padded_vocab(v)}; };
  if (name == "tiny") return make(4, 128, 4, 128, 256);
  if (name == "small") return make(6, 384, 6, 256, 256);
  if (name == "gpt2") return make(12, 768, 12, 1024, 50257);
  return std::nullopt;
}

std::vector<std::string> gpt_preset_names() { return {"tiny", "small", "gpt2"}; }

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
  return Status::success();
}

}  // namespace troupe::compute
