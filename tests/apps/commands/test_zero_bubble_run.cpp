// Zero-bubble pipelines in a job: ZB-H1 and ZB-V run every backward as B, then W later, and must
// end each step with 1F1B's weights bit for bit (every parameter's gradient is the same sum of
// micro-batch contributions in the same order), on moe-tiny (alone and in expert groups of 2) as on
// dense models, with data parallelism and tensor shards too, with
// ZeRO-1, 2 and 3 and with compressed gradient sums; and a zero-bubble run resumes from its
// checkpoint to the weights and moments of one that never stopped.
// Clipping is off but in one case: ZB-V places other layers on each stage, so the squared norm
// is summed in another grouping (docs/schedules.md); clipped, zb-h1 must still equal 1f1b bit for
// bit and zb-v within a rounding step.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

// The parameters after `steps` steps of a pipeline job on `preset`, from its final checkpoint.
std::vector<float> parameters_after(const TempDir& dir, const std::string& preset, const std::string& name,
                                    std::vector<std::string> layout, long steps = 2) {
  std::vector<std::string> args{"train",
                                "--model.preset",
                                preset,
                                "--train.steps",
                                std::to_string(steps),
                                "--train.batch_size",
                                "2",
                                "--train.seq_len",
                                "32",
                                "--train.val_batches",
                                "1",
                                "--train.val_every",
                                "0",
                                "--sample.tokens",
                                "0",
                                "--train.threads",
                                "1",
                                "--pipeline.stages",
                                "2",
                                "--pipeline.microbatches",
                                "4"};
  // Clipping off unless the layout sets it (docs/schedules.md: ZB-V sums the norm in another grouping).
  if (std::find(layout.begin(), layout.end(), "--train.grad_clip") == layout.end())
    args.insert(args.end(), {"--train.grad_clip", "0"});
  args.insert(args.end(), layout.begin(), layout.end());
  return parameters_after_run(dir, args, name, steps);
}

void check_bitwise(const std::string& preset, const std::string& name, const std::vector<float>& zero_bubble,
                   const std::vector<float>& one_f_one_b) {
  const troupe::compute::ParameterLayout layout(troupe::compute::gpt_preset(preset).value());
  const ParameterComparison c = compare_parameters(layout, zero_bubble, one_f_one_b);
  std::printf("%s: %d of %d tensors bitwise equal to 1f1b's (largest difference %.3g in %s)\n", name.c_str(), c.bitwise,
              c.tensors, c.largest, c.largest_in.c_str());
  INFO(name << ": largest difference " << c.largest << " in " << c.largest_in);
  CHECK(c.bitwise == c.tensors);
}

const std::vector<std::string> one_f_one_b{"--pipeline.schedule", "1f1b"};
const std::vector<std::string> zb_h1{"--pipeline.schedule", "zb-h1"};
const std::vector<std::string> zb_v{"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2"};

