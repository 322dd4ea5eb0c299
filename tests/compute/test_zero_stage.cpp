#include <catch2/catch.hpp>

#include "compute/train/zero_stage.hpp"

using namespace troupe::compute;

TEST_CASE("each ZeRO stage shards what the one before it does, and more", "[zero]") {
  struct Row {
    ZeroStage stage;
    bool optimizer_state, gradients, parameters, gathers;
  };
  const Row rows[] = {{ZeroStage::none, false, false, false, false},
                      {ZeroStage::optimizer_state, true, false, false, true},
                      {ZeroStage::gradients, true, true, false, true},
                      {ZeroStage::parameters, true, true, true, false}};
  for (const Row& r : rows) {
    INFO(zero_setting(r.stage));
    CHECK(shards_optimizer_state(r.stage) == r.optimizer_state);
    CHECK(shards_gradients(r.stage) == r.gradients);
    CHECK(shards_parameters(r.stage) == r.parameters);
    CHECK(gathers_parameters(r.stage) == r.gathers);
  }
}

TEST_CASE("train.zero's numbers name the stages, and the stages print as the setting", "[zero]") {
  for (int number = 0; number <= 3; ++number) {
    auto stage = parse_zero_stage(number);
    REQUIRE(stage.ok());
    CHECK(zero_number(*stage) == number);
    CHECK(zero_setting(*stage) == "train.zero " + std::to_string(number));
  }
  auto two = parse_zero_stage(2);
  REQUIRE(two.ok());
  CHECK(*two == ZeroStage::gradients);
  CHECK(parse_zero_stage(4).error().message == "must be 0, 1, 2 or 3, got 4");
  CHECK(parse_zero_stage(-1).error().message == "must be 0, 1, 2 or 3, got -1");
}
