// train.precision as a user runs it: bf16 follows fp32's losses within the tolerance
// docs/precision.md states, two data-parallel workers in bf16 take the steps of one process in
// bf16 as closely as fp32 layouts do, and a combination that does not compose is refused.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
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

TEST_CASE("troupe train --workers 2 in bf16 takes the steps of one process in bf16, as fp32 layouts do",
          "[precision][dp]") {
  TempDir dir;
  const ProcessResult one = run_troupe(dir, tiny_job(16, {"--train.precision", "bf16"}), std::chrono::seconds(120));
  REQUIRE(one.exit_code == 0);
  const ProcessResult two =
      run_troupe(dir, tiny_job(8, {"--train.precision", "bf16", "--workers", "2"}), std::chrono::seconds(120));
  INFO("stdout: " << two.out << "\nstderr: " << two.err);
  REQUIRE(two.exit_code == 0);
  // Each operand is rounded element by element, the same in either layout: only the order of the
  // f32 sums differs, as under fp32 (test_data_parallel_run.cpp's tolerances).
  CHECK(number_after(two.out, "final train loss") == Approx(number_after(one.out, "final train loss")).epsilon(1e-4));
  CHECK(number_after(two.out, "param norm") == Approx(number_after(one.out, "param norm")).epsilon(1e-6));
  CHECK(std::abs(number_after(two.out, "final val loss") - number_after(one.out, "final val loss")) <= 1e-4);
}

TEST_CASE("train.precision bf16 on the sim backend is refused in one line, exit 2", "[precision]") {
  TempDir dir;
  check_rejected_in(dir, tiny_job(8, {"--train.precision", "bf16", "--train.backend", "sim"}),
                    "train.precision bf16 works with train.backend cpu or cuda: the sim backend models fp32 products "
                    "only");
}
