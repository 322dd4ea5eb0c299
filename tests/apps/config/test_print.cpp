#include <catch2/catch.hpp>

#include <string>

#include "apps/config/keys.hpp"
#include "apps/config/config_file.hpp"
#include "apps/config/print.hpp"
#include "apps/config/value.hpp"
#include "support/source_file.hpp"

using namespace troupe;
using namespace troupe::apps;
using Catch::Contains;
using troupe::test::source_text;

TEST_CASE("config_to_toml reads back to the same configuration", "[config]") {
  JobConfig config;
  config.model.preset = "tiny";
  config.train.steps = 17;
  config.train.lr = 2.5e-4;
  config.train.seed = 18446744073709551615ull >> 1;
  config.data.corpus = "C:\\data \"quoted\"\tname";
  config.sample.prompt = "line one\nline two\x01";
  JobConfig back;
  REQUIRE(apply_toml(back, toml::parse(config_to_toml(config), std::string_view("printed")), "printed").ok());
  for (const ConfigKey& key : config_keys()) {
    INFO(key.name);
    CHECK(format_value(back, key) == format_value(config, key));
  }
  CHECK(back.sample.prompt == config.sample.prompt);
  CHECK(back.data.corpus == config.data.corpus);
}

TEST_CASE("docs/configuration.md holds the generated key table", "[config]") {
  const std::string doc = source_text("docs/configuration.md");
  // Regenerate with: troupe train --print-keys
  CHECK_THAT(doc, Contains(config_keys_markdown()));
  for (const ConfigKey& key : config_keys()) CHECK_THAT(doc, Contains("`" + std::string(key.name) + "`"));
}
