// The layout a refusal names: it runs (resolve() takes its keys, nothing in it is "not built"),
// it fits the memory it was searched for, and no layout that fits changes fewer keys.

#include <catch2/catch.hpp>

#include <string>

#include "apps/config/fitting_layout.hpp"
#include "apps/config/keys.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/resolve.hpp"
#include "apps/config/value.hpp"

using namespace troupe::apps;

namespace {

// `config` with the fitting layout's "key value" changes applied.
troupe::actors::JobConfig applied(troupe::actors::JobConfig config, const FittingLayout& layout) {
  for (const std::string& change : layout.changes) {
    const auto space = change.find(' ');
    const ConfigKey* key = find_config_key(change.substr(0, space));
    REQUIRE(key != nullptr);
    REQUIRE(set_from_text(config, *key, change.substr(space + 1), "test").ok());
  }
  return config;
}

}  // namespace

TEST_CASE("the named layout resolves and passes the memory check it was found for", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "small";
  config.train.batch_size = 16;
  auto job = resolve(config);
  REQUIRE(job.ok());
  for (const int ranks : {1, 2, 4}) {
    for (const double mib : {200.0, 300.0, 500.0}) {
      INFO(ranks << " ranks, " << mib << " MiB");
      const double available = mib * 1024 * 1024;
      const JobRanks where{ranks, 1, ranks};
      REQUIRE_FALSE(check_memory_fit(*job, where, RankMemory{available, "test"}).ok());
      const auto layout = fitting_layout(*job, where, available - runtime_bytes_per_rank(job->config.train.backend));
      REQUIRE(layout.has_value());
      if (!layout->fits) continue;
      CHECK_FALSE(layout->changes.empty());
      auto changed = resolve(applied(config, *layout));
      REQUIRE(changed.ok());
      CHECK(check_memory_fit(*changed, where, RankMemory{available, "test"}).ok());
      CHECK(layout->planned_bytes + runtime_bytes_per_rank(job->config.train.backend) <= available);
    }
  }
}

TEST_CASE("no layout is searched for steps or models beyond the search's limits", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  config.train.batch_size = max_searched_batch + 1;
  auto job = resolve(config);
  REQUIRE(job.ok());
  CHECK_FALSE(fitting_layout(*job, {1, 1, 1}, 1e6).has_value());
  config.train.batch_size = max_searched_batch;
  job = resolve(config);
  REQUIRE(job.ok());
  CHECK(fitting_layout(*job, {1, 1, 1}, 1e6).has_value());
}
