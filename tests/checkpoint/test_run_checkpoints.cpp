// A run's checkpoints read back (checkpoint/run_checkpoints.hpp): besides resuming from the newest,
// a running job's rank rolls back to one given checkpoint, reading only its own ranges, with the
// same checks and reads, whether or not the run resumed.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/run_checkpoints.hpp"
#include "checkpoint_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::checkpoint;
using namespace troupe::checkpoint::test;

namespace {

// Rank 1 of 2, holding the second half of the parameters; the global batch of manifest_for's data.
RunIdentity second_half_rank(const compute::GPTConfig& model) {
  return {model, nlohmann::json::object(), Grid{2, 1, 1}, 1, 2, 1337, 8, 10};
}

// Steps 2 and 4 committed by two ranks, each writing half of the parameters (salts 0.5 and 0.25).
void commit_steps_2_and_4(const CheckpointStore& store, const compute::GPTConfig& model, std::int64_t total) {
  for (const auto& [step, salt] : {std::pair{2, 0.5F}, std::pair{4, 0.25F}}) {
    const auto params = distinct_values(total, salt);
    commit_checkpoint(store, model, step,
                      {{piece_of("param", params, 0, total / 2)}, {piece_of("param", params, total / 2, total)}});
  }
}

}  // namespace

TEST_CASE("a rank rolls back to a given committed checkpoint, its own ranges only, without checkpoint.resume",
          "[checkpoint][rollback]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  const CheckpointStore store(dir.path() / "ckpt");
  RunCheckpoints empty({dir.path() / "ckpt", 2, 3, false, false}, second_half_rank(model), {});
  CHECK(empty.newest_committed() == -1);
  commit_steps_2_and_4(store, model, total);

  RunCheckpoints checkpoints({dir.path() / "ckpt", 2, 3, false, false}, second_half_rank(model), {});
  CHECK(checkpoints.newest_committed() == 4);
  std::vector<float> held_half(static_cast<std::size_t>(total - total / 2), -1.0F);
  const std::vector<HeldRange> held{{"param", total / 2, total, held_half.data()}};
  // Without checkpoint.resume a run starts fresh: nothing is read.
  auto fresh = checkpoints.restore(held);
  REQUIRE(fresh.ok());
  CHECK(fresh->steps == 0);
  CHECK(held_half.front() == -1.0F);

  auto back = checkpoints.roll_back_to(2, held);
  REQUIRE(back.ok());
  CHECK(back->steps == 2);
  CHECK(back->from == (dir.path() / "ckpt" / step_folder_name(2)).string());
  const auto step_2 = distinct_values(total, 0.5F);
  CHECK(std::equal(held_half.begin(), held_half.end(), step_2.begin() + total / 2));

  auto missing = checkpoints.roll_back_to(3, held);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error().message, Catch::Contains(step_folder_name(3)));
}

TEST_CASE("a rollback refuses a checkpoint of another global batch, as a resume does", "[checkpoint][rollback]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  commit_steps_2_and_4(CheckpointStore(dir.path() / "ckpt"), model, total);
  RunIdentity other_batch = second_half_rank(model);
  other_batch.samples_per_step = 16;
  RunCheckpoints checkpoints({dir.path() / "ckpt", 2, 3, false, false}, other_batch, {});
  std::vector<float> held_half(static_cast<std::size_t>(total - total / 2), -1.0F);
  const std::vector<HeldRange> held{{"param", total / 2, total, held_half.data()}};
  auto back = checkpoints.roll_back_to(4, held);
  REQUIRE_FALSE(back.ok());
  CHECK_THAT(back.error().message, Catch::Contains("this job's global batch is 16 sequences per step"));
}

