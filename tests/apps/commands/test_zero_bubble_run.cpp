// Zero-bubble pipelines in a job: ZB-H1 and ZB-V run every backward as B, then W later, and must
// end each step with 1F1B's weights bit for bit (every parameter's gradient is the same sum of
// micro-batch contributions in the same order), with data parallelism and tensor shards too.
// Clipping is off: ZB-V places other layers on each stage, so the squared norm would be summed
// over the stages in another grouping (docs/schedules.md).

#include <catch2/catch.hpp>

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
                                "--train.grad_clip",
                                "0",
                                "--pipeline.stages",
                                "2",
                                "--pipeline.microbatches",
                                "4"};
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

TEST_CASE("zb-h1 and zb-v with data parallelism and tensor shards end with 1f1b's weights bit for bit", "[pipeline]") {
  TempDir dir;
  const std::vector<std::string> dp{"--workers", "4"};
  check_bitwise("tiny", "dp 2 x pp 2 zb-v", parameters_after(dir, "tiny", "dp-zb-v", joined(dp, zb_v)),
                parameters_after(dir, "tiny", "dp-1f1b", joined(dp, one_f_one_b)));
  const std::vector<std::string> tp{"--workers", "4", "--tensor.shards", "2"};
  check_bitwise("tiny", "tp 2 x pp 2 zb-h1", parameters_after(dir, "tiny", "tp-zb-h1", joined(tp, zb_h1)),
                parameters_after(dir, "tiny", "tp-1f1b", joined(tp, one_f_one_b)));
}
