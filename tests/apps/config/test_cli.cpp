#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/config/cli.hpp"
#include "apps/config/keys.hpp"
#include "apps/config/config_file.hpp"
#include "apps/config/value.hpp"
#include "apps/config/unknown_arguments.hpp"

using namespace troupe;
using namespace troupe::apps;
using Catch::Contains;

namespace {

// Parses args as `troupe train ARGS` would and applies the overrides to config.
Status override_with(JobConfig& config, std::vector<std::string> args) {
  CLI::App app{"test", "troupe"};
  CLI::App* train = app.add_subcommand("train");
  ConfigOverrides overrides;
  overrides.add_options(*train);
  train->allow_extras();
  args.insert(args.begin(), "train");
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments as a stack
  app.parse(args);
  if (Status extras = reject_unknown_arguments(*train); !extras) return extras;
  return overrides.apply(config);
}

}  // namespace

TEST_CASE("both override spellings set the key", "[cli]") {
  JobConfig config;
  REQUIRE(override_with(config, {"--train.steps", "12", "--model.preset=tiny", "--train.lr=0.003"}).ok());
  CHECK(config.train.steps == 12);
  CHECK(config.model.preset == "tiny");
  CHECK(config.train.lr == 0.003);
}

TEST_CASE("a negative number is a value, not an option", "[cli]") {
  JobConfig config;
  REQUIRE(override_with(config, {"--train.steps", "-5"}).ok());
  CHECK(config.train.steps == -5);
}

TEST_CASE("overrides win over the file and the last of a repeated key wins", "[cli]") {
  auto config = load_config(TROUPE_SOURCE_DIR "/configs/small.toml");
  REQUIRE(config.ok());
  const int file_batch = config->train.batch_size;
  REQUIRE(override_with(*config, {"--train.steps", "3", "--train.steps", "4", "--sample.prompt", "Hi"}).ok());
  CHECK(config->train.steps == 4);
  CHECK(config->sample.prompt == "Hi");
  CHECK(config->train.batch_size == file_batch);
}

TEST_CASE("every key is an option", "[cli]") {
  CLI::App app{"test"};
  ConfigOverrides overrides;
  overrides.add_options(app);
  for (const ConfigKey& key : config_keys()) CHECK(app.get_option_no_throw("--" + std::string(key.name)) != nullptr);
}

