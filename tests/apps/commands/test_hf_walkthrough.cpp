// The fine-tune walkthrough of docs/guide.md (section 9) on the fixture GPT-2 of
// tests/compute/golden/hf_gpt2, with what each step must show: `troupe train --init.from` starts
// from the folder's weights and lowers the loss on a small text; `troupe generate` prints decoded
// text that continues the prompt; `troupe export --format hf` writes a folder that imports to the
// checkpoint's very weights. (The guide's blocks themselves run in test_guide.cpp.)

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "checkpoint/import_gpt2.hpp"
#include "checkpoint/loader.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/data/bpe_tokenizer.hpp"
#include "compute/model/gpt.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;
namespace fs = std::filesystem;

namespace {

const std::string kModel = TROUPE_SOURCE_DIR "/tests/compute/golden/hf_gpt2/model";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The mean next-token loss of `params` (the flat order of `model`) on `tokens`, one window.
double loss_on(const troupe::compute::GPTConfig& model, const std::vector<float>& params,
               const std::vector<std::int32_t>& tokens) {
  troupe::compute::CpuBackend backend(1);
  troupe::compute::GPT gpt(model, backend);
  std::copy(params.begin(), params.end(), gpt.params().data_as<float>());
  const int T = static_cast<int>(tokens.size()) - 1;
  auto inputs = troupe::compute::Tensor::zeros({1, T}, troupe::compute::DType::i32);
  auto targets = troupe::compute::Tensor::zeros({1, T}, troupe::compute::DType::i32);
  std::copy(tokens.begin(), tokens.end() - 1, inputs.data_as<std::int32_t>());
  std::copy(tokens.begin() + 1, tokens.end(), targets.data_as<std::int32_t>());
  gpt.reserve(1, T);
  return gpt.forward(inputs, targets);
}

// `troupe train` from the fixture folder on the text in texts/, checkpoints in `checkpoint_dir`,
// with the keys of `more`.
ProcessResult fine_tune(const TempDir& dir, const std::string& checkpoint_dir, const std::vector<std::string>& more) {
  std::vector<std::string> args = {
      "train", "--init.from",      kModel,        "--data.tokenizer", kModel + "/tokenizer.json", "--data.corpus",
      "texts", "--checkpoint.dir", checkpoint_dir};
  args.insert(args.end(), more.begin(), more.end());
  return run_troupe(dir, args, std::chrono::seconds(120));
}

}  // namespace

TEST_CASE("fine-tune walkthrough: init.from, a falling loss, generate, export that re-imports bit for bit",
          "[guide][hf]") {
  TempDir dir;
  std::string corpus;
  for (int k = 0; k < 20; ++k) corpus += read_text(TROUPE_SOURCE_DIR "/tests/compute/golden/hf_gpt2/text.txt");
  dir.write("texts/text.txt", corpus);

  const ProcessResult train = fine_tune(
      dir, "ft",
      {"--train.steps", "40", "--train.batch_size", "4", "--train.seq_len", "32", "--train.lr", "1e-2",
       "--train.warmup_steps", "2", "--train.threads", "1", "--sample.prompt", "Hello", "--sample.tokens", "8"});
  INFO("train stdout: " << train.out << "\nstderr: " << train.err);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(train.out, Contains("init.from " + kModel + ": imported GPT-2"));

  auto tokenizer = troupe::compute::BpeTokenizer::load(kModel + "/tokenizer.json");
  REQUIRE(tokenizer.ok());
  std::vector<std::int32_t> window = tokenizer->encode(corpus);
  window.resize(33);
  auto imported = troupe::checkpoint::read_hf_gpt2(kModel);
  REQUIRE(imported.ok());
  auto newest = troupe::checkpoint::open_newest_valid(dir.path() / "ft");
  REQUIRE(newest.ok());
  REQUIRE(newest->checkpoint.has_value());
  CHECK(newest->checkpoint->manifest().step == 40);
  auto trained = newest->checkpoint->read_all("param");
  REQUIRE(trained.ok());
  const double before = loss_on(imported->model, imported->params, window);
  const double after = loss_on(imported->model, *trained, window);
  INFO("loss on the text's first window: " << before << " imported, " << after << " after 40 steps");
  CHECK(after < 0.85 * before);

  const ProcessResult generate = run_troupe(dir, {"generate", "--checkpoint", "ft", "--tokenizer",
                                                  kModel + "/tokenizer.json", "--prompt", "Hello", "--tokens", "12"});
  INFO("generate stdout: " << generate.out << "\nstderr: " << generate.err);
  REQUIRE(generate.exit_code == 0);
  CHECK_THAT(generate.out, StartsWith("Hello"));
  CHECK(generate.out.size() > std::string("Hello\n").size());

  const ProcessResult exported = run_troupe(dir, {"export", "--checkpoint", "ft", "--format", "hf", "--out", "my-gpt2",
                                                  "--tokenizer", kModel + "/tokenizer.json"});
  INFO("export stdout: " << exported.out << "\nstderr: " << exported.err);
  REQUIRE(exported.exit_code == 0);
  CHECK(read_text((dir.path() / "my-gpt2/tokenizer.json").string()) == read_text(kModel + "/tokenizer.json"));
  auto again = troupe::checkpoint::read_hf_gpt2(dir.path() / "my-gpt2");
  INFO((again ? std::string() : again.error().message));
  REQUIRE(again.ok());
  REQUIRE(again->params.size() == trained->size());
  CHECK(std::memcmp(again->params.data(), trained->data(), trained->size() * sizeof(float)) == 0);
}

