// train.precision as a user runs it: bf16 follows fp32's losses within the tolerance
// docs/precision.md states, checkpoints (f32 under either policy) resume across precisions, and a
// combination that does not compose is refused. Layouts in bf16: test_precision_layouts.cpp.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/store.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

// tiny for 8 steps on one thread, with a batch of `batch` per worker and `more` after.
std::vector<std::string> tiny_job(int batch, const std::vector<std::string>& more) {
  return with(with({"train"}, tiny_steps(8)), with({"--train.batch_size", std::to_string(batch)}, more));
}

// The tolerance between a bf16 run's losses and fp32's that docs/precision.md states.
constexpr double bf16_loss_tolerance = 0.02;

}  // namespace

TEST_CASE("a tiny run in bf16 ends within 0.02 of fp32's train and val loss and says how it multiplies",
          "[precision]") {
  TempDir dir;
  const ProcessResult fp32 = run_troupe(dir, tiny_job(8, {}), std::chrono::seconds(120));
  REQUIRE(fp32.exit_code == 0);
  const ProcessResult bf16 = run_troupe(dir, tiny_job(8, {"--train.precision", "bf16"}), std::chrono::seconds(120));
  INFO("stdout: " << bf16.out << "\nstderr: " << bf16.err);
  REQUIRE(bf16.exit_code == 0);
  CHECK_THAT(bf16.out + bf16.err, Contains("on cpu, bf16 products "));
  CHECK_THAT(fp32.out + fp32.err, !Contains("bf16"));
  const double loss_fp32 = number_after(fp32.out, "final train loss"),
               loss_bf16 = number_after(bf16.out, "final train loss");
  const double val_fp32 = number_after(fp32.out, "final val loss"), val_bf16 = number_after(bf16.out, "final val loss");
  std::printf("tiny, 8 steps: fp32 loss %.4f val %.4f | bf16 loss %.4f val %.4f\n", loss_fp32, val_fp32, loss_bf16,
              val_bf16);
  CHECK(std::abs(loss_bf16 - loss_fp32) <= bf16_loss_tolerance);
  CHECK(std::abs(val_bf16 - val_fp32) <= bf16_loss_tolerance);
  // The products were rounded: the two runs do not print the same parameters.
  CHECK(number_after(bf16.out, "param norm") != number_after(fp32.out, "param norm"));
}

TEST_CASE(
    "an fp32 checkpoint resumes in bf16 and a bf16 one in fp32: the state is f32 either way, and a bf16 run "
    "resumed from its own checkpoint ends bitwise as one that never stopped",
    "[precision][checkpoint]") {
  TempDir dir;
  const std::vector<std::string> bf16{"--train.precision", "bf16"};
  // tiny for `steps` steps with a checkpoint every 4 into `folder`, resumed from its newest with `resume`.
  auto train = [&](const std::string& folder, long steps, const std::vector<std::string>& more, bool resume) {
    std::vector<std::string> args = with(with({"train"}, tiny_steps(steps)), more);
    args = with(args, {"--train.batch_size", "8", "--checkpoint.every", "4", "--checkpoint.dir",
                       (dir.path() / folder).string()});
    if (resume) args.push_back("--resume");
    const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(120));
    INFO(folder << " stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    if (resume)
      CHECK_THAT(r.out, Contains("resumed from " + troupe::checkpoint::step_dir(dir.path() / folder, 4).string()));
    return r.out;
  };
  // Every tensor a checkpoint file holds, by its header: F32, whichever precision wrote it.
  auto dtypes = [&](const std::string& folder, long step) {
    const std::string bytes =
        file_text(troupe::checkpoint::step_dir(dir.path() / folder, step) / "rank-00000.safetensors");
    std::map<std::string, int> count;
    const std::regex dtype("\"dtype\":\"([A-Z0-9]+)\"");
    REQUIRE(bytes.size() >= 8);
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    const std::string header = bytes.substr(8, length);
    for (auto it = std::sregex_iterator(header.begin(), header.end(), dtype); it != std::sregex_iterator(); ++it)
      ++count[(*it)[1]];
    return count;
  };

  const std::string fp32_straight = train("fp32", 8, {}, false);
  const std::string bf16_straight = train("bf16", 8, bf16, false);
  CHECK(dtypes("bf16", 8) == dtypes("fp32", 8));
  CHECK(dtypes("bf16", 8).count("F32") == 1);
  CHECK(dtypes("bf16", 8).size() == 1);

  // The bf16 run stopped after step 4 and resumed in bf16: its whole state was in the f32 checkpoint.
  std::filesystem::copy(dir.path() / "bf16", dir.path() / "bf16-resumed", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(troupe::checkpoint::step_dir(dir.path() / "bf16-resumed", 8));
  const std::string bf16_resumed = train("bf16-resumed", 8, bf16, true);
  CHECK(number_after(bf16_resumed, "param norm") == number_after(bf16_straight, "param norm"));
  const auto straight = checkpoint_values(troupe::checkpoint::step_dir(dir.path() / "bf16", 8));
  const auto resumed = checkpoint_values(troupe::checkpoint::step_dir(dir.path() / "bf16-resumed", 8));
  for (const auto& [kind, values] : straight) {
    INFO(kind);
    CHECK(std::memcmp(values.data(), resumed.at(kind).data(), values.size() * sizeof(float)) == 0);
  }

  // Across precisions: the fp32 run's step-4 checkpoint continued in bf16, the bf16 run's in fp32.
  for (const auto& [from, to, extra] :
       {std::tuple{"fp32", "bf16", bf16}, std::tuple{"bf16", "fp32", std::vector<std::string>{}}}) {
    INFO("saved in " << from << ", resumed in " << to);
    const std::string folder = std::string(from) + "-to-" + to;
    std::filesystem::copy(dir.path() / from, dir.path() / folder, std::filesystem::copy_options::recursive);
    std::filesystem::remove_all(troupe::checkpoint::step_dir(dir.path() / folder, 8));
    const std::string out = train(folder, 8, extra, true);
    const std::string& same_precision = std::string(to) == "bf16" ? bf16_straight : fp32_straight;
    const std::string& saved_by = std::string(from) == "bf16" ? bf16_straight : fp32_straight;
    CHECK((std::string(to) == "bf16") == (out.find("bf16 products") != std::string::npos));
    const double loss = number_after(out, "final train loss"), norm = number_after(out, "param norm");
    std::printf("saved at step 4 in %s, resumed in %s: loss %.4f, param norm %.9g (straight %s: %.4f, %.9g)\n", from,
                to, loss, norm, to, number_after(same_precision, "final train loss"),
                number_after(same_precision, "param norm"));
    // Four steps of the other precision's products: neither run's weights, both within the tolerance.
    CHECK(norm != number_after(same_precision, "param norm"));
    CHECK(norm != number_after(saved_by, "param norm"));
    CHECK(std::abs(loss - number_after(same_precision, "final train loss")) <= bf16_loss_tolerance);
    CHECK(dtypes(folder, 8) == dtypes("fp32", 8));
  }
}

TEST_CASE("train.precision bf16 on the sim backend is refused in one line, exit 2", "[precision]") {
  TempDir dir;
  check_rejected_in(dir, tiny_job(8, {"--train.precision", "bf16", "--train.backend", "sim"}),
                    "train.precision bf16 works with train.backend cpu or cuda: the sim backend models fp32 products "
                    "only");
}
