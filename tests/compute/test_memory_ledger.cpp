// The process's memory ledger (compute/memory_ledger.hpp): every tensor counts under the kind its
// thread's MemoryScope names until its storage goes, and a GPTStage with its AdamW counts exactly
// the bytes of the tensors it holds, by kind.

#include <catch2/catch.hpp>

#include <cstdint>
#include <memory>
#include <thread>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/optim/adamw.hpp"

using namespace troupe::compute;

namespace {

std::int64_t bytes_of(MemoryKind kind) { return static_cast<std::int64_t>(memory_ledger().report()[kind].bytes); }

// A tensor's counted size: its bytes rounded up to the 64-byte alignment zeros() allocates.
std::int64_t counted(const Tensor& t) { return static_cast<std::int64_t>((t.nbytes() + 63) / 64 * 64); }

const GPTConfig ledger_model{4, 64, 4, 64, 256, 256};

}  // namespace

TEST_CASE("a tensor counts under its thread's innermost scope until its storage goes", "[memory]") {
  const std::int64_t other = bytes_of(MemoryKind::other), grads = bytes_of(MemoryKind::gradients),
                     params = bytes_of(MemoryKind::parameters);
  {
    Tensor loose = Tensor::zeros({100}, DType::f32);  // 400 bytes, 448 allocated
    CHECK(bytes_of(MemoryKind::other) - other == 448);
    MemoryScope outer(MemoryKind::parameters);
    Tensor p = Tensor::zeros({1000}, DType::f64);
    Tensor view = p.slice(10, {20});  // a view allocates nothing
    {
      MemoryScope inner(MemoryKind::gradients);
      Tensor g = Tensor::zeros({3, 5}, DType::f32);
      CHECK(bytes_of(MemoryKind::gradients) - grads == 64);
    }
    CHECK(bytes_of(MemoryKind::gradients) - grads == 0);  // g went with its scope's block
    CHECK(current_memory_kind() == MemoryKind::parameters);
    p = Tensor{};
    CHECK(bytes_of(MemoryKind::parameters) - params == 8000);  // the view still holds the storage
    view = Tensor{};
    CHECK(bytes_of(MemoryKind::parameters) - params == 0);
  }
  CHECK(current_memory_kind() == MemoryKind::other);
  CHECK(bytes_of(MemoryKind::other) - other == 0);
}

TEST_CASE("scopes are per thread", "[memory]") {
  MemoryScope here(MemoryKind::activations);
  MemoryKind there = MemoryKind::runtime;
  std::thread([&] { there = current_memory_kind(); }).join();
  CHECK(there == MemoryKind::other);
  CHECK(current_memory_kind() == MemoryKind::activations);
}

TEST_CASE("a stage and its AdamW count the bytes of their tensors, by kind", "[memory]") {
  CpuBackend backend(1);
  const MemoryReport before = memory_ledger().report();
  for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
    INFO("recompute " << static_cast<int>(recompute));
    auto stage =
        std::make_unique<GPTStage>(ledger_model, backend, 1, 4, DType::f32, recompute);  // a last stage: wte copy
    stage->init_parameters(7);
    stage->reserve(2, 32, 3);
    auto optimizer = std::make_unique<AdamW>(backend, stage->views(), stage->num_params(), DType::f32, AdamWOptions{},
                                             10, stage->num_params());  // a shard, as under ZeRO
    const MemoryReport now = memory_ledger().report();
    auto delta = [&](MemoryKind kind) {
      return static_cast<std::int64_t>(now[kind].bytes) - static_cast<std::int64_t>(before[kind].bytes);
    };
    CHECK(delta(MemoryKind::parameters) == counted(stage->params()));
    CHECK(delta(MemoryKind::gradients) == counted(stage->grads()));
    CHECK(delta(MemoryKind::optimizer_state) ==
          counted(optimizer->first_moments()) + counted(optimizer->second_moments()));
    CHECK(optimizer->first_moments().numel() == stage->num_params() - 10);
    // activation_bytes() sums the tensors' sizes; each is counted rounded up to 64 bytes.
    CHECK(delta(MemoryKind::activations) >= stage->activation_bytes());
    CHECK(delta(MemoryKind::activations) < stage->activation_bytes() + 64 * 40 * 3 * 4);
    CHECK(delta(MemoryKind::gathered_parameters) == 0);
    CHECK(delta(MemoryKind::other) == 0);
    optimizer.reset();
    stage.reset();
    const MemoryReport after = memory_ledger().report();
    for (MemoryKind kind : memory_kinds) CHECK(after[kind].bytes == before[kind].bytes);
  }
}

TEST_CASE("peaks stay at the most held, and the total keeps a peak of its own", "[memory]") {
  MemoryLedger ledger;
  ledger.add(MemoryKind::parameters, 100);
  ledger.add(MemoryKind::activations, 50);
  ledger.remove(MemoryKind::activations, 50);
  ledger.add(MemoryKind::gradients, 30);
  const MemoryReport r = ledger.report();
  CHECK(r[MemoryKind::activations].bytes == 0);
  CHECK(r[MemoryKind::activations].peak == 50);
  CHECK(r.total.bytes == 130);
  CHECK(r.total.peak == 150);  // not 180, the sum of the kinds' peaks
  CHECK(ledger.report(Device::cuda).total.peak == 0);
  ledger.add(MemoryKind::parameters, 8, Device::cuda);
  CHECK(ledger.report(Device::cuda)[MemoryKind::parameters].bytes == 8);
  CHECK(ledger.report().total.bytes == 130);
}

TEST_CASE("runtime is the resident set less what the ledger counts on the host", "[memory]") {
  MemoryLedger ledger;
  ledger.add(MemoryKind::parameters, 1 << 20);
  const std::uint64_t resident_before = resident_bytes();
  ledger.measure_runtime();
  const std::uint64_t resident_after = resident_bytes();
  const std::uint64_t runtime = ledger.report()[MemoryKind::runtime].bytes;
  CHECK(resident_before > (std::uint64_t{1} << 20));
  CHECK(runtime + (1 << 20) >= resident_before - (256 << 10));
  CHECK(runtime + (1 << 20) <= resident_after + (256 << 10));
  ledger.measure_runtime();  // replaces, never adds
  CHECK(ledger.report()[MemoryKind::runtime].bytes < runtime + (1 << 20));
  CHECK(peak_resident_bytes() >= resident_bytes() - (256 << 10));
}

TEST_CASE("the figures read as a line", "[memory]") {
  MemoryLedger ledger;
  ledger.add(MemoryKind::parameters, 3 << 20);
  ledger.add(MemoryKind::activations, 2048);
  ledger.remove(MemoryKind::activations, 2048);
  CHECK(describe(ledger.report(), false) == "parameters 3.0 MiB, activations 0 B; total 3.0 MiB, peak 3.0 MiB");
  CHECK(describe(ledger.report(), true) ==
        "parameters 3.0 MiB (peak 3.0 MiB), activations 0 B (peak 2 KiB); total 3.0 MiB, peak 3.0 MiB");
  CHECK(memory_kind_name(MemoryKind::optimizer_state) == "optimizer_state");
  CHECK(format_bytes(5ull << 30) == "5.00 GiB");
}
