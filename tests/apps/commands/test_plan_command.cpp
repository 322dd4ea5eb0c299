// `troupe plan` as a user runs it: the report of what fits and what does not, and bad input
// refused in one line naming it. Every run gives the cluster's figures, so none measures the
// sgemm peak or reads this machine's memory, and each takes a fraction of a second.

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;

namespace {

const std::vector<std::string> a100_cluster = {"--nodes", "4", "--devices-per-node", "8", "--device-memory", "80GB",
                                               "--peak-flops", "312e12", "--intra-bw", "150e9", "--inter-bw", "25e9"};

std::vector<std::string> plan_args(std::vector<std::string> extra) {
  std::vector<std::string> args{"plan"};
  args.insert(args.end(), a100_cluster.begin(), a100_cluster.end());
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace

TEST_CASE("troupe plan lists what fits fastest first, then what does not with its reason", "[plan]") {
  TempDir dir;
  const ProcessResult result = run_troupe(dir, plan_args({"--model.preset", "gpt3-13b", "--global-batch", "64", "--seq",
                                                          "2048", "--precision", "mixed", "--top", "3"}));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.empty());
  CHECK_THAT(result.out, StartsWith("model gpt3-13b: 40 layers, n_embd 5120, 40 heads, vocabulary 50257: "
                                    "12853626880 parameters\n"));
  CHECK_THAT(result.out, Contains("precision mixed: 2 weight + 2 gradient + 12 optimizer bytes per parameter"));
  CHECK_THAT(result.out, Contains("\nfit, fastest first (3 of "));
  CHECK_THAT(result.out, Contains("\n  1  "));
  CHECK_THAT(result.out, Contains("     memory "));
  CHECK_THAT(result.out, Contains("planned, not built: 2-byte weights and activations"));
  CHECK_THAT(result.out, !Contains("micro-batch sums"));  // the mixed precisions accumulate in the products
  CHECK_THAT(result.out, Contains("\ndo not fit, least memory first (3 of "));
  CHECK_THAT(result.out, Contains(" GB > 80 GB\n"));
}

TEST_CASE("troupe plan takes a model by its dimensions and plans the runnable layouts of this machine's kind", "[plan]") {
  TempDir dir;
  const ProcessResult result =
      run_troupe(dir, {"plan", "--model.n_layer", "4", "--model.n_embd", "128", "--model.n_head", "4",
                       "--devices-per-node", "2", "--device-memory", "4GB", "--peak-flops", "1e11", "--global-batch", "4",
                       "--seq", "128", "--top", "100"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, StartsWith("model small with the dimensions given: 4 layers, n_embd 128, 4 heads"));
  CHECK_THAT(result.out, Contains("(as Troupe trains today)"));
  CHECK_THAT(result.out, Contains("zero 0, dp 2, micro-batch 2 x 1, recompute none\n"));
  CHECK_THAT(result.out, Contains("zero 0, dp 1, pp 2 1f1b, micro-batch 1 x 4, recompute full\n"));
  // Troupe's micro-batch sums, at one thread's copy bandwidth: none for a layout of one micro-batch.
  CHECK(std::regex_search(result.out, std::regex("; memory [0-9.]+ [GM]B/s \\(one thread's copy, measured now\\);")));
  CHECK(std::regex_search(result.out, std::regex("micro-batch 1 x 4, recompute full\n.*\n.*; compute [0-9.e+-]+ s, "
                                                 "micro-batch sums [0-9.e+-]+ s")));
  CHECK(std::regex_search(result.out, std::regex("zero 0, dp 2, micro-batch 2 x 1, recompute none\n.*\n.*; compute "
                                                 "[0-9.e+-]+ s, dp [0-9.e+-]+ s\n")));
  // Every fp32 layout runs: tensor shards and ZeRO with stages included.
  CHECK_THAT(result.out, Contains("zero 0, dp 1, tp 2, micro-batch 1 x 4, recompute none\n"));
  CHECK_THAT(result.out, !Contains("planned, not built"));
  CHECK_THAT(result.out, Contains("zero 3, dp 2, micro-batch 2 x 1, recompute none\n"));
  CHECK_THAT(result.out, !Contains("do not fit"));
}

TEST_CASE(
    "troupe plan --precision bf16 plans train.precision bf16 as it runs: fp32's bytes but 2 for the activations "
    "a slot keeps, and the products' operand copies, nothing marked not built",
    "[plan][precision]") {
  TempDir dir;
  const std::vector<std::string> job{"plan", "--model.n_layer",    "4", "--model.n_embd",  "128", "--model.n_head",
                                     "4",    "--devices-per-node", "2", "--device-memory", "4GB", "--peak-flops",
                                     "1e11", "--global-batch",     "4", "--seq",           "128"};
  const ProcessResult fp32 = run_troupe(dir, job);
  const ProcessResult bf16 = run_troupe(dir, with(job, {"--precision", "bf16"}));
  INFO("stdout: " << bf16.out << "\nstderr: " << bf16.err);
  REQUIRE(fp32.exit_code == 0);
  REQUIRE(bf16.exit_code == 0);
  CHECK_THAT(bf16.out, Contains("precision bf16: 4 weight + 4 gradient + 8 optimizer bytes per parameter, 4-byte "
                                "activations (2 bytes for what the slots keep), 2-byte copies of the "
                                "largest products' operands (as Troupe trains today)"));
  CHECK_THAT(bf16.out, !Contains("planned, not built"));
  // One layout in both: fewer activation bytes in bf16, the copies counted and most values at 2 bytes.
  const std::regex layout("zero 2, dp 2, micro-batch 2 x 1, recompute none\n[^\n]*activations ([0-9.]+) (MB|GB)");
  std::smatch a, b;
  REQUIRE(std::regex_search(fp32.out, a, layout));
  REQUIRE(std::regex_search(bf16.out, b, layout));
  CHECK(a[2] == b[2]);
  CHECK(std::stod(b[1]) < std::stod(a[1]));
}

TEST_CASE("troupe plan takes the experts of a model as troupe train does, and plans their expert groups", "[plan][moe]") {
  TempDir dir;
  const std::vector<std::string> job{"plan", "--model.n_layer",    "4", "--model.n_embd",  "128", "--model.n_head",
                                     "4",    "--devices-per-node", "4", "--device-memory", "4GB", "--peak-flops",
                                     "1e11", "--global-batch",     "8", "--seq",           "128", "--top", "100"};
  const ProcessResult dense = run_troupe(dir, job);
  const ProcessResult moe = run_troupe(
      dir, with(job, {"--model.experts", "4", "--model.top_k", "2", "--model.moe_every", "2", "--model.shared_experts",
                      "1"}));
  INFO("stdout: " << moe.out << "\nstderr: " << moe.err);
  REQUIRE(dense.exit_code == 0);
  REQUIRE(moe.exit_code == 0);
  CHECK_THAT(dense.out, !Contains("experts:") && !Contains(", ep "));
  // Blocks 2 and 4 of 4 carry the experts, as troupe train builds them.
  CHECK_THAT(moe.out, Contains("experts: 4 in each of 2 MoE blocks, top-2"));
  CHECK_THAT(moe.out, Contains(", ep 2,") && Contains(", ep 4,"));
  auto total = [](const std::string& out) {
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex(R"(vocabulary \d+: (\d+) parameters)")));
    return std::stod(m[1]);
  };
  CHECK(total(moe.out) > total(dense.out));
}

