// The memory estimate a job is checked against before it allocates anything
// (compute/model/memory_estimate.hpp), held against what a GPTStage and its AdamW really allocate,
// counted by the allocator itself (mallinfo2: bytes in use, small blocks and mmapped ones).

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/train/trainer.hpp"
#include "support/heap_bytes.hpp"

using namespace troupe::compute;

namespace {

// What constructing the stage, reserving its slots and making its optimizer allocates on `backend`.
double allocated_for(const GPTConfig& config, const StageFootprint& s, Backend& backend) {
  const double before = troupe::test::heap_bytes_in_use();
  // A shard group that is never called: reserve() and the optimizer only allocate.
  TensorShardGroup group;
  group.shard = {0, s.shards};
  group.all_reduce = group.all_gather = [](Tensor) { FAIL("a group call while allocating"); };
  auto stage = std::make_unique<GPTStage>(config, backend, s.first_layer, s.last_layer, DType::f32, s.recompute,
                                          nullptr, group);
  stage->reserve(s.B, s.T, s.slots, s.keep_for_weights);
  AdamW optimizer(backend, stage->views(), stage->num_params(), DType::f32, AdamWOptions{}, 0, stage->num_params());
  return troupe::test::heap_bytes_in_use() - before;
}

double allocated_for(const GPTConfig& config, const StageFootprint& s) {
  CpuBackend backend(1);
  return allocated_for(config, s, backend);
}

const GPTConfig model{4, 64, 4, 64, 256, 256};

}  // namespace

// The estimate leaves out only bookkeeping (views, names, slot structs): a few kilobytes
// against megabytes of tensors, so 3 % is a generous bound that still catches a forgotten buffer.
TEST_CASE("the memory estimate is within 3 percent of what a stage and its AdamW allocate", "[model]") {
  for (const bool keep_for_weights : {false, true})  // a zero-bubble schedule's slots keep B's gradients for W
    for (const Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      for (StageFootprint s : {StageFootprint{0, 4, 8, 64, 1, 4}, StageFootprint{0, 2, 4, 32, 3, 4},
                               StageFootprint{2, 4, 4, 48, 2, 4}, StageFootprint{1, 3, 6, 16, 1, 4}}) {
        s.recompute = recompute;
        s.keep_for_weights = keep_for_weights;
        const MemoryEstimate estimate = estimate_training_memory(model, s);
        const double allocated = allocated_for(model, s);
        INFO("recompute " << recompute_name(recompute) << (keep_for_weights ? ", kept for W" : "") << ", layers ["
                          << s.first_layer << ", " << s.last_layer << ") B " << s.B << " T " << s.T << " slots "
                          << s.slots << ": estimate " << estimate.total() << " bytes, allocated " << allocated);
        CHECK(estimate.parameter_bytes ==
              16.0 * static_cast<double>(stage_parameter_count(model, s.first_layer, s.last_layer)));
        CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
      }
    }
}

// A shard also keeps where each of its row-parallel rows sits in the global layout (a few dozen
// bytes per row of C), so the model here is wide enough for the tensors to dominate as they do in
// practice.
TEST_CASE("the memory estimate of a tensor shard is within 3 percent of what it allocates", "[model]") {
  const GPTConfig model{4, 128, 4, 64, 256, 256};
  for (const int shards : {2, 4}) {
    for (const Recompute recompute : {Recompute::none, Recompute::full}) {
      for (StageFootprint s : {StageFootprint{0, 4, 8, 64, 1, 4}, StageFootprint{2, 4, 4, 48, 2, 4}}) {
        s.recompute = recompute;
        s.shards = shards;
        const MemoryEstimate estimate = estimate_training_memory(model, s);
        const double allocated = allocated_for(model, s);
        const MemoryEstimate whole = estimate_training_memory(model, {s.first_layer, s.last_layer, s.B, s.T, s.slots,
                                                                       4, recompute});
        INFO(shards << " shards, recompute " << recompute_name(recompute) << ", layers [" << s.first_layer << ", "
                    << s.last_layer << "): estimate " << estimate.total() << " bytes, allocated " << allocated);
        CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
        CHECK(estimate.parameter_bytes < whole.parameter_bytes / shards * 1.1);
      }
    }
  }
}