// A writer that died leaves the coordinator waiting for its shard; the job's recovery order ends
// that wait (while_committing throws it) instead of the commit timeout, and the step stays
// uncommitted until every shard of it is written again.
TEST_CASE("the coordinator's wait for a writer's shard gives way to what while_committing throws, leaving the step "
          "uncommitted",
          "[checkpoint][rollback]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  struct Ordered {};
  int looks = 0;
  bool give_up = true;
  RunCheckpointOptions coordinating{dir.path() / "ckpt", 2, 3, false, false};
  coordinating.while_committing = [&] {
    if (give_up && ++looks == 3) throw Ordered{};
  };
  RunIdentity first_half = second_half_rank(model);
  first_half.rank = 0;
  const CheckpointReporter quiet{[](const std::string&) {}, [](const std::string&) {}, {}};
  RunCheckpoints coordinator(coordinating, first_half, quiet);
  RunCheckpoints writer({dir.path() / "ckpt", 2, 3, false, false}, second_half_rank(model), quiet);
  const auto params = distinct_values(total, 0.5F);
  std::vector<float> first(params.begin(), params.begin() + total / 2), second(params.begin() + total / 2, params.end());
  const std::vector<HeldRange> held_first{{"param", 0, total / 2, first.data()}};
  const std::vector<HeldRange> held_second{{"param", total / 2, total, second.data()}};

  CHECK_THROWS_AS(coordinator.after_step(2, held_first), Ordered);
  CHECK(looks == 3);
  CHECK(coordinator.newest_committed() == -1);

  REQUIRE(writer.after_step(2, held_second).ok());
  give_up = false;
  REQUIRE(coordinator.after_step(2, held_first).ok());
  CHECK(coordinator.newest_committed() == 2);
  std::vector<float> read_back(static_cast<std::size_t>(total - total / 2), -1.0F);
  REQUIRE(writer.roll_back_to(2, std::vector<HeldRange>{{"param", total / 2, total, read_back.data()}}).ok());
  CHECK(read_back == second);
}

// In async mode the coordinator waits in a background thread, where no order reaches it: the
// recovery gives that wait up instead, well before the commit timeout the next save would
// otherwise sit out, and once every rank has the plan the coordinator removes what the step left.
TEST_CASE("a background commit waiting for a dead writer's shard is given up at once, leaving the step uncommitted",
          "[checkpoint][rollback]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  RunCheckpointOptions coordinating{dir.path() / "ckpt", 2, 3, true, false};
  coordinating.commit_timeout = std::chrono::seconds(60);
  RunIdentity first_half = second_half_rank(model);
  first_half.rank = 0;
  std::vector<std::string> lines;
  const CheckpointReporter noted{[&](const std::string& line) { lines.push_back(line); },
                                 [&](const std::string& line) { lines.push_back("error: " + line); }, {}};
  RunCheckpoints coordinator(coordinating, first_half, noted);
  const auto params = distinct_values(total, 0.5F);
  std::vector<float> first(params.begin(), params.begin() + total / 2), second(params.begin() + total / 2, params.end());
  const std::vector<HeldRange> held_first{{"param", 0, total / 2, first.data()}};

  REQUIRE(coordinator.after_step(2, held_first).ok());
  const auto started = std::chrono::steady_clock::now();
  coordinator.give_up_background_commit();
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
  CHECK(coordinator.newest_committed() == -1);
  REQUIRE(!lines.empty());
  CHECK_THAT(lines.back(), Catch::Contains("checkpoint after step 2 given up: the job recovers in place"));
  // The recovery's plan taken, the coordinator forgets the step: trained again, it is written whole.
  REQUIRE(std::filesystem::exists(staging_dir(dir.path() / "ckpt", 2)));
  coordinator.forget_uncommitted();
  CHECK_FALSE(std::filesystem::exists(staging_dir(dir.path() / "ckpt", 2)));

  RunCheckpoints writer({dir.path() / "ckpt", 2, 3, false, false}, second_half_rank(model), noted);
  REQUIRE(writer.after_step(2, std::vector<HeldRange>{{"param", total / 2, total, second.data()}}).ok());
  REQUIRE(coordinator.after_step(2, held_first).ok());
  REQUIRE(coordinator.finish().ok());
  CHECK(coordinator.newest_committed() == 2);
}

