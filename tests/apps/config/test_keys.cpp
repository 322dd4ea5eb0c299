#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "apps/config/keys.hpp"
#include "apps/config/spelling.hpp"
#include "compute/model/gpt_config.hpp"

using namespace troupe::apps;

TEST_CASE("every key is section.name in a known section, once, with help", "[config]") {
  const auto sections = config_sections();
  CHECK(sections == std::vector<std::string>{"model", "init", "train", "data", "sample", "pipeline", "tensor",
                                             "context", "expert", "comm", "fault", "checkpoint", "monitor", "sim"});
  std::set<std::string_view> seen;
  for (const ConfigKey& key : config_keys()) {
    INFO(key.name);
    CHECK(seen.insert(key.name).second);
    CHECK(std::count(key.name.begin(), key.name.end(), '.') == 1);
    CHECK(std::find(sections.begin(), sections.end(), std::string(key.section())) != sections.end());
    CHECK(!key.leaf().empty());
    CHECK(!key.help.empty());
    CHECK(find_config_key(key.name) == &key);
  }
  CHECK(config_keys().size() == 99);
  CHECK(find_config_key("train.stepz") == nullptr);
}

TEST_CASE("each key points at its own field", "[config]") {
  JobConfig config;
  std::set<const void*> fields;
  for (const ConfigKey& key : config_keys()) {
    const void* field = std::visit([](auto* p) -> const void* { return p; }, key.field(config));
    INFO(key.name);
    CHECK(fields.insert(field).second);
  }
  CHECK(std::get<long*>(find_config_key("train.steps")->field(config)) == &config.train.steps);
  CHECK(std::get<std::string*>(find_config_key("sample.prompt")->field(config)) == &config.sample.prompt);
  CHECK(std::get<std::uint64_t*>(find_config_key("train.seed")->field(config)) == &config.train.seed);
}

TEST_CASE("the model.preset help names every preset", "[config]") {
  const std::string help(find_config_key("model.preset")->help);
  for (const auto& preset : troupe::compute::gpt_preset_names()) CHECK_THAT(help, Catch::Contains(preset));
}

TEST_CASE("near-miss names get a suggestion, far ones none", "[config]") {
  CHECK(closest_config_key("train.stpes") == "train.steps");  // swapped letters
  CHECK(closest_config_key("model.n_layers") == "model.n_layer");
  CHECK(closest_config_key("model.steps") == "train.steps");  // right name, wrong section
  CHECK(closest_config_key("lr") == "train.lr");
  CHECK(closest_config_key("train.optimizer") == std::nullopt);
  CHECK(closest_config_section("trian") == "train");
  CHECK(closest_config_section("optimizer") == std::nullopt);
  CHECK(closest_match("--model.n_layr", {"--config", "--model.n_layer"}) == "--model.n_layer");
  CHECK(closest_match("--steps", {"--config", "--train.steps"}) == "--train.steps");
}