// One step at a negligible learning rate leaves the weights where they started: the folder's, not
// a random initialization (which would differ by about the weights' own size), on two workers as
// data-parallel replicas, as two pipeline stages and as two tensor shards.
TEST_CASE("init.from starts every rank from the folder's weights, in every layout", "[hf]") {
  const std::vector<std::string> layout = GENERATE(
      std::vector<std::string>{}, std::vector<std::string>{"--pipeline.stages", "2", "--pipeline.microbatches", "2"},
      std::vector<std::string>{"--tensor.shards", "2"});
  TempDir dir;
  dir.write("texts/text.txt", read_text(TROUPE_SOURCE_DIR "/tests/compute/golden/hf_gpt2/text.txt"));
  std::vector<std::string> keys = {
      "--workers",  "2",     "--train.steps",  "1", "--train.batch_size",   "2", "--train.seq_len", "32",
      "--train.lr", "1e-12", "--train.min_lr", "0", "--train.warmup_steps", "0", "--sample.tokens", "0"};
  keys.insert(keys.end(), layout.begin(), layout.end());
  const ProcessResult train = fine_tune(dir, "once", keys);
  INFO("layout: " << (layout.empty() ? std::string("data-parallel") : layout[0]));
  INFO("train stdout: " << train.out << "\nstderr: " << train.err);
  REQUIRE(train.exit_code == 0);
  auto imported = troupe::checkpoint::read_hf_gpt2(kModel);
  REQUIRE(imported.ok());
  auto stepped = troupe::checkpoint::open_checkpoint(dir.path() / "once/step-0000001");
  REQUIRE(stepped.ok());
  auto params = stepped->read_all("param");
  REQUIRE(params.ok());
  REQUIRE(params->size() == imported->params.size());
  double largest = 0;
  for (std::size_t i = 0; i < params->size(); ++i)
    largest = std::max(largest, static_cast<double>(std::abs((*params)[i] - imported->params[i])));
  INFO("largest change of a weight in the step: " << largest);
  CHECK(largest < 1e-6);
}

TEST_CASE("init.from refuses a model key that disagrees with the folder, and needs checkpoint.dir", "[hf]") {
  TempDir dir;
  const ProcessResult layers =
      run_troupe(dir, {"train", "--init.from", kModel, "--checkpoint.dir", "ft", "--model.n_layer", "4"});
  CHECK(layers.exit_code == 2);
  CHECK_THAT(layers.err, Contains("model.n_layer 4 differs from the 2 of init.from " + kModel +
                                  "/config.json; leave the model keys out"));
  const ProcessResult no_dir = run_troupe(dir, {"train", "--init.from", kModel});
  CHECK(no_dir.exit_code == 2);
  CHECK_THAT(no_dir.err, Contains("init.from needs checkpoint.dir"));
  const ProcessResult missing = run_troupe(dir, {"tokenize", "--tokenizer", "absent.json", "--in", "x", "--out", "y"});
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("tokenizer.json 'absent.json': cannot be read"));
}
