// manifest.json: every field survives to_json/from_json, and a missing or mistyped field is
// one line naming it. Pins the manifest fields of docs/formats/checkpoint.md.

#include <catch2/catch.hpp>

#include "checkpoint/loader.hpp"
#include "checkpoint/manifest.hpp"
#include "checkpoint_fixture.hpp"

using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;

namespace {

Manifest full_manifest() {
  Manifest m = manifest_for(tiny_model(), 40);
  m.data.val_position = 96;
  m.rng.words = {1, 0xFFFFFFFFFFFFFFFFull};
  m.hash_algorithm = "xxh3_64";
  m.files = {{"rank-00000.safetensors", 1234, "0123456789abcdef", 0, {{"param", 0, 10}, {"adam_m", 0, 5}}},
             {"rank-00001.safetensors", 99, "fedcba9876543210", 1, {{"adam_m", 5, 10}}}};
  return m;
}

std::string from_json_error(const nlohmann::json& json) {
  auto m = manifest_from_json(json);
  REQUIRE_FALSE(m.ok());
  return m.error().message;
}

}  // namespace

TEST_CASE("manifest round trip keeps every field", "[manifest]") {
  const Manifest m = full_manifest();
  const nlohmann::json json = to_json(m);
  CHECK(json["format_version"] == 1);
  CHECK(json["model"]["padded_vocab_size"] == 256);
  CHECK(json["grid"] == nlohmann::json{{"dp", 2}, {"pp", 1}, {"tp", 1}});
  CHECK(json["data"]["samples_consumed"] == 320);
  CHECK(json["files"][1]["pieces"][0] == nlohmann::json{{"kind", "adam_m"}, {"begin", 5}, {"end", 10}});

  auto back = manifest_from_json(nlohmann::json::parse(json.dump()));
  REQUIRE(back.ok());
  CHECK(to_json(*back) == json);
  CHECK(back->rng.words[1] == 0xFFFFFFFFFFFFFFFFull);
  CHECK(back->data.val_position == std::optional<std::uint64_t>(96));
  CHECK(back->job_config["model"] == "tiny");

  Manifest no_val = m;
  no_val.data.val_position.reset();
  auto back2 = manifest_from_json(to_json(no_val));
  REQUIRE(back2.ok());
  CHECK_FALSE(back2->data.val_position);
}

TEST_CASE("manifest errors name the missing or mistyped field", "[manifest]") {
  const nlohmann::json good = to_json(full_manifest());
  auto without = [&](const nlohmann::json::json_pointer& at) {
    nlohmann::json j = good;
    j.at(at.parent_pointer()).erase(at.back());
    return j;
  };
  CHECK(from_json_error(without("/grid/dp"_json_pointer)) == "field 'grid.dp' is missing");
  CHECK(from_json_error(without("/step"_json_pointer)) == "field 'step' is missing");
  CHECK(from_json_error(without("/files/1/hash"_json_pointer)) == "field 'files.1.hash' is missing");
  nlohmann::json mistyped = good;
  mistyped["model"]["n_layer"] = "4";
  CHECK(from_json_error(mistyped) == "field 'model.n_layer' must be an integer, got \"4\"");
  mistyped = good;
  mistyped["data"]["samples_consumed"] = -3;
  CHECK(from_json_error(mistyped) == "field 'data.samples_consumed' must be a non-negative integer, got -3");
  mistyped = good;
  mistyped["files"][0]["name"] = "../escape.safetensors";
  CHECK(from_json_error(mistyped) == "field 'files.0.name' must be a plain file name, got '../escape.safetensors'");
  mistyped = good;
  mistyped["files"][0]["pieces"][0]["kind"] = "Param";
  CHECK(from_json_error(mistyped) == "field 'files.0.pieces.0.kind' must be letters a-z and '_', got 'Param'");
  mistyped = good;
  mistyped["format_version"] = 2;
  mistyped.erase("grid");
  CHECK(from_json_error(mistyped) == "format version 2; this build reads 1");
  CHECK(from_json_error(nlohmann::json::array()) == "the top level is not a JSON object");
}

TEST_CASE("a model with experts writes its MoE shape into the manifest, and a dense one's model has none",
          "[manifest][moe]") {
  const nlohmann::json dense = to_json(full_manifest());
  CHECK_FALSE(dense["model"].contains("experts"));
  const Manifest m = manifest_for(*troupe::compute::gpt_preset("moe-tiny"), 40);
  const nlohmann::json json = to_json(m);
  CHECK(json["model"]["experts"] == 4);
  CHECK(json["model"]["top_k"] == 2);
  CHECK(json["model"]["moe_every"] == 2);
  CHECK(json["model"]["shared_experts"] == 0);
  auto back = manifest_from_json(nlohmann::json::parse(json.dump()));
  REQUIRE(back.ok());
  CHECK(back->model.experts == 4);
  CHECK(back->model.moe_every == 2);
  CHECK(to_json(*back) == json);
  CHECK(check_model(*back, *troupe::compute::gpt_preset("moe-tiny")).ok());
  CHECK(check_model(*back, *troupe::compute::gpt_preset("tiny")).error().message ==
        "checkpoint was written for experts 4, this model has 0");
}
