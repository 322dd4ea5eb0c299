// The built-in presets: each is a valid model, the GPT-2 family has the parameter counts OpenAI
// published (plus the rows the vocabulary's padding adds), the GPT-3 family is the size its
// name says, and moe-small's active parameters are about small's.

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"

using namespace troupe::compute;

TEST_CASE("every preset is a valid model", "[model]") {
  const std::vector<std::string> names = gpt_preset_names();
  REQUIRE(names.size() == 13);
  for (const std::string& name : names) {
    INFO(name);
    const auto config = gpt_preset(name);
    REQUIRE(config.has_value());
    CHECK(validate(*config).ok());
  }
  CHECK_FALSE(gpt_preset("gpt3-175b").has_value());
}

TEST_CASE("the GPT-2 family has the published parameter counts, the GPT-3 family the size of its name", "[model]") {
  // Hugging Face's counts (tied embeddings, vocabulary 50257); Troupe pads the vocabulary to 50304.
  // gpt2 itself: test_model_training.cpp.
  for (const auto& [name, published] : std::vector<std::pair<std::string, std::int64_t>>{
           {"gpt2-medium", 354823168}, {"gpt2-large", 774030080}, {"gpt2-xl", 1557611200}}) {
    const GPTConfig config = *gpt_preset(name);
    INFO(name);
    CHECK(ParameterLayout(config).total() ==
          published + std::int64_t{config.padded_vocab_size - config.vocab_size} * config.n_embd);
  }
  for (const auto& [name, size] : std::vector<std::pair<std::string, double>>{
           {"gpt3-1.3b", 1.3e9}, {"gpt3-2.7b", 2.7e9}, {"gpt3-6.7b", 6.7e9}, {"gpt3-13b", 13e9}}) {
    INFO(name);
    CHECK(static_cast<double>(ParameterLayout(*gpt_preset(name)).total()) == Approx(size).epsilon(0.03));
  }
}

TEST_CASE(
    "moe-small has small's width, a shared expert and 8 routed ones a third of the MLP's width, top-2, and within 2 "
    "percent of small's parameters active per token",
    "[model]") {
  const GPTConfig moe = *gpt_preset("moe-small");
  CHECK(moe.experts == 8);
  CHECK(moe.top_k == 2);
  CHECK(moe.shared_experts == 1);
  CHECK(moe.n_embd == gpt_preset("small")->n_embd);
  CHECK(moe.expert_hidden() * 3 == 4 * moe.n_embd);
  const ParameterLayout layout(moe);
  const double small = static_cast<double>(ParameterLayout(*gpt_preset("small")).total());
  INFO("moe-small: " << layout.active() << " active of " << layout.total() << "; small: " << small);
  CHECK(static_cast<double>(layout.active()) == Approx(small).epsilon(0.02));
  CHECK(static_cast<double>(layout.total()) > 2 * small);
  CHECK(gpt_preset("moe-tiny")->moe_layers() == 2);
}

TEST_CASE("nano, the control plane's model, holds 22,000 parameters: a rank costs its runtime", "[model]") {
  // wte 256 x 32, wpe 32 x 32, one block (12 C^2 + 13 C), the final LayerNorm (2 C).
  const std::int64_t c = 32;
  CHECK(ParameterLayout(*gpt_preset("nano")).total() == 256 * c + 32 * c + 12 * c * c + 13 * c + 2 * c);
}