TEST_CASE("a malformed override names the key and the text", "[cli]") {
  JobConfig config;
  auto bad = override_with(config, {"--train.steps", "ten"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "command line: train.steps: expected an integer, got 'ten'");
  bad = override_with(config, {"--train.lr", "1e-3x"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "command line: train.lr: expected a number, got '1e-3x'");
  bad = override_with(config, {"--model.n_embd", "99999999999"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "command line: model.n_embd: '99999999999' is out of range");
  bad = override_with(config, {"--train.seed", "-1"});
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message, Contains("train.seed: expected a non-negative integer"));
  bad = override_with(config, {"--train.eps", "inf"});
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message, Contains("train.eps: expected a finite number"));
}

TEST_CASE("train.zero is a number on the command line and a stage behind it", "[cli]") {
  JobConfig config;
  REQUIRE(override_with(config, {"--train.zero", "2"}).ok());
  CHECK(config.train.zero == compute::ZeroStage::gradients);
  CHECK(format_text(config, *find_config_key("train.zero")) == "2");
  auto bad = override_with(config, {"--train.zero", "4"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "command line: train.zero: must be 0, 1, 2 or 3, got 4");
  bad = override_with(config, {"--train.zero", "one"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message == "command line: train.zero: expected an integer, got 'one'");
}

TEST_CASE("a key of a few names reads each back as its enum and refuses another in one line", "[cli]") {
  // Every such key, with its names in the order the line lists them.
  const std::vector<std::pair<std::string, std::vector<std::string>>> named{
      {"train.backend", {"cpu", "cuda", "sim"}},
      {"train.precision", {"fp32", "bf16"}},
      {"train.recompute", {"none", "selective", "full"}},
      {"pipeline.schedule", {"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"}},
      {"comm.compress", {"none", "bf16", "powersgd"}},
      {"fault.recovery", {"in_place", "restart"}},
      {"monitor.log_format", {"text", "json"}}};
  for (const auto& [name, choices] : named) {
    const ConfigKey* key = find_config_key(name);
    REQUIRE(key != nullptr);
    CHECK(type_name(*key) == "string");
    for (const std::string& choice : choices) {
      INFO(name << " " << choice);
      JobConfig config;
      REQUIRE(override_with(config, {"--" + name, choice}).ok());
      CHECK(format_text(config, *key) == choice);
      CHECK(format_value(config, *key) == "\"" + choice + "\"");
    }
    std::string listed = choices.front();
    for (std::size_t i = 1; i < choices.size(); ++i) listed += (i + 1 == choices.size() ? " or " : ", ") + choices[i];
    JobConfig config;
    const Status bad = override_with(config, {"--" + name, "nosuch"});
    REQUIRE(!bad.ok());
    CHECK(bad.error().message == "command line: " + name + ": expected " + listed + ", got 'nosuch'");
  }
  JobConfig config;
  REQUIRE(override_with(config, {"--train.backend", "cuda", "--train.precision", "bf16", "--comm.compress", "powersgd",
                                 "--pipeline.schedule", "gpipe", "--train.recompute", "full"})
              .ok());
  CHECK(config.train.backend == compute::BackendKind::cuda);
  CHECK(config.train.precision == compute::Precision::bf16);
  CHECK(config.comm.compress == comm::Compression::powersgd);
  CHECK(config.pipeline.schedule == schedules::ScheduleKind::gpipe);
  CHECK(config.train.recompute == compute::Recompute::full);
}

TEST_CASE("train.backend cuda-bf16 is read as train.backend cuda with train.precision bf16", "[cli]") {
  JobConfig config;
  REQUIRE(override_with(config, {"--train.backend", "cuda-bf16"}).ok());
  CHECK(config.train.backend == compute::BackendKind::cuda);
  CHECK(config.train.precision == compute::Precision::bf16);
  // What a node process is handed spells the policy, not the alias.
  const std::vector<std::string> handed = override_arguments(config);
  CHECK(std::find(handed.begin(), handed.end(), "--train.backend=cuda") != handed.end());
  CHECK(std::find(handed.begin(), handed.end(), "--train.precision=bf16") != handed.end());
}

TEST_CASE("an unknown option is named with the likely intended one", "[cli]") {
  JobConfig config;
  auto bad = override_with(config, {"--model.n_layr", "3"});
  REQUIRE(!bad.ok());
  CHECK(bad.error().message ==
        "unknown option --model.n_layr (did you mean --model.n_layer?); see 'troupe train --help'");
  bad = override_with(config, {"--steps=3"});
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message, Contains("unknown option --steps (did you mean --train.steps?)"));
  bad = override_with(config, {"--frobnicate"});
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message, !Contains("did you mean"));
  bad = override_with(config, {"stray"});
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.error().message, Contains("unexpected argument 'stray'"));
}

TEST_CASE("set_from_text and format_value agree on every default", "[config]") {
  const JobConfig defaults;
  for (const ConfigKey& key : config_keys()) {
    if (type_name(key) == "string") continue;  // strings are written quoted, read raw
    JobConfig config;
    const std::string text = format_value(defaults, key);
    INFO(key.name << " = " << text);
    REQUIRE(set_from_text(config, key, text, "test").ok());
    CHECK(format_value(config, key) == text);
  }
}

TEST_CASE("numbers are written the way a user would write them", "[config]") {
  CHECK(format_number(1e-3) == "0.001");
  CHECK(format_number(0.95) == "0.95");
  CHECK(format_number(1e-8) == "1e-08");
  CHECK(format_number(2.0) == "2.0");
  JobConfig config;
  CHECK(format_value(config, *find_config_key("sample.prompt")) == "\"\\n\"");
  CHECK(format_value(config, *find_config_key("train.steps")) == "200");
}
