// troupe generate: text from a checkpoint, in a Hugging Face tokenizer's tokens: the prompt is
// encoded, the model samples (compute/model/sampling.hpp) on the CPU, and prompt and continuation
// are decoded and printed, made safe for a terminal (compute/data/decode.hpp).
//
//   troupe generate --checkpoint ckpt --tokenizer gpt2/tokenizer.json --prompt "Once upon a time"

#include <cstdio>
#include <memory>
#include <thread>

#include "apps/commands/checkpoint_argument.hpp"
#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "compute/backend.hpp"
#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/decode.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/sampling.hpp"

namespace troupe::apps {

int run_generate(const GenerateOptions& options) {
  auto tokenizer = compute::BpeTokenizer::load(options.tokenizer);
  if (!tokenizer) return error_exit(ExitCode::bad_input, tokenizer.error().message);
  auto loaded = open_checkpoint_argument(options.checkpoint);
  if (!loaded) return error_exit(ExitCode::bad_input, loaded.error().message);
  const compute::GPTConfig& config = loaded->manifest().model;
  if (tokenizer->vocab_size() > config.vocab_size)
    return error_exit(ExitCode::bad_input,
                      "--tokenizer " + options.tokenizer + " has " + std::to_string(tokenizer->vocab_size()) +
                          " tokens; the model's vocabulary is " + std::to_string(config.vocab_size));
  std::vector<std::int32_t> prompt = tokenizer->encode(options.prompt);
  if (prompt.empty()) {
    const std::int32_t eot = tokenizer->added_token("<|endoftext|>");
    if (eot < 0)
      return error_exit(ExitCode::bad_input,
                        "--prompt is empty and the tokenizer has no end-of-text token to start from");
    prompt.push_back(eot);
  }
  auto params = loaded->read_all("param");
  if (!params) return error_exit(ExitCode::bad_input, params.error().message);
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32,
                                       static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  if (!backend) return error_exit(ExitCode::failure, backend.error().message);
  compute::GPT model(config, **backend);
  compute::Tensor host = compute::Tensor::zeros(model.params().shape(), compute::DType::f32);
  std::copy(params->begin(), params->end(), host.data_as<float>());
  (*backend)->copy(model.params(), host);

  const compute::SamplingOptions sampling{options.tokens, options.temperature, options.top_k, options.seed};
  const std::vector<int> produced = compute::generate(model, std::vector<int>(prompt.begin(), prompt.end()), sampling);
  std::vector<std::int32_t> all = prompt;
  all.insert(all.end(), produced.begin(), produced.end());
  auto text = tokenizer->decode(all);
  if (!text) return error_exit(ExitCode::failure, text.error().message);
  std::vector<int> bytes(text->begin(), text->end());
  for (int& b : bytes) b = static_cast<unsigned char>(b);
  std::printf("%s\n", compute::decode_bytes(bytes).c_str());
  return to_int(ExitCode::success);
}

Command add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command =
      app.add_subcommand("generate", "Sample text from a checkpoint, through a Hugging Face tokenizer.");
  command
      ->add_option("--checkpoint", options->checkpoint,
                   "checkpoint.dir (its newest valid checkpoint) or one step-NNNNNNN folder")
      ->type_name("DIR")
      ->required();
  command->add_option("--tokenizer", options->tokenizer, "Hugging Face tokenizer.json (byte-level BPE)")
      ->type_name("FILE")
      ->required();
  command->add_option("--prompt", options->prompt, "text to continue; empty = <|endoftext|>")->type_name("TEXT");
  command->add_option("--tokens", options->tokens, "tokens to sample")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  command->add_option("--temperature", options->temperature, "softmax temperature")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--top-k", options->top_k, "sample from the k likeliest tokens; 0 = all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--seed", options->seed, "random seed")->capture_default_str();
  return refusing_unknown(*command, [options] { return run_generate(*options); });
}

}  // namespace troupe::apps