TEST_CASE("troupe plan takes its nodes and devices from a host file", "[plan]") {
  TempDir dir;
  dir.write("hosts.txt", "# two machines of four\nalpha slots=4\nbeta slots=2\nbeta slots=2\n");
  const ProcessResult result = run_troupe(dir, {"plan", "--hostfile", "hosts.txt", "--device-memory", "4GB",
                                                "--peak-flops", "1e11", "--global-batch", "8", "--seq", "128"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("cluster: 2 nodes x 4 devices, 4 GB each"));
  dir.write("uneven.txt", "alpha slots=4\nbeta slots=2\n");
  check_rejected_in(dir, {"plan", "--hostfile", "uneven.txt", "--device-memory", "4GB", "--peak-flops", "1e11"},
                    "--hostfile uneven.txt: alpha has 4 slots and beta has 2; troupe plan needs as many devices on "
                    "every host");
  check_rejected_in(dir, {"plan", "--hostfile", "hosts.txt", "--nodes", "2"},
                    "--hostfile and --nodes or --devices-per-node: give the cluster one way");
  check_rejected_in(dir, {"plan", "--hostfile", "missing.txt"}, "missing.txt");
}

TEST_CASE("troupe plan --stage-speeds plans pipelines of that many stages, split by speed first", "[plan][speed]") {
  TempDir dir;
  const ProcessResult result =
      run_troupe(dir, {"plan", "--model.n_layer", "12", "--devices-per-node", "2", "--device-memory", "8GB",
                       "--peak-flops", "1e11", "--global-batch", "16", "--stage-speeds", "1,0.5", "--top", "2"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("stage speeds 1,0.5: pipelines of 2 stages only"));
  CHECK_THAT(result.out, Contains("\n  1  "));
  const std::string first = result.out.substr(result.out.find("\n  1  "));
  CHECK_THAT(first.substr(0, first.find('\n', 1)), Contains(", pp 2 ") && Contains(" by speed, "));
  check_rejected_in(dir, plan_args({"--stage-speeds", "1"}),
                    "stage speeds: one speed a pipeline stage, and at least 2 stages");
  check_rejected_in(dir, plan_args({"--stage-speeds", "1,fast"}),
                    "--stage-speeds: 'fast' in '1,fast' is not a number (write one speed a stage, comma-separated: "
                    "1,0.5)");
}

TEST_CASE("troupe plan refuses bad input in one line naming it", "[plan]") {
  TempDir dir;
  check_rejected_in(dir, plan_args({"--precision", "fp16"}),
                    "unknown precision 'fp16' (expected fp32, bf16, mixed or mixed-fp32-grads)");
  check_rejected_in(dir, plan_args({"--model.preset", "gpt5"}), "model.preset 'gpt5' is not a preset (known: nano, tiny,");
  check_rejected_in(dir, plan_args({"--model.experts", "4", "--model.top_k", "5"}),
                    "model.top_k 5 must be between 1 and model.experts 4");
  check_rejected_in(dir, {"plan", "--device-memory", "80XB"}, "--device-memory 80XB: not a positive size");
  check_rejected_in(dir, plan_args({"--top", "0"}), "--top must be at least 1, got 0");
  check_rejected_in(dir, {"plan", "--nodes", "0", "--device-memory", "1GB", "--peak-flops", "1e11"},
                    "nodes must be at least 1, got 0");
  check_rejected_in(dir, plan_args({"--mfu", "1.5"}), "MFU must be at most 1, got 1.5");
  check_rejected_in(dir, plan_args({"--seq", "4096"}), "sequence length 4096 must be from 1 to the model's block size 256");
  check_rejected_in(dir, plan_args({"--global-batch", "0"}), "global batch must be at least 1, got 0");
  check_rejected_in(dir, plan_args({"--seq", "0"}), "sequence length 0 must be from 1 to the model's block size 256");
  check_rejected_in(dir, {"plan", "--peak-flops", "-1", "--device-memory", "1GB"}, "peak FLOP/s must be positive, got -1");
  check_rejected_in(dir, {"plan", "--memory-bw", "0", "--device-memory", "1GB"},
                    "memory bandwidth must be positive, got 0");
  check_rejected_in(dir, {"plan", "--inter-bw", "0", "--peak-flops", "1e11", "--device-memory", "1GB"},
                    "bandwidth between nodes must be positive, got 0");
  check_rejected_in(dir, plan_args({"--model.n_head", "5"}), "model.n_embd (384) must be divisible by model.n_head (5)");
  check_rejected_in(dir, plan_args({"--nodez", "2"}), "--nodez");
}

// Sizes that once overflowed (a division by zero, "0 layouts" and exit 0) or ran for minutes.
TEST_CASE("troupe plan refuses sizes past its bounds in one line and answers any other at once", "[plan]") {
  TempDir dir;
  const std::vector<std::string> tiny = {"plan", "--model.preset", "tiny", "--device-memory", "1GB", "--peak-flops",
                                         "1e11", "--top",          "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = tiny;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  check_rejected_in(dir, with({"--nodes", "65536", "--devices-per-node", "65536"}),
                    "nodes 65536 x devices per node 65536 = 4294967296 devices is more than the planner takes");
  check_rejected_in(dir, with({"--nodes", "2147483647", "--devices-per-node", "2"}),
                    "nodes 2147483647 x devices per node 2 = 4294967294 devices is more than the planner takes");
  check_rejected_in(dir, with({"--nodes", "7", "--devices-per-node", "1"}),
                    "no layout of 7 devices divides the global batch of 8 sequences");
  check_rejected_in(dir, with({"--model.vocab_size", "2147483647"}),
                    "model.vocab_size 2147483647 is more than the planner takes (at most 16777216)");
  for (const char* batch : {"2147483647", "1073741824"}) {
    const ProcessResult result = run_troupe(dir, with({"--devices-per-node", "2", "--global-batch", batch}));
    INFO("stdout: " << result.out << "\nstderr: " << result.err);
    REQUIRE(!result.timed_out);
    REQUIRE(result.exit_code == 0);
    CHECK_THAT(result.out, Contains("step: global batch " + std::string(batch) + " x 128 tokens"));
    CHECK_THAT(result.out, Contains("\nfit, fastest first (1 of "));
  }
}

TEST_CASE(
    "troupe plan of a model with experts says a rank holds its share of the experts and lists expert groups' "
    "traffic, full recompute's rerun exchanges included",
    "[plan][moe]") {
  TempDir dir;
  const ProcessResult result =
      run_troupe(dir, {"plan", "--model.preset", "moe-tiny", "--devices-per-node", "2", "--device-memory", "4GB",
                       "--peak-flops", "1e11", "--global-batch", "4", "--seq", "64", "--top", "200"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("\nexperts: 4 in each of 2 MoE blocks, top-2, "));
  CHECK_THAT(result.out, Contains("under ep e a rank holds E/e of each block's experts"));
  CHECK_THAT(result.out, Contains("zero 0, dp 2, ep 2, micro-batch 2 x 1, recompute none\n"));
  CHECK_THAT(result.out, Contains(" ep 524 kB (in node)"));  // 2 x 64 tokens x 2 slots x 128 x 4 B x 4 x 2 blocks / 2
  // Recompute is built with experts; full's rerun forward dispatches and combines again: 6 exchanges, not 4.
  CHECK_THAT(result.out, !Contains("experts with recompute"));
  const std::string full = "zero 0, dp 2, ep 2, micro-batch 2 x 1, recompute full\n";
  const std::size_t at = result.out.find(full);
  REQUIRE(at != std::string::npos);
  const std::string details = result.out.substr(at + full.size(), result.out.find("s/step", at) - at - full.size());
  CHECK_THAT(details, Contains(" ep 786 kB (in node)"));
}