// Under train.precision bf16 the CPU backend also keeps copies of the largest products' operands:
// bf16 (2 bytes) on BF16 units, bf16 values in f32 (4 bytes) emulated, made when the stage reserves.
TEST_CASE(
    "under bf16 the memory estimate, with the products' operand copies, is within 3 percent of what a stage "
    "and its AdamW allocate",
    "[model][precision]") {
  const GPTConfig wide{4, 128, 4, 64, 256, 256};
  for (const cpu::Bf16Units units :
       {cpu::bf16_units_present() ? cpu::Bf16Units::hardware : cpu::Bf16Units::emulated, cpu::Bf16Units::emulated}) {
    for (const Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
      for (StageFootprint s :
           {StageFootprint{0, 4, 8, 64, 1, 4}, StageFootprint{2, 4, 4, 48, 2, 4}, StageFootprint{0, 2, 4, 32, 3, 4}}) {
        CpuBackend backend(1, Precision::bf16, units);
        s.recompute = recompute;
        s.operand_bytes = backend.product_operand_bytes();
        CHECK(s.operand_bytes == (units == cpu::Bf16Units::hardware ? 2u : 4u));
        s.stored_activation_bytes = dtype_size(backend.activation_storage_dtype(DType::f32));
        CHECK(s.stored_activation_bytes == 2u);
        StageFootprint fp32 = s;
        fp32.operand_bytes = 0;
        const MemoryEstimate estimate = estimate_training_memory(wide, s);
        const double allocated = allocated_for(wide, s, backend);
        const double copies = estimate.activation_bytes - estimate_training_memory(wide, fp32).activation_bytes;
        INFO((units == cpu::Bf16Units::hardware ? "BF16 units" : "emulated")
             << ", recompute " << recompute_name(recompute) << ", layers [" << s.first_layer << ", " << s.last_layer
             << ") B " << s.B << " T " << s.T << " slots " << s.slots << ": estimate " << estimate.total()
             << " bytes (operand copies " << copies << "), allocated " << allocated);
        CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
        // The copies are allocated: the estimate without them is further off.
        CHECK(std::abs(estimate.total() - allocated) < std::abs(estimate.total() - copies - allocated));
        // The activations the slots keep are stored in bf16: at 4 bytes it is further off too.
        StageFootprint stored_f32 = s;
        stored_f32.stored_activation_bytes = 4;
        CHECK(std::abs(estimate.total() - allocated) <
              std::abs(estimate_training_memory(wide, stored_f32).total() - allocated));
      }
    }
  }
}

// The copies are made when the model reserves, at the products' largest operands: the steps that
// follow allocate none (the ledger counts every growth of them), micro-batch accumulation included.
TEST_CASE("under bf16 the products' operand copies are made when the model reserves: training steps allocate none",
          "[model][precision]") {
  const GPTConfig config{2, 64, 4, 64, 256, 256};
  std::vector<std::uint16_t> tokens(20000);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint16_t>((i * 7919) % 256);
  for (const cpu::Bf16Units units :
       {cpu::bf16_units_present() ? cpu::Bf16Units::hardware : cpu::Bf16Units::emulated, cpu::Bf16Units::emulated}) {
    CpuBackend backend(1, Precision::bf16, units);
    GPT model(config, backend);
    model.init_parameters(1);
    TrainerOptions options;
    options.batch_size = 4;
    options.seq_len = 64;
    options.grad_accum = 2;
    Trainer trainer(model, options, tokens, tokens);
    const std::uint64_t reserved = memory_ledger().report().total.bytes;
    for (int step = 0; step < 2; ++step) trainer.step();
    INFO((units == cpu::Bf16Units::hardware ? "BF16 units" : "emulated"));
    CHECK(memory_ledger().report().total.bytes == reserved);
  }
}

TEST_CASE("the memory estimate of sizes beyond any machine is a figure, not an overflow", "[model]") {
  const GPTConfig deep{std::numeric_limits<int>::max(), 128, 4, 128, 256, 256};
  const MemoryEstimate estimate = estimate_training_memory(deep, {0, deep.n_layer, 8, 128, 1, 4});
  CHECK(estimate.parameter_bytes > 1e15);
  CHECK(estimate.activation_bytes > 1e15);
}

TEST_CASE("sizes whose element counts overflow 64 bits are refused naming the keys", "[model]") {
  CHECK(check_element_counts(model, 8, 64).ok());
  const GPTConfig wide{4, std::numeric_limits<int>::max() - 1, 2, 128, 256, 256};
  const troupe::Status refused = check_element_counts(wide, 8, 128);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message,
             Catch::Contains("model.n_embd 2147483646") && Catch::Contains("more than a 64-bit count holds"));
  const GPTConfig long_context{4, 128, 4, std::numeric_limits<int>::max(), 256, 256};
  CHECK_FALSE(check_element_counts(long_context, 1000000, std::numeric_limits<int>::max()).ok());
}