// A writer lost while the coordinator waits for its shard of step 2 leaves that save half
// written (here rank 2 of 3 wrote, rank 1 never did); the job then asks the survivors for a rescue
// snapshot of step 2, other shards on another grid. Staged in a folder of its own, it commits its
// own shards only, never a file the interrupted save left.
TEST_CASE("a rescue snapshot of a step whose save a failure left half written commits only its own shards",
          "[checkpoint]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  const auto third = [&](int rank) { return RunIdentity{model, nlohmann::json::object(), Grid{3, 1, 1}, rank, 3, 1337, 8, 10}; };
  struct Rescue {};
  RunCheckpointOptions coordinating{dir.path() / "ckpt", 2, 3, false, false};
  coordinating.while_committing = [] { throw Rescue{}; };
  const CheckpointReporter quiet{[](const std::string&) {}, [](const std::string&) {}, {}};
  RunCheckpoints coordinator(coordinating, third(0), quiet);
  RunCheckpoints last({dir.path() / "ckpt", 2, 3, false, false}, third(2), quiet);
  std::vector<float> saved = distinct_values(total, 0.5F);
  const std::vector<HeldRange> last_third{{"param", 2 * total / 3, total, saved.data() + 2 * total / 3}};

  REQUIRE(last.after_step(2, last_third).ok());
  CHECK_THROWS_AS(coordinator.after_step(2, std::vector<HeldRange>{{"param", 0, total / 3, saved.data()}}), Rescue);
  CHECK(coordinator.newest_committed() == -1);

  // The rescue: one surviving replica holding the whole model, its values not the save's.
  std::vector<float> rescued = distinct_values(total, 0.25F);
  REQUIRE(coordinator.rescue(2, std::vector<HeldRange>{{"param", 0, total, rescued.data()}}, 0, 1,
                             std::chrono::seconds(10))
              .ok());
  REQUIRE(coordinator.newest_committed() == 2);
  std::ifstream manifest_file(step_dir(dir.path() / "ckpt", 2) / "manifest.json");
  auto manifest = manifest_from_json(nlohmann::json::parse(manifest_file));
  REQUIRE(manifest.ok());
  CHECK(manifest->files.size() == 1);
  CHECK(manifest->grid.dp == 1);
  std::vector<float> read_back(static_cast<std::size_t>(total - 2 * total / 3), -1.0F);
  REQUIRE(last.roll_back_to(2, std::vector<HeldRange>{{"param", 2 * total / 3, total, read_back.data()}}).ok());
  CHECK(std::equal(read_back.begin(), read_back.end(), rescued.begin() + 2 * total / 3));
}

// A rank lost mid-step can leave the surviving replicas a step apart: the coordinator of the
// rescue finds the other writer's snapshot of another step and says so at once, rather than after
// its whole wait for a shard that never comes.
TEST_CASE("a rescue snapshot's coordinator gives up at once when another writer wrote its snapshot of another step",
          "[checkpoint]") {
  troupe::test::TempDir dir;
  const compute::GPTConfig model = tiny_model();
  const std::int64_t total = compute::ParameterLayout(model).total();
  const CheckpointReporter quiet{[](const std::string&) {}, [](const std::string&) {}, {}};
  RunIdentity first_half = second_half_rank(model);
  first_half.rank = 0;
  RunCheckpoints coordinator({dir.path() / "ckpt", 2, 3, false, false}, first_half, quiet);
  RunCheckpoints behind({dir.path() / "ckpt", 2, 3, false, false}, second_half_rank(model), quiet);
  std::vector<float> values = distinct_values(total, 0.5F);
  REQUIRE(behind.rescue(4, std::vector<HeldRange>{{"param", total / 2, total, values.data() + total / 2}}, 1, 2,
                        std::chrono::seconds(30))
              .ok());
  const auto started = std::chrono::steady_clock::now();
  const Status rescued = coordinator.rescue(5, std::vector<HeldRange>{{"param", 0, total / 2, values.data()}}, 0, 2,
                                            std::chrono::seconds(30));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  REQUIRE_FALSE(rescued.ok());
  CHECK(rescued.error().message ==
        "another writer's rescue snapshot is of step 4, this rank's of step 5: the survivors hold different steps");
  CHECK(coordinator.newest_committed() == -1);
}
