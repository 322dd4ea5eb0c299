#include <catch2/catch.hpp>

#include <string>

#include "apps/config/config_file.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::apps;
using Catch::Contains;

namespace {

// apply_toml on defaults; the error message, or "" when the document applies.
std::string toml_error(const std::string& text, JobConfig* out = nullptr) {
  JobConfig config;
  const Status status = apply_toml(config, toml::parse(text, std::string_view("job.toml")), "job.toml");
  if (out) *out = config;
  return status.ok() ? "" : status.error().message;
}

}  // namespace

TEST_CASE("every shipped config loads and sets its preset", "[config]") {
  for (const std::string name : {"tiny", "small", "gpt2"}) {
    INFO(name);
    auto config = load_config(std::string(TROUPE_SOURCE_DIR) + "/configs/" + name + ".toml");
    REQUIRE(config.ok());
    CHECK(config->model.preset == name);
  }
}

TEST_CASE("small.toml is the learning test", "[config]") {
  auto config = load_config(TROUPE_SOURCE_DIR "/configs/small.toml");
  REQUIRE(config.ok());
  CHECK(config->train.steps == 200);
  CHECK(config->train.batch_size == 8);
  CHECK(config->train.lr == 1e-3);
  CHECK(config->train.beta1 == 0.9);
  CHECK(config->train.beta2 == 0.95);
  CHECK(config->train.weight_decay == 0.1);
}

TEST_CASE("a TOML document sets the keys it names and leaves the rest at their defaults", "[config]") {
  JobConfig config;
  REQUIRE(toml_error(R"(
[model]
preset = "tiny"
n_layer = 2
[train]
steps = 7
lr = 3        # an integer is fine for a number key
seed = 42
[data]
corpus = "/tmp/x.txt"
[sample]
prompt = "Once"
)",
                     &config) == "");
  CHECK(config.model.preset == "tiny");
  CHECK(config.model.n_layer == 2);
  CHECK(config.train.steps == 7);
  CHECK(config.train.lr == 3.0);
  CHECK(config.train.seed == 42);
  CHECK(config.data.corpus == "/tmp/x.txt");
  CHECK(config.sample.prompt == "Once");
  CHECK(config.train.batch_size == JobConfig{}.train.batch_size);
  CHECK(config.sample.temperature == JobConfig{}.sample.temperature);
}

TEST_CASE("dotted keys at the top level reach the same fields", "[config]") {
  JobConfig config;
  REQUIRE(toml_error("train.steps = 9\nmodel.n_head = 2\n", &config) == "");
  CHECK(config.train.steps == 9);
  CHECK(config.model.n_head == 2);
}

TEST_CASE("a TOML train.backend of cuda-bf16 is read as train.backend cuda with train.precision bf16", "[config]") {
  JobConfig config;
  REQUIRE(toml_error("[train]\nbackend = \"cuda-bf16\"\n", &config) == "");
  CHECK(config.train.backend == troupe::compute::BackendKind::cuda);
  CHECK(config.train.precision == troupe::compute::Precision::bf16);
  REQUIRE(toml_error("[train]\nprecision = \"bf16\"\n", &config) == "");
  CHECK(config.train.backend == troupe::compute::BackendKind::cpu);
  CHECK(config.train.precision == troupe::compute::Precision::bf16);
  CHECK_THAT(toml_error("[train]\nprecision = \"fp16\"\n"),
             Contains("train.precision: expected fp32 or bf16, got 'fp16'"));
}

TEST_CASE("an unknown key is named with its line and the likely intended key", "[config]") {
  const auto message = toml_error("[train]\nsteps = 5\nstpes = 10\n");
  CHECK_THAT(message, Contains("job.toml:3:"));
  CHECK_THAT(message, Contains("unknown key 'train.stpes'"));
  CHECK_THAT(message, Contains("did you mean 'train.steps'?"));
}

TEST_CASE("a key in the wrong section points to the right one", "[config]") {
  const auto message = toml_error("[model]\nsteps = 5\n");
  CHECK_THAT(message, Contains("unknown key 'model.steps'"));
  CHECK_THAT(message, Contains("did you mean 'train.steps'?"));
}

TEST_CASE("a far-off unknown key gets no suggestion", "[config]") {
  const auto message = toml_error("[train]\noptimizer = \"sgd\"\n");
  CHECK_THAT(message, Contains("unknown key 'train.optimizer'"));
  CHECK_THAT(message, !Contains("did you mean"));
}

TEST_CASE("an unknown section is named", "[config]") {
  const auto message = toml_error("[train]\nsteps = 5\n\n[trian]\nlr = 0.1\n");
  CHECK_THAT(message, Contains("job.toml:4:"));
  CHECK_THAT(message, Contains("unknown section [trian]"));
  CHECK_THAT(message, Contains("did you mean [train]?"));
}

TEST_CASE("a key outside any section is rejected", "[config]") {
  const auto message = toml_error("steps = 5\n");
  CHECK_THAT(message, Contains("job.toml:1:"));
  CHECK_THAT(message, Contains("'steps' outside any section"));
  CHECK_THAT(message, Contains("did you mean 'train.steps'?"));
}

