// The model FLOPs MFU divides by (compute/model/flops.hpp), pinned by hand for tiny: 4 layers,
// C = 128, a vocabulary of 256, T = 128.

#include <catch2/catch.hpp>

#include "compute/model/flops.hpp"
#include "compute/model/parameter_layout.hpp"

using namespace troupe::compute;

TEST_CASE("model FLOPs count the matmuls of a causal model: the blocks' weights, half the attention, the lm head",
          "[flops]") {
  const GPTConfig tiny = *gpt_preset("tiny");
  // Per token, forward and backward (6 per multiply-add): per block 12·128² weights and 128
  // channels over the (128 + 1)/2 keys a token attends to on average, twice (scores, weighted sum);
  // the lm head 256 × 128.
  const double block_weights = 6.0 * 12 * 128 * 128;             // 1,179,648
  const double block_attention = 6.0 * 2 * 128 * (128 + 1) / 2;  // 99,072
  const double head = 6.0 * 256 * 128;                           // 196,608
  const ModelFlops f = model_flops(tiny, 128);
  CHECK(f.block_weights == block_weights);
  CHECK(f.block_attention == block_attention);
  CHECK(f.head == head);
  CHECK(model_flops_per_token(tiny, 128) == 4 * (block_weights + block_attention) + head);
  CHECK(model_flops_per_token(tiny, 128) == 5'311'488);

  // Below PaLM's 6N + 12·L·C·T, which counts the masked half of attention and the position
  // embeddings; the attention term grows with T, a token of a shorter sequence attends to fewer keys.
  const double palm = 6.0 * double(ParameterLayout(tiny).total()) + 12.0 * 4 * 128 * 128;
  CHECK(model_flops_per_token(tiny, 128) < palm);
  CHECK(model_flops(tiny, 64).block_attention == 6.0 * 128 * 65);
  // The vocabulary's padding columns are not the model's: gpt2 counts 50257, not 50304.
  const GPTConfig gpt2 = *gpt_preset("gpt2");
  CHECK(model_flops(gpt2, 1024).head == 6.0 * 50257 * 768);
}

TEST_CASE("model FLOPs of moe-tiny count the router and the k experts a token reaches, not all E", "[flops]") {
  const GPTConfig moe = *gpt_preset("moe-tiny");  // tiny with 4 experts, top-2, in blocks 1 and 3
  const GPTConfig tiny = *gpt_preset("tiny");
  // Each of the 2 MoE blocks: a router of 4 × 128, and a second 8·128² MLP.
  const double extra = 2 * 6.0 * (4 * 128 + 8 * 128 * 128);
  CHECK(model_flops(moe, 128).moe_extra == extra);
  CHECK(model_flops_per_token(moe, 128) == model_flops_per_token(tiny, 128) + extra);
  CHECK(model_flops(tiny, 128).moe_extra == 0);
}