std::vector<std::string> joined(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("zb-h1 and zb-v end their steps with 1f1b's weights bit for bit: tiny, and small", "[pipeline]") {
  TempDir dir;
  const std::vector<std::string> two{"--workers", "2"};
  const std::vector<float> base = parameters_after(dir, "tiny", "tiny-1f1b", joined(two, one_f_one_b));
  check_bitwise("tiny", "tiny zb-h1 p2 m4", parameters_after(dir, "tiny", "tiny-zb-h1", joined(two, zb_h1)), base);
  check_bitwise("tiny", "tiny zb-v p2 m4", parameters_after(dir, "tiny", "tiny-zb-v", joined(two, zb_v)), base);
  // small's 6 layers do not cut into 4 equal chunks: ZB-H1 only.
  check_bitwise("small", "small zb-h1 p2 m4", parameters_after(dir, "small", "small-zb-h1", joined(two, zb_h1), 1),
                parameters_after(dir, "small", "small-1f1b", joined(two, one_f_one_b), 1));
}

TEST_CASE("zb-h1 and zb-v end their steps with 1f1b's weights bit for bit on moe-tiny, with 2 expert shards too",
          "[pipeline][moe]") {
  TempDir dir;
  const std::vector<std::string> two{"--workers", "2"}, sharded{"--workers", "4", "--expert.shards", "2"};
  const std::vector<float> base = parameters_after(dir, "moe-tiny", "moe-1f1b", joined(two, one_f_one_b));
  check_bitwise("moe-tiny", "moe-tiny zb-h1 p2 m4", parameters_after(dir, "moe-tiny", "moe-zb-h1", joined(two, zb_h1)),
                base);
  check_bitwise("moe-tiny", "moe-tiny zb-v p2 m4", parameters_after(dir, "moe-tiny", "moe-zb-v", joined(two, zb_v)),
                base);
  check_bitwise("moe-tiny", "moe-tiny ep 2 x pp 2 zb-h1",
                parameters_after(dir, "moe-tiny", "moe-ep-zb-h1", joined(sharded, zb_h1)),
                parameters_after(dir, "moe-tiny", "moe-ep-1f1b", joined(sharded, one_f_one_b)));
}

TEST_CASE("zb-h1 and zb-v with data parallelism and tensor shards end with 1f1b's weights bit for bit", "[pipeline]") {
  TempDir dir;
  const std::vector<std::string> dp{"--workers", "4"};
  check_bitwise("tiny", "dp 2 x pp 2 zb-v", parameters_after(dir, "tiny", "dp-zb-v", joined(dp, zb_v)),
                parameters_after(dir, "tiny", "dp-1f1b", joined(dp, one_f_one_b)));
  const std::vector<std::string> tp{"--workers", "4", "--tensor.shards", "2"};
  check_bitwise("tiny", "tp 2 x pp 2 zb-h1", parameters_after(dir, "tiny", "tp-zb-h1", joined(tp, zb_h1)),
                parameters_after(dir, "tiny", "tp-1f1b", joined(tp, one_f_one_b)));
}

TEST_CASE(
    "zb-h1 and zb-v with ZeRO-1, 2 and 3 and with compression end with 1f1b's weights bit for bit under the "
    "same settings",
    "[pipeline]") {
  TempDir dir;
  const std::vector<std::string> dp{"--workers", "4"};  // dp 2 x pp 2
  struct Case {
    std::string name;
    std::vector<std::string> settings;
    std::vector<std::string> schedule;
  };
  const Case cases[] = {
      {"zero 1", {"--train.zero", "1"}, zb_h1},
      {"zero 2", {"--train.zero", "2"}, zb_v},
      {"zero 3", {"--train.zero", "3"}, zb_v},
      {"powersgd", {"--comm.compress", "powersgd", "--comm.compress_start_step", "1"}, zb_v},
      {"bf16", {"--comm.compress", "bf16", "--comm.compress_start_step", "1"}, zb_h1},
  };
  for (const Case& c : cases) {
    const std::vector<std::string> job = joined(dp, c.settings);
    const std::string zb_name = c.name + " " + c.schedule[1];
    check_bitwise("tiny", "dp 2 x pp 2 " + zb_name, parameters_after(dir, "tiny", zb_name, joined(job, c.schedule)),
                  parameters_after(dir, "tiny", c.name + " 1f1b", joined(job, one_f_one_b)));
  }
}

TEST_CASE("a zb-v run resumed from its checkpoint ends with the weights and moments of one that never stopped",
          "[pipeline][checkpoint]") {
  TempDir dir;
  const long steps = 4;
  const std::vector<std::string> job = joined(joined({"--workers", "2"}, zb_v), {"--checkpoint.every", "2"});
  const std::vector<float> straight = parameters_after(dir, "tiny", "straight", job, steps);
  // The straight run's checkpoint of step 2 alone, as a run stopped after it leaves its folder.
  const std::filesystem::path stopped = dir.path() / "stopped";
  std::filesystem::create_directories(stopped);
  std::filesystem::copy(troupe::checkpoint::step_dir(dir.path() / "straight", 2),
                        troupe::checkpoint::step_dir(stopped, 2), std::filesystem::copy_options::recursive);
  const std::vector<float> resumed = parameters_after(dir, "tiny", "stopped", joined(job, {"--resume"}), steps);
  check_bitwise("tiny", "zb-v resumed from step 2", resumed, straight);
  const auto a = checkpoint_values(troupe::checkpoint::step_dir(dir.path() / "straight", steps));
  const auto b = checkpoint_values(troupe::checkpoint::step_dir(stopped, steps));
  for (const char* kind : {"adam_m", "adam_v"}) {
    INFO(kind);
    CHECK(a.at(kind) == b.at(kind));
  }
}

TEST_CASE("with the gradient norm clipped, zb-h1 ends with 1f1b's weights bit for bit and zb-v within rounding",
          "[pipeline]") {
  TempDir dir;
  const std::vector<std::string> clipped{"--workers", "2", "--train.grad_clip", "0.05"};  // clips every step
  const std::vector<float> base = parameters_after(dir, "tiny", "clip-1f1b", joined(clipped, one_f_one_b));
  // zb-h1 places the layers as 1f1b does: each stage sums the same squares in the same order.
  check_bitwise("tiny", "clipped zb-h1", parameters_after(dir, "tiny", "clip-zb-h1", joined(clipped, zb_h1)), base);
  // zb-v's stage 0 sums its two chunks' squares apart, then adds them: the norm, in double, may
  // move by a rounding step, and so may the clip's factor and a weight by a float rounding.
  const std::vector<float> v = parameters_after(dir, "tiny", "clip-zb-v", joined(clipped, zb_v));
  const troupe::compute::ParameterLayout layout(troupe::compute::gpt_preset("tiny").value());
  const ParameterComparison c = compare_parameters(layout, v, base);
  std::printf("clipped zb-v: %d of %d tensors bitwise equal to 1f1b's (largest difference %.3g in %s)\n", c.bitwise,
              c.tensors, c.largest, c.largest_in.c_str());
  CHECK(c.largest <= 1e-6);
}