TEST_CASE("a section that is not a table is rejected", "[config]") {
  CHECK_THAT(toml_error("train = 5\n"), Contains("'train' must be a table"));
  CHECK_THAT(toml_error("[[train]]\nsteps = 5\n"), Contains("'train' must be a table"));
}

TEST_CASE("a value of the wrong type names the key, the expected and the given type", "[config]") {
  auto message = toml_error("[train]\n\nsteps = \"ten\"\n");
  CHECK_THAT(message, Contains("job.toml:3:"));
  CHECK_THAT(message, Contains("train.steps: expected an integer, got a string"));
  CHECK_THAT(toml_error("[train]\nsteps = 2.5\n"), Contains("train.steps: expected an integer, got a float"));
  CHECK_THAT(toml_error("[train]\nlr = \"fast\"\n"), Contains("train.lr: expected a number, got a string"));
  CHECK_THAT(toml_error("[train]\nbackend = 1\n"), Contains("train.backend: expected a string, got an integer"));
  CHECK_THAT(toml_error("[sample]\nprompt = true\n"), Contains("sample.prompt: expected a string, got a boolean"));
  CHECK_THAT(toml_error("[train]\nlr = nan\n"), Contains("train.lr: expected a finite number"));
}

TEST_CASE("a key of a few names takes one of them as a string", "[config]") {
  JobConfig config;
  CHECK(toml_error("[comm]\ncompress = \"bf16\"\n[pipeline]\nschedule = \"interleaved\"\n", &config).empty());
  CHECK(config.comm.compress == comm::Compression::bf16);
  CHECK(config.pipeline.schedule == schedules::ScheduleKind::interleaved);
  const auto message = toml_error("[comm]\ncompress = \"fp8\"\n");
  CHECK_THAT(message, Contains("job.toml:2:"));
  CHECK_THAT(message, Contains("comm.compress: expected none, bf16 or powersgd, got 'fp8'"));
}

TEST_CASE("an integer that does not fit its field is out of range", "[config]") {
  CHECK_THAT(toml_error("[model]\nn_layer = 3000000000\n"), Contains("model.n_layer: 3000000000 is out of range"));
  CHECK_THAT(toml_error("[train]\nseed = -1\n"), Contains("train.seed: -1 is out of range"));
}

TEST_CASE("train.zero takes the numbers 0 to 3", "[config]") {
  JobConfig config;
  CHECK(toml_error("[train]\nzero = 3\n", &config).empty());
  CHECK(config.train.zero == compute::ZeroStage::parameters);
  CHECK_THAT(toml_error("[train]\nzero = -1\n"), Contains("train.zero: must be 0, 1, 2 or 3, got -1"));
  CHECK_THAT(toml_error("[train]\nzero = \"3\"\n"), Contains("train.zero: expected an integer, got a string"));
}

TEST_CASE("the problem nearest the top of the file is the one reported", "[config]") {
  // toml::table iterates keys by name; the report must follow the file instead.
  const auto message = toml_error("[train]\nsteps = \"x\"\n[data]\nzzz = 1\n[model]\naaa = 1\n");
  CHECK_THAT(message, Contains("job.toml:2: train.steps"));
}

TEST_CASE("load_config names a missing file", "[config]") {
  const auto config = load_config("/nonexistent/troupe.toml");
  REQUIRE(!config.ok());
  CHECK_THAT(config.error().message, Contains("cannot read config file '/nonexistent/troupe.toml'"));
  CHECK_THAT(config.error().message, Contains("No such file"));
}

TEST_CASE("load_config names a directory", "[config]") {
  troupe::test::TempDir dir;
  const auto config = load_config(dir.path().string());
  REQUIRE(!config.ok());
  CHECK_THAT(config.error().message, Contains("is a directory"));
}

TEST_CASE("load_config reports a TOML syntax error with file and line", "[config]") {
  troupe::test::TempDir dir;
  const auto path = dir.write("broken.toml", "[train]\nsteps = 5\nlr = = 2\n");
  const auto config = load_config(path);
  REQUIRE(!config.ok());
  CHECK_THAT(config.error().message, Contains(path + ":3:"));
  CHECK_THAT(config.error().message, Contains("TOML syntax error"));
}

TEST_CASE("load_config prefixes key errors with the file name", "[config]") {
  troupe::test::TempDir dir;
  const auto path = dir.write("job.toml", "[model]\nn_layerz = 3\n");
  const auto config = load_config(path);
  REQUIRE(!config.ok());
  CHECK_THAT(config.error().message, Contains(path + ":2: unknown key 'model.n_layerz'"));
}

TEST_CASE("an empty file is the defaults", "[config]") {
  troupe::test::TempDir dir;
  auto config = load_config(dir.write("empty.toml", ""));
  REQUIRE(config.ok());
  CHECK(config->train.steps == JobConfig{}.train.steps);
  CHECK(config->model.preset == JobConfig{}.model.preset);
}
